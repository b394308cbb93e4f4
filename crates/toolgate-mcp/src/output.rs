//! MCP call results: what a tool's handler returns and what the model reads.
//!
//! A successful call returns the MCP result as the server sent it, without
//! `isError` and `_meta`: `{"content": [...], "structuredContent": ...}`
//! (`structuredContent` only when the server sent one). UIs can show it as
//! is. The model reads it through [`model_output`]:
//!
//! - `structuredContent` present → a `json` result with that value;
//! - only `text` blocks → a `text` result, the texts joined with `"\n"`;
//! - anything else → a `content` result: text blocks as text parts, images as
//!   `image-data` parts (base64 + media type), audio as `file-data` parts,
//!   embedded resources as text parts (text) or `image-data`/`file-data`
//!   parts (blobs), resource links as text parts naming the link, and blocks
//!   of unknown types as their JSON text.
//!
//! A result with `isError: true` becomes a tool error (the model reads an
//! `error-text` result with the text blocks), and a reply that is not a tool
//! result at all is refused as garbage.

use serde_json::{Map, Value, json};
use toolgate::ToolResultOutput;
use toolgate::protocol::ContentOutputPart;

/// A tool result as the server sent it, checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CallOutcome {
    /// The handler's output (see the module docs).
    Success(Value),
    /// `isError: true`, with the text the model reads.
    ToolFailed(String),
}

/// Checks a raw `tools/call` result. `Err` says why it is not a tool result.
pub(crate) fn interpret(raw: Value) -> Result<CallOutcome, String> {
    let Value::Object(mut object) = raw else {
        return Err(format!("expected a JSON object, got {}", preview(&raw)));
    };
    object.remove("_meta");
    object.remove("resultType");
    let is_error = match object.remove("isError") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => flag,
        Some(other) => return Err(format!("`isError` is not a boolean: {}", preview(&other))),
    };
    let content = match object.remove("content") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(format!("`content` is not an array: {}", preview(&other))),
    };
    let structured = object.remove("structuredContent").filter(|value| !value.is_null());
    if let Some((key, _)) = object.iter().next()
        && content.is_empty()
        && structured.is_none()
    {
        return Err(format!("it has no `content` but an unexpected field `{key}`"));
    }
    if is_error {
        return Ok(CallOutcome::ToolFailed(error_text(&content, structured.as_ref())));
    }
    let mut output = Map::new();
    output.insert("content".into(), Value::Array(content));
    if let Some(structured) = structured {
        output.insert("structuredContent".into(), structured);
    }
    Ok(CallOutcome::Success(Value::Object(output)))
}

fn error_text(content: &[Value], structured: Option<&Value>) -> String {
    let texts: Vec<&str> = content.iter().filter_map(text_of).collect();
    if !texts.is_empty() {
        return texts.join("\n");
    }
    match (content.is_empty(), structured) {
        (true, None) => "the MCP tool reported an error without a message".to_owned(),
        (true, Some(structured)) => structured.to_string(),
        (false, _) => Value::Array(content.to_vec()).to_string(),
    }
}

/// What the model reads for a handler output (see the module docs). Values
/// that are not MCP results map as toolgate's default does (string → text,
/// anything else → JSON).
pub fn model_output(value: &Value) -> ToolResultOutput {
    let Some(object) = value.as_object() else {
        return ToolResultOutput::from_value(value.clone());
    };
    let content = object.get("content").and_then(Value::as_array);
    let is_mcp_result = content.is_some() && object.keys().all(|key| key == "content" || key == "structuredContent");
    let Some(content) = content.filter(|_| is_mcp_result) else {
        return ToolResultOutput::from_value(value.clone());
    };
    if let Some(structured) = object.get("structuredContent").filter(|value| !value.is_null()) {
        return ToolResultOutput::json(structured.clone());
    }
    if content.iter().all(|block| text_of(block).is_some()) {
        let texts: Vec<&str> = content.iter().filter_map(text_of).collect();
        return ToolResultOutput::text(texts.join("\n"));
    }
    ToolResultOutput::Content { value: content.iter().map(content_part).collect(), provider_options: None }
}

fn text_of(block: &Value) -> Option<&str> {
    if block.get("type")?.as_str()? != "text" {
        return None;
    }
    block.get("text")?.as_str()
}

fn str_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

fn text_part(text: String) -> ContentOutputPart {
    ContentOutputPart::Text { text, provider_options: None }
}

fn content_part(block: &Value) -> ContentOutputPart {
    if let Some(text) = text_of(block) {
        return text_part(text.to_owned());
    }
    let kind = str_field(block, "type").unwrap_or_default();
    let data = str_field(block, "data");
    let mime = str_field(block, "mimeType");
    match (kind, data, mime) {
        ("image", Some(data), Some(mime)) => image_part(data, mime),
        ("audio", Some(data), Some(mime)) => file_part(data, mime, None),
        ("resource", _, _) => {
            resource_part(block.get("resource").unwrap_or(&Value::Null)).unwrap_or_else(|| text_part(block.to_string()))
        }
        ("resource_link", _, _) => {
            let uri = str_field(block, "uri").unwrap_or("?");
            let name = str_field(block, "name").unwrap_or(uri);
            let mut text = format!("[resource link] {name}: {uri}");
            if let Some(mime) = mime {
                text.push_str(&format!(" ({mime})"));
            }
            if let Some(description) = str_field(block, "description") {
                text.push_str(&format!(" - {description}"));
            }
            text_part(text)
        }
        _ => text_part(block.to_string()),
    }
}

fn resource_part(resource: &Value) -> Option<ContentOutputPart> {
    let uri = str_field(resource, "uri").unwrap_or("?");
    if let Some(text) = str_field(resource, "text") {
        return Some(text_part(format!("[resource {uri}]\n{text}")));
    }
    let blob = str_field(resource, "blob")?;
    let mime = str_field(resource, "mimeType").unwrap_or("application/octet-stream");
    if mime.starts_with("image/") {
        return Some(image_part(blob, mime));
    }
    let filename = uri.rsplit('/').next().filter(|name| !name.is_empty()).map(str::to_owned);
    Some(file_part(blob, mime, filename))
}

fn image_part(data: &str, mime: &str) -> ContentOutputPart {
    ContentOutputPart::ImageData { data: data.to_owned(), media_type: mime.to_owned(), provider_options: None }
}

fn file_part(data: &str, mime: &str, filename: Option<String>) -> ContentOutputPart {
    ContentOutputPart::FileData { data: data.to_owned(), media_type: mime.to_owned(), filename, provider_options: None }
}

/// A short rendering of a value for error messages.
pub(crate) fn preview(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The preliminary output reported for an MCP progress notification.
pub(crate) fn progress_value(progress: f64, total: Option<f64>, message: Option<String>) -> Value {
    let mut value = json!({ "progress": progress });
    if let Some(total) = total {
        value["total"] = json!(total);
    }
    if let Some(message) = message {
        value["message"] = json!(message);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn success(raw: Value) -> Value {
        match interpret(raw) {
            Ok(CallOutcome::Success(value)) => value,
            other => panic!("expected success, got {other:?}"),
        }
    }

    #[test]
    fn text_only_results_are_text() {
        let value = success(json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}));
        assert_eq!(model_output(&value), ToolResultOutput::text("a\nb"));
        assert_eq!(model_output(&success(json!({"content": []}))), ToolResultOutput::text(""));
        assert_eq!(model_output(&success(json!({}))), ToolResultOutput::text(""));
    }

    #[test]
    fn structured_content_is_json() {
        let value = success(json!({"content": [{"type": "text", "text": "{\"t\":1}"}], "structuredContent": {"t": 1},
            "_meta": {"x": 1}, "isError": false}));
        assert_eq!(value, json!({"content": [{"type": "text", "text": "{\"t\":1}"}], "structuredContent": {"t": 1}}));
        assert_eq!(model_output(&value), ToolResultOutput::json(json!({"t": 1})));
    }

    #[test]
    fn media_and_resources_are_content_parts() {
        let value = success(json!({"content": [
            {"type": "text", "text": "look"},
            {"type": "image", "data": "iVBOR", "mimeType": "image/png"},
            {"type": "audio", "data": "UklG", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "test://a.txt", "text": "hello"}},
            {"type": "resource", "resource": {"uri": "test://b/c.bin", "blob": "AAEC", "mimeType": "application/x-b"}},
            {"type": "resource_link", "uri": "test://d", "name": "d", "mimeType": "text/plain"},
            {"type": "hologram", "x": 1}
        ]}));
        let ToolResultOutput::Content { value: parts, .. } = model_output(&value) else { panic!("content") };
        assert_eq!(
            parts,
            vec![
                text_part("look".into()),
                image_part("iVBOR", "image/png"),
                file_part("UklG", "audio/wav", None),
                text_part("[resource test://a.txt]\nhello".into()),
                file_part("AAEC", "application/x-b", Some("c.bin".into())),
                text_part("[resource link] d: test://d (text/plain)".into()),
                text_part(r#"{"type":"hologram","x":1}"#.into()),
            ]
        );
    }

    #[test]
    fn errors_and_garbage_are_told_apart() {
        assert_eq!(
            interpret(json!({"content": [{"type": "text", "text": "boom"}], "isError": true})),
            Ok(CallOutcome::ToolFailed("boom".into()))
        );
        assert!(
            matches!(interpret(json!({"isError": true})), Ok(CallOutcome::ToolFailed(text)) if text.contains("without a message"))
        );
        assert!(interpret(json!([1, 2])).is_err());
        assert!(interpret(json!({"content": "text"})).is_err());
        assert!(interpret(json!({"isError": "yes"})).is_err());
        assert!(interpret(json!({"tools": []})).unwrap_err().contains("tools"));
    }

    #[test]
    fn other_values_map_as_toolgate_does() {
        assert_eq!(model_output(&json!("hi")), ToolResultOutput::text("hi"));
        assert_eq!(model_output(&json!({"a": 1})), ToolResultOutput::json(json!({"a": 1})));
        assert_eq!(
            model_output(&json!({"content": [], "extra": 1})),
            ToolResultOutput::json(json!({"content": [], "extra": 1}))
        );
    }
}
