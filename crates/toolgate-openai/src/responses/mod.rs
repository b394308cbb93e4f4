//! [`OpenAiResponsesModel`]: the Responses API (`POST {base}/responses`),
//! including hosted MCP tools whose approvals OpenAI asks for.
//!
//! Approval round trip with a hosted MCP server:
//! 1. The toolkit holds [`McpServer::tool`] (a provider tool `openai.mcp`).
//! 2. OpenAI answers with `mcp_approval_request{id: "mcpr_…"}`: the model
//!    emits a provider-executed `tool-call` (`mcp.<name>`, a new call id,
//!    `providerOptions.openai.approvalRequestId`) and a
//!    `tool-approval-request{approvalId: "mcpr_…"}`. The engine stops there.
//! 3. The client appends a `tool-approval-response{approvalId, approved,
//!    providerExecuted: true}`; the engine forwards it untouched, and this
//!    model sends `item_reference` (when stored) + `mcp_approval_response`.
//! 4. OpenAI runs the call: its `mcp_call{approval_request_id}` is reported
//!    under the call id from step 2, with the output as a provider result.
//!
//! Provider options (`providerOptions.openai`): `store` (bool; OpenAI's
//! default is `true`), `previousResponseId` (string; continue a stored
//! response; send only the messages after it), `parallelToolCalls` (bool),
//! `strictJsonSchema` (bool), `instructions`, `user`, `reasoningEffort`,
//! `reasoningSummary` (strings).

mod items;
pub mod mcp;
mod request;
mod response;
mod stream;
pub mod wire;

use toolgate_http::{Endpoint, HttpClient, decode_sse, read_json};
use toolgate_model::{LanguageModel, ModelError, ModelStream};
use toolgate_protocol::{ModelRequest, ModelResponse};

pub use items::ApprovalAliases;
pub use mcp::{AllowedTools, ApprovalMode, MCP_TOOL_ID, McpServer, RequireApproval, ToolFilter};
pub use request::{approval_aliases, responses_request};
pub use response::responses_response;
pub use stream::ResponsesDecoder;

use crate::OpenAiConfig;

/// A Responses API model.
///
/// ```no_run
/// use toolgate_openai::OpenAiResponsesModel;
/// let model = OpenAiResponsesModel::from_env("gpt-5-mini")?;
/// # Ok::<(), toolgate::ModelError>(())
/// ```
#[derive(Clone, Debug)]
pub struct OpenAiResponsesModel {
    endpoint: Endpoint<OpenAiConfig>,
}

impl OpenAiResponsesModel {
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
        let body = responses_request(self.endpoint.config(), self.endpoint.model(), request, stream)?;
        self.endpoint.post(&self.endpoint.config().url("responses"), &body).await
    }
}

impl LanguageModel for OpenAiResponsesModel {
    fn provider(&self) -> &str {
        &self.endpoint.config().provider_name
    }

    fn model_id(&self) -> &str {
        self.endpoint.model()
    }

    async fn generate(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        let aliases = approval_aliases(&request.prompt);
        let response = self.post(&request, false).await?;
        responses_response(read_json(response).await?, &self.endpoint.config().id_generator, aliases)
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let aliases = approval_aliases(&request.prompt);
        let response = self.post(&request, true).await?;
        Ok(decode_sse(response, ResponsesDecoder::new(self.endpoint.config().id_generator.clone(), aliases)))
    }
}
