//! The text of a tool outcome: `TOOL_CALL_RESULT.content`, which the client
//! keeps as the `content` of an AG-UI tool message and sends back.
//!
//! Written by the adapter (always a string):
//! - a tool's output `v`: the JSON text of `v` (`{"deleted":"a.txt"}`; a string
//!   output `hi` is written `"hi"`, quoted);
//! - a tool error `e`: `{"error": e}`;
//! - a denial: `{"denied": true, "reason": "..."}` (`reason` omitted when unknown).
//!
//! Read back into a toolgate [`ToolResultOutput`]:
//! - a tool message with `error` set: `error-text` with that message;
//! - content parts: a `content` output;
//! - text that is exactly `{"denied": true}` or `{"denied": true, "reason": <string>}`:
//!   `execution-denied` (so the model keeps seeing the denial on later turns);
//! - text that is exactly `{"error": <string>}`: `error-text`; `{"error": <other>}`: `error-json`;
//! - text that is a JSON string: `text` with the unquoted string;
//! - other JSON text: `json`; text that is not JSON (e.g. written by a client tool): `text`.
//!
//! A tool whose real output is exactly one of the marker objects is read back
//! as a denial or an error; the model is told the same thing either way.

use serde_json::{Map, Value, json};
use toolgate_protocol::{ContentOutputPart, ToolResultOutput};

use crate::messages::{Content, ContentPart, PartSource};

/// The content for a tool's output.
pub fn output_content(output: &Value) -> String {
    output.to_string()
}

/// The content for a tool error.
pub fn error_content(error: &Value) -> String {
    json!({ "error": error }).to_string()
}

/// The content for a denied call.
pub fn denial_content(reason: Option<&str>) -> String {
    match reason {
        Some(reason) => json!({ "denied": true, "reason": reason }).to_string(),
        None => json!({ "denied": true }).to_string(),
    }
}

/// Reads a tool message's content (and `error`) back as a tool result output.
/// Fails only on media parts a model cannot take (the detail says which).
pub fn decode_result(content: &Content, error: Option<&str>) -> Result<ToolResultOutput, String> {
    if let Some(error) = error {
        return Ok(ToolResultOutput::error_text(error));
    }
    match content {
        Content::Text(text) => Ok(decode_text(text)),
        Content::Parts(parts) => {
            let value = parts.iter().map(output_part).collect::<Result<Vec<_>, _>>()?;
            Ok(ToolResultOutput::Content { value, provider_options: None })
        }
    }
}

fn decode_text(text: &str) -> ToolResultOutput {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::String(text)) => ToolResultOutput::text(text),
        Ok(Value::Object(object)) => marker(&object).unwrap_or_else(|| ToolResultOutput::json(Value::Object(object))),
        Ok(other) => ToolResultOutput::json(other),
        Err(_) => ToolResultOutput::text(text),
    }
}

fn marker(object: &Map<String, Value>) -> Option<ToolResultOutput> {
    if object.get("denied") == Some(&Value::Bool(true)) {
        return match (object.len(), object.get("reason")) {
            (1, None) => Some(ToolResultOutput::denied(None)),
            (2, Some(Value::String(reason))) => Some(ToolResultOutput::denied(Some(reason.clone()))),
            _ => None,
        };
    }
    match (object.len(), object.get("error")) {
        (1, Some(Value::String(message))) => Some(ToolResultOutput::error_text(message.clone())),
        (1, Some(other)) => Some(ToolResultOutput::error_json(other.clone())),
        _ => None,
    }
}

fn output_part(part: &ContentPart) -> Result<ContentOutputPart, String> {
    Ok(match part {
        ContentPart::Text { text, .. } => ContentOutputPart::Text { text: text.clone(), provider_options: None },
        ContentPart::Image { source, .. } => match source {
            PartSource::Data { value, mime_type } => ContentOutputPart::ImageData {
                data: value.clone(),
                media_type: mime_type.clone(),
                provider_options: None,
            },
            PartSource::Url { value, .. } => ContentOutputPart::ImageUrl { url: value.clone(), provider_options: None },
            PartSource::File { .. } => return Err(provider_file_detail("image")),
        },
        ContentPart::Audio { source, .. }
        | ContentPart::Video { source, .. }
        | ContentPart::Document { source, .. } => match source {
            PartSource::Data { value, mime_type } => ContentOutputPart::FileData {
                data: value.clone(),
                media_type: mime_type.clone(),
                filename: None,
                provider_options: None,
            },
            PartSource::Url { value, .. } => ContentOutputPart::FileUrl { url: value.clone(), provider_options: None },
            PartSource::File { .. } => return Err(provider_file_detail(part_kind(part))),
        },
    })
}

/// The `type` of a content part.
pub(crate) fn part_kind(part: &ContentPart) -> &'static str {
    match part {
        ContentPart::Text { .. } => "text",
        ContentPart::Image { .. } => "image",
        ContentPart::Audio { .. } => "audio",
        ContentPart::Video { .. } => "video",
        ContentPart::Document { .. } => "document",
    }
}

/// Why a provider file handle cannot be used.
pub(crate) fn provider_file_detail(kind: &str) -> String {
    format!("{kind} part with a provider file source is not supported; send the data or a URL")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn read(text: &str) -> ToolResultOutput {
        decode_result(&Content::Text(text.into()), None).unwrap()
    }

    #[test]
    fn written_content_reads_back_as_the_same_outcome() {
        assert_eq!(read(&output_content(&json!({"deleted": "a"}))), ToolResultOutput::json(json!({"deleted": "a"})));
        assert_eq!(read(&output_content(&json!("hi"))), ToolResultOutput::text("hi"));
        assert_eq!(read(&output_content(&json!(42))), ToolResultOutput::json(json!(42)));
        assert_eq!(read(&error_content(&json!("boom"))), ToolResultOutput::error_text("boom"));
        assert_eq!(read(&error_content(&json!({"code": 7}))), ToolResultOutput::error_json(json!({"code": 7})));
        assert_eq!(read(&denial_content(Some("no"))), ToolResultOutput::denied(Some("no".into())));
        assert_eq!(read(&denial_content(None)), ToolResultOutput::denied(None));
    }

    #[test]
    fn only_exact_markers_are_denials_or_errors() {
        let near_misses = [
            json!({"denied": false}),
            json!({"denied": true, "reason": 3}),
            json!({"denied": true, "by": "x"}),
            json!({"error": "e", "code": 1}),
        ];
        for value in near_misses {
            assert_eq!(read(&value.to_string()), ToolResultOutput::json(value.clone()), "{value}");
        }
    }

    #[test]
    fn plain_text_and_error_fields() {
        assert_eq!(read("sunny, 21 degrees"), ToolResultOutput::text("sunny, 21 degrees"));
        let failed = decode_result(&Content::Text("ignored".into()), Some("disk full")).unwrap();
        assert_eq!(failed, ToolResultOutput::error_text("disk full"));
    }
}
