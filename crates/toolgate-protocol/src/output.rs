//! Tool result outputs: what a tool result tells the model (AI SDK `ToolResultOutput`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ProviderOptions;

/// What the model reads for a denied call without a reason.
pub const DENIED_TEXT: &str = "Tool call execution denied.";

/// What the model is told about a tool call's outcome, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ToolResultOutput {
    /// A text result.
    Text {
        /// The text.
        value: String,
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
    /// A JSON result.
    Json {
        /// The value.
        value: Value,
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
    /// A person denied the call; it never ran.
    ExecutionDenied {
        /// Why, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
    /// The tool failed; the error as text.
    ErrorText {
        /// The error message.
        value: String,
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
    /// The tool failed; the error as JSON.
    ErrorJson {
        /// The error value.
        value: Value,
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
    /// Multi-part content (text, media, files).
    Content {
        /// The parts.
        value: Vec<ContentOutputPart>,
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
}

impl ToolResultOutput {
    /// A text output.
    pub fn text(value: impl Into<String>) -> Self {
        Self::Text { value: value.into(), provider_options: None }
    }

    /// A JSON output.
    pub fn json(value: Value) -> Self {
        Self::Json { value, provider_options: None }
    }

    /// A denial, with the reason if there is one.
    pub fn denied(reason: Option<String>) -> Self {
        Self::ExecutionDenied { reason, provider_options: None }
    }

    /// A text error.
    pub fn error_text(value: impl Into<String>) -> Self {
        Self::ErrorText { value: value.into(), provider_options: None }
    }

    /// A JSON error.
    pub fn error_json(value: Value) -> Self {
        Self::ErrorJson { value, provider_options: None }
    }

    /// The output the AI SDK derives from a tool's return value: a string is
    /// `text`, anything else `json`.
    pub fn from_value(value: Value) -> Self {
        match value {
            Value::String(text) => Self::text(text),
            other => Self::json(other),
        }
    }

    /// True for `execution-denied`.
    pub fn is_denied(&self) -> bool {
        matches!(self, Self::ExecutionDenied { .. })
    }

    /// True for `error-text` and `error-json`.
    pub fn is_error(&self) -> bool {
        matches!(self, Self::ErrorText { .. } | Self::ErrorJson { .. })
    }

    /// The output as the text the model reads: text as is, JSON as JSON text,
    /// a denial as its reason (or [`DENIED_TEXT`]), errors as their text or
    /// JSON, multi-part content as its text parts (other parts as JSON), one
    /// per line.
    pub fn model_text(&self) -> String {
        match self {
            Self::Text { value, .. } | Self::ErrorText { value, .. } => value.clone(),
            Self::Json { value, .. } | Self::ErrorJson { value, .. } => value.to_string(),
            Self::ExecutionDenied { reason, .. } => reason.clone().unwrap_or_else(|| DENIED_TEXT.to_owned()),
            Self::Content { value, .. } => value
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
}

/// One part of a `content` tool output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ContentOutputPart {
    /// Text.
    Text {
        /// The text.
        text: String,
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
    /// Base64 media (older form).
    Media {
        /// Base64 data.
        data: String,
        /// The IANA media type.
        #[serde(rename = "mediaType")]
        media_type: String,
    },
    /// Base64 file data.
    FileData {
        /// Base64 data.
        data: String,
        /// The IANA media type.
        #[serde(rename = "mediaType")]
        media_type: String,
        /// The file name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
    /// A file by URL.
    FileUrl {
        /// The URL.
        url: String,
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
    /// A file by provider id (a string or a per-provider map).
    FileId {
        /// The id.
        #[serde(rename = "fileId")]
        file_id: Value,
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
    /// Base64 image data.
    ImageData {
        /// Base64 data.
        data: String,
        /// The IANA media type.
        #[serde(rename = "mediaType")]
        media_type: String,
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
    /// An image by URL.
    ImageUrl {
        /// The URL.
        url: String,
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
    /// An image by provider id.
    ImageFileId {
        /// The id.
        #[serde(rename = "fileId")]
        file_id: Value,
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
    /// Provider-defined content.
    Custom {
        /// Provider-specific options.
        #[serde(default, rename = "providerOptions", skip_serializing_if = "Option::is_none")]
        provider_options: Option<ProviderOptions>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outputs_become_readable_text() {
        assert_eq!(ToolResultOutput::denied(None).model_text(), DENIED_TEXT);
        assert_eq!(ToolResultOutput::denied(Some("not now".into())).model_text(), "not now");
        assert_eq!(ToolResultOutput::text("hi").model_text(), "hi");
        assert_eq!(ToolResultOutput::json(json!({"a": 1})).model_text(), r#"{"a":1}"#);
        assert_eq!(ToolResultOutput::error_text("boom").model_text(), "boom");
        assert_eq!(ToolResultOutput::error_json(json!("x")).model_text(), r#""x""#);
        let content = ToolResultOutput::Content {
            value: vec![
                ContentOutputPart::Text { text: "a".into(), provider_options: None },
                ContentOutputPart::ImageUrl { url: "https://x/i.png".into(), provider_options: None },
            ],
            provider_options: None,
        };
        assert_eq!(content.model_text(), "a\n{\"type\":\"image-url\",\"url\":\"https://x/i.png\"}");
    }
}
