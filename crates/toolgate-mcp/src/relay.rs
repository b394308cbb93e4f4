//! What a gateway needs to offer these servers to its own clients: the
//! tools as MCP lists them (under their toolgate names, with schemas and
//! annotations as the server sent them), raw calls whose result goes back
//! unchanged, and each server's connection for resources and prompts.

use std::sync::Arc;

use rmcp::Peer;
use rmcp::model::CallToolResult;
use rmcp::service::RoleClient;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::call::{Target, send};
use crate::error::CallError;
use crate::tool::McpToolInfo;
use crate::tools::McpTools;

/// One tool as a gateway offers it again.
#[derive(Debug, Clone)]
pub struct RelayedTool {
    /// The tool as its server listed it, renamed to its toolgate name.
    pub listed: rmcp::model::Tool,
    /// What toolgate knows about it (server, name on the server, approval default).
    pub info: McpToolInfo,
    /// The toolgate tool (schema check, approval policy) behind it.
    pub tool: toolgate::Tool,
}

impl McpTools {
    /// The current tools, as [`McpTools::tools`] orders them, each with the
    /// listing its server sent (renamed to `<server>__<tool>`).
    pub fn relayed_tools(&self) -> Vec<RelayedTool> {
        let listings = self.registry().listings();
        self.registry()
            .current()
            .iter()
            .filter_map(|(tool, info)| relayed(tool, info, listings.get(self.server_index(&info.server)?)?))
            .collect()
    }

    /// The current tool named `name` (its toolgate name), as
    /// [`McpTools::relayed_tools`] gives it; reads only its server's listing.
    pub fn relayed_tool(&self, name: &str) -> Option<RelayedTool> {
        let current = self.registry().current();
        let (tool, info) = current.iter().find(|(_, info)| info.name == name)?;
        relayed(tool, info, &self.registry().listing(self.server_index(&info.server)?)?)
    }

    fn server_index(&self, server: &str) -> Option<usize> {
        self.registry().servers.iter().position(|candidate| candidate.name() == server)
    }

    /// Calls the tool named `name` (its toolgate name) with `input` and
    /// returns the server's result as it sent it (`isError` results
    /// included). `progress` gets each progress notification as
    /// `{"progress", "total"?, "message"?}`; cancelling `cancel` tells the
    /// server to stop. Fails like a toolgate call of the tool would
    /// ([`CallError`]): unknown tool, server down, timeout, rejected request.
    pub async fn call_relayed(
        &self,
        name: &str,
        input: Value,
        cancel: &CancellationToken,
        progress: &(dyn Fn(Value) + Send + Sync),
    ) -> Result<CallToolResult, CallError> {
        let current = self.registry().current();
        let Some((_, info)) = current.iter().find(|(_, info)| info.name == name) else {
            return Err(CallError::UnknownTool { tool: name.to_owned() });
        };
        let server = self
            .registry()
            .servers
            .iter()
            .find(|server| server.name() == info.server)
            .ok_or_else(|| CallError::UnknownTool { tool: name.to_owned() })?;
        let target = Target { server: Arc::clone(server), mcp_name: info.mcp_name.clone(), tool: name.to_owned() };
        let raw = send(&target, input, cancel, progress).await?;
        serde_json::from_value(raw).map_err(|error| CallError::InvalidResponse {
            server: info.server.clone(),
            tool: name.to_owned(),
            detail: error.to_string(),
        })
    }

    /// The connection to the server named `server` (for resources and
    /// prompts), or why there is none.
    pub fn peer(&self, server: &str) -> Result<Peer<RoleClient>, CallError> {
        match self.registry().servers.iter().find(|candidate| candidate.name() == server) {
            Some(found) => found.peer(),
            None => Err(CallError::ServerStopped { server: server.to_owned() }),
        }
    }
}

/// `info`'s tool as its server's `listing` has it, renamed to its toolgate name.
fn relayed(tool: &toolgate::Tool, info: &McpToolInfo, listing: &[rmcp::model::Tool]) -> Option<RelayedTool> {
    let mut listed = listing.iter().find(|mcp| mcp.name == info.mcp_name)?.clone();
    listed.name = info.name.clone().into();
    Some(RelayedTool { listed, info: info.clone(), tool: tool.clone() })
}
