//! What a tool handler and an approval policy know about the call.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolgate_protocol::ModelMessage;

/// Context for an approval policy.
#[derive(Debug, Clone)]
pub struct ApprovalContext {
    /// The call being decided on.
    pub tool_call_id: String,
    /// The messages that led to the call (the prompt of the step that made it,
    /// without the system prompt or the assistant message holding the call).
    pub messages: Arc<[ModelMessage]>,
}

/// Receives a tool's preliminary outputs.
pub(crate) type PreliminarySink = Arc<dyn Fn(Value) + Send + Sync>;

/// Context for a tool handler.
#[derive(Clone)]
pub struct ToolContext {
    tool_call_id: String,
    messages: Arc<[ModelMessage]>,
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
    pub fn new(tool_call_id: impl Into<String>, messages: Arc<[ModelMessage]>) -> Self {
        Self { tool_call_id: tool_call_id.into(), messages, cancellation: CancellationToken::new(), preliminary: None }
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
