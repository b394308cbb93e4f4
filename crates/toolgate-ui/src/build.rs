//! The assistant message a `useChat` client assembles from a UI message stream.
//!
//! The server keeps its own copy of each conversation; this builder applies
//! the chunks it streams exactly as a client does, so the stored message is
//! the one the client holds: text and reasoning blocks by id, one tool part
//! per call moving through its states, the approval object once requested.
//! A continuation extends the assistant message it continues.

use std::collections::HashMap;

use crate::chunk::UiChunk;
use crate::message::{ToolState, UiApproval, UiMessage, UiPart, UiRole, UiToolPart};

/// Applies UI chunks to one assistant message.
#[derive(Debug, Clone)]
pub struct UiMessageBuilder {
    message: UiMessage,
    blocks: HashMap<String, usize>,
    tools: HashMap<String, usize>,
    /// toolgate's data parts, by (type, id): one per id, replaced as it changes.
    data_parts: HashMap<(String, String), usize>,
}

/// The type of the data part that says why a call waits or was denied.
pub const REASON_PART: &str = "data-toolgate-reason";
/// The type of the data part that reports an approval's votes and state.
pub const APPROVAL_PART: &str = "data-toolgate-approval";

impl UiMessageBuilder {
    /// A new assistant message with this id (a `start` chunk naming another id replaces it).
    pub fn new(message_id: impl Into<String>) -> Self {
        let message = UiMessage {
            id: message_id.into(),
            role: UiRole::Assistant,
            parts: Vec::new(),
            metadata: None,
            extra: Default::default(),
        };
        Self::continuing(message)
    }

    /// Extends an existing assistant message (a continuation after approvals).
    pub fn continuing(message: UiMessage) -> Self {
        let tools = message.tool_parts().map(|(index, tool)| (tool.tool_call_id.clone(), index)).collect();
        let data_parts = message
            .parts
            .iter()
            .enumerate()
            .filter_map(|(index, part)| match part {
                UiPart::Other(raw) if raw["type"] == REASON_PART || raw["type"] == APPROVAL_PART => {
                    Some(((raw["type"].as_str()?.to_owned(), raw["id"].as_str()?.to_owned()), index))
                }
                _ => None,
            })
            .collect();
        Self { message, blocks: HashMap::new(), tools, data_parts }
    }

    /// The message so far.
    pub fn message(&self) -> &UiMessage {
        &self.message
    }

    /// The message so far, to change in place (a client recording an answer
    /// while the stream goes on). Parts may be changed, not removed or
    /// reordered: the builder finds blocks and tool calls by position.
    pub fn message_mut(&mut self) -> &mut UiMessage {
        &mut self.message
    }

    /// The tool part of this call, found through the builder's index (no scan).
    pub fn tool_part(&self, tool_call_id: &str) -> Option<&UiToolPart> {
        match self.tools.get(tool_call_id).and_then(|&index| self.message.parts.get(index)) {
            Some(UiPart::Tool(part)) => Some(part),
            _ => None,
        }
    }

    /// The `data` of the `data-toolgate-reason` part for this call, if the server sent one.
    pub fn reason(&self, tool_call_id: &str) -> Option<&serde_json::Value> {
        let key = (REASON_PART.to_owned(), tool_call_id.to_owned());
        match self.data_parts.get(&key).and_then(|&index| self.message.parts.get(index)) {
            Some(UiPart::Other(raw)) => raw.get("data"),
            _ => None,
        }
    }

    /// The finished message.
    pub fn finish(self) -> UiMessage {
        self.message
    }

    /// Applies one chunk.
    pub fn apply(&mut self, chunk: &UiChunk) {
        match chunk {
            UiChunk::Start { message_id } => {
                if let Some(id) = message_id {
                    self.message.id.clone_from(id);
                }
            }
            UiChunk::StartStep => self.message.parts.push(UiPart::StepStart),
            UiChunk::FinishStep => self.blocks.clear(),
            UiChunk::Finish { .. } | UiChunk::Error { .. } | UiChunk::Warning { .. } => {}
            UiChunk::TextStart { id } => self.open_block(id, UiPart::Text { text: String::new() }),
            UiChunk::ReasoningStart { id } => self.open_block(id, UiPart::Reasoning { text: String::new() }),
            UiChunk::TextDelta { id, delta } | UiChunk::ReasoningDelta { id, delta } => {
                if let Some(UiPart::Text { text } | UiPart::Reasoning { text }) =
                    self.blocks.get(id).and_then(|&index| self.message.parts.get_mut(index))
                {
                    text.push_str(delta);
                }
            }
            UiChunk::TextEnd { .. } | UiChunk::ReasoningEnd { .. } | UiChunk::ToolInputDelta { .. } => {}
            UiChunk::ToolInputStart { tool_call_id, tool_name, provider_executed, dynamic } => {
                let part = self.tool(tool_call_id, tool_name, *dynamic);
                part.state = ToolState::InputStreaming;
                part.provider_executed = *provider_executed;
            }
            UiChunk::ToolInputAvailable {
                tool_call_id,
                tool_name,
                input,
                provider_executed,
                dynamic,
                provider_metadata,
            } => {
                let part = self.tool(tool_call_id, tool_name, *dynamic);
                part.state = ToolState::InputAvailable;
                part.input = Some(input.clone());
                part.provider_executed = *provider_executed;
                if provider_metadata.is_some() {
                    part.call_provider_metadata = provider_metadata.clone();
                }
            }
            UiChunk::ToolInputError { tool_call_id, tool_name, input, error_text, provider_executed, dynamic } => {
                let part = self.tool(tool_call_id, tool_name, *dynamic);
                part.state = ToolState::OutputError;
                part.input = Some(input.clone());
                part.error_text = Some(error_text.clone());
                part.provider_executed = *provider_executed;
            }
            UiChunk::ToolApprovalRequest { approval_id, tool_call_id, signature } => {
                if let Some(part) = self.existing_tool(tool_call_id) {
                    part.state = ToolState::ApprovalRequested;
                    part.approval = Some(UiApproval {
                        id: approval_id.clone(),
                        approved: None,
                        reason: None,
                        signature: signature.clone(),
                        edited_input: None,
                        grant: None,
                    });
                }
            }
            UiChunk::ToolOutputAvailable { tool_call_id, output, preliminary, .. } => {
                if let Some(part) = self.existing_tool(tool_call_id) {
                    part.state = ToolState::OutputAvailable;
                    part.output = Some(output.clone());
                    part.preliminary = preliminary.filter(|preliminary| *preliminary);
                }
            }
            UiChunk::ToolOutputError { tool_call_id, error_text, .. } => {
                if let Some(part) = self.existing_tool(tool_call_id) {
                    part.state = ToolState::OutputError;
                    part.error_text = Some(error_text.clone());
                }
            }
            UiChunk::ToolOutputDenied { tool_call_id } => {
                if let Some(part) = self.existing_tool(tool_call_id) {
                    part.state = ToolState::OutputDenied;
                }
            }
            UiChunk::Reason { id, data } => self.data_part(REASON_PART, id, data),
            UiChunk::Approval { id, data } => self.data_part(APPROVAL_PART, id, data),
        }
    }

    /// Adds a toolgate data part, or replaces the one of the same type and id.
    fn data_part(&mut self, kind: &str, id: &str, data: &serde_json::Value) {
        let part = UiPart::Other(serde_json::json!({ "type": kind, "id": id, "data": data }));
        let key = (kind.to_owned(), id.to_owned());
        match self.data_parts.get(&key).and_then(|&index| self.message.parts.get_mut(index)) {
            Some(existing) => *existing = part,
            None => {
                self.data_parts.insert(key, self.message.parts.len());
                self.message.parts.push(part);
            }
        }
    }

    fn open_block(&mut self, id: &str, part: UiPart) {
        self.message.parts.push(part);
        self.blocks.insert(id.to_owned(), self.message.parts.len() - 1);
    }

    fn existing_tool(&mut self, tool_call_id: &str) -> Option<&mut UiToolPart> {
        match self.tools.get(tool_call_id).and_then(|&index| self.message.parts.get_mut(index)) {
            Some(UiPart::Tool(part)) => Some(part),
            _ => None,
        }
    }

    fn tool(&mut self, tool_call_id: &str, tool_name: &str, dynamic: Option<bool>) -> &mut UiToolPart {
        let index = match self.tools.get(tool_call_id) {
            Some(&index) => index,
            None => {
                self.message.parts.push(UiPart::Tool(Box::new(UiToolPart {
                    tool_name: tool_name.to_owned(),
                    dynamic: dynamic == Some(true),
                    tool_call_id: tool_call_id.to_owned(),
                    state: ToolState::InputStreaming,
                    input: None,
                    output: None,
                    error_text: None,
                    raw_input: None,
                    provider_executed: None,
                    approval: None,
                    call_provider_metadata: None,
                    preliminary: None,
                })));
                self.tools.insert(tool_call_id.to_owned(), self.message.parts.len() - 1);
                self.message.parts.len() - 1
            }
        };
        match &mut self.message.parts[index] {
            UiPart::Tool(part) => part,
            _ => unreachable!("tool indexes point at tool parts"),
        }
    }
}
