//! MCP servers as toolgate tools.
//!
//! [`McpTools::connect`] starts (stdio) or reaches (streamable HTTP) every
//! configured server ([`McpServerConfig`], one `[[mcp]]` table of a config
//! file), runs the MCP handshake with the official Rust SDK (`rmcp`) and
//! lists each server's tools. [`McpTools::tools`] returns them as
//! [`toolgate::Tool`]s for a [`toolgate::Toolkit`]:
//!
//! ```no_run
//! use toolgate_mcp::{McpServerConfig, McpTools};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let fs = McpServerConfig::stdio("fs", "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"])
//!     .trusted(true);
//! let mcp = McpTools::connect(vec![fs]).await?;
//! let mut toolkit = mcp.toolkit()?; // fs__read_text_file, fs__write_file, ...
//! let mut changes = mcp.subscribe();
//! // ... on `changes.changed()`, rebuild: toolkit = mcp.toolkit()?;
//! mcp.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # The contract
//!
//! - **Names.** A tool is `<server>__<tool>`; characters providers refuse
//!   become `_`, names stay unique and at most 64 characters ([`naming`]).
//! - **Input.** The server's `inputSchema` is the tool's schema and toolgate
//!   checks every input (and every edited input) against it before the call
//!   is sent. A tool whose schema does not compile is skipped with a warning;
//!   the rest of the server's tools are kept.
//! - **Approval.** Annotations are hints a server makes about itself, so they
//!   are believed only from servers configured `trusted = true`, and only to
//!   relax approval: a tool runs without approval exactly when the server is
//!   trusted and the tool says `readOnlyHint: true` without
//!   `destructiveHint: true` or `openWorldHint: true`. Every other tool (no
//!   annotations, MCP's default being "destructive"; `destructiveHint`;
//!   `openWorldHint`; not read-only; any tool of an untrusted server) asks a
//!   person, with a reason on the approval card such as
//!   ``MCP tool `fs__write_file` may modify data (destructiveHint or no
//!   annotations)`` or ``server `fs` is not trusted, so readOnlyHint is not
//!   believed``. `idempotentHint: true` from a trusted server marks the tool
//!   idempotent. Request-wide rules ([`toolgate::tool::CallGate`]) decide
//!   before these defaults and may lift an ask. See [`approval`].
//! - **Results.** The handler returns the MCP result (`content` and
//!   `structuredContent`) for UIs; the model reads text, JSON (structured
//!   content) or content parts (images, audio, resources). `isError: true`
//!   is an error result. See [`output`].
//! - **Failures never end the conversation.** A dead, hung (per-call
//!   `timeout`, default 60s) or garbled server, and a server that rejects
//!   the call, give the model an error result naming the server
//!   ([`CallError`]). A server whose connection ends is restarted in the
//!   background with exponential backoff ([`restart`]); meanwhile its tools
//!   stay listed and fail at once with [`CallError::ServerDown`].
//! - **Cancellation and progress.** When the engine cancels a call (the
//!   [`toolgate::ToolContext`] token), the server gets
//!   `notifications/cancelled`; so does a call that times out. MCP progress
//!   notifications become preliminary tool outputs
//!   (`{"progress", "total"?, "message"?}`).
//! - **Tool list changes.** `notifications/tools/list_changed` re-lists the
//!   server's tools; when they differ, [`McpTools::subscribe`]'s version goes
//!   up and the caller rebuilds its toolkit.

pub mod approval;
mod call;
pub mod config;
mod connect;
mod error;
pub mod naming;
pub mod output;
mod relay;
pub mod restart;
mod server;
mod tool;
mod tools;

pub use approval::{ApprovalDefault, ToolHints, approval_default};
pub use config::{ConfigError, McpServerConfig, TransportKind};
pub use error::{CallError, McpError};
pub use relay::RelayedTool;
pub use server::ServerStatus;
pub use tool::McpToolInfo;
pub use tools::McpTools;
