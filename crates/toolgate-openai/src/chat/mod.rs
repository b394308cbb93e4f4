//! [`OpenAiChatModel`]: the Chat Completions API (`POST {base}/chat/completions`),
//! for OpenAI and for OpenAI-compatible servers.

mod request;
mod response;
mod stream;
pub mod wire;

use reqwest::header::HeaderMap;
use toolgate::protocol::{ModelRequest, ModelResponse};
use toolgate::{LanguageModel, ModelError, ModelStream};
use toolgate_http::{HttpClient, decode_sse, read_json};

pub use request::chat_request;
pub use response::chat_response;
pub use stream::ChatDecoder;

use crate::OpenAiConfig;

/// A Chat Completions model.
///
/// Tools become function tools; `tool_choice` maps to
/// `auto | none | required | {function}`. Approvals are toolgate's: the
/// engine gates calls itself, and denied calls reach the model as `tool`
/// messages saying so. Provider options read (under the config's provider
/// name, then `openai`): `parallelToolCalls` (bool), `user` (string),
/// `reasoningEffort` (string).
///
/// ```no_run
/// use toolgate_openai::{OpenAiChatModel, OpenAiConfig};
/// let openai = OpenAiChatModel::from_env("gpt-4o-mini")?;
/// let local = OpenAiChatModel::new(OpenAiConfig::compatible("http://127.0.0.1:8080/v1"), "qwen2.5")?;
/// # Ok::<(), toolgate::ModelError>(())
/// ```
#[derive(Clone)]
pub struct OpenAiChatModel {
    config: OpenAiConfig,
    model: String,
    http: HttpClient,
    /// Built once from the config; holds the API key, so not in `Debug`.
    headers: HeaderMap,
}

impl std::fmt::Debug for OpenAiChatModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiChatModel")
            .field("config", &self.config)
            .field("model", &self.model)
            .field("http", &self.http)
            .finish_non_exhaustive()
    }
}

impl OpenAiChatModel {
    /// A model reached with `config`; fails on a header the config cannot send.
    pub fn new(config: OpenAiConfig, model: impl Into<String>) -> Result<Self, ModelError> {
        let http = HttpClient::new(&config.http)?;
        let headers = config.header_map()?;
        Ok(Self { config, model: model.into(), http, headers })
    }

    /// OpenAI's `model`, configured from the environment (see [`OpenAiConfig::from_env`]).
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        Self::new(OpenAiConfig::from_env()?, model)
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    async fn post(&self, request: &ModelRequest, stream: bool) -> Result<reqwest::Response, ModelError> {
        let body = chat_request(&self.config, &self.model, request, stream)?;
        self.http.post_json(&self.config.url("chat/completions"), &self.headers, &body).await
    }
}

impl LanguageModel for OpenAiChatModel {
    fn provider(&self) -> &str {
        &self.config.provider_name
    }

    fn model_id(&self) -> &str {
        &self.model
    }

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        let response = self.post(&request, false).await?;
        chat_response(read_json(response).await?, &self.config.id_generator)
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let response = self.post(&request, true).await?;
        Ok(decode_sse(response, ChatDecoder::new(self.config.id_generator.clone())))
    }
}
