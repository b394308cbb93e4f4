//! The toolgate book's Rust examples, compiled and run as doctests.
//!
//! The book lives in `docs/` (mdBook; `bash scripts/build-book.sh` builds it). Every chapter is included below
//! as the documentation of an item that exists only under `cfg(doctest)`, so `cargo test -p toolgate-book --doc`
//! compiles every `rust` code block of the book and runs those not marked `no_run` (the ones that start servers
//! or reach a network). Code in other languages is tagged (`sh`, `toml`, `json`, `text`, `js`, ...), which
//! rustdoc leaves alone; an untagged block would be compiled as Rust and fail here.
//!
//! Doctests run with this crate's directory as the working directory; an example that reads files of the
//! repository (`examples/...`) changes to the repository root first, on a hidden line.
//!
//! A new chapter gets a line here as well as in `docs/src/SUMMARY.md`.

/// `docs/src/introduction.md`: the introduction.
#[doc = include_str!("../../../docs/src/introduction.md")]
#[cfg(doctest)]
pub struct Introduction;

/// `docs/src/getting-started.md`: getting started.
#[doc = include_str!("../../../docs/src/getting-started.md")]
#[cfg(doctest)]
pub struct GettingStarted;

/// `docs/src/web-page.md`: the web page.
#[doc = include_str!("../../../docs/src/web-page.md")]
#[cfg(doctest)]
pub struct WebPage;

/// `docs/src/terminal.md`: `toolgate chat` and `toolgate run`.
#[doc = include_str!("../../../docs/src/terminal.md")]
#[cfg(doctest)]
pub struct Terminal;

/// `docs/src/library.md`: the engine as a Rust library.
#[doc = include_str!("../../../docs/src/library.md")]
#[cfg(doctest)]
pub struct Library;

/// `docs/src/approval-semantics.md`: approval semantics.
#[doc = include_str!("../../../docs/src/approval-semantics.md")]
#[cfg(doctest)]
pub struct ApprovalSemantics;

/// `docs/src/ledger.md`: the ledger and exactly-once.
#[doc = include_str!("../../../docs/src/ledger.md")]
#[cfg(doctest)]
pub struct Ledger;

/// `docs/src/sign-in.md`: sign-in and who may see what.
#[doc = include_str!("../../../docs/src/sign-in.md")]
#[cfg(doctest)]
pub struct SignIn;

/// `docs/src/approvers.md`: approvers, quorum and the inbox.
#[doc = include_str!("../../../docs/src/approvers.md")]
#[cfg(doctest)]
pub struct Approvers;

/// `docs/src/notifications.md`: notifications, one-time links and escalation.
#[doc = include_str!("../../../docs/src/notifications.md")]
#[cfg(doctest)]
pub struct Notifications;

/// `docs/src/subagents.md`: sub-agents, whose approvals reach the root.
#[doc = include_str!("../../../docs/src/subagents.md")]
#[cfg(doctest)]
pub struct Subagents;

/// `docs/src/policies.md`: policies and sticky decisions.
#[doc = include_str!("../../../docs/src/policies.md")]
#[cfg(doctest)]
pub struct Policies;

/// `docs/src/mcp.md`: MCP tools.
#[doc = include_str!("../../../docs/src/mcp.md")]
#[cfg(doctest)]
pub struct Mcp;

/// `docs/src/mcp-gateway.md`: the MCP gateway.
#[doc = include_str!("../../../docs/src/mcp-gateway.md")]
#[cfg(doctest)]
pub struct McpGateway;

/// `docs/src/calls.md`: any agent, the call-gating API.
#[doc = include_str!("../../../docs/src/calls.md")]
#[cfg(doctest)]
pub struct Calls;

/// `docs/src/clients.md`: chat clients.
#[doc = include_str!("../../../docs/src/clients.md")]
#[cfg(doctest)]
pub struct Clients;

/// `docs/src/providers.md`: providers and the local model.
#[doc = include_str!("../../../docs/src/providers.md")]
#[cfg(doctest)]
pub struct Providers;

/// `docs/src/deployment.md`: deployment.
#[doc = include_str!("../../../docs/src/deployment.md")]
#[cfg(doctest)]
pub struct Deployment;

/// `docs/src/threat-model.md`: the threat model.
#[doc = include_str!("../../../docs/src/threat-model.md")]
#[cfg(doctest)]
pub struct ThreatModel;

/// `docs/src/http-api.md`: the HTTP API.
#[doc = include_str!("../../../docs/src/http-api.md")]
#[cfg(doctest)]
pub struct HttpApi;

/// `docs/src/cli.md`: the command line.
#[doc = include_str!("../../../docs/src/cli.md")]
#[cfg(doctest)]
pub struct Cli;

/// `docs/src/benchmarks.md`: benchmarks.
#[doc = include_str!("../../../docs/src/benchmarks.md")]
#[cfg(doctest)]
pub struct Benchmarks;

/// `docs/src/architecture.md`: architecture.
#[doc = include_str!("../../../docs/src/architecture.md")]
#[cfg(doctest)]
pub struct Architecture;

/// `docs/src/testing.md`: tests and CI.
#[doc = include_str!("../../../docs/src/testing.md")]
#[cfg(doctest)]
pub struct Testing;
