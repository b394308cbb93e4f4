//! Update events (seed 004's chat update listeners), in the order the chat
//! changed. Every subscriber gets every event after it subscribed, in order;
//! nothing is dropped (the queues are unbounded, so a subscriber that never
//! reads should be dropped).

use futures::channel::mpsc;
use serde_json::Value;
use toolgate_ui::{ToolState, UiChunk, UiMessage};

use crate::error::ClientError;

/// The status of a chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Nothing in flight.
    Ready,
    /// A request was sent; no chunk has arrived yet.
    Submitted,
    /// A response is streaming.
    Streaming,
    /// The last request failed; [`crate::Chat::error`] says why.
    Error,
}

impl Status {
    /// The AI SDK's name for the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Submitted => "submitted",
            Self::Streaming => "streaming",
            Self::Error => "error",
        }
    }
}

/// What changed a message.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageChange {
    /// A chunk of the response stream was applied.
    Streamed(UiChunk),
    /// A person answered an approval of this tool call.
    Answered {
        /// The call.
        tool_call_id: String,
    },
    /// The client supplied the result of this tool call.
    ToolOutput {
        /// The call.
        tool_call_id: String,
    },
}

/// One change to a chat.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatEvent {
    /// A message joined the chat (a user message, or a new assistant response).
    MessageAdded {
        /// The message as it was added.
        message: UiMessage,
    },
    /// A message changed.
    MessageUpdated {
        /// The message.
        message_id: String,
        /// What changed it.
        change: MessageChange,
    },
    /// A tool part moved to another state.
    ToolStateChanged {
        /// The message holding the part.
        message_id: String,
        /// The call.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The state before (`None` for a new part).
        from: Option<ToolState>,
        /// The state now.
        to: ToolState,
    },
    /// The server asks a person to approve a call.
    ApprovalRequested {
        /// The message holding the call.
        message_id: String,
        /// The id to answer with.
        approval_id: String,
        /// The call.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The input the model gave.
        input: Value,
        /// Why the server asks (e.g. the policy rule that matched), when it says.
        reason: Option<String>,
    },
    /// The chat's status changed.
    StatusChanged {
        /// Before.
        from: Status,
        /// Now.
        to: Status,
    },
    /// A request or stream failed.
    Error {
        /// Why.
        error: ClientError,
    },
}

/// The subscribers of one chat.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    senders: Vec<mpsc::UnboundedSender<ChatEvent>>,
}

impl Listeners {
    /// A new subscriber's queue.
    pub(crate) fn subscribe(&mut self) -> mpsc::UnboundedReceiver<ChatEvent> {
        let (sender, receiver) = mpsc::unbounded();
        self.senders.push(sender);
        receiver
    }

    /// Sends to every subscriber, forgetting the ones that went away.
    pub(crate) fn emit(&mut self, events: impl IntoIterator<Item = ChatEvent>) {
        for event in events {
            self.senders.retain(|sender| sender.unbounded_send(event.clone()).is_ok());
        }
    }
}
