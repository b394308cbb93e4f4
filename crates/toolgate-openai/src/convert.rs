//! Conversions both OpenAI APIs share: tool outputs as text, media as URLs,
//! provider options, finish reasons and usage.

use serde_json::Value;
use toolgate::ModelError;
use toolgate::protocol::{ContentOutputPart, FilePart, ImagePart, ModelRequest, ToolResultOutput};

/// What the model reads for a denied call without a reason.
pub const DENIED_TEXT: &str = "Tool call execution denied.";

/// A tool output as the text the model reads: text as is, JSON as JSON text,
/// a denial as its reason (or [`DENIED_TEXT`]), errors as their text or JSON,
/// multi-part content as its text parts (other parts as JSON), one per line.
pub fn tool_output_text(output: &ToolResultOutput) -> String {
    match output {
        ToolResultOutput::Text { value, .. } | ToolResultOutput::ErrorText { value, .. } => value.clone(),
        ToolResultOutput::Json { value, .. } | ToolResultOutput::ErrorJson { value, .. } => value.to_string(),
        ToolResultOutput::ExecutionDenied { reason, .. } => reason.clone().unwrap_or_else(|| DENIED_TEXT.to_owned()),
        ToolResultOutput::Content { value, .. } => value
            .iter()
            .map(|part| match part {
                ContentOutputPart::Text { text, .. } => text.clone(),
                ContentOutputPart::Media { .. }
                | ContentOutputPart::FileData { .. }
                | ContentOutputPart::FileUrl { .. }
                | ContentOutputPart::FileId { .. }
                | ContentOutputPart::ImageData { .. }
                | ContentOutputPart::ImageUrl { .. }
                | ContentOutputPart::ImageFileId { .. }
                | ContentOutputPart::Custom { .. } => serde_json::to_string(part).unwrap_or_default(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// An image part as a URL (an `http(s):` or `data:` URL kept, base64 data
/// turned into a `data:` URL).
pub fn image_url(image: &ImagePart) -> String {
    data_url(&image.image, image.media_type.as_deref().unwrap_or("image/jpeg"))
}

/// A file part's data as a URL (see [`image_url`]).
pub fn file_url(file: &FilePart) -> String {
    data_url(&file.data, &file.media_type)
}

fn data_url(data: &str, media_type: &str) -> String {
    if data.starts_with("http://") || data.starts_with("https://") || data.starts_with("data:") {
        data.to_owned()
    } else {
        format!("data:{media_type};base64,{data}")
    }
}

/// The error for content an API cannot carry.
pub fn unsupported(what: impl std::fmt::Display) -> ModelError {
    ModelError::Configuration { message: format!("not supported by this provider: {what}") }
}

/// Provider options of a request, read from the first of `keys` that has the option.
pub struct Options<'a> {
    request: &'a ModelRequest,
    keys: [&'a str; 2],
}

impl<'a> Options<'a> {
    /// Options under `provider`, then `openai`.
    pub fn new(request: &'a ModelRequest, provider: &'a str) -> Self {
        Self { request, keys: [provider, "openai"] }
    }

    /// The raw value of `key`.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        let options = self.request.provider_options.as_ref()?;
        self.keys.iter().find_map(|provider| options.get(*provider)?.get(key))
    }

    /// A boolean option.
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.get(key).and_then(Value::as_bool)
    }

    /// A string option.
    pub fn str(&self, key: &str) -> Option<&'a str> {
        self.get(key).and_then(Value::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outputs_become_readable_text() {
        assert_eq!(tool_output_text(&ToolResultOutput::denied(None)), DENIED_TEXT);
        assert_eq!(tool_output_text(&ToolResultOutput::denied(Some("not now".into()))), "not now");
        assert_eq!(tool_output_text(&ToolResultOutput::json(json!({"a": 1}))), r#"{"a":1}"#);
        assert_eq!(tool_output_text(&ToolResultOutput::error_text("boom")), "boom");
        assert_eq!(tool_output_text(&ToolResultOutput::error_json(json!("x"))), r#""x""#);
    }
}
