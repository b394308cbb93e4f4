//! toolgate-bench: `toolgate serve` side by side with a stock Vercel AI SDK
//! server (`e2e/bench-ai-sdk`), driven with the same approval-continuation
//! bodies, with the serde_json floor of each body measured in the same run.
//!
//! - [`bodies`]: the request bodies (histories of N UI messages, signed approvals).
//! - [`floor`]: the serde_json floor of a body.
//! - [`load`]: the bounded loopback load generator (keep-alive connections, req/s, latencies).
//! - [`process`]: peak RSS of the servers from `/proc`.
//! - [`sse`]: reading and checking UI message streams.
//! - [`report`]: the results and their markdown table.
//! - [`soak`]: the sustained-load memory check (`--soak`).
//! - [`inbox`]: the inbox at scale (the `inbox_bench` binary, `scripts/bench-inbox.sh`).
//! - [`subagents`]: the sub-agent approval round trip over HTTP (`subagents_bench --http`).
//! - [`stored`]: the stored round trip over HTTP, server configurations compared in alternating blocks
//!   (`history_bench --http`, `receipts_bench --http`).
//!
//! `scripts/bench-vs-ai-sdk.sh` builds everything, starts the servers and runs
//! the `toolgate-bench` binary; see its usage line.

pub mod bodies;
pub mod floor;
pub mod inbox;
pub mod load;
pub mod process;
pub mod report;
pub mod soak;
pub mod sse;
pub mod stored;
pub mod subagents;
