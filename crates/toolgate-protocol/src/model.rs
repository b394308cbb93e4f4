//! What flows between the engine and a model provider.
//!
//! A provider receives a [`ModelRequest`] whose prompt is already clean: no
//! approval requests, only provider-executed approval responses, and every
//! local tool call followed by its result. It answers with a
//! [`ModelResponse`] (generate) or a stream of [`ModelStreamPart`]s. Tool call
//! inputs arrive as JSON text: the engine parses them, so a model that emits
//! invalid JSON produces a tool error, not a provider failure.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Prompt, ProviderOptions};

/// Why a model stopped generating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    /// A natural stop.
    Stop,
    /// The output token limit was reached.
    Length,
    /// A content filter stopped the output.
    ContentFilter,
    /// The model called tools (or the engine is waiting on approvals or client tools).
    ToolCalls,
    /// The call failed.
    Error,
    /// Anything else.
    Other,
}

impl FinishReason {
    /// True when tool calls of this step may run (`stop` or `tool-calls`).
    pub fn allows_tool_execution(self) -> bool {
        matches!(self, Self::Stop | Self::ToolCalls)
    }
}

/// Token usage; every count is optional because providers report different ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Reasoning tokens, where reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Prompt tokens read from a cache, where reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
}

/// The sum of two usages; a count is present if either side has it.
impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            }
        }
        Usage {
            input_tokens: sum(self.input_tokens, other.input_tokens),
            output_tokens: sum(self.output_tokens, other.output_tokens),
            total_tokens: sum(self.total_tokens, other.total_tokens),
            reasoning_tokens: sum(self.reasoning_tokens, other.reasoning_tokens),
            cached_input_tokens: sum(self.cached_input_tokens, other.cached_input_tokens),
        }
    }
}

/// Which tools the model may or must call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool must be called.
    Tool {
        /// The tool's name.
        #[serde(rename = "toolName")]
        tool_name: String,
    },
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ToolSpec {
    /// A function tool described by a JSON Schema (run by toolgate or the client).
    Function {
        /// The tool's name.
        name: String,
        /// What it does.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// JSON Schema of the input.
        #[serde(rename = "inputSchema")]
        input_schema: Value,
    },
    /// A tool hosted and run by the provider (e.g. OpenAI hosted MCP).
    Provider {
        /// The name calls use.
        name: String,
        /// The provider's tool id, e.g. `openai.mcp`.
        id: String,
        /// Provider-specific configuration.
        args: Value,
    },
}

impl ToolSpec {
    /// The tool's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Function { name, .. } | Self::Provider { name, .. } => name,
        }
    }
}

/// One model call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequest {
    /// The clean prompt, shared with the engine (see [`Prompt`]).
    pub prompt: Prompt,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Which tools the model may or must call.
    pub tool_choice: ToolChoice,
    /// Output token limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Sequences that stop generation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    /// Provider-specific options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<ProviderOptions>,
}

/// A complete tool call from the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelToolCall {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The input as JSON text (possibly invalid; the engine checks it).
    pub input: String,
    /// True when the provider runs the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_executed: Option<bool>,
    /// Provider metadata, kept as the call's `providerOptions` in history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderOptions>,
}

/// The result of a provider-executed tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelToolResult {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The result value.
    pub result: Value,
    /// True when the provider reports a failure.
    #[serde(default)]
    pub is_error: bool,
    /// Provider metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderOptions>,
}

/// One piece of a streamed model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ModelStreamPart {
    /// A text block starts.
    TextStart {
        /// Block id.
        id: String,
    },
    /// More text.
    TextDelta {
        /// Block id.
        id: String,
        /// The text.
        delta: String,
    },
    /// A text block ends.
    TextEnd {
        /// Block id.
        id: String,
    },
    /// A reasoning block starts.
    ReasoningStart {
        /// Block id.
        id: String,
    },
    /// More reasoning.
    ReasoningDelta {
        /// Block id.
        id: String,
        /// The text.
        delta: String,
    },
    /// A reasoning block ends.
    ReasoningEnd {
        /// Block id.
        id: String,
    },
    /// The model starts writing a tool call's input.
    ToolInputStart {
        /// The tool call id.
        id: String,
        /// The tool's name.
        #[serde(rename = "toolName")]
        tool_name: String,
        /// True when the provider runs the tool.
        #[serde(default, rename = "providerExecuted", skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
    },
    /// More input JSON text.
    ToolInputDelta {
        /// The tool call id.
        id: String,
        /// The text.
        delta: String,
    },
    /// The input is complete.
    ToolInputEnd {
        /// The tool call id.
        id: String,
    },
    /// A complete tool call.
    ToolCall(ModelToolCall),
    /// The provider asks for approval of a provider-executed call.
    ToolApprovalRequest {
        /// The provider's approval id.
        #[serde(rename = "approvalId")]
        approval_id: String,
        /// The call awaiting approval.
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
    },
    /// A provider-executed call's result.
    ToolResult(ModelToolResult),
    /// The response is complete.
    Finish {
        /// Why it ended.
        #[serde(rename = "finishReason")]
        finish_reason: FinishReason,
        /// Token usage.
        #[serde(default)]
        usage: Usage,
        /// Provider metadata for the response.
        #[serde(default, rename = "providerMetadata", skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<ProviderOptions>,
    },
}

/// One piece of a complete (non-streamed) model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ModelContent {
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
    ToolCall(ModelToolCall),
    /// The provider asks for approval of a provider-executed call.
    ToolApprovalRequest {
        /// The provider's approval id.
        #[serde(rename = "approvalId")]
        approval_id: String,
        /// The call awaiting approval.
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
    },
    /// A provider-executed call's result.
    ToolResult(ModelToolResult),
}

/// A complete model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelResponse {
    /// The content, in order.
    pub content: Vec<ModelContent>,
    /// Why it ended.
    pub finish_reason: FinishReason,
    /// Token usage.
    #[serde(default)]
    pub usage: Usage,
    /// Provider metadata for the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<ProviderOptions>,
}
