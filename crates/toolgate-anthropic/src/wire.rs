//! Messages API wire types (serde only, no IO). Unknown event, block and
//! delta types decode to `Other`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /messages` body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessagesRequest {
    /// The model id.
    pub model: String,
    /// Output limit (required by the API).
    pub max_tokens: u32,
    /// The system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Alternating user and assistant messages.
    pub messages: Vec<Message>,
    /// Client tools and server tools.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
    /// `{"type": "auto" | "any" | "none" | "tool", "name"?, "disable_parallel_tool_use"?}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Stop sequences.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    /// Extended thinking: `{"type": "enabled", "budget_tokens"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Value>,
    /// Stream the answer as SSE events.
    pub stream: bool,
}

/// One message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// `user` or `assistant`.
    pub role: &'static str,
    /// Its blocks.
    pub content: Vec<Block>,
}

/// A content block in a request, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// Base64 data or a URL.
        source: Source,
    },
    /// A PDF document.
    Document {
        /// Base64 data or a URL.
        source: Source,
    },
    /// A tool call the model made.
    ToolUse {
        /// `toolu_...`.
        id: String,
        /// The tool.
        name: String,
        /// The input object.
        input: Value,
    },
    /// A tool call's result.
    ToolResult {
        /// The call answered.
        tool_use_id: String,
        /// Text or blocks.
        content: ToolResultContent,
        /// True for failures and denials.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// Signed thinking from an earlier turn.
    Thinking {
        /// The text.
        thinking: String,
        /// Its signature.
        signature: String,
    },
}

/// A tool result's content.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    /// Text.
    Text(String),
    /// Text and image blocks.
    Blocks(Vec<Block>),
}

/// Where an image or document comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Source {
    /// Inline data.
    Base64 {
        /// The IANA media type.
        media_type: String,
        /// Base64 data.
        data: String,
    },
    /// A URL.
    Url {
        /// The URL.
        url: String,
    },
}

/// One streamed event, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// The message starts.
    MessageStart {
        /// Id, model, initial usage.
        message: MessageStart,
    },
    /// A block starts.
    ContentBlockStart {
        /// Its index.
        index: u32,
        /// The block (empty text, tool use with `{}` input, ...).
        content_block: ContentBlock,
    },
    /// More of a block.
    ContentBlockDelta {
        /// Its index.
        index: u32,
        /// What is new.
        delta: Delta,
    },
    /// A block is complete.
    ContentBlockStop {
        /// Its index.
        index: u32,
    },
    /// The stop reason and final usage.
    MessageDelta {
        /// `{stop_reason}`.
        #[serde(default)]
        delta: MessageDeltaBody,
        /// Cumulative usage.
        #[serde(default)]
        usage: Option<AnthropicUsage>,
    },
    /// The message is complete.
    MessageStop,
    /// Keep-alive.
    Ping,
    /// An error (e.g. `overloaded_error`).
    Error {
        /// `{type, message}`.
        #[serde(default)]
        error: ErrorBody,
    },
    /// Any other event (ignored).
    #[serde(other)]
    Other,
}

/// `message_start.message`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct MessageStart {
    /// `msg_...`.
    #[serde(default)]
    pub id: Option<String>,
    /// Initial usage (input tokens).
    #[serde(default)]
    pub usage: Option<AnthropicUsage>,
}

/// `message_delta.delta`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct MessageDeltaBody {
    /// Why the model stopped.
    #[serde(default)]
    pub stop_reason: Option<String>,
}

/// `{type, message}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ErrorBody {
    /// E.g. `overloaded_error`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// The message.
    #[serde(default)]
    pub message: Option<String>,
}

/// Token usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct AnthropicUsage {
    /// Uncached input tokens.
    #[serde(default)]
    pub input_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// Input tokens read from the cache.
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
    /// Input tokens written to the cache.
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
}

/// A content block in a response, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Text.
    Text {
        /// Initial (streaming) or whole text.
        #[serde(default)]
        text: String,
    },
    /// A tool call.
    ToolUse {
        /// `toolu_...`.
        id: String,
        /// The tool.
        name: String,
        /// Initial (streaming, `{}`) or whole input.
        #[serde(default)]
        input: Value,
    },
    /// Thinking.
    Thinking {
        /// Initial or whole text.
        #[serde(default)]
        thinking: String,
    },
    /// Anything else (server tools, redacted thinking; ignored).
    #[serde(other)]
    Other,
}

/// A block delta, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta {
    /// More text.
    TextDelta {
        /// The text.
        #[serde(default)]
        text: String,
    },
    /// More tool input JSON text.
    InputJsonDelta {
        /// The fragment (may be empty).
        #[serde(default)]
        partial_json: String,
    },
    /// More thinking.
    ThinkingDelta {
        /// The text.
        #[serde(default)]
        thinking: String,
    },
    /// Anything else (signatures, citations; ignored).
    #[serde(other)]
    Other,
}

/// A non-streamed message.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct MessagesResponse {
    /// `msg_...`.
    #[serde(default)]
    pub id: Option<String>,
    /// The blocks.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// Why the model stopped.
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// Usage.
    #[serde(default)]
    pub usage: Option<AnthropicUsage>,
}
