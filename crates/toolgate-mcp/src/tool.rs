//! MCP tools as toolgate tools.
//!
//! Each listed MCP tool becomes a [`Tool::dynamic`] named `<server>__<tool>`
//! ([`crate::naming`]) with the server's `inputSchema` (checked by toolgate's
//! JSON Schema validator before a call is sent), the server's description
//! (or its title), the approval default of [`crate::approval`], the output
//! mapping of [`crate::output`], and a handler that calls the server
//! ([`crate::call`]). A tool whose schema does not compile, or that does not
//! decode as an MCP tool at all, is skipped with a warning; the server's
//! other tools are kept.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use toolgate::{Tool, ToolContext, Toolkit, ToolkitError};

use crate::approval::{ApprovalDefault, ToolHints, approval_default};
use crate::call::{Target, call_tool};
use crate::naming::unique_tool_name;
use crate::output::model_output;
use crate::server::Server;

/// What is known about one MCP tool, for listings and UIs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpToolInfo {
    /// The model-facing name (`<server>__<tool>`).
    pub name: String,
    /// The server's name.
    pub server: String,
    /// The tool's name on the server.
    pub mcp_name: String,
    /// The tool's human-readable title, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool's annotations, if it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hints: Option<ToolHints>,
    /// Whether its calls ask a person by default, and why.
    pub approval: ApprovalDefault,
}

/// The toolgate tools of one server's listing, with names unique among `taken` (which they join).
pub(crate) fn server_tools(
    server: &Arc<Server>,
    listing: &[rmcp::model::Tool],
    taken: &mut HashSet<String>,
) -> Vec<(Tool, McpToolInfo)> {
    let mut built = Vec::with_capacity(listing.len());
    for mcp in listing.iter().filter(|mcp| server.config.offers(&mcp.name)) {
        if mcp.name.is_empty() {
            tracing::warn!(server = %server.name(), "skipping an MCP tool without a name");
            continue;
        }
        let name = unique_tool_name(server.name(), &mcp.name, taken);
        match build(server, mcp, &name) {
            Ok(entry) => built.push(entry),
            Err(error) => {
                tracing::warn!(server = %server.name(), tool = %mcp.name, %error, "skipping MCP tool");
                taken.remove(&name);
            }
        }
    }
    built
}

fn build(server: &Arc<Server>, mcp: &rmcp::model::Tool, name: &str) -> Result<(Tool, McpToolInfo), ToolkitError> {
    let hints = mcp.annotations.as_ref().map(ToolHints::from);
    let approval = approval_default(name, server.name(), server.config.trusted, hints.as_ref());
    let schema = Value::Object((*mcp.input_schema).clone());
    let target = Arc::new(Target { server: Arc::clone(server), mcp_name: mcp.name.to_string(), tool: name.to_owned() });
    let mut tool = Tool::dynamic(name, schema)
        .needs_approval(approval.needs_approval)
        .idempotent(approval.idempotent)
        .to_model_output(model_output)
        .handler(move |input: Value, context: ToolContext| {
            let target = Arc::clone(&target);
            async move { call_tool(&target, input, context).await }
        });
    if approval.needs_approval {
        tool = tool.approval_reason(approval.reason.clone());
    }
    let title = mcp.title.clone().or_else(|| mcp.annotations.as_ref().and_then(|a| a.title.clone()));
    if let Some(description) = mcp.description.as_deref().map(str::to_owned).or_else(|| title.clone()) {
        tool = tool.description(description);
    }
    // The engine's own check: a toolkit refuses a tool whose schema does not compile.
    Toolkit::new([tool.clone()])?;
    let info = McpToolInfo {
        name: name.to_owned(),
        server: server.name().to_owned(),
        mcp_name: mcp.name.to_string(),
        title,
        hints,
        approval,
    };
    Ok((tool, info))
}
