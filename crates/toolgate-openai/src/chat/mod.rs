//! [`OpenAiChatModel`]: the Chat Completions API (`POST {base}/chat/completions`),
//! for OpenAI and for OpenAI-compatible servers.

mod request;
mod response;
mod stream;
pub mod wire;

use toolgate_http::{Endpoint, HttpClient, decode_sse, read_json};
use toolgate_model::{LanguageModel, ModelError, ModelStream};
use toolgate_protocol::{ModelRequest, ModelResponse};

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
#[derive(Clone, Debug)]
pub struct OpenAiChatModel {
    endpoint: Endpoint<OpenAiConfig>,
}

impl OpenAiChatModel {
    /// A model reached with `config`; fails on a header the config cannot send.
    pub fn new(config: OpenAiConfig, model: impl Into<String>) -> Result<Self, ModelError> {
        let http = HttpClient::new(&config.http)?;
        let headers = config.header_map()?;
        Ok(Self { endpoint: Endpoint::new(config, model, http, headers) })
    }

    /// OpenAI's `model`, configured from the environment (see [`OpenAiConfig::from_env`]).
    pub fn from_env(model: impl Into<String>) -> Result<Self, ModelError> {
        Self::new(OpenAiConfig::from_env()?, model)
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        self.endpoint.config()
    }

    async fn post(&self, request: &ModelRequest, stream: bool) -> Result<reqwest::Response, ModelError> {
        let body = chat_request(self.endpoint.config(), self.endpoint.model(), request, stream)?;
        self.endpoint.post(&self.endpoint.config().url("chat/completions"), &body).await
    }
}

impl LanguageModel for OpenAiChatModel {
    fn provider(&self) -> &str {
        &self.endpoint.config().provider_name
    }

    fn model_id(&self) -> &str {
        self.endpoint.model()
    }

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        let response = self.post(&request, false).await?;
        chat_response(read_json(response).await?, &self.endpoint.config().id_generator)
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let response = self.post(&request, true).await?;
        Ok(decode_sse(response, ChatDecoder::new(self.endpoint.config().id_generator.clone())))
    }
}
