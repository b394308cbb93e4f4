//! AG-UI messages → toolgate [`ModelMessage`]s (AI SDK v6 form).
//!
//! - `system` and `developer` → system messages; `user` → user messages
//!   (text, images, and audio/video/documents as files).
//! - `assistant` → an assistant message: its text, then one `tool-call` part
//!   per tool call with the arguments parsed (empty arguments are `{}`;
//!   anything else that is not JSON is [`InputError::InvalidToolArguments`]).
//! - `tool` → a tool message with one `tool-result`; the tool's name comes
//!   from the earlier call (none: [`InputError::UnknownToolCall`]) and the
//!   output from [`crate::content::decode_result`], so the adapter's own
//!   denials come back as `execution-denied`.
//! - `reasoning` and `activity` messages are display-only and are dropped.

use std::collections::HashMap;

use serde_json::Value;
use toolgate::ModelMessage;
use toolgate_protocol::{
    AssistantPart, FilePart, ImagePart, TextPart, ToolCallPart, ToolPart, ToolResultPart, UserContent,
    UserMessage as ModelUserMessage, UserPart,
};

use crate::InputError;
use crate::content::{decode_result, part_kind, provider_file_detail};
use crate::messages::{AssistantMessage, Content, ContentPart, Message, PartSource, ToolCall};

/// Converts a conversation; errors name the message index.
pub fn to_model_messages(messages: &[Message]) -> Result<Vec<ModelMessage>, InputError> {
    let mut tool_names: HashMap<&str, &str> = HashMap::new();
    let mut converted = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        match message {
            Message::Developer(m) | Message::System(m) => converted.push(ModelMessage::system(m.content.clone())),
            Message::User(m) => converted.push(user_message(index, &m.content)?),
            Message::Assistant(m) => {
                for call in m.tool_calls.iter().flatten() {
                    tool_names.insert(&call.id, &call.function.name);
                }
                if let Some(message) = assistant_message(index, m)? {
                    converted.push(message);
                }
            }
            Message::Tool(m) => {
                let tool_name = tool_names
                    .get(m.tool_call_id.as_str())
                    .ok_or_else(|| InputError::UnknownToolCall { index, tool_call_id: m.tool_call_id.clone() })?;
                let output = decode_result(&m.content, m.error.as_deref())
                    .map_err(|detail| InputError::UnsupportedContent { index, detail })?;
                converted.push(ModelMessage::tool(vec![ToolPart::ToolResult(ToolResultPart {
                    tool_call_id: m.tool_call_id.clone(),
                    tool_name: (*tool_name).to_owned(),
                    output,
                    provider_options: None,
                })]));
            }
            Message::Reasoning(_) | Message::Activity(_) => {}
        }
    }
    Ok(converted)
}

/// Parses a tool call's arguments: empty text is `{}`.
pub fn parse_arguments(arguments: &str) -> Result<Value, serde_json::Error> {
    if arguments.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str(arguments)
}

fn assistant_message(index: usize, message: &AssistantMessage) -> Result<Option<ModelMessage>, InputError> {
    let mut parts = Vec::new();
    if let Some(text) = message.content.as_deref().filter(|text| !text.is_empty()) {
        parts.push(AssistantPart::Text(TextPart::new(text)));
    }
    for call in message.tool_calls.iter().flatten() {
        parts.push(AssistantPart::ToolCall(tool_call_part(index, call)?));
    }
    Ok((!parts.is_empty()).then(|| ModelMessage::assistant(parts)))
}

fn tool_call_part(index: usize, call: &ToolCall) -> Result<ToolCallPart, InputError> {
    let input = parse_arguments(&call.function.arguments).map_err(|error| InputError::InvalidToolArguments {
        index,
        tool_call_id: call.id.clone(),
        detail: error.to_string(),
    })?;
    // A sub-agent's call surfaced in this thread keeps its mark (`metadata.toolgate.subAgent`).
    let mark = call.extra.get("metadata").and_then(|metadata| metadata.get("toolgate")?.get("subAgent"));
    let provider_options =
        mark.map(|mark| serde_json::Map::from_iter([("toolgate".to_owned(), serde_json::json!({ "subAgent": mark }))]));
    Ok(ToolCallPart {
        tool_call_id: call.id.clone(),
        tool_name: call.function.name.clone(),
        input,
        provider_executed: None,
        provider_options,
    })
}

fn user_message(index: usize, content: &Content) -> Result<ModelMessage, InputError> {
    let parts = match content {
        Content::Text(text) => return Ok(ModelMessage::user(text.clone())),
        Content::Parts(parts) => parts,
    };
    let parts = parts
        .iter()
        .map(|part| user_part(part).map_err(|detail| InputError::UnsupportedContent { index, detail }))
        .collect::<Result<_, _>>()?;
    Ok(ModelMessage::User(ModelUserMessage { content: UserContent::Parts(parts), provider_options: None }))
}

fn user_part(part: &ContentPart) -> Result<UserPart, String> {
    let source = match part {
        ContentPart::Text { text, .. } => return Ok(UserPart::Text(TextPart::new(text.clone()))),
        ContentPart::Image { source, .. } => {
            let (image, media_type) = match source {
                PartSource::Data { value, mime_type } => (value.clone(), Some(mime_type.clone())),
                PartSource::Url { value, mime_type } => (value.clone(), mime_type.clone()),
                PartSource::File { .. } => return Err(provider_file_detail("image")),
            };
            return Ok(UserPart::Image(ImagePart { image, media_type, provider_options: None }));
        }
        ContentPart::Audio { source, .. }
        | ContentPart::Video { source, .. }
        | ContentPart::Document { source, .. } => source,
    };
    let kind = part_kind(part);
    let (data, media_type) = match source {
        PartSource::Data { value, mime_type } => (value.clone(), mime_type.clone()),
        PartSource::Url { value, mime_type: Some(mime_type) } => (value.clone(), mime_type.clone()),
        PartSource::Url { mime_type: None, .. } => return Err(format!("{kind} part at a URL needs a mimeType")),
        PartSource::File { .. } => return Err(provider_file_detail(kind)),
    };
    Ok(UserPart::File(FilePart { data, media_type, filename: None, provider_options: None }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunAgentInput;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn convert(messages: Value) -> Value {
        let input = RunAgentInput::from_value(json!({"threadId": "t", "runId": "r", "messages": messages})).unwrap();
        serde_json::to_value(to_model_messages(&input.messages).unwrap()).unwrap()
    }

    #[test]
    fn converts_every_role_into_ai_sdk_messages() {
        let converted = convert(json!([
            {"id": "s", "role": "system", "content": "Be brief."},
            {"id": "d", "role": "developer", "content": "Use tools."},
            {"id": "u", "role": "user", "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image", "source": {"type": "url", "value": "https://x/cat.png", "mimeType": "image/png"}},
                {"type": "document", "source": {"type": "data", "value": "JVBER", "mimeType": "application/pdf"}}
            ], "name": "ann"},
            {"id": "r", "role": "reasoning", "content": "thinking"},
            {"id": "a", "role": "assistant", "content": "Checking.", "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "list_files", "arguments": ""}}
            ]},
            {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "{\"temperatureC\":3}"},
            {"id": "t2", "role": "tool", "toolCallId": "c2", "content": "boom", "error": "disk gone"},
            {"id": "e", "role": "assistant"}
        ]));
        assert_eq!(
            converted,
            json!([
                {"role": "system", "content": "Be brief."},
                {"role": "system", "content": "Use tools."},
                {"role": "user", "content": [
                    {"type": "text", "text": "Look:"},
                    {"type": "image", "image": "https://x/cat.png", "mediaType": "image/png"},
                    {"type": "file", "data": "JVBER", "mediaType": "application/pdf"}
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool-call", "toolCallId": "c1", "toolName": "get_weather", "input": {"city": "Oslo"}},
                    {"type": "tool-call", "toolCallId": "c2", "toolName": "list_files", "input": {}}
                ]},
                {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c1", "toolName": "get_weather",
                    "output": {"type": "json", "value": {"temperatureC": 3}}}]},
                {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c2", "toolName": "list_files",
                    "output": {"type": "error-text", "value": "disk gone"}}]}
            ])
        );
    }

    #[test]
    fn media_a_model_cannot_take_is_an_error_naming_the_message() {
        let input = RunAgentInput::from_value(json!({"threadId": "t", "runId": "r", "messages": [
            {"id": "u", "role": "user", "content": "hi"},
            {"id": "v", "role": "user", "content": [{"type": "audio", "source": {"type": "url", "value": "https://x/a"}}]}
        ]}))
        .unwrap();
        assert_eq!(
            to_model_messages(&input.messages).unwrap_err(),
            InputError::UnsupportedContent { index: 1, detail: "audio part at a URL needs a mimeType".into() }
        );
    }

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let message = json!({"id": "a", "role": "assistant", "content": "x", "metadata": {"k": null}, "toolCalls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}, "encryptedValue": "e"}
        ]});
        let decoded = Message::from_value(0, message.clone()).unwrap();
        assert_eq!(serde_json::to_value(&decoded).unwrap(), message);
    }
}
