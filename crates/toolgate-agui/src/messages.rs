//! AG-UI 1.0 messages (`Message` in `@ag-ui/core`), as they travel in
//! `RunAgentInput.messages` and in `MESSAGES_SNAPSHOT`.
//!
//! Every message has an `id` and is tagged by `role`. Fields the adapter does
//! not read (`name`, `metadata`, `encryptedValue`, ...) are kept in `extra`
//! and written back unchanged, so a message survives a round trip through a
//! snapshot. Decoding dispatches on `role`; an unknown role is an error.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::InputError;

/// Fields of an AG-UI object that the adapter does not interpret, kept as they came.
pub type Extra = serde_json::Map<String, Value>;

/// One AG-UI message, tagged by `role`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// Instructions from the application developer (sent to the model as a system message).
    Developer(TextMessage),
    /// Instructions from the system.
    System(TextMessage),
    /// What the person said.
    User(UserMessage),
    /// What the agent said, with its tool calls.
    Assistant(AssistantMessage),
    /// What a tool returned.
    Tool(ToolMessage),
    /// The agent's reasoning (shown to the person, not replayed to the model).
    Reasoning(ReasoningMessage),
    /// Client-side progress display (never replayed to the model).
    Activity(ActivityMessage),
}

impl Message {
    /// The message's id.
    pub fn id(&self) -> &str {
        match self {
            Self::Developer(m) | Self::System(m) => &m.id,
            Self::User(m) => &m.id,
            Self::Assistant(m) => &m.id,
            Self::Tool(m) => &m.id,
            Self::Reasoning(m) => &m.id,
            Self::Activity(m) => &m.id,
        }
    }

    /// Decodes message `index` of a list; errors name the index.
    pub fn from_value(index: usize, value: Value) -> Result<Self, InputError> {
        let Value::Object(mut object) = value else {
            return Err(InputError::InvalidMessage { index, detail: "a message must be a JSON object".into() });
        };
        let role = match object.remove("role") {
            Some(Value::String(role)) => role,
            Some(other) => {
                return Err(InputError::InvalidMessage {
                    index,
                    detail: format!("`role` must be a string, got {other}"),
                });
            }
            None => return Err(InputError::InvalidMessage { index, detail: "`role` is missing".into() }),
        };
        let value = Value::Object(object);
        let invalid =
            |error: serde_json::Error| InputError::InvalidMessage { index, detail: format!("{role}: {error}") };
        Ok(match role.as_str() {
            "developer" => Self::Developer(serde_json::from_value(value).map_err(invalid)?),
            "system" => Self::System(serde_json::from_value(value).map_err(invalid)?),
            "user" => Self::User(serde_json::from_value(value).map_err(invalid)?),
            "assistant" => Self::Assistant(serde_json::from_value(value).map_err(invalid)?),
            "tool" => Self::Tool(serde_json::from_value(value).map_err(invalid)?),
            "reasoning" => Self::Reasoning(serde_json::from_value(value).map_err(invalid)?),
            "activity" => Self::Activity(serde_json::from_value(value).map_err(invalid)?),
            _ => return Err(InputError::UnknownRole { index, role }),
        })
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(0, value).map_err(|error| serde::de::Error::custom(error.detail()))
    }
}

/// A developer or system message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextMessage {
    /// The message id.
    pub id: String,
    /// The instructions.
    pub content: String,
    /// Fields the adapter does not read.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    /// The message id.
    pub id: String,
    /// Text or parts.
    pub content: Content,
    /// Fields the adapter does not read.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An assistant message: text, tool calls, or both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// The message id.
    pub id: String,
    /// The text, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The calls the agent made.
    #[serde(default, rename = "toolCalls", skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// Fields the adapter does not read.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A tool call inside an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The tool call id.
    pub id: String,
    /// Always `"function"`.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    /// The tool and its arguments.
    pub function: FunctionCall,
    /// Fields the adapter does not read (`metadata`, `encryptedValue`).
    #[serde(flatten)]
    pub extra: Extra,
}

impl ToolCall {
    /// A function call with these arguments (JSON text).
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            kind: function_kind(),
            function: FunctionCall { name: name.into(), arguments: arguments.into(), extra: Extra::new() },
            extra: Extra::new(),
        }
    }
}

fn function_kind() -> String {
    "function".to_owned()
}

/// The name and arguments of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
    /// Fields the adapter does not read.
    #[serde(flatten)]
    pub extra: Extra,
}

/// What a tool returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolMessage {
    /// The message id.
    pub id: String,
    /// The result: text (toolgate writes JSON text) or parts.
    pub content: Content,
    /// The call this answers.
    #[serde(rename = "toolCallId")]
    pub tool_call_id: String,
    /// An error message, when the tool failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Fields the adapter does not read.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A span of reasoning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningMessage {
    /// The message id.
    pub id: String,
    /// The reasoning text.
    pub content: String,
    /// Fields the adapter does not read.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Structured progress shown by the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivityMessage {
    /// The message id.
    pub id: String,
    /// What kind of activity.
    #[serde(rename = "activityType")]
    pub activity_type: String,
    /// The activity's content (an object).
    pub content: Value,
    /// Fields the adapter does not read.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Message content: a string or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Parts.
    Parts(Vec<ContentPart>),
}

/// One part of message content, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentPart {
    /// Text.
    Text {
        /// The text.
        text: String,
        /// Fields the adapter does not read (`id`, `metadata`).
        #[serde(flatten)]
        extra: Extra,
    },
    /// An image.
    Image {
        /// Where the bytes are.
        source: PartSource,
        /// Fields the adapter does not read.
        #[serde(flatten)]
        extra: Extra,
    },
    /// Audio.
    Audio {
        /// Where the bytes are.
        source: PartSource,
        /// Fields the adapter does not read.
        #[serde(flatten)]
        extra: Extra,
    },
    /// Video.
    Video {
        /// Where the bytes are.
        source: PartSource,
        /// Fields the adapter does not read.
        #[serde(flatten)]
        extra: Extra,
    },
    /// A document.
    Document {
        /// Where the bytes are.
        source: PartSource,
        /// Fields the adapter does not read.
        #[serde(flatten)]
        extra: Extra,
    },
}

/// Where a media part's bytes come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum PartSource {
    /// Base64 bytes inline.
    Data {
        /// The base64 data.
        value: String,
        /// The IANA media type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// Bytes at a URL.
    Url {
        /// The URL.
        value: String,
        /// The IANA media type, when known.
        #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
    /// A provider-issued file handle.
    File {
        /// The handle.
        value: String,
        /// The provider that issued it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
        /// The IANA media type, when known.
        #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}
