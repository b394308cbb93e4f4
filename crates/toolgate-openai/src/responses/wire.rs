//! Responses API wire types (serde only, no IO). Unknown event and item
//! types decode to `Other` so new server features never break a stream.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chat::wire::null_as_default;

/// `POST /responses` body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponsesRequest {
    /// The model id.
    pub model: String,
    /// The conversation as input items.
    pub input: Vec<InputItem>,
    /// Top-level instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Function, MCP and other hosted tools.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
    /// `"auto" | "none" | "required" | {"type":"function","name"} | {"type":"mcp","server_label"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Whether the model may call several tools at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Keep the response server-side (OpenAI's default is `true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    /// Continue from a stored response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<String>,
    /// Output limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// End-user id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `{effort, summary}` for reasoning models.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Value>,
    /// Stream the answer as SSE events.
    pub stream: bool,
}

/// An input item: a message or a typed item.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum InputItem {
    /// `{"role", "content"}`.
    Message(InputMessage),
    /// `{"type": ...}`.
    Item(TypedInput),
}

/// A message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputMessage {
    /// `system`, `developer`, `user` or `assistant`.
    pub role: &'static str,
    /// Text or parts.
    pub content: MessageContent,
}

/// Message content: a string or parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Parts.
    Parts(Vec<ContentPart>),
}

/// A content part, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// User text.
    InputText {
        /// The text.
        text: String,
    },
    /// A user image by URL or `data:` URL.
    InputImage {
        /// The URL.
        image_url: String,
    },
    /// A user file as a `data:` URL.
    InputFile {
        /// The file name.
        filename: String,
        /// The data.
        file_data: String,
    },
    /// Assistant text.
    OutputText {
        /// The text.
        text: String,
    },
}

/// A typed input item.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TypedInput {
    /// A function call the model made.
    FunctionCall {
        /// The call id.
        call_id: String,
        /// The function.
        name: String,
        /// The input as JSON text.
        arguments: String,
    },
    /// A function call's result.
    FunctionCallOutput {
        /// The call answered.
        call_id: String,
        /// The result as text.
        output: String,
    },
    /// A person's answer to an MCP approval request.
    McpApprovalResponse {
        /// The `mcpr_` id.
        approval_request_id: String,
        /// The decision.
        approve: bool,
        /// Why a call was denied, if the person said.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A stored item, by id.
    ItemReference {
        /// The item id.
        id: String,
    },
}

/// One streamed event, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type")]
pub enum StreamEvent {
    /// The response was created.
    #[serde(rename = "response.created")]
    Created {
        /// The response so far.
        response: ResponseSummary,
    },
    /// An output item started.
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded {
        /// The item (incomplete).
        item: OutputItem,
    },
    /// An output item is complete.
    #[serde(rename = "response.output_item.done")]
    OutputItemDone {
        /// The item.
        item: OutputItem,
    },
    /// More message text.
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta {
        /// The message item.
        item_id: String,
        /// The text.
        #[serde(default)]
        delta: String,
    },
    /// More function call arguments.
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta {
        /// The function call item.
        item_id: String,
        /// The text.
        #[serde(default)]
        delta: String,
    },
    /// More reasoning summary text.
    #[serde(rename = "response.reasoning_summary_text.delta")]
    ReasoningSummaryTextDelta {
        /// The reasoning item.
        item_id: String,
        /// Which summary part.
        #[serde(default)]
        summary_index: u32,
        /// The text.
        #[serde(default)]
        delta: String,
    },
    /// The response is complete.
    #[serde(rename = "response.completed")]
    Completed {
        /// The final response.
        response: ResponseSummary,
    },
    /// The response stopped early (token limit, content filter).
    #[serde(rename = "response.incomplete")]
    Incomplete {
        /// The final response.
        response: ResponseSummary,
    },
    /// The response failed.
    #[serde(rename = "response.failed")]
    Failed {
        /// The failed response with its `error`.
        response: ResponseSummary,
    },
    /// An error.
    #[serde(rename = "error")]
    Error {
        /// The error code.
        #[serde(default)]
        code: Option<String>,
        /// The message.
        #[serde(default)]
        message: Option<String>,
        /// A nested `{code, message}` (some servers).
        #[serde(default)]
        error: Option<ErrorBody>,
    },
    /// Any other event (ignored).
    #[serde(other)]
    Other,
}

/// The parts of a response object a stream needs.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ResponseSummary {
    /// `resp_...`.
    #[serde(default)]
    pub id: Option<String>,
    /// `completed`, `incomplete`, `failed`, ...
    #[serde(default)]
    pub status: Option<String>,
    /// Token usage.
    #[serde(default)]
    pub usage: Option<ResponsesUsage>,
    /// Why it is incomplete.
    #[serde(default)]
    pub incomplete_details: Option<IncompleteDetails>,
    /// Why it failed.
    #[serde(default)]
    pub error: Option<ErrorBody>,
}

/// A complete (non-streamed) response.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ResponseObject {
    /// Id, status, usage, errors.
    #[serde(flatten)]
    pub summary: ResponseSummary,
    /// The output items, in order.
    #[serde(default, deserialize_with = "null_as_default")]
    pub output: Vec<OutputItem>,
}

/// `{reason}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct IncompleteDetails {
    /// `max_output_tokens` or `content_filter`.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `{code, message}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ErrorBody {
    /// The code.
    #[serde(default)]
    pub code: Option<String>,
    /// The message.
    #[serde(default)]
    pub message: Option<String>,
}

/// Token usage.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ResponsesUsage {
    /// Input tokens.
    #[serde(default)]
    pub input_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// Both.
    #[serde(default)]
    pub total_tokens: Option<u64>,
    /// `{cached_tokens}`.
    #[serde(default)]
    pub input_tokens_details: Option<InputTokensDetails>,
    /// `{reasoning_tokens}`.
    #[serde(default)]
    pub output_tokens_details: Option<OutputTokensDetails>,
}

/// `input_tokens_details`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct InputTokensDetails {
    /// Cached input tokens.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// `output_tokens_details`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct OutputTokensDetails {
    /// Reasoning tokens.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

/// An output item, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    /// An assistant message.
    Message {
        /// `msg_...`.
        id: String,
        /// Its content (empty while streaming).
        #[serde(default, deserialize_with = "null_as_default")]
        content: Vec<OutputContent>,
    },
    /// Reasoning; only its summary is readable.
    Reasoning {
        /// `rs_...`.
        id: String,
        /// Summary texts.
        #[serde(default, deserialize_with = "null_as_default")]
        summary: Vec<SummaryText>,
    },
    /// A function call.
    FunctionCall {
        /// `fc_...`.
        #[serde(default)]
        id: Option<String>,
        /// `call_...`: what outputs refer to.
        call_id: String,
        /// The function.
        name: String,
        /// The input as JSON text (empty while streaming).
        #[serde(default, deserialize_with = "null_as_default")]
        arguments: String,
    },
    /// OpenAI asks approval for a hosted MCP call.
    McpApprovalRequest {
        /// `mcpr_...`: the approval id.
        id: String,
        /// The MCP server.
        server_label: String,
        /// The MCP tool.
        name: String,
        /// The input as JSON text.
        #[serde(default, deserialize_with = "null_as_default")]
        arguments: String,
    },
    /// A hosted MCP call OpenAI made.
    McpCall {
        /// `mcp_...`.
        id: String,
        /// The MCP server.
        server_label: String,
        /// The MCP tool.
        name: String,
        /// The input as JSON text.
        #[serde(default, deserialize_with = "null_as_default")]
        arguments: String,
        /// The tool's output.
        #[serde(default)]
        output: Option<Value>,
        /// The failure, if it failed.
        #[serde(default)]
        error: Option<Value>,
        /// The approval request this call was approved by.
        #[serde(default)]
        approval_request_id: Option<String>,
    },
    /// Any other item (`mcp_list_tools`, `web_search_call`, ...; ignored).
    #[serde(other)]
    Other,
}

/// A message content part.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputContent {
    /// Text.
    OutputText {
        /// The text.
        #[serde(default)]
        text: String,
    },
    /// A refusal.
    Refusal {
        /// Why.
        #[serde(default)]
        refusal: String,
    },
    /// Anything else (ignored).
    #[serde(other)]
    Other,
}

/// A reasoning summary part.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct SummaryText {
    /// The text.
    #[serde(default)]
    pub text: String,
}
