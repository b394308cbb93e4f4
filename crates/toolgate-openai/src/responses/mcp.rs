//! Hosted MCP servers: the `args` of a `ToolSpec::Provider { id: "openai.mcp" }`.
//!
//! The args are camelCase JSON (snake_case keys are accepted too):
//!
//! ```json
//! {
//!   "serverLabel": "zip1",                      // required
//!   "serverUrl": "https://zip1.io/mcp",         // or "connectorId": "connector_gmail"
//!   "requireApproval": "always",                // "always" | "never" |
//!                                               // {"always": {"toolNames": [..]}, "never": {"toolNames": [..], "readOnly": true}}
//!   "allowedTools": ["create_short_url"],       // or {"toolNames": [..], "readOnly": true}
//!   "headers": {"X-Api-Key": "..."},
//!   "authorization": "oauth token",
//!   "serverDescription": "Link shortener"
//! }
//! ```
//!
//! Without `requireApproval` the field is not sent and OpenAI's default
//! applies (it asks for approval). Build the tool with [`McpServer::tool`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_model::ProviderTool;

/// The provider tool id of hosted MCP servers.
pub const MCP_TOOL_ID: &str = "openai.mcp";

/// A hosted MCP server OpenAI calls on the model's behalf.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServer {
    /// The label calls and approvals name the server by.
    #[serde(alias = "server_label")]
    pub server_label: String,
    /// The server's URL.
    #[serde(default, alias = "server_url", skip_serializing_if = "Option::is_none")]
    pub server_url: Option<String>,
    /// A connector id instead of a URL.
    #[serde(default, alias = "connector_id", skip_serializing_if = "Option::is_none")]
    pub connector_id: Option<String>,
    /// Which calls OpenAI asks approval for (default: OpenAI's, which asks).
    #[serde(default, alias = "require_approval", skip_serializing_if = "Option::is_none")]
    pub require_approval: Option<RequireApproval>,
    /// Which of the server's tools the model may use.
    #[serde(default, alias = "allowed_tools", skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<AllowedTools>,
    /// Headers sent to the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// An OAuth access token for the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<String>,
    /// What the server does, for the model.
    #[serde(default, alias = "server_description", skip_serializing_if = "Option::is_none")]
    pub server_description: Option<String>,
}

/// When OpenAI asks for approval before calling a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequireApproval {
    /// For every tool, or for none.
    Mode(ApprovalMode),
    /// Per tool.
    Filter {
        /// Tools that always ask.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        always: Option<ToolFilter>,
        /// Tools that never ask.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        never: Option<ToolFilter>,
    },
}

/// `always` or `never`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalMode {
    /// Ask before every call.
    Always,
    /// Never ask.
    Never,
}

/// The server's tools the model may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AllowedTools {
    /// These names.
    Names(Vec<String>),
    /// A filter.
    Filter(ToolFilter),
}

/// Selects tools by name and/or by their read-only annotation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolFilter {
    /// Tool names.
    #[serde(default, alias = "tool_names", skip_serializing_if = "Option::is_none")]
    pub tool_names: Option<Vec<String>>,
    /// Only tools annotated read-only.
    #[serde(default, alias = "read_only", skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
}

impl McpServer {
    /// A server at `url` labelled `label`.
    pub fn new(label: impl Into<String>, url: impl Into<String>) -> Self {
        Self { server_label: label.into(), server_url: Some(url.into()), ..Self::default() }
    }

    /// Sets the approval rule.
    pub fn require_approval(mut self, rule: RequireApproval) -> Self {
        self.require_approval = Some(rule);
        self
    }

    /// Sets the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.server_description = Some(description.into());
        self
    }

    /// The args JSON of the provider tool.
    pub fn args(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The provider tool (named after the server label) to put in a toolkit
    /// (`toolgate::Tool::from(server.tool())`).
    pub fn tool(&self) -> ProviderTool {
        ProviderTool::new(self.server_label.clone(), MCP_TOOL_ID, self.args())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn args_round_trip_in_both_spellings() {
        let server = McpServer::new("zip1", "https://zip1.io/mcp")
            .require_approval(RequireApproval::Mode(ApprovalMode::Always))
            .description("Link shortener");
        assert_eq!(
            server.args(),
            json!({"serverLabel": "zip1", "serverUrl": "https://zip1.io/mcp", "requireApproval": "always",
                   "serverDescription": "Link shortener"})
        );
        let snake: McpServer = serde_json::from_value(json!({
            "server_label": "x", "connector_id": "c",
            "require_approval": {"never": {"tool_names": ["read"]}},
            "allowed_tools": {"read_only": true}
        }))
        .unwrap();
        assert_eq!(
            snake.require_approval,
            Some(RequireApproval::Filter {
                always: None,
                never: Some(ToolFilter { tool_names: Some(vec!["read".into()]), read_only: None })
            })
        );
        assert_eq!(
            snake.allowed_tools,
            Some(AllowedTools::Filter(ToolFilter { tool_names: None, read_only: Some(true) }))
        );
    }
}
