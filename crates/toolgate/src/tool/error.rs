//! The error a tool handler returns, and how it reaches the model.

use std::fmt;

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

    /// The tool result output for this failure.
    pub fn to_output(&self) -> ToolResultOutput {
        match &self.payload {
            Payload::Text(text) => ToolResultOutput::error_text(text.clone()),
            Payload::Json(value) => ToolResultOutput::error_json(value.clone()),
        }
    }

    /// The failure as a JSON value, as stream `tool-error` parts carry it.
    pub fn to_value(&self) -> Value {
        match &self.payload {
            Payload::Text(text) => Value::String(text.clone()),
            Payload::Json(value) => value.clone(),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.payload {
            Payload::Text(text) => f.write_str(text),
            Payload::Json(value) => write!(f, "{value}"),
        }
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ToolError {
    fn from(error: E) -> Self {
        Self::text(crate::model::error_chain(&error))
    }
}
