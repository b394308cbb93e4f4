//! The Anthropic Messages API (`POST {base}/messages`) as a toolgate model.
//!
//! Approvals are toolgate's: Anthropic has no provider-side approval step,
//! so the engine gates calls itself, and a denied call reaches the model as
//! a `tool_result` with `is_error: true` whose text is the reason (or "Tool
//! call execution denied."). See [`request`] and [`stream`] for the exact
//! mapping.
//!
//! ```no_run
//! use toolgate_anthropic::AnthropicModel;
//! let model = AnthropicModel::from_env("claude-haiku-4-5")?;
//! # Ok::<(), toolgate::ModelError>(())
//! ```

mod config;
pub mod request;
pub mod response;
pub mod stream;
pub mod wire;

use toolgate_http::{Endpoint, HttpClient, decode_sse, read_json};
use toolgate_model::{LanguageModel, ModelError, ModelStream};
use toolgate_protocol::{ModelRequest, ModelResponse};

pub use config::{AnthropicConfig, DEFAULT_API_VERSION, DEFAULT_BASE_URL, DEFAULT_MAX_TOKENS};
pub use toolgate_http::{HttpOptions, RetryPolicy};

/// An Anthropic model.
#[derive(Clone, Debug)]
pub struct AnthropicModel {
    endpoint: Endpoint<AnthropicConfig>,
}

impl AnthropicModel {
    /// A model reached with `config`; fails on a header the config cannot send.
    pub fn new(config: AnthropicConfig, model: impl Into<String>) -> Result<Self, ModelError> {
        let http = HttpClient::new(&config.http)?;
        let headers = config.header_map()?;
        Ok(Self { endpoint: Endpoint::new(config, model, http, headers) })
    }

    /// `model`, configured from the environment (see [`AnthropicConfig::from_env`]).
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        Self::new(AnthropicConfig::from_env()?, model)
    }

    /// The configuration.
    pub fn config(&self) -> &AnthropicConfig {
        self.endpoint.config()
    }

    async fn post(&self, request: &ModelRequest, stream: bool) -> Result<reqwest::Response, ModelError> {
        let config = self.endpoint.config();
        let body = request::messages_request(self.endpoint.model(), request, config.max_tokens, stream)?;
        self.endpoint.post(&config.url(), &body).await
    }
}

impl LanguageModel for AnthropicModel {
    fn provider(&self) -> &str {
        "anthropic"
    }

    fn model_id(&self) -> &str {
        self.endpoint.model()
    }

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        let response = self.post(&request, false).await?;
        Ok(response::messages_response(read_json(response).await?))
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let response = self.post(&request, true).await?;
        Ok(decode_sse(response, stream::AnthropicDecoder::new()))
    }
}
