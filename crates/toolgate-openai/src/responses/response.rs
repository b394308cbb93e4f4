//! A complete (non-streamed) Responses API object → `ModelResponse`, item by
//! item as [`super::stream`] would emit them.

use toolgate_http::error::error_from_event;
use toolgate_model::ModelError;
use toolgate_protocol::{ModelContent, ModelResponse};

use super::items::{
    ApprovalAliases, McpCallItem, approval_request_call, finish_reason, function_call, mcp_call, response_metadata,
    usage_of,
};
use super::wire::{OutputContent, OutputItem, ResponseObject};
use crate::config::IdGenerator;

/// Converts a response; a `failed` one is a typed error.
pub fn responses_response(
    response: ResponseObject,
    ids: &IdGenerator,
    mut aliases: ApprovalAliases,
) -> Result<ModelResponse, ModelError> {
    if response.summary.status.as_deref() == Some("failed") {
        let error = response.summary.error.clone().unwrap_or_default();
        return Err(error_from_event(
            error.code.as_deref(),
            error.message.unwrap_or_else(|| "the response failed".to_owned()),
        ));
    }
    let mut content = Vec::new();
    let mut pending_calls = false;
    for item in response.output {
        match item {
            OutputItem::Message { content: parts, .. } => {
                let text: String = parts
                    .iter()
                    .map(|part| match part {
                        OutputContent::OutputText { text } => text.as_str(),
                        OutputContent::Refusal { refusal } => refusal.as_str(),
                        OutputContent::Other => "",
                    })
                    .collect();
                if !text.is_empty() {
                    content.push(ModelContent::Text { text });
                }
            }
            OutputItem::Reasoning { summary, .. } => {
                content.extend(
                    summary
                        .into_iter()
                        .filter(|part| !part.text.is_empty())
                        .map(|part| ModelContent::Reasoning { text: part.text }),
                );
            }
            OutputItem::FunctionCall { id, call_id, name, arguments } => {
                content.push(ModelContent::ToolCall(function_call(id.as_deref(), &call_id, &name, &arguments)));
                pending_calls = true;
            }
            OutputItem::McpApprovalRequest { id, name, arguments, .. } => {
                let tool_call_id = ids();
                let call = approval_request_call(&id, &name, &arguments, tool_call_id.clone(), &mut aliases);
                content.push(ModelContent::ToolCall(call));
                content.push(ModelContent::ToolApprovalRequest { approval_id: id, tool_call_id });
                pending_calls = true;
            }
            OutputItem::McpCall { id, server_label, name, arguments, output, error, approval_request_id } => {
                let item = McpCallItem {
                    id: &id,
                    server_label: &server_label,
                    name: &name,
                    arguments: &arguments,
                    output: output.as_ref(),
                    error: error.as_ref(),
                    approval_request_id: approval_request_id.as_deref(),
                };
                let (call, result) = mcp_call(item, &aliases);
                content.push(ModelContent::ToolCall(call));
                content.push(ModelContent::ToolResult(result));
            }
            OutputItem::Other => {}
        }
    }
    Ok(ModelResponse {
        content,
        finish_reason: finish_reason(&response.summary, pending_calls),
        usage: usage_of(response.summary.usage.as_ref()),
        provider_metadata: response_metadata(&response.summary),
    })
}
