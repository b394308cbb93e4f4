//! Chat Completions wire types (serde only, no IO). Response types accept
//! missing fields and explicit `null`s wherever servers are known to vary.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// `POST /chat/completions` body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    /// The model id.
    pub model: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Function tools.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ChatTool>,
    /// `"auto" | "none" | "required" | {"type":"function","function":{"name"}}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Whether the model may call several tools at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Stream the answer as SSE chunks.
    pub stream: bool,
    /// `{"include_usage": true}` for a final usage chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Output limit (OpenAI).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    /// Output limit (compatible servers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Stop sequences.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// End-user id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `low | medium | high` for reasoning models.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
}

/// `stream_options`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamOptions {
    /// Send a usage-only chunk before `[DONE]`.
    pub include_usage: bool,
}

/// One message, tagged by `role`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ChatMessage {
    /// Instructions.
    System {
        /// The text.
        content: String,
    },
    /// The person.
    User {
        /// Text or parts.
        content: ChatUserContent,
    },
    /// The model; `content` is `""` when it only called tools (some
    /// compatible servers reject `null`).
    Assistant {
        /// The text.
        content: String,
        /// Its tool calls.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ChatToolCall>,
    },
    /// A tool call's result.
    Tool {
        /// The call answered.
        tool_call_id: String,
        /// The result as text.
        content: String,
    },
}

/// User content: a string or parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ChatUserContent {
    /// Plain text.
    Text(String),
    /// Parts.
    Parts(Vec<ChatUserPart>),
}

/// A user content part, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChatUserPart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image by URL or `data:` URL.
    ImageUrl {
        /// `{url}`.
        image_url: UrlRef,
    },
    /// A file (PDF) as a `data:` URL.
    File {
        /// `{filename, file_data}`.
        file: FileData,
    },
}

/// `{"url": ...}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UrlRef {
    /// The URL.
    pub url: String,
}

/// `{"filename", "file_data"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileData {
    /// The file name.
    pub filename: String,
    /// A `data:` URL.
    pub file_data: String,
}

/// An assistant tool call in a request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatToolCall {
    /// The call id.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: FunctionKind,
    /// Name and JSON-text arguments.
    pub function: ChatFunctionCall,
}

/// The constant `"function"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FunctionKind {
    /// `function`.
    Function,
}

/// `{"name", "arguments"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatFunctionCall {
    /// The tool's name.
    pub name: String,
    /// The input as JSON text.
    pub arguments: String,
}

/// A function tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatTool {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: FunctionKind,
    /// The definition.
    pub function: ChatFunction,
}

/// A function tool's definition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatFunction {
    /// The name.
    pub name: String,
    /// What it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    /// Strict schema adherence (only sent when asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// One streamed chunk.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ChatChunk {
    /// Per-choice deltas (`[]` or `null` on the usage chunk).
    #[serde(default, deserialize_with = "null_as_default")]
    pub choices: Vec<ChunkChoice>,
    /// Usage (the final chunk with `include_usage`; some servers send it earlier).
    #[serde(default)]
    pub usage: Option<ChatUsage>,
    /// An error reported inside the stream.
    #[serde(default)]
    pub error: Option<Value>,
}

/// A choice's delta.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ChunkChoice {
    /// The choice index (only 0 is followed).
    #[serde(default)]
    pub index: Option<u32>,
    /// What is new.
    #[serde(default)]
    pub delta: Option<ChunkDelta>,
    /// Set on the choice's last chunk.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// New content in a chunk.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ChunkDelta {
    /// Text.
    #[serde(default)]
    pub content: Option<String>,
    /// Reasoning text (DeepSeek, vLLM, llama.cpp).
    #[serde(default)]
    pub reasoning_content: Option<String>,
    /// Reasoning text (Ollama, OpenRouter).
    #[serde(default)]
    pub reasoning: Option<String>,
    /// Tool call fragments.
    #[serde(default, deserialize_with = "null_as_default")]
    pub tool_calls: Vec<ToolCallDelta>,
}

/// A fragment of a tool call, keyed by `index`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ToolCallDelta {
    /// Which call (may start at 1; missing on a few servers).
    #[serde(default)]
    pub index: Option<u32>,
    /// The call id (first fragment; empty or repeated later on some servers).
    #[serde(default)]
    pub id: Option<String>,
    /// Name and argument text.
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

/// A fragment of a function call.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct FunctionDelta {
    /// The name (first fragment; empty or repeated later on some servers).
    #[serde(default)]
    pub name: Option<String>,
    /// More argument text.
    #[serde(default)]
    pub arguments: Option<String>,
}

/// Token usage.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ChatUsage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Generated tokens.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// Both.
    #[serde(default)]
    pub total_tokens: Option<u64>,
    /// `{cached_tokens}`.
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// `{reasoning_tokens}`.
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

/// `prompt_tokens_details`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens read from the cache.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// `completion_tokens_details`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct CompletionTokensDetails {
    /// Reasoning tokens.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

/// A non-streamed completion.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ChatCompletion {
    /// The choices (only the first is used).
    #[serde(default, deserialize_with = "null_as_default")]
    pub choices: Vec<CompletionChoice>,
    /// Usage.
    #[serde(default)]
    pub usage: Option<ChatUsage>,
}

/// A completed choice.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct CompletionChoice {
    /// The answer.
    #[serde(default)]
    pub message: CompletionMessage,
    /// Why it ended.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// A completed assistant message.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct CompletionMessage {
    /// Text.
    #[serde(default)]
    pub content: Option<String>,
    /// Reasoning text.
    #[serde(default)]
    pub reasoning_content: Option<String>,
    /// Tool calls.
    #[serde(default, deserialize_with = "null_as_default")]
    pub tool_calls: Vec<CompletionToolCall>,
}

/// A completed tool call.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct CompletionToolCall {
    /// The call id.
    #[serde(default)]
    pub id: Option<String>,
    /// Name and arguments.
    #[serde(default)]
    pub function: FunctionDelta,
}

/// `null` → the type's default.
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
