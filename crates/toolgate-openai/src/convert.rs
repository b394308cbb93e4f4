//! Conversions both OpenAI APIs share: media as URLs, errors for unsupported
//! content, provider options. Tool outputs become text with
//! [`ToolResultOutput::model_text`](toolgate_protocol::ToolResultOutput::model_text).

use serde_json::Value;
use toolgate_model::ModelError;
use toolgate_protocol::{FilePart, ImagePart, ModelRequest};

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
