//! The inbox at scale (`inbox_bench`): a store filled with many pending
//! approvals routed to groups of approvers, `toolgate serve` on it, and the
//! inbox API measured as approvers use it.
//!
//! - [`layout`]: who requests what and who decides it (the data set, deterministic).
//! - [`fill`]: writes the data set through `ApprovalStore::issue`, and the tokens and config files.
//! - [`server`]: starts `toolgate serve` on loopback and stops it by its PID.
//! - [`client`]: a keep-alive HTTP/1.1 client with a bearer token, and inbox streams.
//! - [`streams`]: many open `GET /api/approvals/stream` connections, drained in the background.
//! - [`table`]: latency summaries and the markdown table.
//!
//! `scripts/bench-inbox.sh` builds the binaries and runs the bench on
//! SQLite and Postgres; see `inbox_bench --help`.

pub mod client;
pub mod fill;
pub mod layout;
pub mod server;
pub mod streams;
pub mod table;
