//! Strict parsing of `ModelMessage[]` JSON with errors that name what is wrong.
//!
//! Contract: every message must be an object with a known `role`; user and
//! assistant content may be a string or an array of parts, system content is a
//! string, tool content an array. Every part must carry a `type` known for its
//! role. Unknown fields are ignored (as the AI SDK does), unknown part types
//! and wrong field types are errors. Nothing here panics on any input.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::message::{
    AssistantContent, AssistantMessage, AssistantPart, ModelMessage, SystemMessage, ToolMessage, ToolPart, UserContent,
    UserMessage, UserPart,
};

/// A malformed message, with where it is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid message {message_index}{}: {kind}", field.as_deref().map(|f| format!(" at `{f}`")).unwrap_or_default())]
pub struct MessageError {
    /// Index of the message in the list.
    pub message_index: usize,
    /// Path of the offending field inside the message, e.g. `content[1].toolCallId`.
    pub field: Option<String>,
    /// What is wrong.
    pub kind: MessageErrorKind,
}

/// What is wrong with a message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MessageErrorKind {
    /// The document is not a JSON array of messages.
    #[error("expected a JSON array of messages")]
    NotAnArray,
    /// The document is not valid JSON.
    #[error("invalid JSON: {0}")]
    InvalidJson(String),
    /// A message or part is not a JSON object.
    #[error("expected a JSON object")]
    NotAnObject,
    /// A message has no `role`.
    #[error("missing `role`")]
    MissingRole,
    /// A message has a role that is not system, user, assistant or tool.
    #[error("unknown role `{0}`")]
    UnknownRole(String),
    /// The content has the wrong JSON type for the role.
    #[error("content of a {role} message must be {expected}")]
    InvalidContent {
        /// The message role.
        role: &'static str,
        /// What the content must be.
        expected: &'static str,
    },
    /// A part has no `type`.
    #[error("part has no `type`")]
    MissingPartType,
    /// A part type that does not exist, or is not allowed for this role.
    #[error("unknown part type `{part_type}` for a {role} message")]
    UnknownPartType {
        /// The message role.
        role: &'static str,
        /// The offending type.
        part_type: String,
    },
    /// A field is missing or has the wrong type.
    #[error("{0}")]
    InvalidField(String),
}

/// Parses a JSON text holding an array of model messages.
pub fn parse_messages_str(json: &str) -> Result<Vec<ModelMessage>, MessageError> {
    let value: Value = serde_json::from_str(json).map_err(|e| MessageError {
        message_index: 0,
        field: None,
        kind: MessageErrorKind::InvalidJson(e.to_string()),
    })?;
    parse_messages(value)
}

/// Parses a JSON array of model messages.
pub fn parse_messages(value: Value) -> Result<Vec<ModelMessage>, MessageError> {
    let Value::Array(items) = value else {
        return Err(MessageError { message_index: 0, field: None, kind: MessageErrorKind::NotAnArray });
    };
    items.into_iter().enumerate().map(|(index, item)| parse_message(index, item)).collect()
}

/// Parses one message; `index` is only used in errors.
pub(crate) fn parse_message(index: usize, value: Value) -> Result<ModelMessage, MessageError> {
    let err = |field: Option<String>, kind| MessageError { message_index: index, field, kind };
    let Value::Object(mut object) = value else {
        return Err(err(None, MessageErrorKind::NotAnObject));
    };
    let role = match object.get("role") {
        None | Some(Value::Null) => return Err(err(Some("role".into()), MessageErrorKind::MissingRole)),
        Some(Value::String(role)) => role.clone(),
        Some(other) => return Err(err(Some("role".into()), MessageErrorKind::UnknownRole(other.to_string()))),
    };
    let provider_options = match object.remove("providerOptions") {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(_) => {
            return Err(err(
                Some("providerOptions".into()),
                MessageErrorKind::InvalidField("expected an object".into()),
            ));
        }
    };
    let content = object.remove("content").unwrap_or(Value::Null);
    match role.as_str() {
        "system" => match content {
            Value::String(text) => Ok(ModelMessage::System(SystemMessage { content: text, provider_options })),
            _ => Err(err(
                Some("content".into()),
                MessageErrorKind::InvalidContent { role: "system", expected: "a string" },
            )),
        },
        "user" => {
            let content = match content {
                Value::String(text) => UserContent::Text(text),
                Value::Array(parts) => UserContent::Parts(parse_parts(index, "user", parts, user_part)?),
                _ => return Err(err(Some("content".into()), invalid_content("user"))),
            };
            Ok(ModelMessage::User(UserMessage { content, provider_options }))
        }
        "assistant" => {
            let content = match content {
                Value::String(text) => AssistantContent::Text(text),
                Value::Array(parts) => AssistantContent::Parts(parse_parts(index, "assistant", parts, assistant_part)?),
                _ => return Err(err(Some("content".into()), invalid_content("assistant"))),
            };
            Ok(ModelMessage::Assistant(AssistantMessage { content, provider_options }))
        }
        "tool" => match content {
            Value::Array(parts) => Ok(ModelMessage::Tool(ToolMessage {
                content: parse_parts(index, "tool", parts, tool_part)?,
                provider_options,
            })),
            _ => Err(err(
                Some("content".into()),
                MessageErrorKind::InvalidContent { role: "tool", expected: "an array of parts" },
            )),
        },
        _ => Err(err(Some("role".into()), MessageErrorKind::UnknownRole(role))),
    }
}

fn invalid_content(role: &'static str) -> MessageErrorKind {
    MessageErrorKind::InvalidContent { role, expected: "a string or an array of parts" }
}

/// The outcome of decoding one part: `None` means the type is unknown for the role.
type PartResult<P> = Option<Result<P, (Option<String>, String)>>;

fn parse_parts<P>(
    message_index: usize,
    role: &'static str,
    parts: Vec<Value>,
    decode: fn(&str, Value) -> PartResult<P>,
) -> Result<Vec<P>, MessageError> {
    parts
        .into_iter()
        .enumerate()
        .map(|(part_index, part)| {
            let at = |suffix: Option<&str>| {
                Some(match suffix {
                    Some(path) if !path.is_empty() && path != "." => format!("content[{part_index}].{path}"),
                    _ => format!("content[{part_index}]"),
                })
            };
            let err = |field, kind| MessageError { message_index, field, kind };
            let part_type = match &part {
                Value::Object(object) => match object.get("type") {
                    Some(Value::String(part_type)) => part_type.clone(),
                    _ => return Err(err(at(Some("type")), MessageErrorKind::MissingPartType)),
                },
                _ => return Err(err(at(None), MessageErrorKind::NotAnObject)),
            };
            match decode(&part_type, part) {
                None => Err(err(at(None), MessageErrorKind::UnknownPartType { role, part_type })),
                Some(Ok(part)) => Ok(part),
                Some(Err((path, detail))) => Err(err(at(path.as_deref()), MessageErrorKind::InvalidField(detail))),
            }
        })
        .collect()
}

/// Decodes a part's fields, keeping the path of the field that failed.
fn fields<T: DeserializeOwned>(value: Value) -> Result<T, (Option<String>, String)> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        (Some(path), error.into_inner().to_string())
    })
}

fn user_part(part_type: &str, value: Value) -> PartResult<UserPart> {
    Some(match part_type {
        "text" => fields(value).map(UserPart::Text),
        "image" => fields(value).map(UserPart::Image),
        "file" => fields(value).map(UserPart::File),
        "tool-approval" => fields(value).map(UserPart::ToolApproval),
        _ => return None,
    })
}

fn assistant_part(part_type: &str, value: Value) -> PartResult<AssistantPart> {
    Some(match part_type {
        "text" => fields(value).map(AssistantPart::Text),
        "reasoning" => fields(value).map(AssistantPart::Reasoning),
        "file" => fields(value).map(AssistantPart::File),
        "tool-call" => fields(value).map(AssistantPart::ToolCall),
        "tool-result" => fields(value).map(AssistantPart::ToolResult),
        "tool-approval-request" => fields(value).map(AssistantPart::ToolApprovalRequest),
        _ => return None,
    })
}

fn tool_part(part_type: &str, value: Value) -> PartResult<ToolPart> {
    Some(match part_type {
        "tool-result" => fields(value).map(ToolPart::ToolResult),
        "tool-approval-response" => fields(value).map(ToolPart::ToolApprovalResponse),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn names_message_index_and_field_of_a_missing_field() {
        let error = parse_messages(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}, {"type": "tool-call", "toolName": "x", "input": {}}]}
        ]))
        .unwrap_err();
        assert_eq!(error.message_index, 1);
        assert_eq!(error.field.as_deref(), Some("content[1]"));
        assert!(error.to_string().contains("toolCallId"), "{error}");
    }

    #[test]
    fn names_a_nested_wrong_type() {
        let error = parse_messages(json!([
            {"role": "tool", "content": [{"type": "tool-approval-response", "approvalId": "a", "approved": null}]}
        ]))
        .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("content[0].approved"));
    }

    #[test]
    fn rejects_unknown_part_type_for_role() {
        let error = parse_messages(json!([{"role": "user", "content": [{"type": "tool-call"}]}])).unwrap_err();
        assert_eq!(error.kind, MessageErrorKind::UnknownPartType { role: "user", part_type: "tool-call".into() });
    }

    #[test]
    fn rejects_non_arrays_and_bad_roles() {
        assert_eq!(parse_messages(json!({})).unwrap_err().kind, MessageErrorKind::NotAnArray);
        assert_eq!(
            parse_messages(json!([{"role": "robot", "content": "x"}])).unwrap_err().kind,
            MessageErrorKind::UnknownRole("robot".into())
        );
        assert_eq!(parse_messages(json!([{"content": "x"}])).unwrap_err().kind, MessageErrorKind::MissingRole);
        assert_eq!(parse_messages(json!([7])).unwrap_err().kind, MessageErrorKind::NotAnObject);
        assert!(matches!(parse_messages_str("[{").unwrap_err().kind, MessageErrorKind::InvalidJson(_)));
    }
}
