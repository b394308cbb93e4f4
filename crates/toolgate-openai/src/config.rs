//! Connection settings shared by [`crate::OpenAiChatModel`] and [`crate::OpenAiResponsesModel`].

use std::sync::Arc;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use toolgate_http::{HttpOptions, RetryPolicy, header_map};
use toolgate_model::ModelError;

/// The default API base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Makes ids for things the provider does not name (e.g. the tool call an MCP
/// approval request stands for).
pub type IdGenerator = Arc<dyn Fn() -> String + Send + Sync>;

/// Where and how to reach an OpenAI or OpenAI-compatible API.
///
/// ```
/// use toolgate_openai::OpenAiConfig;
/// let openai = OpenAiConfig::new("sk-...").organization("org-1");
/// let local = OpenAiConfig::compatible("http://127.0.0.1:8080/v1");
/// ```
#[derive(Clone)]
pub struct OpenAiConfig {
    pub(crate) api_key: Option<String>,
    pub(crate) base_url: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) http: HttpOptions,
    pub(crate) provider_name: String,
    pub(crate) include_usage: bool,
    pub(crate) id_generator: IdGenerator,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("base_url", &self.base_url)
            .field("provider_name", &self.provider_name)
            .field("http", &self.http)
            .finish_non_exhaustive()
    }
}

impl OpenAiConfig {
    /// The OpenAI API with this key.
    pub fn new(api_key: impl Into<String>) -> Self {
        Self {
            api_key: Some(api_key.into()),
            base_url: DEFAULT_BASE_URL.to_owned(),
            headers: Vec::new(),
            http: HttpOptions::default(),
            provider_name: "openai".to_owned(),
            include_usage: true,
            id_generator: Arc::new(|| uuid::Uuid::now_v7().simple().to_string()),
        }
    }

    /// An OpenAI-compatible server (llama.cpp, Ollama, vLLM, ...) at `base_url`
    /// (ending in `/v1`), without a key; the provider name is `openai-compatible`.
    pub fn compatible(base_url: impl Into<String>) -> Self {
        Self { api_key: None, provider_name: "openai-compatible".to_owned(), ..Self::new("") }.base_url(base_url)
    }

    /// The OpenAI API configured from the environment: `OPENAI_API_KEY`
    /// (required), `OPENAI_BASE_URL`, `OPENAI_ORGANIZATION`, `OPENAI_PROJECT`.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`Self::from_env`] with a custom variable lookup.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let var = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let Some(api_key) = var("OPENAI_API_KEY") else {
            return Err(ModelError::Configuration {
                message: "OPENAI_API_KEY is not set: export your OpenAI API key in OPENAI_API_KEY".into(),
            });
        };
        let mut config = Self::new(api_key);
        if let Some(base_url) = var("OPENAI_BASE_URL") {
            config = config.base_url(base_url);
        }
        if let Some(organization) = var("OPENAI_ORGANIZATION") {
            config = config.organization(organization);
        }
        if let Some(project) = var("OPENAI_PROJECT") {
            config = config.project(project);
        }
        Ok(config)
    }

    /// Sets the API key (sent as `Authorization: Bearer`).
    pub fn api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into()).filter(|key: &String| !key.is_empty());
        self
    }

    /// Sets the base URL, e.g. `https://api.openai.com/v1` (a trailing `/` is ignored).
    pub fn base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Sends `OpenAI-Organization`.
    pub fn organization(self, organization: impl Into<String>) -> Self {
        self.header("OpenAI-Organization", organization)
    }

    /// Sends `OpenAI-Project`.
    pub fn project(self, project: impl Into<String>) -> Self {
        self.header("OpenAI-Project", project)
    }

    /// Sends an extra header with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
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

    /// The provider name models report, and the first key read from
    /// `providerOptions` (then `openai`).
    pub fn provider_name(mut self, name: impl Into<String>) -> Self {
        self.provider_name = name.into();
        self
    }

    /// Chat Completions: ask for a usage chunk (`stream_options.include_usage`,
    /// on by default; turn off for servers that reject it).
    pub fn include_usage(mut self, include: bool) -> Self {
        self.include_usage = include;
        self
    }

    /// Replaces the generator of provider-side ids (for reproducible tests).
    pub fn id_generator(mut self, generator: impl Fn() -> String + Send + Sync + 'static) -> Self {
        self.id_generator = Arc::new(generator);
        self
    }

    /// True for the OpenAI API itself (not a compatible server).
    pub(crate) fn is_openai(&self) -> bool {
        self.provider_name == "openai"
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base_url, path.trim_start_matches('/'))
    }

    /// Every header a request carries (built once per model).
    pub(crate) fn header_map(&self) -> Result<HeaderMap, ModelError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.api_key {
            let value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| ModelError::Configuration {
                message: "invalid header value for the API key".to_owned(),
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        headers.extend(header_map(self.headers.iter().map(|(name, value)| (name, value)))?);
        Ok(headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_needs_a_key_and_reads_the_base_url() {
        let error = OpenAiConfig::from_lookup(|_| None).unwrap_err();
        assert!(error.to_string().contains("OPENAI_API_KEY"), "{error}");
        let config = OpenAiConfig::from_lookup(|name| match name {
            "OPENAI_API_KEY" => Some("sk-test".into()),
            "OPENAI_BASE_URL" => Some("http://localhost:1234/v1/".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(config.url("chat/completions"), "http://localhost:1234/v1/chat/completions");
        assert_eq!(config.header_map().unwrap()["authorization"], "Bearer sk-test");
        assert!(format!("{config:?}").contains("<redacted>"));
    }
}
