//! `UIMessage` as the AI SDK v6 client keeps and sends it.
//!
//! Parsing is strict where it matters (roles, tool parts, states, the
//! approval object; errors name the message and part index) and lenient
//! elsewhere: `source-*` and `data-*` parts are kept as raw JSON and play no
//! part in the conversion, unknown fields of parts are ignored.
//!
//! In a **user** message, a `tool-approval` part is the chat-message approval
//! (`{type: "tool-approval", toolCallId, approved, reason?}`), a person's
//! answer keyed by the tool call; in an assistant message the same type is a
//! tool part for a tool named `approval`. A message keeps its `metadata` and
//! every other top-level field (e.g. `createdAt`), and serializes back to the
//! same JSON.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::ConvertError;

/// Who wrote a UI message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UiRole {
    /// Instructions.
    System,
    /// The person.
    User,
    /// The model.
    Assistant,
}

/// One message of the client's conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct UiMessage {
    /// The message id.
    pub id: String,
    /// Who wrote it.
    pub role: UiRole,
    /// Its parts.
    pub parts: Vec<UiPart>,
    /// Application metadata, kept as is.
    pub metadata: Option<Value>,
    /// Other top-level fields (e.g. `createdAt`), kept as they came.
    pub extra: Map<String, Value>,
}

impl UiMessage {
    /// The message's tool parts with their positions among its parts.
    pub fn tool_parts(&self) -> impl Iterator<Item = (usize, &UiToolPart)> {
        self.parts.iter().enumerate().filter_map(|(index, part)| match part {
            UiPart::Tool(tool) => Some((index, tool.as_ref())),
            _ => None,
        })
    }
}

/// A part of a UI message.
#[derive(Debug, Clone, PartialEq)]
pub enum UiPart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning text.
    Reasoning {
        /// The text.
        text: String,
    },
    /// The start of a model step.
    StepStart,
    /// A file.
    File {
        /// A data or http URL.
        url: String,
        /// The IANA media type.
        media_type: String,
        /// The file name.
        filename: Option<String>,
    },
    /// A tool invocation (`tool-<name>` or `dynamic-tool`).
    Tool(Box<UiToolPart>),
    /// A person's answer keyed by tool call id, in a user message (`tool-approval`).
    ToolApproval {
        /// The call decided on.
        tool_call_id: String,
        /// The decision.
        approved: bool,
        /// Why, if given.
        reason: Option<String>,
    },
    /// `source-*` and `data-*` parts, kept as they came.
    Other(Value),
}

/// The seven states of a tool part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolState {
    /// The input is still streaming.
    InputStreaming,
    /// The input is complete.
    InputAvailable,
    /// Waiting for a person's decision.
    ApprovalRequested,
    /// A person decided; the server has not acted yet.
    ApprovalResponded,
    /// The tool produced an output.
    OutputAvailable,
    /// The tool failed.
    OutputError,
    /// The call was denied.
    OutputDenied,
}

impl ToolState {
    /// The state's wire name (`approval-requested`, `output-available`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InputStreaming => "input-streaming",
            Self::InputAvailable => "input-available",
            Self::ApprovalRequested => "approval-requested",
            Self::ApprovalResponded => "approval-responded",
            Self::OutputAvailable => "output-available",
            Self::OutputError => "output-error",
            Self::OutputDenied => "output-denied",
        }
    }
}

/// The approval object of a tool part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UiApproval {
    /// The approval id the server issued.
    pub id: String,
    /// The decision, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    /// Why, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The AI SDK signature, if the server sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// toolgate extension: the input the person approved instead of the model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_input: Option<Value>,
    /// toolgate extension: with an approval, a grant (`{"uses", "within",
    /// "input", "scope"}`): the next calls like it run without asking. The
    /// server checks it (`toolgate::approval::lifecycle::grant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Value>,
}

/// A tool invocation part.
#[derive(Debug, Clone, PartialEq)]
pub struct UiToolPart {
    /// The tool's name.
    pub tool_name: String,
    /// True for `dynamic-tool` parts.
    pub dynamic: bool,
    /// The call id.
    pub tool_call_id: String,
    /// The state.
    pub state: ToolState,
    /// The input (possibly partial while streaming).
    pub input: Option<Value>,
    /// The output, in `output-available`.
    pub output: Option<Value>,
    /// The error, in `output-error`.
    pub error_text: Option<String>,
    /// The raw input of an `output-error` part whose input did not parse.
    pub raw_input: Option<Value>,
    /// True when the provider runs the tool.
    pub provider_executed: Option<bool>,
    /// The approval, once one was requested.
    pub approval: Option<UiApproval>,
    /// Provider metadata of the call.
    pub call_provider_metadata: Option<Map<String, Value>>,
    /// True for an intermediate output.
    pub preliminary: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolFields {
    pub(crate) tool_call_id: String,
    pub(crate) state: ToolState,
    #[serde(default)]
    pub(crate) tool_name: Option<String>,
    #[serde(default)]
    pub(crate) input: Option<Value>,
    #[serde(default)]
    pub(crate) output: Option<Value>,
    #[serde(default)]
    pub(crate) error_text: Option<String>,
    #[serde(default)]
    pub(crate) raw_input: Option<Value>,
    #[serde(default)]
    pub(crate) provider_executed: Option<bool>,
    #[serde(default)]
    pub(crate) approval: Option<UiApproval>,
    #[serde(default)]
    pub(crate) call_provider_metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub(crate) preliminary: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileFields {
    url: String,
    media_type: String,
    #[serde(default)]
    filename: Option<String>,
}

#[derive(Deserialize)]
struct TextFields {
    text: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApprovalFields {
    tool_call_id: String,
    approved: bool,
    #[serde(default)]
    reason: Option<String>,
}

/// The body `DefaultChatTransport` POSTs to the chat endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The chat id.
    pub id: String,
    /// The whole conversation.
    pub messages: Vec<UiMessage>,
    /// `submit-message` or `regenerate-message`.
    pub trigger: Option<String>,
    /// The id of the message the request is about.
    pub message_id: Option<String>,
}

impl ChatRequest {
    /// The strict path: the body as a `Value`, then each message and part,
    /// with errors that name the message, the part and the field.
    pub(crate) fn from_json_strictly(body: &[u8]) -> Result<Self, ConvertError> {
        let value: Value = serde_json::from_slice(body).map_err(|e| ConvertError::InvalidJson(e.to_string()))?;
        let Value::Object(mut object) = value else {
            return Err(ConvertError::InvalidBody("the body must be a JSON object".into()));
        };
        let text_field = |object: &Map<String, Value>, name: &str| match object.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(ConvertError::InvalidBody(format!("`{name}` must be a string"))),
        };
        let id = text_field(&object, "id")?.unwrap_or_default();
        let trigger = text_field(&object, "trigger")?;
        let message_id = text_field(&object, "messageId")?;
        let messages = object
            .remove("messages")
            .ok_or_else(|| ConvertError::InvalidBody("the body has no `messages` array".into()))?;
        Ok(Self { id, messages: parse_ui_messages(messages)?, trigger, message_id })
    }

    /// The id of the assistant message a continuation extends: the last
    /// message's id when it is an assistant message.
    pub fn continued_message_id(&self) -> Option<&str> {
        self.messages.last().filter(|m| m.role == UiRole::Assistant).map(|m| m.id.as_str())
    }
}

/// Parses a JSON array of UI messages; errors name the message and part.
pub fn parse_ui_messages(value: Value) -> Result<Vec<UiMessage>, ConvertError> {
    let Value::Array(items) = value else {
        return Err(ConvertError::InvalidBody("`messages` must be an array".into()));
    };
    items.into_iter().enumerate().map(|(index, item)| parse_message(index, item)).collect()
}

fn parse_message(message_index: usize, value: Value) -> Result<UiMessage, ConvertError> {
    let invalid = |detail: String| ConvertError::InvalidMessage { message_index, part_index: None, detail };
    let Value::Object(mut object) = value else {
        return Err(invalid("expected an object".into()));
    };
    let id = match object.remove("id") {
        Some(Value::String(id)) => id,
        None | Some(Value::Null) => String::new(),
        Some(_) => return Err(invalid("`id` must be a string".into())),
    };
    let role = match object.remove("role") {
        Some(role) => serde_json::from_value(role.clone())
            .map_err(|_| invalid(format!("unknown role {role}; expected system, user or assistant")))?,
        None => return Err(invalid("missing `role`".into())),
    };
    let parts = match object.remove("parts") {
        Some(Value::Array(parts)) => parts
            .into_iter()
            .enumerate()
            .map(|(part_index, part)| {
                parse_part(role, part).map_err(|detail| ConvertError::InvalidMessage {
                    message_index,
                    part_index: Some(part_index),
                    detail,
                })
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(invalid("`parts` must be an array".into())),
    };
    let metadata = object.remove("metadata");
    Ok(UiMessage { id, role, parts, metadata, extra: object })
}

fn fields<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        if path.is_empty() || path == "." {
            error.into_inner().to_string()
        } else {
            format!("`{path}`: {}", error.into_inner())
        }
    })
}

fn parse_part(role: UiRole, value: Value) -> Result<UiPart, String> {
    let part_type = match value.get("type") {
        Some(Value::String(part_type)) => part_type.clone(),
        _ => return Err("part has no `type`".into()),
    };
    match part_type.as_str() {
        "text" => fields::<TextFields>(value).map(|f| UiPart::Text { text: f.text }),
        "reasoning" => fields::<TextFields>(value).map(|f| UiPart::Reasoning { text: f.text }),
        "step-start" => Ok(UiPart::StepStart),
        "file" => fields::<FileFields>(value).map(|f| UiPart::File {
            url: f.url,
            media_type: f.media_type,
            filename: f.filename,
        }),
        "source-url" | "source-document" => Ok(UiPart::Other(value)),
        other if other.starts_with("data-") => Ok(UiPart::Other(value)),
        "dynamic-tool" => tool_part(None, value),
        "tool-approval" if role == UiRole::User => fields::<ApprovalFields>(value).map(|f| UiPart::ToolApproval {
            tool_call_id: f.tool_call_id,
            approved: f.approved,
            reason: f.reason,
        }),
        other => match other.strip_prefix("tool-") {
            Some(name) if !name.is_empty() => tool_part(Some(name.to_owned()), value),
            _ => Err(format!("unknown part type `{other}`")),
        },
    }
}

fn tool_part(static_name: Option<String>, value: Value) -> Result<UiPart, String> {
    build_tool(static_name, fields(value)?)
}

/// A tool part from its fields; `static_name` is the `tool-<name>` of its type (none for `dynamic-tool`).
pub(crate) fn build_tool(static_name: Option<String>, fields: ToolFields) -> Result<UiPart, String> {
    let dynamic = static_name.is_none();
    let tool_name = match static_name.or(fields.tool_name) {
        Some(name) => name,
        None => return Err("a dynamic-tool part needs `toolName`".into()),
    };
    let needs = |what: &str| format!("a `{}` tool part needs {what}", fields.state.as_str());
    match fields.state {
        ToolState::ApprovalRequested if fields.approval.is_none() => return Err(needs("`approval`")),
        ToolState::ApprovalResponded if fields.approval.as_ref().and_then(|a| a.approved).is_none() => {
            return Err(needs("`approval.approved`"));
        }
        ToolState::OutputError if fields.error_text.is_none() => return Err(needs("`errorText`")),
        _ => {}
    }
    Ok(UiPart::Tool(Box::new(UiToolPart {
        tool_name,
        dynamic,
        tool_call_id: fields.tool_call_id,
        state: fields.state,
        input: fields.input,
        output: fields.output,
        error_text: fields.error_text,
        raw_input: fields.raw_input,
        provider_executed: fields.provider_executed,
        approval: fields.approval,
        call_provider_metadata: fields.call_provider_metadata,
        preliminary: fields.preliminary,
    })))
}

impl Serialize for UiMessage {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = Map::new();
        object.insert("id".into(), json!(self.id));
        object.insert("role".into(), json!(self.role));
        let parts: Vec<Value> =
            self.parts.iter().map(|part| serde_json::to_value(part).unwrap_or(Value::Null)).collect();
        object.insert("parts".into(), Value::Array(parts));
        if let Some(metadata) = &self.metadata {
            object.insert("metadata".into(), metadata.clone());
        }
        for (key, value) in &self.extra {
            object.entry(key.clone()).or_insert_with(|| value.clone());
        }
        object.serialize(serializer)
    }
}

impl Serialize for UiPart {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value = match self {
            Self::Text { text } => json!({"type": "text", "text": text}),
            Self::Reasoning { text } => json!({"type": "reasoning", "text": text}),
            Self::StepStart => json!({"type": "step-start"}),
            Self::File { url, media_type, filename } => {
                let mut file = json!({"type": "file", "url": url, "mediaType": media_type});
                if let Some(filename) = filename {
                    file["filename"] = json!(filename);
                }
                file
            }
            Self::Tool(part) => return part.serialize(serializer),
            Self::ToolApproval { tool_call_id, approved, reason } => {
                let mut approval = json!({"type": "tool-approval", "toolCallId": tool_call_id, "approved": approved});
                if let Some(reason) = reason {
                    approval["reason"] = json!(reason);
                }
                approval
            }
            Self::Other(raw) => raw.clone(),
        };
        value.serialize(serializer)
    }
}

impl Serialize for UiToolPart {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = Map::new();
        if self.dynamic {
            object.insert("type".into(), json!("dynamic-tool"));
            object.insert("toolName".into(), json!(self.tool_name));
        } else {
            object.insert("type".into(), json!(format!("tool-{}", self.tool_name)));
        }
        object.insert("toolCallId".into(), json!(self.tool_call_id));
        object.insert("state".into(), json!(self.state));
        let optional = [
            ("input", self.input.clone()),
            ("output", self.output.clone()),
            ("errorText", self.error_text.clone().map(Value::String)),
            ("rawInput", self.raw_input.clone()),
            ("providerExecuted", self.provider_executed.map(Value::Bool)),
            ("approval", self.approval.as_ref().and_then(|a| serde_json::to_value(a).ok())),
            ("callProviderMetadata", self.call_provider_metadata.clone().map(Value::Object)),
            ("preliminary", self.preliminary.map(Value::Bool)),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                object.insert(key.into(), value);
            }
        }
        object.serialize(serializer)
    }
}
