//! Rewrites older approval encodings into canonical `tool-approval-response` parts.
//!
//! Two encodings are accepted besides the canonical one:
//!
//! 1. **Approval in a user message** (`{type:"tool-approval", toolCallId, approved, reason?}`
//!    in a user message's parts). It names the tool call, not the approval. It
//!    becomes a tool message holding a `tool-approval-response` whose
//!    `approvalId` is the id of the (first) `tool-approval-request` for that
//!    call, placed where the user message was. The user message's other parts
//!    stay, as a user message after it; a user message that held only
//!    approvals disappears (it is an answer, not a new turn).
//! 2. **Approval tool result** (a `tool-result` with `toolName:"approval"` in a
//!    tool message, answering a call to another tool). Its output must be
//!    `{type:"json", value:{approved: <bool>, reason?: <string>}}`; it becomes a
//!    `tool-approval-response` the same way. A result whose call really is to
//!    a tool named `approval` is left alone.
//!
//! Both forms must answer a call that has a `tool-approval-request`: an
//! approval nobody asked for is an error, never an execution.

use std::collections::HashMap;

use serde_json::Value;

use crate::{
    AssistantPart, ModelMessage, ToolApprovalResponsePart, ToolMessage, ToolPart, ToolResultOutput, UserContent,
    UserMessage, UserPart,
};

/// The tool name that marks an approval tool result in the older encoding.
pub const LEGACY_APPROVAL_TOOL_NAME: &str = "approval";

/// An older-form approval that cannot be mapped to a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NormalizeError {
    /// The approval names a tool call that no earlier assistant message contains.
    #[error(
        "message {message_index}: approval for tool call `{tool_call_id}`, which no earlier assistant message contains"
    )]
    ToolCallNotFound {
        /// Index of the message holding the approval.
        message_index: usize,
        /// The tool call it names.
        tool_call_id: String,
    },
    /// The tool call exists but nobody asked for its approval.
    #[error("message {message_index}: approval for tool call `{tool_call_id}`, which has no tool-approval-request")]
    NoApprovalRequest {
        /// Index of the message holding the approval.
        message_index: usize,
        /// The tool call it names.
        tool_call_id: String,
    },
    /// An approval tool result whose output is not `{approved: bool, reason?: string}` JSON.
    #[error("message {message_index}: approval result for tool call `{tool_call_id}` is malformed: {detail}")]
    InvalidLegacyApproval {
        /// Index of the message holding the approval.
        message_index: usize,
        /// The tool call it names.
        tool_call_id: String,
        /// What is wrong.
        detail: String,
    },
}

#[derive(Default)]
struct CallIndex {
    tool_names: HashMap<String, String>,
    approval_ids: HashMap<String, String>,
}

impl CallIndex {
    fn record(&mut self, parts: &[AssistantPart]) {
        for part in parts {
            match part {
                AssistantPart::ToolCall(call) => {
                    self.tool_names.insert(call.tool_call_id.clone(), call.tool_name.clone());
                }
                AssistantPart::ToolApprovalRequest(request) => {
                    // The first request for a call is the one answered; the engine refuses a second.
                    self.approval_ids
                        .entry(request.tool_call_id.clone())
                        .or_insert_with(|| request.approval_id.clone());
                }
                AssistantPart::Text(_)
                | AssistantPart::Reasoning(_)
                | AssistantPart::File(_)
                | AssistantPart::ToolResult(_) => {}
            }
        }
    }

    fn response(
        &self,
        message_index: usize,
        tool_call_id: &str,
        approved: bool,
        reason: Option<String>,
    ) -> Result<ToolApprovalResponsePart, NormalizeError> {
        if !self.tool_names.contains_key(tool_call_id) {
            return Err(NormalizeError::ToolCallNotFound { message_index, tool_call_id: tool_call_id.into() });
        }
        let approval_id = self
            .approval_ids
            .get(tool_call_id)
            .ok_or_else(|| NormalizeError::NoApprovalRequest { message_index, tool_call_id: tool_call_id.into() })?;
        Ok(ToolApprovalResponsePart {
            approval_id: approval_id.clone(),
            approved,
            reason,
            provider_executed: None,
            edited_input: None,
        })
    }
}

/// Rewrites older approval encodings into canonical ones (see the module docs).
/// Histories without them come back unchanged, without being rebuilt.
pub fn normalize_approvals(messages: Vec<ModelMessage>) -> Result<Vec<ModelMessage>, NormalizeError> {
    if !messages.iter().any(has_older_encoding) {
        return Ok(messages);
    }
    let mut index = CallIndex::default();
    let mut out = Vec::with_capacity(messages.len());
    for (message_index, message) in messages.into_iter().enumerate() {
        match message {
            ModelMessage::Assistant(assistant) => {
                index.record(assistant.part_slice());
                out.push(ModelMessage::Assistant(assistant));
            }
            ModelMessage::User(UserMessage { content: UserContent::Parts(parts), provider_options })
                if parts.iter().any(|part| matches!(part, UserPart::ToolApproval(_))) =>
            {
                let mut responses = Vec::new();
                let mut rest = Vec::new();
                for part in parts {
                    match part {
                        UserPart::ToolApproval(approval) => {
                            responses.push(ToolPart::ToolApprovalResponse(index.response(
                                message_index,
                                &approval.tool_call_id,
                                approval.approved,
                                approval.reason,
                            )?))
                        }
                        other => rest.push(other),
                    }
                }
                out.push(ModelMessage::tool(responses));
                if !rest.is_empty() {
                    out.push(ModelMessage::User(UserMessage { content: UserContent::Parts(rest), provider_options }));
                }
            }
            ModelMessage::Tool(ToolMessage { content, provider_options }) => {
                let content = content
                    .into_iter()
                    .map(|part| migrate_tool_part(&index, message_index, part))
                    .collect::<Result<_, _>>()?;
                out.push(ModelMessage::Tool(ToolMessage { content, provider_options }));
            }
            other @ (ModelMessage::System(_) | ModelMessage::User(_)) => out.push(other),
        }
    }
    Ok(out)
}

/// True when `message` may hold an older encoding: a user message with an
/// approval part, or a tool message with a result named like the approval tool.
fn has_older_encoding(message: &ModelMessage) -> bool {
    match message {
        ModelMessage::User(user) => user.has_approval_parts(),
        ModelMessage::Tool(tool) => tool.content.iter().any(|part| match part {
            ToolPart::ToolResult(result) => result.tool_name == LEGACY_APPROVAL_TOOL_NAME,
            ToolPart::ToolApprovalResponse(_) => false,
        }),
        ModelMessage::System(_) | ModelMessage::Assistant(_) => false,
    }
}

fn migrate_tool_part(index: &CallIndex, message_index: usize, part: ToolPart) -> Result<ToolPart, NormalizeError> {
    let ToolPart::ToolResult(result) = part else {
        return Ok(part);
    };
    let answers_other_tool = result.tool_name == LEGACY_APPROVAL_TOOL_NAME
        && index.tool_names.get(&result.tool_call_id).is_some_and(|name| name != LEGACY_APPROVAL_TOOL_NAME);
    if !answers_other_tool {
        return Ok(ToolPart::ToolResult(result));
    }
    let invalid = |detail: &str| NormalizeError::InvalidLegacyApproval {
        message_index,
        tool_call_id: result.tool_call_id.clone(),
        detail: detail.into(),
    };
    let ToolResultOutput::Json { value: Value::Object(fields), .. } = &result.output else {
        return Err(invalid("output must be JSON {approved: boolean, reason?: string}"));
    };
    let Some(Value::Bool(approved)) = fields.get("approved") else {
        return Err(invalid("`approved` must be a boolean"));
    };
    let reason = match fields.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(reason)) => Some(reason.clone()),
        Some(_) => return Err(invalid("`reason` must be a string")),
    };
    Ok(ToolPart::ToolApprovalResponse(index.response(message_index, &result.tool_call_id, *approved, reason)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_messages;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn asked() -> serde_json::Value {
        json!({"role": "assistant", "content": [
            {"type": "tool-call", "toolCallId": "c1", "toolName": "delete_file", "input": {"path": "a"}},
            {"type": "tool-approval-request", "approvalId": "apr_1", "toolCallId": "c1"}
        ]})
    }

    fn normalized(history: serde_json::Value) -> Result<serde_json::Value, NormalizeError> {
        let messages = normalize_approvals(parse_messages(history).unwrap())?;
        Ok(serde_json::to_value(messages).unwrap())
    }

    #[test]
    fn a_canonical_history_comes_back_as_it_was_without_a_rebuild() {
        let history = parse_messages(json!([
            {"role": "user", "content": [{"type": "text", "text": "delete a"}]},
            asked(),
            {"role": "tool", "content": [
                {"type": "tool-approval-response", "approvalId": "apr_1", "approved": true},
                {"type": "tool-result", "toolCallId": "c1", "toolName": "delete_file",
                 "output": {"type": "json", "value": {"deleted": "a"}}}
            ]}
        ]))
        .unwrap();
        let expected = history.clone();
        let buffer = history.as_ptr();
        let out = normalize_approvals(history).unwrap();
        assert_eq!(out, expected);
        assert_eq!(out.as_ptr(), buffer, "the same vector, not a copy");
    }

    #[test]
    fn user_message_approval_becomes_a_tool_response() {
        let out = normalized(json!([
            {"role": "user", "content": "delete a"},
            asked(),
            {"role": "user", "content": [{"type": "tool-approval", "toolCallId": "c1", "approved": false, "reason": "no"}]}
        ]))
        .unwrap();
        assert_eq!(
            out[2],
            json!({"role": "tool", "content": [
                {"type": "tool-approval-response", "approvalId": "apr_1", "approved": false, "reason": "no"}
            ]})
        );
        assert_eq!(out.as_array().unwrap().len(), 3, "an approval-only user message is not a new turn");
    }

    #[test]
    fn user_text_next_to_an_approval_stays() {
        let out = normalized(json!([
            asked(),
            {"role": "user", "content": [
                {"type": "tool-approval", "toolCallId": "c1", "approved": true},
                {"type": "text", "text": "and then say hi"}
            ]}
        ]))
        .unwrap();
        assert_eq!(out[1]["role"], "tool");
        assert_eq!(out[2], json!({"role": "user", "content": [{"type": "text", "text": "and then say hi"}]}));
    }

    #[test]
    fn approval_tool_result_is_migrated() {
        let out = normalized(json!([
            asked(),
            {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c1", "toolName": "approval",
                "output": {"type": "json", "value": {"approved": true}}}]}
        ]))
        .unwrap();
        assert_eq!(
            out[1]["content"][0],
            json!({"type": "tool-approval-response", "approvalId": "apr_1", "approved": true})
        );
    }

    #[test]
    fn result_of_a_real_approval_tool_is_kept() {
        let history = json!([
            {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "c9", "toolName": "approval", "input": {}}]},
            {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c9", "toolName": "approval",
                "output": {"type": "text", "value": "fine"}}]}
        ]);
        assert_eq!(normalized(history.clone()).unwrap(), history);
    }

    #[test]
    fn malformed_or_unrequested_approvals_are_errors() {
        let bad_output = normalized(json!([
            asked(),
            {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c1", "toolName": "approval",
                "output": {"type": "text", "value": "yes"}}]}
        ]));
        assert!(matches!(bad_output, Err(NormalizeError::InvalidLegacyApproval { message_index: 1, .. })));

        let no_call = normalized(json!([
            {"role": "user", "content": [{"type": "tool-approval", "toolCallId": "ghost", "approved": true}]}
        ]));
        assert!(matches!(no_call, Err(NormalizeError::ToolCallNotFound { .. })));

        let no_request = normalized(json!([
            {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "c1", "toolName": "x", "input": {}}]},
            {"role": "user", "content": [{"type": "tool-approval", "toolCallId": "c1", "approved": true}]}
        ]));
        assert!(matches!(no_request, Err(NormalizeError::NoApprovalRequest { .. })));
    }
}
