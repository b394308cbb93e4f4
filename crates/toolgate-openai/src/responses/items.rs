//! Output items → core tool calls and results, shared by streamed and
//! complete responses.
//!
//! - `function_call` → a `tool-call` (id `call_id`, metadata `{openai:{itemId}}`).
//! - `mcp_approval_request` → a provider-executed `tool-call` with a new
//!   (dummy) id, named `mcp.<name>`, metadata `{openai:{approvalRequestId}}`,
//!   then a `tool-approval-request` whose approval id is the `mcpr_` id.
//! - `mcp_call` → a provider-executed `tool-call` and `tool-result` (an error
//!   result when `error` is set), result `{type:"call", serverLabel, name,
//!   arguments, output, error?}`. With `approval_request_id`, the call id is
//!   the one its approval request got (in this response or, via the prompt's
//!   tool-call `providerOptions.openai.approvalRequestId`, an earlier one).

use std::collections::HashMap;

use serde_json::{Map, Value, json};
use toolgate_protocol::{FinishReason, ModelToolCall, ModelToolResult, ProviderOptions, Usage};

use super::wire::{ResponseSummary, ResponsesUsage};

/// Maps MCP approval request ids to the tool call ids standing for them.
pub type ApprovalAliases = HashMap<String, String>;

/// `{"openai": {key: value}}`.
pub fn openai_metadata(key: &str, value: &str) -> ProviderOptions {
    let mut inner = Map::new();
    inner.insert(key.to_owned(), Value::String(value.to_owned()));
    let mut outer = Map::new();
    outer.insert("openai".to_owned(), Value::Object(inner));
    outer
}

/// The tool call for a function call item.
pub fn function_call(item_id: Option<&str>, call_id: &str, name: &str, arguments: &str) -> ModelToolCall {
    ModelToolCall {
        tool_call_id: call_id.to_owned(),
        tool_name: name.to_owned(),
        input: arguments.to_owned(),
        provider_executed: None,
        provider_metadata: item_id.map(|id| openai_metadata("itemId", id)),
    }
}

/// The call standing for an approval request; records the alias.
pub fn approval_request_call(
    approval_id: &str,
    name: &str,
    arguments: &str,
    tool_call_id: String,
    aliases: &mut ApprovalAliases,
) -> ModelToolCall {
    aliases.insert(approval_id.to_owned(), tool_call_id.clone());
    ModelToolCall {
        tool_call_id,
        tool_name: format!("mcp.{name}"),
        input: arguments.to_owned(),
        provider_executed: Some(true),
        provider_metadata: Some(openai_metadata("approvalRequestId", approval_id)),
    }
}

/// An MCP call item's fields.
pub struct McpCallItem<'a> {
    /// `mcp_...`.
    pub id: &'a str,
    /// The server.
    pub server_label: &'a str,
    /// The tool.
    pub name: &'a str,
    /// The input as JSON text.
    pub arguments: &'a str,
    /// The output.
    pub output: Option<&'a Value>,
    /// The failure.
    pub error: Option<&'a Value>,
    /// The approval request it ran under.
    pub approval_request_id: Option<&'a str>,
}

/// The call and result for an MCP call item.
pub fn mcp_call(item: McpCallItem<'_>, aliases: &ApprovalAliases) -> (ModelToolCall, ModelToolResult) {
    let tool_call_id = item
        .approval_request_id
        .and_then(|approval| aliases.get(approval))
        .cloned()
        .unwrap_or_else(|| item.id.to_owned());
    let tool_name = format!("mcp.{}", item.name);
    let metadata = openai_metadata("itemId", item.id);
    let error = item.error.filter(|error| !error.is_null());
    let mut result = json!({
        "type": "call",
        "serverLabel": item.server_label,
        "name": item.name,
        "arguments": item.arguments,
        "output": item.output.cloned().unwrap_or(Value::Null),
    });
    if let (Some(error), Some(object)) = (error, result.as_object_mut()) {
        object.insert("error".to_owned(), error.clone());
    }
    let call = ModelToolCall {
        tool_call_id: tool_call_id.clone(),
        tool_name: tool_name.clone(),
        input: item.arguments.to_owned(),
        provider_executed: Some(true),
        provider_metadata: Some(metadata.clone()),
    };
    let result = ModelToolResult {
        tool_call_id,
        tool_name,
        result,
        is_error: error.is_some(),
        provider_metadata: Some(metadata),
    };
    (call, result)
}

/// The finish reason of a finished response: incomplete for `max_output_tokens`
/// → `length`, for `content_filter` → `content-filter`, otherwise `other`;
/// complete with pending function calls or approval requests → `tool-calls`;
/// else `stop`.
pub fn finish_reason(response: &ResponseSummary, pending_calls: bool) -> FinishReason {
    let incomplete = response.incomplete_details.as_ref().and_then(|details| details.reason.as_deref());
    match (response.status.as_deref(), incomplete) {
        (_, Some("max_output_tokens")) => FinishReason::Length,
        (_, Some("content_filter")) => FinishReason::ContentFilter,
        (Some("incomplete"), _) | (_, Some(_)) => FinishReason::Other,
        _ if pending_calls => FinishReason::ToolCalls,
        _ => FinishReason::Stop,
    }
}

/// Maps Responses usage.
pub fn usage_of(usage: Option<&ResponsesUsage>) -> Usage {
    let Some(usage) = usage else { return Usage::default() };
    Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        total_tokens: usage.total_tokens,
        reasoning_tokens: usage.output_tokens_details.as_ref().and_then(|details| details.reasoning_tokens),
        cached_input_tokens: usage.input_tokens_details.as_ref().and_then(|details| details.cached_tokens),
    }
}

/// `{"openai": {"responseId"}}` when the response has an id.
pub fn response_metadata(response: &ResponseSummary) -> Option<ProviderOptions> {
    response.id.as_deref().map(|id| openai_metadata("responseId", id))
}
