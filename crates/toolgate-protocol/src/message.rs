//! Model messages: the AI SDK v6 `ModelMessage` JSON, one Rust type per role.
//!
//! Serialization is derived and matches the AI SDK field names exactly
//! (camelCase, `role` and `type` tags, optional fields omitted when absent).
//! Deserialization goes through [`crate::parse_messages`] so that errors name
//! the message index and field; the `Deserialize` impls here call into it.
//!
//! This file and `parse.rs` import each other on purpose, the one circle
//! between files the workspace keeps (`scripts/file-circles.py` lists it):
//! the types are built by the parser, and the types' `Deserialize` is the
//! parser, so `serde_json::from_str::<ModelMessage>` and `parse_messages`
//! cannot disagree. Splitting them would mean a second deserializer to keep
//! in step.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Provider-specific options attached to a message or part
/// (`Record<provider, Record<string, JSON>>` in the AI SDK).
pub type ProviderOptions = serde_json::Map<String, Value>;

/// One message of a conversation, tagged by `role`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum ModelMessage {
    /// Instructions for the model.
    System(SystemMessage),
    /// What the person said.
    User(UserMessage),
    /// What the model said, including its tool calls and approval requests.
    Assistant(AssistantMessage),
    /// Tool results and approval responses.
    Tool(ToolMessage),
}

impl ModelMessage {
    /// A system message with the given text.
    pub fn system(text: impl Into<String>) -> Self {
        Self::System(SystemMessage { content: text.into(), provider_options: None })
    }

    /// A user message whose content is plain text.
    pub fn user(text: impl Into<String>) -> Self {
        Self::User(UserMessage { content: UserContent::Text(text.into()), provider_options: None })
    }

    /// An assistant message made of parts.
    pub fn assistant(parts: Vec<AssistantPart>) -> Self {
        Self::Assistant(AssistantMessage { content: AssistantContent::Parts(parts), provider_options: None })
    }

    /// A tool message made of parts.
    pub fn tool(parts: Vec<ToolPart>) -> Self {
        Self::Tool(ToolMessage { content: parts, provider_options: None })
    }

    /// The role name as it appears on the wire.
    pub fn role(&self) -> &'static str {
        match self {
            Self::System(_) => "system",
            Self::User(_) => "user",
            Self::Assistant(_) => "assistant",
            Self::Tool(_) => "tool",
        }
    }
}

impl<'de> Deserialize<'de> for ModelMessage {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        crate::parse::parse_message(0, value).map_err(serde::de::Error::custom)
    }
}

/// A system message. Its content is always a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemMessage {
    /// The instructions.
    pub content: String,
    /// Provider-specific options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<ProviderOptions>,
}

/// A user message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// A string or a list of parts.
    pub content: UserContent,
    /// Provider-specific options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<ProviderOptions>,
}

impl UserMessage {
    /// True when the message holds chat-message approvals (`tool-approval`
    /// parts), the older encoding `normalize_approvals` rewrites.
    pub fn has_approval_parts(&self) -> bool {
        match &self.content {
            UserContent::Text(_) => false,
            UserContent::Parts(parts) => parts.iter().any(|part| matches!(part, UserPart::ToolApproval(_))),
        }
    }
}

/// User content: a plain string or parts, as the AI SDK allows both.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum UserContent {
    /// Plain text.
    Text(String),
    /// A list of parts.
    Parts(Vec<UserPart>),
}

/// A part of a user message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum UserPart {
    /// Text.
    Text(TextPart),
    /// An image.
    Image(ImagePart),
    /// A file.
    File(FilePart),
    /// An approval keyed by tool call id (the chat-message approval form).
    /// [`crate::normalize_approvals`] turns it into a `tool-approval-response`.
    ToolApproval(LegacyToolApprovalPart),
}

/// An assistant message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// A string or a list of parts.
    pub content: AssistantContent,
    /// Provider-specific options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<ProviderOptions>,
}

impl AssistantMessage {
    /// The parts of this message; plain string content is one text part.
    pub fn parts(&self) -> Vec<AssistantPart> {
        match &self.content {
            AssistantContent::Text(text) => vec![AssistantPart::Text(TextPart::new(text.clone()))],
            AssistantContent::Parts(parts) => parts.clone(),
        }
    }

    /// The parts of this message, borrowed; empty for plain string content.
    pub fn part_slice(&self) -> &[AssistantPart] {
        match &self.content {
            AssistantContent::Text(_) => &[],
            AssistantContent::Parts(parts) => parts,
        }
    }
}

/// Assistant content: a plain string or parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AssistantContent {
    /// Plain text.
    Text(String),
    /// A list of parts.
    Parts(Vec<AssistantPart>),
}

/// A part of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum AssistantPart {
    /// Text.
    Text(TextPart),
    /// Reasoning text.
    Reasoning(ReasoningPart),
    /// A file the model produced.
    File(FilePart),
    /// A tool call.
    ToolCall(ToolCallPart),
    /// The result of a provider-executed tool call.
    ToolResult(ToolResultPart),
    /// A request for a person to approve a tool call.
    ToolApprovalRequest(ToolApprovalRequestPart),
}

/// A tool message: results of tool calls and answers to approval requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolMessage {
    /// The parts.
    pub content: Vec<ToolPart>,
    /// Provider-specific options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<ProviderOptions>,
}

/// A part of a tool message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ToolPart {
    /// The result of a tool call.
    ToolResult(ToolResultPart),
    /// A person's answer to an approval request.
    ToolApprovalResponse(ToolApprovalResponsePart),
}

/// Text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextPart {
    /// The text.
    pub text: String,
    /// Provider-specific options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<ProviderOptions>,
}

impl TextPart {
    /// A text part with no provider options.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into(), provider_options: None }
    }
}

/// Reasoning text produced by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningPart {
    /// The reasoning.
    pub text: String,
    /// Provider-specific options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<ProviderOptions>,
}

/// An image, as base64 data or a URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImagePart {
    /// Base64 data or a URL.
    pub image: String,
    /// The IANA media type, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Provider-specific options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<ProviderOptions>,
}

/// A file, as base64 data or a URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilePart {
    /// Base64 data or a URL.
    pub data: String,
    /// The IANA media type.
    pub media_type: String,
    /// The file name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Provider-specific options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<ProviderOptions>,
}

/// A tool call made by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallPart {
    /// The id that results and approvals refer to.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The parsed JSON input.
    pub input: Value,
    /// True when the provider runs the tool (e.g. hosted MCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_executed: Option<bool>,
    /// Provider-specific options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<ProviderOptions>,
}

impl ToolCallPart {
    /// True when the provider executes this call.
    pub fn is_provider_executed(&self) -> bool {
        self.provider_executed == Some(true)
    }
}

/// The result of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultPart {
    /// The call this result answers.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// What the model is told.
    pub output: crate::ToolResultOutput,
    /// Provider-specific options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_options: Option<ProviderOptions>,
}

/// A request for a person to approve a tool call. Lives in assistant messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolApprovalRequestPart {
    /// The approval's id; opaque to clients (toolgate carries its signature in it).
    pub approval_id: String,
    /// The tool call awaiting the decision.
    pub tool_call_id: String,
    /// The AI SDK's separate HMAC signature field, when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A person's answer to an approval request. Lives in tool messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolApprovalResponsePart {
    /// The approval request this answers.
    pub approval_id: String,
    /// The decision. Strictly a boolean: `null` or a string is rejected.
    pub approved: bool,
    /// Why, if the person said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// True for provider-executed calls, whose answer is forwarded to the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_executed: Option<bool>,
    /// toolgate extension: the input the person approved instead of the model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_input: Option<Value>,
}

/// An approval keyed by tool call id, sent as a user message part
/// (`{type:"tool-approval", toolCallId, approved}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyToolApprovalPart {
    /// The tool call decided on.
    pub tool_call_id: String,
    /// The decision.
    pub approved: bool,
    /// Why, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
