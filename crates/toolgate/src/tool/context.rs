//! What a tool handler and an approval policy know about the call.
//!
//! Both see the conversation that led to the call as a [`SharedMessages`]
//! view, shared by every policy and handler of an engine call, each seeing
//! its own part of it. Nothing is copied per call, so the work stays linear in
//! the size of the request however many calls it holds. A call answered in
//! the history (run before the model is called) sees the history up to the
//! answer; a call the model makes in a step sees the prompt of that step, as
//! the model saw it, without the system prompt (the messages the AI SDK hands
//! its tools).

use std::ops::Deref;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolgate_protocol::ModelMessage;

/// A run of a conversation's messages, shared rather than copied. Derefs to the messages.
#[derive(Clone, Default)]
pub struct SharedMessages {
    messages: Arc<Vec<ModelMessage>>,
    start: usize,
    end: usize,
}

impl SharedMessages {
    /// A view of all of `messages`.
    pub fn new(messages: Arc<Vec<ModelMessage>>) -> Self {
        Self::from_index(messages, 0)
    }

    /// A view of `messages` from index `start` on (none if `start` is past their end).
    pub fn from_index(messages: Arc<Vec<ModelMessage>>, start: usize) -> Self {
        let end = messages.len();
        Self { messages, start: start.min(end), end }
    }

    /// The first `len` messages of this view (all of them if `len` is past its end).
    pub fn prefix(&self, len: usize) -> Self {
        Self { messages: Arc::clone(&self.messages), start: self.start, end: self.end.min(self.start + len) }
    }

    /// The messages.
    pub fn as_slice(&self) -> &[ModelMessage] {
        &self.messages[self.start..self.end]
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
        f.debug_struct("SharedMessages").field("len", &(self.end - self.start)).finish()
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

    /// The messages that led to the call, without the system prompt: the
    /// history before the message holding the call, or, for a call the model
    /// makes now, the prompt the model was given (see the module docs).
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
    /// What an agent tool needs of the engine call that runs it (see [`crate::agent`]).
    nesting: Option<Nesting>,
}

/// The engine's context for an agent tool, opaque to this module.
pub(crate) type Nesting = Arc<dyn std::any::Any + Send + Sync>;

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
            nesting: None,
        }
    }

    pub(crate) fn with_nesting(mut self, nesting: Option<Nesting>) -> Self {
        self.nesting = nesting;
        self
    }

    pub(crate) fn nesting(&self) -> Option<&Nesting> {
        self.nesting.as_ref()
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

    /// The messages that led to the call, as for its approval policy
    /// ([`ApprovalContext::messages`]).
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
