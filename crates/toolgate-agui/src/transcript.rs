//! The conversation as the client holds it, kept in step with the events the
//! encoder emits, for `MESSAGES_SNAPSHOT`.
//!
//! It starts from the input messages (unchanged, ids kept) and applies each
//! emitted event the way `@ag-ui/client` applies it: text and tool calls go
//! into the step's assistant message (created on first use), a tool result
//! becomes a tool message placed right after the assistant message holding
//! the call (after any results already there), reasoning becomes a
//! `reasoning` message. So the snapshot agrees with the client's own state,
//! id for id.

use serde_json::{Map, Value, json};

use crate::messages::{AssistantMessage, Content, Extra, Message, ReasoningMessage, ToolCall, ToolMessage};

/// The AG-UI conversation being built.
#[derive(Debug, Clone, Default)]
pub(crate) struct Transcript {
    messages: Vec<Message>,
}

impl Transcript {
    pub(crate) fn new(messages: Vec<Message>) -> Self {
        Self { messages }
    }

    pub(crate) fn messages(&self) -> Vec<Message> {
        self.messages.clone()
    }

    pub(crate) fn append_text(&mut self, message_id: &str, delta: &str) {
        let message = self.assistant(message_id);
        message.content.get_or_insert_with(String::new).push_str(delta);
    }

    pub(crate) fn start_tool_call(&mut self, message_id: &str, tool_call_id: &str, tool_name: &str) {
        let message = self.assistant(message_id);
        message.tool_calls.get_or_insert_with(Vec::new).push(ToolCall::new(tool_call_id, tool_name, ""));
    }

    pub(crate) fn append_arguments(&mut self, tool_call_id: &str, delta: &str) {
        if let Some(call) = self.call_mut(tool_call_id) {
            call.function.arguments.push_str(delta);
        }
    }

    /// Replaces a call's arguments with the person's edit, recording the
    /// model's proposal in the call's metadata (`toolgate.originalArguments`).
    /// False when the call is not there.
    pub(crate) fn edit_arguments(&mut self, tool_call_id: &str, arguments: String) -> bool {
        let Some(call) = self.call_mut(tool_call_id) else { return false };
        let original = std::mem::replace(&mut call.function.arguments, arguments);
        let metadata = call.extra.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(metadata) = metadata {
            metadata.insert("toolgate".to_owned(), json!({ "originalArguments": original }));
        }
        true
    }

    /// Keeps a sub-agent's mark (its lineage) with a surfaced call, in the
    /// call's metadata (`toolgate.subAgent`), so the thread hands it back.
    pub(crate) fn mark_sub_agent(&mut self, tool_call_id: &str, mark: &Value) {
        let Some(call) = self.call_mut(tool_call_id) else { return };
        let metadata = call.extra.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(metadata) = metadata {
            let toolgate = metadata.entry("toolgate").or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(toolgate) = toolgate {
                toolgate.insert("subAgent".to_owned(), mark.clone());
            }
        }
    }

    pub(crate) fn add_result(&mut self, message_id: &str, tool_call_id: &str, content: String) {
        let message = Message::Tool(ToolMessage {
            id: message_id.to_owned(),
            content: Content::Text(content),
            tool_call_id: tool_call_id.to_owned(),
            error: None,
            extra: Extra::new(),
        });
        let owner = self.messages.iter().position(|m| match m {
            Message::Assistant(a) => a.tool_calls.iter().flatten().any(|call| call.id == tool_call_id),
            _ => false,
        });
        match owner {
            None => self.messages.push(message),
            Some(owner) => {
                let mut at = owner + 1;
                while matches!(self.messages.get(at), Some(Message::Tool(_))) {
                    at += 1;
                }
                self.messages.insert(at, message);
            }
        }
    }

    pub(crate) fn append_reasoning(&mut self, message_id: &str, delta: &str) {
        let existing = self.messages.iter_mut().rev().find_map(|m| match m {
            Message::Reasoning(r) if r.id == message_id => Some(r),
            _ => None,
        });
        match existing {
            Some(reasoning) => reasoning.content.push_str(delta),
            None => self.messages.push(Message::Reasoning(ReasoningMessage {
                id: message_id.to_owned(),
                content: delta.to_owned(),
                extra: Extra::new(),
            })),
        }
    }

    /// The assistant message with this id, appended empty if it is not there yet.
    fn assistant(&mut self, message_id: &str) -> &mut AssistantMessage {
        let index = match self.messages.iter().rposition(|m| matches!(m, Message::Assistant(a) if a.id == message_id)) {
            Some(index) => index,
            None => {
                self.messages.push(Message::Assistant(AssistantMessage {
                    id: message_id.to_owned(),
                    content: None,
                    tool_calls: None,
                    extra: Extra::new(),
                }));
                self.messages.len() - 1
            }
        };
        match &mut self.messages[index] {
            Message::Assistant(assistant) => assistant,
            _ => unreachable!("the position was found or pushed as an assistant message"),
        }
    }

    fn call_mut(&mut self, tool_call_id: &str) -> Option<&mut ToolCall> {
        self.messages.iter_mut().rev().find_map(|m| match m {
            Message::Assistant(a) => a.tool_calls.iter_mut().flatten().find(|call| call.id == tool_call_id),
            _ => None,
        })
    }
}
