//! A thread's history as the server produced it, and the check that a run's
//! `messages` hold nothing else.
//!
//! AG-UI clients send the whole conversation with every run. Where the server
//! keeps threads (with a store), it records the messages each run leaves
//! behind ([`ThreadRecorder`]: the input messages with the run's events
//! applied the way `@ag-ui/client` applies them) and checks the next run's
//! messages against them ([`check_history`]) before anything runs:
//! - every tool call in an assistant message is one the server emitted in
//!   this thread: same call id, same tool, same arguments (compared as JSON;
//!   after a person's edit, the edited or the model's original arguments);
//! - every tool result is one the server emitted for that call (same content,
//!   compared as JSON where both sides are JSON), or the client's own answer:
//!   a result for a call the server does not execute itself (a client tool),
//!   or the placeholder a client holds for a call whose interrupt this run's
//!   `resume` answers (the resume decides that call; see [`crate::resume`]).
//!
//! Anything else is a [`HistoryMismatch`] naming the message and the call:
//! the run fails with `RUN_ERROR {code: "history_mismatch"}` and nothing
//! runs. Text, user and system messages are the client's to keep as it likes.
//! The check builds two indexes over the recorded messages and then looks at
//! each input message once, so its work is linear in the sizes of both.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::convert::parse_arguments;
use crate::events::Event;
use crate::input::RunAgentInput;
use crate::messages::{Content, Message, ToolCall};
use crate::resume::PendingApproval;
use crate::transcript::Transcript;

/// The metadata key under which an edited call keeps the model's original arguments.
const ORIGINAL_ARGUMENTS: &str = "originalArguments";

/// A run's messages hold a tool call or result the server never produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("message {index} (`{message_id}`), tool call `{tool_call_id}`: {detail}")]
pub struct HistoryMismatch {
    /// The message's position in `messages`.
    pub index: usize,
    /// The message's id.
    pub message_id: String,
    /// The call concerned.
    pub tool_call_id: String,
    /// What differs from the thread the server recorded.
    pub detail: String,
}

/// Builds the messages a run leaves behind, as a client applying its events holds them.
#[derive(Debug, Clone)]
pub struct ThreadRecorder {
    transcript: Transcript,
}

impl ThreadRecorder {
    /// Starts from the run's input messages (already checked).
    pub fn new(messages: Vec<Message>) -> Self {
        Self { transcript: Transcript::new(messages) }
    }

    /// Applies one emitted event: text, reasoning, tool calls and results join
    /// the conversation; a `MESSAGES_SNAPSHOT` replaces it.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::TextMessageContent { message_id, delta } => self.transcript.append_text(message_id, delta),
            Event::ReasoningMessageContent { message_id, delta } => self.transcript.append_reasoning(message_id, delta),
            Event::ToolCallStart { tool_call_id, tool_call_name, parent_message_id } => {
                let parent = parent_message_id.as_deref().unwrap_or(tool_call_id);
                self.transcript.start_tool_call(parent, tool_call_id, tool_call_name);
            }
            Event::ToolCallArgs { tool_call_id, delta } => self.transcript.append_arguments(tool_call_id, delta),
            Event::ToolCallResult { message_id, tool_call_id, content, .. } => {
                self.transcript.add_result(message_id, tool_call_id, content.clone())
            }
            Event::MessagesSnapshot { messages } => self.transcript = Transcript::new(messages.clone()),
            Event::RunStarted { .. }
            | Event::RunFinished { .. }
            | Event::RunError { .. }
            | Event::TextMessageStart { .. }
            | Event::TextMessageEnd { .. }
            | Event::ToolCallEnd { .. }
            | Event::StateSnapshot { .. }
            | Event::ReasoningStart { .. }
            | Event::ReasoningMessageStart { .. }
            | Event::ReasoningMessageEnd { .. }
            | Event::ReasoningEnd { .. }
            | Event::Custom { .. } => {}
        }
    }

    /// The conversation after the events applied so far.
    pub fn messages(&self) -> Vec<Message> {
        self.transcript.messages()
    }
}

/// Checks a run's messages against the thread the server recorded (see the
/// module docs). `pending` are the thread's open interrupts as the server
/// stored them; `is_server_tool` tells the tools the server executes itself.
pub fn check_history(
    recorded: &[Message],
    input: &RunAgentInput,
    pending: &[PendingApproval],
    is_server_tool: impl Fn(&str) -> bool,
) -> Result<(), HistoryMismatch> {
    let index = Recorded::index(recorded);
    let resumed: HashSet<&str> = input.resume.iter().flatten().map(|entry| entry.interrupt_id.as_str()).collect();
    let placeholders: HashSet<&str> = pending
        .iter()
        .filter(|approval| resumed.contains(approval.interrupt_id.as_str()))
        .map(|approval| approval.tool_call_id.as_str())
        .collect();
    for (position, message) in input.messages.iter().enumerate() {
        let mismatch = |tool_call_id: &str, detail: String| HistoryMismatch {
            index: position,
            message_id: message.id().to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            detail,
        };
        match message {
            Message::Assistant(assistant) => {
                for call in assistant.tool_calls.iter().flatten() {
                    index.check_call(call).map_err(|detail| mismatch(&call.id, detail))?;
                }
            }
            Message::Tool(tool) => {
                let Some(call) = index.calls.get(tool.tool_call_id.as_str()) else {
                    return Err(mismatch(&tool.tool_call_id, "a result for a call the server never made".into()));
                };
                match index.results.get(tool.tool_call_id.as_str()) {
                    Some(results) if results.iter().any(|recorded| same_content(recorded, &tool.content)) => {}
                    Some(_) => {
                        return Err(mismatch(
                            &tool.tool_call_id,
                            "the result differs from the one the server recorded".into(),
                        ));
                    }
                    None if placeholders.contains(tool.tool_call_id.as_str()) => {}
                    None if !is_server_tool(&call.function.name) => {}
                    None => {
                        let detail = format!(
                            "a result for `{}`, which the server executes itself and has not",
                            call.function.name
                        );
                        return Err(mismatch(&tool.tool_call_id, detail));
                    }
                }
            }
            Message::Developer(_)
            | Message::System(_)
            | Message::User(_)
            | Message::Reasoning(_)
            | Message::Activity(_) => {}
        }
    }
    Ok(())
}

/// The recorded calls and results, by call id.
struct Recorded<'a> {
    calls: HashMap<&'a str, &'a ToolCall>,
    results: HashMap<&'a str, Vec<&'a Content>>,
}

impl<'a> Recorded<'a> {
    fn index(messages: &'a [Message]) -> Self {
        let mut calls = HashMap::new();
        let mut results: HashMap<&str, Vec<&Content>> = HashMap::new();
        for message in messages {
            match message {
                Message::Assistant(assistant) => {
                    for call in assistant.tool_calls.iter().flatten() {
                        calls.insert(call.id.as_str(), call);
                    }
                }
                Message::Tool(tool) => results.entry(tool.tool_call_id.as_str()).or_default().push(&tool.content),
                Message::Developer(_)
                | Message::System(_)
                | Message::User(_)
                | Message::Reasoning(_)
                | Message::Activity(_) => {}
            }
        }
        Self { calls, results }
    }

    /// The call is the recorded one: same tool and arguments (or the original ones of an edit).
    fn check_call(&self, call: &ToolCall) -> Result<(), String> {
        let Some(recorded) = self.calls.get(call.id.as_str()) else {
            return Err(format!("a call of `{}` the server never made", call.function.name));
        };
        if recorded.function.name != call.function.name {
            return Err(format!("the call was of `{}`, not `{}`", recorded.function.name, call.function.name));
        }
        let original = recorded
            .extra
            .get("metadata")
            .and_then(|metadata| metadata.get("toolgate"))
            .and_then(|toolgate| toolgate.get(ORIGINAL_ARGUMENTS))
            .and_then(Value::as_str);
        let same = same_arguments(&recorded.function.arguments, &call.function.arguments)
            || original.is_some_and(|original| same_arguments(original, &call.function.arguments));
        if same { Ok(()) } else { Err(format!("the input of `{}` was changed", call.function.name)) }
    }
}

/// Arguments are the same JSON (or, where either is not JSON, the same text).
fn same_arguments(recorded: &str, received: &str) -> bool {
    match (parse_arguments(recorded), parse_arguments(received)) {
        (Ok(recorded), Ok(received)) => recorded == received,
        _ => recorded == received,
    }
}

/// Contents are equal, text compared as JSON where both sides are JSON.
fn same_content(recorded: &Content, received: &Content) -> bool {
    match (recorded, received) {
        (Content::Text(recorded), Content::Text(received)) => {
            recorded == received
                || matches!(
                    (serde_json::from_str::<Value>(recorded), serde_json::from_str::<Value>(received)),
                    (Ok(a), Ok(b)) if a == b
                )
        }
        _ => recorded == received,
    }
}
