//! What a tool handler and an approval policy know about the call.
//!
//! Both see the conversation that led to the call as a [`SharedMessages`]
//! view: one copy of the history per engine call, shared by every policy and
//! handler, each seeing its own prefix. Nothing is copied per call, so the
//! work stays linear in the size of the request however many calls it holds.

use std::ops::Deref;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolgate_protocol::ModelMessage;

/// A prefix of a conversation, shared rather than copied. Derefs to the messages.
#[derive(Clone, Default)]
pub struct SharedMessages {
    messages: Arc<Vec<ModelMessage>>,
    end: usize,
}

impl SharedMessages {
    /// A view of all of `messages`.
    pub fn new(messages: Arc<Vec<ModelMessage>>) -> Self {
        let end = messages.len();
        Self { messages, end }
    }

    /// The first `end` messages of this view (all of them if `end` is past its end).
    pub fn prefix(&self, end: usize) -> Self {
        Self { messages: Arc::clone(&self.messages), end: end.min(self.end) }
    }

    /// The messages.
    pub fn as_slice(&self) -> &[ModelMessage] {
        &self.messages[..self.end]
    }
}

impl Deref for SharedMessages {
    type Target = [ModelMessage];

    fn deref(&self) -> &[ModelMessage] {
        self.as_slice()
    }
}

impl From<Vec<ModelMessage>> for SharedMessages {
    fn from(messages: Vec<ModelMessage>) -> Self {
        Self::new(Arc::new(messages))
    }
}

impl std::fmt::Debug for SharedMessages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedMessages").field("len", &self.end).finish()
    }
}

/// Context for an approval policy.
#[derive(Debug, Clone)]
pub struct ApprovalContext {
    tool_call_id: String,
    messages: SharedMessages,
}

impl ApprovalContext {
    /// A context; the engine builds these, tests may too.
    pub fn new(tool_call_id: impl Into<String>, messages: impl Into<SharedMessages>) -> Self {
        Self { tool_call_id: tool_call_id.into(), messages: messages.into() }
    }

    /// The call being decided on.
    pub fn tool_call_id(&self) -> &str {
        &self.tool_call_id
    }

    /// The messages that led to the call (the conversation before the
    /// assistant message holding it, without the system prompt).
    pub fn messages(&self) -> &[ModelMessage] {
        &self.messages
    }
}

/// Receives a tool's preliminary outputs.
pub(crate) type PreliminarySink = Arc<dyn Fn(Value) + Send + Sync>;

/// Context for a tool handler.
#[derive(Clone)]
pub struct ToolContext {
    tool_call_id: String,
    messages: SharedMessages,
    cancellation: CancellationToken,
    preliminary: Option<PreliminarySink>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("tool_call_id", &self.tool_call_id)
            .field("messages", &self.messages.len())
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// A context; the engine builds these, tests may too.
    pub fn new(tool_call_id: impl Into<String>, messages: impl Into<SharedMessages>) -> Self {
        Self {
            tool_call_id: tool_call_id.into(),
            messages: messages.into(),
            cancellation: CancellationToken::new(),
            preliminary: None,
        }
    }

    pub(crate) fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = token;
        self
    }

    pub(crate) fn with_preliminary(mut self, sink: PreliminarySink) -> Self {
        self.preliminary = Some(sink);
        self
    }

    /// The id of the call being run.
    pub fn tool_call_id(&self) -> &str {
        &self.tool_call_id
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[ModelMessage] {
        &self.messages
    }

    /// Cancelled when the caller drops the stream or the call is abandoned.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }

    /// Reports an intermediate output (a `tool-result` part with
    /// `preliminary: true`). The handler's return value is the final output.
    /// Outputs that fail to serialize are skipped.
    pub fn report(&self, output: impl Serialize) {
        if let (Some(sink), Ok(value)) = (&self.preliminary, serde_json::to_value(output)) {
            sink(value);
        }
    }
}
