//! A deterministic model that answers from a script, for tests, examples and demos.
//!
//! Script file shape: `{"turns": [[part, ...], ...]}`. The model answers with
//! turn `k`, where `k` is the number of assistant messages in the prompt it
//! receives (the last turn repeats past the end), so it needs no state across
//! calls or processes. It keeps nothing per request (a long-running server
//! playing a script does not grow); wrap it in a [`crate::RecordingModel`] to
//! see the requests.
//!
//! Parts: `text {text}`, `reasoning {text}`, `tool-call {toolCallId, toolName,
//! input, providerExecuted?}`, `tool-approval-request {approvalId, toolCallId}`
//! (a provider-issued approval), `tool-result {toolCallId, toolName, output,
//! providerExecuted}`, `finish {finishReason, usage?}`, and toolgate's
//! `error {message}`, which cuts the stream at that point. A turn without
//! `finish` ends with `tool-calls` when it has tool calls, else `stop`.
//! Streaming splits text into word deltas and tool inputs into several
//! input deltas.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_protocol::{
    FinishReason, ModelContent, ModelMessage, ModelRequest, ModelResponse, ModelStreamPart, ModelToolCall,
    ModelToolResult, Usage,
};

use super::{LanguageModel, ModelError, ModelStream};

/// One scripted part of a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ScriptPart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning.
    Reasoning {
        /// The text.
        text: String,
    },
    /// A tool call.
    #[serde(rename_all = "camelCase")]
    ToolCall {
        /// The call's id.
        tool_call_id: String,
        /// The tool's name.
        tool_name: String,
        /// The input.
        input: Value,
        /// True when the provider runs the tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
    },
    /// A provider-issued approval request.
    #[serde(rename_all = "camelCase")]
    ToolApprovalRequest {
        /// The provider's approval id.
        approval_id: String,
        /// The call awaiting approval.
        tool_call_id: String,
    },
    /// A provider-executed tool's result.
    #[serde(rename_all = "camelCase")]
    ToolResult {
        /// The call's id.
        tool_call_id: String,
        /// The tool's name.
        tool_name: String,
        /// The result.
        output: Value,
        /// Must be true: only provider tools have results in a model response.
        #[serde(default)]
        provider_executed: bool,
    },
    /// The end of the turn.
    #[serde(rename_all = "camelCase")]
    Finish {
        /// Why the turn ends.
        finish_reason: FinishReason,
        /// Token usage to report.
        #[serde(default)]
        usage: Option<Usage>,
    },
    /// Cuts the stream here with [`ModelError::StreamInterrupted`].
    Error {
        /// The error message.
        message: String,
    },
}

/// A script that cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file cannot be read.
    #[error("cannot read script {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The JSON is not a script.
    #[error("invalid script: {0}")]
    Invalid(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    turns: Vec<Vec<ScriptPart>>,
}

/// A model that plays a script. It keeps nothing per request; wrap it in a
/// [`crate::RecordingModel`] to see what it was sent.
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    turns: Arc<[Vec<ScriptPart>]>,
}

impl ScriptedModel {
    /// A model playing these turns; there must be at least one.
    pub fn new(turns: Vec<Vec<ScriptPart>>) -> Result<Self, ScriptError> {
        if turns.is_empty() {
            return Err(ScriptError::Invalid("a script needs at least one turn".into()));
        }
        for (turn_index, turn) in turns.iter().enumerate() {
            for part in turn {
                if let ScriptPart::ToolResult { provider_executed: false, tool_call_id, .. } = part {
                    return Err(ScriptError::Invalid(format!(
                        "turn {turn_index}: tool-result `{tool_call_id}` must set providerExecuted: true"
                    )));
                }
            }
        }
        Ok(Self { turns: turns.into() })
    }

    /// Parses a script from JSON text.
    pub fn from_json(json: &str) -> Result<Self, ScriptError> {
        let file: ScriptFile = serde_json::from_str(json).map_err(|e| ScriptError::Invalid(e.to_string()))?;
        Self::new(file.turns)
    }

    /// Reads a script file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ScriptError> {
        let path = path.as_ref();
        let json = std::fs::read_to_string(path)
            .map_err(|source| ScriptError::Io { path: path.display().to_string(), source })?;
        Self::from_json(&json)
    }

    /// The turn for a request: the one after as many turns as the prompt has assistant messages.
    fn turn_for(&self, request: &ModelRequest) -> &[ScriptPart] {
        let assistant_messages =
            request.prompt.iter().filter(|message| matches!(message, ModelMessage::Assistant(_))).count();
        &self.turns[assistant_messages.min(self.turns.len() - 1)]
    }
}

fn inferred_finish(turn: &[ScriptPart]) -> FinishReason {
    if turn.iter().any(|part| matches!(part, ScriptPart::ToolCall { .. })) {
        FinishReason::ToolCalls
    } else {
        FinishReason::Stop
    }
}

fn model_call(tool_call_id: &str, tool_name: &str, input: &Value, provider_executed: Option<bool>) -> ModelToolCall {
    ModelToolCall {
        tool_call_id: tool_call_id.to_owned(),
        tool_name: tool_name.to_owned(),
        input: input.to_string(),
        provider_executed,
        provider_metadata: None,
    }
}

fn model_result(tool_call_id: &str, tool_name: &str, output: &Value) -> ModelToolResult {
    ModelToolResult {
        tool_call_id: tool_call_id.to_owned(),
        tool_name: tool_name.to_owned(),
        result: output.clone(),
        is_error: false,
        provider_metadata: None,
    }
}

/// Splits text into word-sized deltas that concatenate back to it.
fn word_deltas(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive(' ')
}

/// Splits JSON text into about three pieces on character boundaries.
fn input_deltas(json: &str) -> Vec<&str> {
    let size = json.len().div_ceil(3).max(1);
    let mut pieces = Vec::new();
    let mut rest = json;
    while !rest.is_empty() {
        let mut cut = size.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (piece, tail) = rest.split_at(cut);
        pieces.push(piece);
        rest = tail;
    }
    pieces
}

fn stream_parts(turn: &[ScriptPart]) -> Vec<Result<ModelStreamPart, ModelError>> {
    let mut parts = Vec::new();
    for (index, part) in turn.iter().enumerate() {
        let id = format!("{index}");
        match part {
            ScriptPart::Text { text } => {
                parts.push(Ok(ModelStreamPart::TextStart { id: id.clone() }));
                parts.extend(
                    word_deltas(text)
                        .map(|delta| Ok(ModelStreamPart::TextDelta { id: id.clone(), delta: delta.to_owned() })),
                );
                parts.push(Ok(ModelStreamPart::TextEnd { id }));
            }
            ScriptPart::Reasoning { text } => {
                parts.push(Ok(ModelStreamPart::ReasoningStart { id: id.clone() }));
                parts.extend(
                    word_deltas(text)
                        .map(|delta| Ok(ModelStreamPart::ReasoningDelta { id: id.clone(), delta: delta.to_owned() })),
                );
                parts.push(Ok(ModelStreamPart::ReasoningEnd { id }));
            }
            ScriptPart::ToolCall { tool_call_id, tool_name, input, provider_executed } => {
                let call = model_call(tool_call_id, tool_name, input, *provider_executed);
                parts.push(Ok(ModelStreamPart::ToolInputStart {
                    id: tool_call_id.clone(),
                    tool_name: tool_name.clone(),
                    provider_executed: *provider_executed,
                }));
                parts.extend(input_deltas(&call.input).into_iter().map(|delta| {
                    Ok(ModelStreamPart::ToolInputDelta { id: tool_call_id.clone(), delta: delta.to_owned() })
                }));
                parts.push(Ok(ModelStreamPart::ToolInputEnd { id: tool_call_id.clone() }));
                parts.push(Ok(ModelStreamPart::ToolCall(call)));
            }
            ScriptPart::ToolApprovalRequest { approval_id, tool_call_id } => {
                parts.push(Ok(ModelStreamPart::ToolApprovalRequest {
                    approval_id: approval_id.clone(),
                    tool_call_id: tool_call_id.clone(),
                }));
            }
            ScriptPart::ToolResult { tool_call_id, tool_name, output, .. } => {
                parts.push(Ok(ModelStreamPart::ToolResult(model_result(tool_call_id, tool_name, output))));
            }
            ScriptPart::Finish { finish_reason, usage } => {
                parts.push(Ok(ModelStreamPart::Finish {
                    finish_reason: *finish_reason,
                    usage: usage.unwrap_or_default(),
                    provider_metadata: None,
                }));
                return parts;
            }
            ScriptPart::Error { message } => {
                parts.push(Err(ModelError::StreamInterrupted { message: message.clone() }));
                return parts;
            }
        }
    }
    parts.push(Ok(ModelStreamPart::Finish {
        finish_reason: inferred_finish(turn),
        usage: Usage::default(),
        provider_metadata: None,
    }));
    parts
}

impl LanguageModel for ScriptedModel {
    fn provider(&self) -> &str {
        "script"
    }

    fn model_id(&self) -> &str {
        "scripted"
    }

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        let turn = self.turn_for(&request);
        let mut content = Vec::new();
        for part in turn {
            match part {
                ScriptPart::Text { text } => content.push(ModelContent::Text { text: text.clone() }),
                ScriptPart::Reasoning { text } => content.push(ModelContent::Reasoning { text: text.clone() }),
                ScriptPart::ToolCall { tool_call_id, tool_name, input, provider_executed } => {
                    content.push(ModelContent::ToolCall(model_call(tool_call_id, tool_name, input, *provider_executed)))
                }
                ScriptPart::ToolApprovalRequest { approval_id, tool_call_id } => {
                    content.push(ModelContent::ToolApprovalRequest {
                        approval_id: approval_id.clone(),
                        tool_call_id: tool_call_id.clone(),
                    })
                }
                ScriptPart::ToolResult { tool_call_id, tool_name, output, .. } => {
                    content.push(ModelContent::ToolResult(model_result(tool_call_id, tool_name, output)))
                }
                ScriptPart::Finish { finish_reason, usage } => {
                    return Ok(ModelResponse {
                        content,
                        finish_reason: *finish_reason,
                        usage: usage.unwrap_or_default(),
                        provider_metadata: None,
                    });
                }
                ScriptPart::Error { message } => {
                    return Err(ModelError::StreamInterrupted { message: message.clone() });
                }
            }
        }
        Ok(ModelResponse {
            content,
            finish_reason: inferred_finish(turn),
            usage: Usage::default(),
            provider_metadata: None,
        })
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let parts = stream_parts(self.turn_for(&request));
        Ok(Box::pin(futures::stream::iter(parts)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_concatenate_back() {
        let text = "Let me check that for you.";
        assert_eq!(word_deltas(text).collect::<String>(), text);
        assert!(word_deltas(text).count() > 1);
        let json = r#"{"path":"notes.txt","note":"héllo"}"#;
        assert_eq!(input_deltas(json).concat(), json);
        assert!(input_deltas(json).len() >= 3);
    }

    #[test]
    fn rejects_empty_and_local_results() {
        assert!(ScriptedModel::from_json(r#"{"turns": []}"#).is_err());
        let local_result = r#"{"turns": [[{"type": "tool-result", "toolCallId": "c", "toolName": "t", "output": 1}]]}"#;
        assert!(ScriptedModel::from_json(local_result).is_err());
        assert!(ScriptedModel::from_json(r#"{"turns": [[{"type": "bogus"}]]}"#).is_err());
    }
}
