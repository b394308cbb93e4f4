//! Connection settings for [`crate::AnthropicModel`].

use reqwest::header::{HeaderMap, HeaderValue};
use toolgate_http::{HttpOptions, RetryPolicy, header_map};
use toolgate_model::ModelError;

/// The default API base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/v1";
/// The `anthropic-version` header sent by default.
pub const DEFAULT_API_VERSION: &str = "2023-06-01";
/// `max_tokens` when the request sets no output limit (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Where and how to reach the Anthropic API.
///
/// ```
/// use toolgate_anthropic::AnthropicConfig;
/// let config = AnthropicConfig::new("sk-ant-...").max_tokens(2048);
/// ```
#[derive(Clone)]
pub struct AnthropicConfig {
    pub(crate) api_key: String,
    pub(crate) base_url: String,
    pub(crate) version: String,
    pub(crate) betas: Vec<String>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) http: HttpOptions,
    pub(crate) max_tokens: u32,
}

impl std::fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("api_key", &"<redacted>")
            .field("base_url", &self.base_url)
            .field("version", &self.version)
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

impl AnthropicConfig {
    /// The Anthropic API with this key.
    pub fn new(api_key: impl Into<String>) -> Self {
        Self {
            api_key: api_key.into(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            version: DEFAULT_API_VERSION.to_owned(),
            betas: Vec::new(),
            headers: Vec::new(),
            http: HttpOptions::default(),
            max_tokens: DEFAULT_MAX_TOKENS,
        }
    }

    /// Configured from the environment: `ANTHROPIC_API_KEY` (required) and
    /// `ANTHROPIC_BASE_URL`.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`Self::from_env`] with a custom variable lookup.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let var = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let Some(api_key) = var("ANTHROPIC_API_KEY") else {
            return Err(ModelError::Configuration {
                message: "ANTHROPIC_API_KEY is not set: export your Anthropic API key in ANTHROPIC_API_KEY".into(),
            });
        };
        let config = Self::new(api_key);
        Ok(match var("ANTHROPIC_BASE_URL") {
            Some(base_url) => config.base_url(base_url),
            None => config,
        })
    }

    /// Sets the base URL, e.g. `https://api.anthropic.com/v1` (a trailing `/` is ignored).
    pub fn base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Sets the `anthropic-version` header.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Adds an `anthropic-beta` feature.
    pub fn beta(mut self, feature: impl Into<String>) -> Self {
        self.betas.push(feature.into());
        self
    }

    /// Sends an extra header with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// `max_tokens` for requests without an output limit (default [`DEFAULT_MAX_TOKENS`]).
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Sets the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.http.retry = retry;
        self
    }

    /// Sets timeouts and retries.
    pub fn http_options(mut self, http: HttpOptions) -> Self {
        self.http = http;
        self
    }

    pub(crate) fn url(&self) -> String {
        format!("{}/messages", self.base_url)
    }

    /// Every header a request carries (built once per model).
    pub(crate) fn header_map(&self) -> Result<HeaderMap, ModelError> {
        let invalid = |what: &str| ModelError::Configuration { message: format!("invalid header {what}") };
        let mut headers = HeaderMap::new();
        headers
            .insert("x-api-key", HeaderValue::from_str(&self.api_key).map_err(|_| invalid("value for the API key"))?);
        headers.insert("anthropic-version", HeaderValue::from_str(&self.version).map_err(|_| invalid("version"))?);
        if !self.betas.is_empty() {
            let betas = HeaderValue::from_str(&self.betas.join(",")).map_err(|_| invalid("anthropic-beta"))?;
            headers.insert("anthropic-beta", betas);
        }
        headers.extend(header_map(self.headers.iter().map(|(name, value)| (name, value)))?);
        Ok(headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_needs_a_key() {
        let error = AnthropicConfig::from_lookup(|_| None).unwrap_err();
        assert!(error.to_string().contains("ANTHROPIC_API_KEY"), "{error}");
        let config = AnthropicConfig::from_lookup(|name| match name {
            "ANTHROPIC_API_KEY" => Some("sk-ant".into()),
            "ANTHROPIC_BASE_URL" => Some("http://localhost:9/v1/".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(config.url(), "http://localhost:9/v1/messages");
        let headers = config.beta("a").beta("b").header_map().unwrap();
        assert_eq!(headers["x-api-key"], "sk-ant");
        assert_eq!(headers["anthropic-version"], DEFAULT_API_VERSION);
        assert_eq!(headers["anthropic-beta"], "a,b");
    }
}
