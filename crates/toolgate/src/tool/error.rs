//! The error a tool handler returns, and how it reaches the model.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;
use toolgate_protocol::ToolResultOutput;

/// A tool failure. It becomes an `error-text` or `error-json` tool result;
/// it never ends the turn.
///
/// Any `std::error::Error` converts into it (as text, with its source chain),
/// so handlers can use `?` on their own error types.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    payload: Payload,
}

#[derive(Debug, Clone, PartialEq)]
enum Payload {
    Text(String),
    Json(Value),
    /// Not a failure: a sub-agent paused on approvals (see [`crate::agent`]).
    /// Only the engine builds it; the model never reads it.
    Paused(Arc<Vec<crate::ApprovalRequest>>),
}

impl ToolError {
    /// A failure the model reads as text.
    pub fn text(message: impl Into<String>) -> Self {
        Self { payload: Payload::Text(message.into()) }
    }

    /// A failure the model reads as JSON.
    pub fn json(value: Value) -> Self {
        Self { payload: Payload::Json(value) }
    }

    /// A sub-agent that paused on these approval requests (lifted to the caller's level).
    pub(crate) fn paused(requests: Vec<crate::ApprovalRequest>) -> Self {
        Self { payload: Payload::Paused(Arc::new(requests)) }
    }

    /// The approval requests of a paused sub-agent, when this is one.
    pub(crate) fn paused_requests(&self) -> Option<&[crate::ApprovalRequest]> {
        match &self.payload {
            Payload::Paused(requests) => Some(requests),
            Payload::Text(_) | Payload::Json(_) => None,
        }
    }

    /// The tool result output for this failure.
    pub fn to_output(&self) -> ToolResultOutput {
        match &self.payload {
            Payload::Text(text) => ToolResultOutput::error_text(text.clone()),
            Payload::Json(value) => ToolResultOutput::error_json(value.clone()),
            Payload::Paused(_) => ToolResultOutput::error_text(PAUSED_TEXT),
        }
    }

    /// The failure as a JSON value, as stream `tool-error` parts carry it.
    pub fn to_value(&self) -> Value {
        match &self.payload {
            Payload::Text(text) => Value::String(text.clone()),
            Payload::Json(value) => value.clone(),
            Payload::Paused(_) => Value::String(PAUSED_TEXT.to_owned()),
        }
    }
}

/// What a paused sub-agent's call says where it cannot pause (it never reaches a model).
const PAUSED_TEXT: &str = "the sub-agent is waiting for approval";

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.payload {
            Payload::Text(text) => f.write_str(text),
            Payload::Paused(_) => f.write_str(PAUSED_TEXT),
            Payload::Json(value) => write!(f, "{value}"),
        }
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ToolError {
    fn from(error: E) -> Self {
        Self::text(crate::model::error_chain(&error))
    }
}
