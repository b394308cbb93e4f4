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
use crate::error::ConvertError;
use crate::message::{ToolState, UiMessage, UiPart, UiRole, UiToolPart};

/// Converts the client's messages into the engine's (see the module docs).
/// Copies what it keeps; [`into_model_messages`] moves it instead.
pub fn convert_to_model_messages(messages: &[UiMessage]) -> Result<Vec<ModelMessage>, ConvertError> {
    // Only the parts the conversion can use are copied, one at a time as it
    // takes them: no message ids or metadata, no `data-*` or `source-*` parts
    // (the denial reasons among them are read before).
    let parts = messages.iter().map(|message| {
        let kept = message.parts.iter().filter(|part| !matches!(part, UiPart::Other(_))).cloned();
        (message.role, denial_reasons(message.role, &message.parts), kept)
    });
    Ok(convert(parts, messages.len()))
}

/// Converts the client's messages into the engine's (see the module docs),
/// moving every text, input and output into the model messages instead of
/// copying it: the form for a caller that no longer needs the UI messages.
pub fn into_model_messages(messages: Vec<UiMessage>) -> Result<Vec<ModelMessage>, ConvertError> {
    let count = messages.len();
    let parts = messages
        .into_iter()
        .map(|message| (message.role, denial_reasons(message.role, &message.parts), message.parts.into_iter()));
    Ok(convert(parts, count))
}

/// Converts `count` messages, each given as its role, its denial reasons and its parts.
fn convert<P: Iterator<Item = UiPart>>(
    messages: impl Iterator<Item = (UiRole, Denials, P)>,
    count: usize,
) -> Vec<ModelMessage> {
    // An assistant message gives up to two model messages per step.
    let mut out = Vec::with_capacity(count + count / 2);
    // Parts gather in these buffers and leave them in vectors of their exact
    // size: pushed one at a time, a message's few parts would hold room for
    // four or more, doubling the memory a conversation takes.
    let mut step = Step::default();
    let mut user_parts = Vec::new();
    for (role, denials, parts) in messages {
        match role {
            UiRole::System => {
                let text: String = parts.filter_map(text_of).collect();
                out.push(ModelMessage::system(text));
            }
            UiRole::User => {
                user_parts.extend(parts.filter_map(user_part));
                out.push(ModelMessage::User(UserMessage {
                    content: UserContent::Parts(exact(&mut user_parts)),
                    provider_options: None,
                }));
            }
            UiRole::Assistant => {
                for part in parts {
                    match part {
                        UiPart::StepStart => step.flush(&mut out),
                        part => step.add(part, &denials),
                    }
                }
                step.flush(&mut out);
            }
        }
    }
    out
}

fn text_of(part: UiPart) -> Option<String> {
    match part {
        UiPart::Text { text } => Some(text),
        _ => None,
    }
}

fn user_part(part: UiPart) -> Option<UserPart> {
    match part {
        UiPart::Text { text } => Some(UserPart::Text(TextPart::new(text))),
        UiPart::File { url, media_type, filename } => {
            Some(UserPart::File(FilePart { data: url, media_type, filename, provider_options: None }))
        }
        UiPart::ToolApproval { tool_call_id, approved, reason } => {
            Some(UserPart::ToolApproval(LegacyToolApprovalPart { tool_call_id, approved, reason }))
        }
        UiPart::Reasoning { .. } | UiPart::StepStart | UiPart::Tool(_) | UiPart::Other(_) => None,
    }
}

/// Why calls of one message were denied without a person's answer (a rule, a
/// sticky decision, the tool's own policy): the `data-toolgate-reason` parts
/// with `decision: "deny"` of an assistant message, by call id.
/// Also the approval ids a sub-agent's surfaced calls carry (their
/// `callProviderMetadata.toolgate.subAgent`): the encoder repeats each on the
/// agent call that waits for it, for clients that send a step once every call
/// in it is answered; that copy is no approval of the agent call.
#[derive(Default)]
struct Denials {
    reasons: HashMap<String, String>,
    relayed: std::collections::HashSet<String>,
}

impl Denials {
    fn get(&self, tool_call_id: &str) -> Option<&String> {
        self.reasons.get(tool_call_id)
    }
}

fn denial_reasons(role: UiRole, parts: &[UiPart]) -> Denials {
    if role != UiRole::Assistant {
        return Denials::default();
    }
    let reasons = parts
        .iter()
        .filter_map(|part| match part {
            UiPart::Other(raw) if raw["type"] == REASON_PART && raw["data"]["decision"] == "deny" => {
                Some((raw["id"].as_str()?.to_owned(), raw["data"]["reason"].as_str()?.to_owned()))
            }
            _ => None,
        })
        .collect();
    let relayed = parts
        .iter()
        .filter_map(|part| match part {
            UiPart::Tool(tool) if is_surfaced(tool) => tool.approval.as_ref().map(|approval| approval.id.clone()),
            _ => None,
        })
        .collect();
    Denials { reasons, relayed }
}

/// True for a sub-agent's call surfaced in this message.
fn is_surfaced(tool: &UiToolPart) -> bool {
    tool.call_provider_metadata.as_ref().and_then(|metadata| metadata.get("toolgate")?.get("subAgent")).is_some()
}

/// The model parts of one step of an assistant message: the assistant's, then
/// the tool message's (approval answers and results).
#[derive(Default)]
struct Step {
    assistant: Vec<AssistantPart>,
    tool: Vec<ToolPart>,
}

impl Step {
    fn add(&mut self, part: UiPart, denials: &Denials) {
        match part {
            UiPart::Text { text } if !text.is_empty() => self.assistant.push(AssistantPart::Text(TextPart::new(text))),
            UiPart::Reasoning { text } if !text.is_empty() => {
                self.assistant.push(AssistantPart::Reasoning(ReasoningPart { text, provider_options: None }))
            }
            UiPart::File { url, media_type, filename } => self.assistant.push(AssistantPart::File(FilePart {
                data: url,
                media_type,
                filename,
                provider_options: None,
            })),
            UiPart::Tool(part) if part.state != ToolState::InputStreaming => self.add_tool(*part, denials),
            UiPart::Text { .. }
            | UiPart::Reasoning { .. }
            | UiPart::Tool(_)
            | UiPart::ToolApproval { .. }
            | UiPart::StepStart
            | UiPart::Other(_) => {}
        }
    }

    /// The call (and its approval request, and a provider-executed result) in
    /// the assistant message; the approval's answer and a local result in the
    /// tool message.
    fn add_tool(&mut self, mut part: UiToolPart, denials: &Denials) {
        if !is_surfaced(&part) && part.approval.as_ref().is_some_and(|approval| denials.relayed.contains(&approval.id))
        {
            // The encoder's copy of a sub-agent's approval on the agent call that waits: no approval of it.
            part.approval = None;
            if matches!(part.state, ToolState::ApprovalRequested | ToolState::ApprovalResponded) {
                part.state = ToolState::InputAvailable;
            }
        }
        let UiToolPart {
            tool_name,
            tool_call_id,
            state,
            input,
            output,
            error_text,
            raw_input,
            provider_executed,
            approval,
            call_provider_metadata,
            preliminary,
            dynamic: _,
        } = part;
        let input = match state {
            ToolState::OutputError => input.or(raw_input),
            _ => input,
        };
        self.assistant.push(AssistantPart::ToolCall(ToolCallPart {
            tool_call_id: tool_call_id.clone(),
            tool_name: tool_name.clone(),
            input: input.unwrap_or_else(|| Value::Object(Default::default())),
            provider_executed,
            provider_options: call_provider_metadata,
        }));
        let mut person = None;
        if let Some(approval) = approval {
            self.assistant.push(AssistantPart::ToolApprovalRequest(ToolApprovalRequestPart {
                approval_id: approval.id.clone(),
                tool_call_id: tool_call_id.clone(),
                signature: approval.signature,
            }));
            if let Some(approved) = approval.approved {
                self.tool.push(ToolPart::ToolApprovalResponse(ToolApprovalResponsePart {
                    approval_id: approval.id,
                    approved,
                    reason: approval.reason.clone(),
                    provider_executed,
                    edited_input: approval.edited_input,
                }));
            }
            person = approval.reason;
        }
        if provider_executed == Some(true) {
            let output = match state {
                ToolState::OutputAvailable => Some(ToolResultOutput::json(output.unwrap_or(Value::Null))),
                ToolState::OutputError => {
                    Some(ToolResultOutput::error_json(Value::String(error_text.unwrap_or_default())))
                }
                _ => None,
            };
            if let Some(output) = output {
                self.assistant.push(AssistantPart::ToolResult(result(tool_call_id, tool_name, output)));
            }
            return;
        }
        let output = match state {
            ToolState::OutputDenied => {
                let rule = || denials.get(tool_call_id.as_str()).cloned();
                Some(ToolResultOutput::denied(person.or_else(rule)))
            }
            ToolState::OutputAvailable if preliminary != Some(true) => {
                Some(ToolResultOutput::from_value(output.unwrap_or(Value::Null)))
            }
            ToolState::OutputError => Some(ToolResultOutput::error_text(error_text.unwrap_or_default())),
            ToolState::InputStreaming
            | ToolState::InputAvailable
            | ToolState::ApprovalRequested
            | ToolState::ApprovalResponded
            | ToolState::OutputAvailable => None,
        };
        if let Some(output) = output {
            self.tool.push(ToolPart::ToolResult(result(tool_call_id, tool_name, output)));
        }
    }

    /// Ends the step: its assistant message, then its tool message, each if not empty.
    fn flush(&mut self, out: &mut Vec<ModelMessage>) {
        if !self.assistant.is_empty() {
            out.push(ModelMessage::Assistant(AssistantMessage {
                content: AssistantContent::Parts(exact(&mut self.assistant)),
                provider_options: None,
            }));
        }
        if !self.tool.is_empty() {
            out.push(ModelMessage::tool(exact(&mut self.tool)));
        }
    }
}

/// Moves what `buffer` holds into a vector of exactly its length, keeping the buffer's room for the next message.
#[allow(clippy::drain_collect, reason = "`mem::take` would hand over the buffer's spare room too")]
fn exact<T>(buffer: &mut Vec<T>) -> Vec<T> {
    buffer.drain(..).collect()
}

fn result(tool_call_id: String, tool_name: String, output: ToolResultOutput) -> ToolResultPart {
    ToolResultPart { tool_call_id, tool_name, output, provider_options: None }
}
