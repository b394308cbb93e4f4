//! The engine's stream parts as UI message stream chunks.
//!
//! Contract: `start` carries the response message id; on a continuation it
//! is the id of the assistant message being continued, so the client extends
//! that message instead of adding a second one. Pre-resolution outputs come
//! before the first `start-step` because the engine emits them first. Text
//! and reasoning part ids are made unique per step. `tool-input-end` has no
//! UI chunk. Errors of tools are passed on as `errorText` strings.

use serde_json::Value;
use toolgate_protocol::StreamPart;

use crate::chunk::UiChunk;

/// How to encode a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncoderOptions {
    /// The response message id.
    pub message_id: String,
    /// Send the AI SDK `signature` field on approval requests (clients ai >= 6.0.231 only).
    pub signature_field: bool,
}

/// Turns stream parts into UI chunks, one response at a time.
#[derive(Debug, Clone)]
pub struct UiStreamEncoder {
    options: EncoderOptions,
    step: usize,
}

impl UiStreamEncoder {
    /// An encoder for one response.
    pub fn new(options: EncoderOptions) -> Self {
        Self { options, step: 0 }
    }

    /// The chunks for one stream part (none for parts the UI stream does not carry).
    pub fn encode(&mut self, part: &StreamPart) -> Vec<UiChunk> {
        let chunk = match part {
            StreamPart::Start => UiChunk::Start { message_id: Some(self.options.message_id.clone()) },
            StreamPart::StartStep => {
                self.step += 1;
                UiChunk::StartStep
            }
            StreamPart::FinishStep { .. } => UiChunk::FinishStep,
            StreamPart::Finish { finish_reason, .. } => UiChunk::Finish { finish_reason: Some(*finish_reason) },
            StreamPart::Error { error } => UiChunk::Error { error_text: error.clone() },
            StreamPart::Warning { code, message } => {
                UiChunk::Warning { data: serde_json::json!({"code": code, "message": message}), transient: true }
            }
            StreamPart::TextStart { id } => UiChunk::TextStart { id: self.block_id(id) },
            StreamPart::TextDelta { id, text } => UiChunk::TextDelta { id: self.block_id(id), delta: text.clone() },
            StreamPart::TextEnd { id } => UiChunk::TextEnd { id: self.block_id(id) },
            StreamPart::ReasoningStart { id } => UiChunk::ReasoningStart { id: self.block_id(id) },
            StreamPart::ReasoningDelta { id, text } => {
                UiChunk::ReasoningDelta { id: self.block_id(id), delta: text.clone() }
            }
            StreamPart::ReasoningEnd { id } => UiChunk::ReasoningEnd { id: self.block_id(id) },
            StreamPart::ToolInputStart { id, tool_name, provider_executed, dynamic } => UiChunk::ToolInputStart {
                tool_call_id: id.clone(),
                tool_name: tool_name.clone(),
                provider_executed: *provider_executed,
                dynamic: *dynamic,
            },
            StreamPart::ToolInputDelta { id, delta } => {
                UiChunk::ToolInputDelta { tool_call_id: id.clone(), input_text_delta: delta.clone() }
            }
            StreamPart::ToolInputEnd { .. } => return Vec::new(),
            StreamPart::ToolCall(call) => match &call.error {
                Some(error) if call.invalid == Some(true) => UiChunk::ToolInputError {
                    tool_call_id: call.tool_call_id.clone(),
                    tool_name: call.tool_name.clone(),
                    input: call.input.clone(),
                    error_text: error.clone(),
                    provider_executed: call.provider_executed,
                    dynamic: call.dynamic,
                },
                _ => UiChunk::ToolInputAvailable {
                    tool_call_id: call.tool_call_id.clone(),
                    tool_name: call.tool_name.clone(),
                    input: call.input.clone(),
                    provider_executed: call.provider_executed,
                    dynamic: call.dynamic,
                    provider_metadata: call.provider_metadata.clone(),
                },
            },
            StreamPart::ToolResult { tool_call_id, output, provider_executed, preliminary, dynamic, .. } => {
                UiChunk::ToolOutputAvailable {
                    tool_call_id: tool_call_id.clone(),
                    output: output.clone(),
                    provider_executed: *provider_executed,
                    dynamic: *dynamic,
                    preliminary: *preliminary,
                }
            }
            StreamPart::ToolError { tool_call_id, error, provider_executed, dynamic, .. } => UiChunk::ToolOutputError {
                tool_call_id: tool_call_id.clone(),
                error_text: error_text(error),
                provider_executed: *provider_executed,
                dynamic: *dynamic,
            },
            StreamPart::ToolApprovalRequest { approval_id, tool_call, signature, reason, routing } => {
                let request = UiChunk::ToolApprovalRequest {
                    approval_id: approval_id.clone(),
                    tool_call_id: tool_call.tool_call_id.clone(),
                    signature: signature.clone().filter(|_| self.options.signature_field),
                };
                let mut chunks =
                    with_reason(request, &tool_call.tool_call_id, Some(approval_id), "ask", reason.as_deref());
                if let (Some(routing), [UiChunk::Reason { data, .. }, _]) = (routing, chunks.as_mut_slice()) {
                    // Routed to named approvers: the chat shows who it waits for.
                    data["approvers"] = serde_json::json!(routing.approvers);
                    data["quorum"] = serde_json::json!(routing.quorum);
                }
                if let (Some(lineage), [UiChunk::Reason { data, .. }, _]) =
                    (tool_call.sub_agent_lineage(), chunks.as_mut_slice())
                {
                    // A sub-agent's call: the chat shows where it comes from.
                    data["lineage"] = lineage.clone();
                }
                // The agent call waiting for it shows the same request, so a client that sends a step once
                // every call in it is answered (the AI SDK's `lastAssistantMessageIsCompleteWithApprovalResponses`)
                // answers both with one `addToolApprovalResponse`; read back, that copy is no approval of the agent call.
                let waiting =
                    tool_call.sub_agent_lineage().and_then(|lineage| lineage.get(0)?.get("toolCallId")?.as_str());
                if let Some(agent_call_id) = waiting {
                    chunks.push(UiChunk::ToolApprovalRequest {
                        approval_id: approval_id.clone(),
                        tool_call_id: agent_call_id.to_owned(),
                        signature: None,
                    });
                }
                return chunks;
            }
            StreamPart::ToolOutputDenied { tool_call_id, reason, .. } => {
                let denied = UiChunk::ToolOutputDenied { tool_call_id: tool_call_id.clone() };
                return with_reason(denied, tool_call_id, None, "deny", reason.as_deref());
            }
        };
        vec![chunk]
    }

    fn block_id(&self, id: &str) -> String {
        format!("{}-{id}", self.step)
    }
}

fn error_text(error: &Value) -> String {
    match error {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `chunk`, after a `data-toolgate-reason` chunk when there is a reason (first,
/// so a client reading the approval request already holds its reason).
fn with_reason(
    chunk: UiChunk,
    tool_call_id: &str,
    approval_id: Option<&String>,
    decision: &str,
    reason: Option<&str>,
) -> Vec<UiChunk> {
    let Some(reason) = reason else { return vec![chunk] };
    let mut data = serde_json::json!({ "toolCallId": tool_call_id, "decision": decision, "reason": reason });
    if let Some(approval_id) = approval_id {
        data["approvalId"] = Value::String(approval_id.clone());
    }
    vec![UiChunk::Reason { id: tool_call_id.to_owned(), data }, chunk]
}
