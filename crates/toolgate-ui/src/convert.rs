//! `UIMessage[]` to `ModelMessage[]`, following the AI SDK v6 rules.
//!
//! Assistant messages split into one assistant message per step
//! (`step-start`). Each tool part that is past `input-streaming` gives a
//! `tool-call`; a part with an `approval` also gives a
//! `tool-approval-request`; once the approval has `approved` set, a
//! `tool-approval-response` goes into the tool message that follows. Outputs
//! become `tool-result`s: `output-available` as text or JSON, `output-error`
//! as `error-text`, and `output-denied` as `execution-denied` with the
//! person's reason, else the reason of the message's `data-toolgate-reason`
//! part for the call (a rule's or a policy's denial; the AI SDK uses
//! `error-text` there; a denial the model can tell apart from a failure is
//! better). Provider-executed results stay
//! in the assistant message. toolgate's `approval.editedInput` becomes the
//! response's `editedInput`. A user message's `tool-approval` part becomes
//! the model user part of the same name, in place; the engine rewrites it
//! into a `tool-approval-response` (see `toolgate_protocol::normalize_approvals`).

use std::collections::HashMap;

use serde_json::Value;
use toolgate_protocol::{
    AssistantContent, AssistantMessage, AssistantPart, FilePart, LegacyToolApprovalPart, ModelMessage, ReasoningPart,
    TextPart, ToolApprovalRequestPart, ToolApprovalResponsePart, ToolCallPart, ToolPart, ToolResultOutput,
    ToolResultPart, UserContent, UserMessage, UserPart,
};

use crate::build::REASON_PART;
use crate::message::{ToolState, UiMessage, UiPart, UiRole, UiToolPart};

/// A request body or message list that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// The body is not JSON.
    #[error("the body is not valid JSON: {0}")]
    InvalidJson(String),
    /// The body is JSON but not a chat request.
    #[error("invalid chat request: {0}")]
    InvalidBody(String),
    /// A message or part is malformed.
    #[error("invalid message {message_index}{}: {detail}", part_index.map(|p| format!(", part {p}")).unwrap_or_default())]
    InvalidMessage {
        /// Index of the message.
        message_index: usize,
        /// Index of the part, when a part is at fault.
        part_index: Option<usize>,
        /// What is wrong.
        detail: String,
    },
}

/// Converts the client's messages into the engine's (see the module docs).
pub fn convert_to_model_messages(messages: &[UiMessage]) -> Result<Vec<ModelMessage>, ConvertError> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        match message.role {
            UiRole::System => {
                let text: String = message.parts.iter().filter_map(text_of).collect();
                out.push(ModelMessage::system(text));
            }
            UiRole::User => {
                let parts: Vec<UserPart> = message.parts.iter().filter_map(user_part).collect();
                out.push(ModelMessage::User(UserMessage {
                    content: UserContent::Parts(parts),
                    provider_options: None,
                }));
            }
            UiRole::Assistant => {
                let denials = denial_reasons(&message.parts);
                for step in message.parts.split(|part| matches!(part, UiPart::StepStart)) {
                    convert_step(step, &denials, &mut out);
                }
            }
        }
    }
    Ok(out)
}

fn text_of(part: &UiPart) -> Option<&str> {
    match part {
        UiPart::Text { text } => Some(text),
        _ => None,
    }
}

fn user_part(part: &UiPart) -> Option<UserPart> {
    match part {
        UiPart::Text { text } => Some(UserPart::Text(TextPart::new(text.clone()))),
        UiPart::File { url, media_type, filename } => Some(UserPart::File(FilePart {
            data: url.clone(),
            media_type: media_type.clone(),
            filename: filename.clone(),
            provider_options: None,
        })),
        UiPart::ToolApproval { tool_call_id, approved, reason } => {
            Some(UserPart::ToolApproval(LegacyToolApprovalPart {
                tool_call_id: tool_call_id.clone(),
                approved: *approved,
                reason: reason.clone(),
            }))
        }
        UiPart::Reasoning { .. } | UiPart::StepStart | UiPart::Tool(_) | UiPart::Other(_) => None,
    }
}

/// Why calls of one message were denied without a person's answer (a rule, a
/// sticky decision, the tool's own policy): the `data-toolgate-reason` parts
/// with `decision: "deny"`, by call id.
fn denial_reasons(parts: &[UiPart]) -> HashMap<&str, &str> {
    parts
        .iter()
        .filter_map(|part| match part {
            UiPart::Other(raw) if raw["type"] == REASON_PART && raw["data"]["decision"] == "deny" => {
                Some((raw["id"].as_str()?, raw["data"]["reason"].as_str()?))
            }
            _ => None,
        })
        .collect()
}

fn convert_step(step: &[UiPart], denials: &HashMap<&str, &str>, out: &mut Vec<ModelMessage>) {
    let mut assistant = Vec::new();
    let mut tool = Vec::new();
    for part in step {
        match part {
            UiPart::Text { text } if !text.is_empty() => {
                assistant.push(AssistantPart::Text(TextPart::new(text.clone())))
            }
            UiPart::Reasoning { text } if !text.is_empty() => {
                assistant.push(AssistantPart::Reasoning(ReasoningPart { text: text.clone(), provider_options: None }))
            }
            UiPart::File { url, media_type, filename } => assistant.push(AssistantPart::File(FilePart {
                data: url.clone(),
                media_type: media_type.clone(),
                filename: filename.clone(),
                provider_options: None,
            })),
            UiPart::Tool(part) if part.state != ToolState::InputStreaming => {
                assistant.extend(assistant_parts(part));
                tool.extend(tool_parts(part, denials));
            }
            UiPart::Text { .. }
            | UiPart::Reasoning { .. }
            | UiPart::Tool(_)
            | UiPart::ToolApproval { .. }
            | UiPart::StepStart
            | UiPart::Other(_) => {}
        }
    }
    if !assistant.is_empty() {
        out.push(ModelMessage::Assistant(AssistantMessage {
            content: AssistantContent::Parts(assistant),
            provider_options: None,
        }));
    }
    if !tool.is_empty() {
        out.push(ModelMessage::tool(tool));
    }
}

fn is_provider_executed(part: &UiToolPart) -> bool {
    part.provider_executed == Some(true)
}

fn assistant_parts(part: &UiToolPart) -> Vec<AssistantPart> {
    let input = match part.state {
        ToolState::OutputError => part.input.clone().or_else(|| part.raw_input.clone()),
        _ => part.input.clone(),
    };
    let mut parts = vec![AssistantPart::ToolCall(ToolCallPart {
        tool_call_id: part.tool_call_id.clone(),
        tool_name: part.tool_name.clone(),
        input: input.unwrap_or_else(|| Value::Object(Default::default())),
        provider_executed: part.provider_executed,
        provider_options: part.call_provider_metadata.clone(),
    })];
    if let Some(approval) = &part.approval {
        parts.push(AssistantPart::ToolApprovalRequest(ToolApprovalRequestPart {
            approval_id: approval.id.clone(),
            tool_call_id: part.tool_call_id.clone(),
            signature: approval.signature.clone(),
        }));
    }
    if is_provider_executed(part) {
        let output = match part.state {
            ToolState::OutputAvailable => Some(ToolResultOutput::json(part.output.clone().unwrap_or(Value::Null))),
            ToolState::OutputError => {
                Some(ToolResultOutput::error_json(Value::String(part.error_text.clone().unwrap_or_default())))
            }
            _ => None,
        };
        if let Some(output) = output {
            parts.push(AssistantPart::ToolResult(result(part, output)));
        }
    }
    parts
}

fn tool_parts(part: &UiToolPart, denials: &HashMap<&str, &str>) -> Vec<ToolPart> {
    let mut parts = Vec::new();
    if let Some(approval) = &part.approval
        && let Some(approved) = approval.approved
    {
        parts.push(ToolPart::ToolApprovalResponse(ToolApprovalResponsePart {
            approval_id: approval.id.clone(),
            approved,
            reason: approval.reason.clone(),
            provider_executed: part.provider_executed,
            edited_input: approval.edited_input.clone(),
        }));
    }
    if is_provider_executed(part) {
        return parts;
    }
    let output = match part.state {
        ToolState::OutputDenied => {
            let person = part.approval.as_ref().and_then(|approval| approval.reason.clone());
            let rule = || denials.get(part.tool_call_id.as_str()).map(|reason| (*reason).to_owned());
            Some(ToolResultOutput::denied(person.or_else(rule)))
        }
        ToolState::OutputAvailable if part.preliminary != Some(true) => {
            Some(ToolResultOutput::from_value(part.output.clone().unwrap_or(Value::Null)))
        }
        ToolState::OutputError => Some(ToolResultOutput::error_text(part.error_text.clone().unwrap_or_default())),
        ToolState::InputStreaming
        | ToolState::InputAvailable
        | ToolState::ApprovalRequested
        | ToolState::ApprovalResponded
        | ToolState::OutputAvailable => None,
    };
    if let Some(output) = output {
        parts.push(ToolPart::ToolResult(result(part, output)));
    }
    parts
}

fn result(part: &UiToolPart, output: ToolResultOutput) -> ToolResultPart {
    ToolResultPart {
        tool_call_id: part.tool_call_id.clone(),
        tool_name: part.tool_name.clone(),
        output,
        provider_options: None,
    }
}
