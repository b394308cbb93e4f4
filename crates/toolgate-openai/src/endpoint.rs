//! What both OpenAI models hold: the config, the model id, the HTTP client,
//! and the headers built once from the config (they hold the API key, so
//! `Debug` leaves them out).

use reqwest::header::HeaderMap;
use toolgate::ModelError;
use toolgate_http::HttpClient;

use crate::OpenAiConfig;

/// One model on one OpenAI-style server.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) config: OpenAiConfig,
    pub(crate) model: String,
    http: HttpClient,
    headers: HeaderMap,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("config", &self.config)
            .field("model", &self.model)
            .field("http", &self.http)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// `model` reached with `config`; fails on a header the config cannot send.
    pub(crate) fn new(config: OpenAiConfig, model: String) -> Result<Self, ModelError> {
        let http = HttpClient::new(&config.http)?;
        let headers = config.header_map()?;
        Ok(Self { config, model, http, headers })
    }

    /// POSTs `body` as JSON to `path` under the config's base URL.
    pub(crate) async fn post<B: serde::Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<reqwest::Response, ModelError> {
        self.http.post_json(&self.config.url(path), &self.headers, body).await
    }
}
