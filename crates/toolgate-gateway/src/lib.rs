//! `toolgate mcp-gateway`: an MCP server in front of MCP servers that holds
//! every risky call for a person's approval, for agents toolgate did not
//! build (Claude Desktop, Claude Code, Cursor, Codex, VS Code, any MCP client).
//!
//! # The contract
//!
//! - **Tools.** The gateway offers the tools of its `[[mcp]]` servers as
//!   `toolgate serve` offers them to a model (`<server>__<tool>`, filtered
//!   by `tools = [...]`), with their schemas and annotations, and tells its
//!   clients `notifications/tools/list_changed` when they change. Resources
//!   and prompts of the upstream servers pass through unchanged.
//! - **The gate.** Every `tools/call` is decided as the engine decides a
//!   model's call, and its question issued, through the lifecycle's one
//!   path ([`Gateway::admit`]): rules (deny > ask > allow, history terms
//!   counted atomically), sticky decisions and grants, then the tool's
//!   default from annotations believed only from `trusted` servers. A denial answers at once with an `isError` result
//!   whose text starts `denied by policy: ` and names the rule; nothing
//!   reaches the upstream server. A call that needs no approval is relayed.
//! - **Approval.** Every other call is held ([`hold`]) and recorded in the
//!   ledger, in conversation `mcp:<principal>:<client>`
//!   ([`Session::conversation_id`]), bound to its tool and canonical input.
//!   The client is asked by `elicitation/create` (form mode: `decision` =
//!   `approve` | `approve_always` | `deny`, and an optional `reason`) when it
//!   declared the capability and the rule named no approvers; otherwise the
//!   approval waits out of band (the inbox of any `toolgate serve` on the
//!   same store, `toolgate approvals`, notifications) while the gateway
//!   holds the call for `hold`, reporting progress every 10 s. Not decided
//!   in time: an `isError` result saying so, with
//!   `_meta["toolgate/approval"] = {id, state, url?}`. A denial by the
//!   person in the client reads `denied by the user: REASON`; one out of
//!   band, `denied by PRINCIPAL: REASON`.
//! - **Retries and exactly once.** A call with the same tool and canonical
//!   input from the same principal and client attaches to the open approval,
//!   and gets the stored outcome within the retry window after it ended. The
//!   upstream tool runs once per approval, under the ledger's claim, however
//!   many retries race and across gateway restarts (a call whose runner died
//!   resolves as interrupted unless the tool is idempotent).
//! - **Claude Code.** With `[gateway] permission_prompt_tool = true`, the
//!   tool `approval_prompt` answers Claude Code's `--permission-prompt-tool`
//!   ([`prompt_tool`]).
//!
//! Transports: stdio ([`serve_stdio`]) or streamable HTTP ([`http::router`]).

mod call;
mod gateway;
pub mod handler;
pub mod hold;
pub mod http;
pub mod options;
pub mod outcome;
pub mod prompt_tool;

pub use gateway::{CONVERSATION_PREFIX, Gateway, Identity, Session};
pub use handler::GatewayHandler;
pub use options::{DEFAULT_HOLD, DEFAULT_MAX_HELD_CALLS, DEFAULT_RETRY_WINDOW, GatewayOptions, GatewaySection};

use std::sync::Arc;

use rmcp::ServiceExt;

/// Why the gateway stopped serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The MCP session over stdio could not start or failed.
    #[error("MCP over stdio: {0}")]
    Stdio(String),
}

/// Serves one client over stdio (what Claude Desktop, Cursor and Codex start
/// as a command) until it disconnects, acting for `identity`.
pub async fn serve_stdio(gateway: Arc<Gateway>, identity: Identity) -> Result<(), GatewayError> {
    let handler = GatewayHandler::new(gateway, identity);
    let service =
        handler.serve(rmcp::transport::stdio()).await.map_err(|error| GatewayError::Stdio(error.to_string()))?;
    service.waiting().await.map_err(|error| GatewayError::Stdio(error.to_string()))?;
    Ok(())
}
