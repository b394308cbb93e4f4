//! HTTP to any AI SDK v6 UI-message-stream endpoint: `POST <api>` with the
//! `useChat` body, and `GET <api>/<chat id>/stream` to resume (204: nothing
//! to resume), as `DefaultChatTransport` does.

use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::error::ClientError;
use crate::transport::sse::chunk_stream;
use crate::transport::{ChatTransport, ChunkStream, TransportRequest};

/// A transport to a chat endpoint such as `http://127.0.0.1:3000/api/chat`.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    api: String,
    client: reqwest::Client,
    headers: HeaderMap,
    body: serde_json::Map<String, Value>,
}

impl HttpTransport {
    /// A transport to this endpoint URL.
    pub fn new(api: impl Into<String>) -> Self {
        Self::with_client(api, reqwest::Client::new())
    }

    /// A transport using this `reqwest` client (timeouts, proxies, TLS).
    pub fn with_client(api: impl Into<String>, client: reqwest::Client) -> Self {
        Self { api: api.into(), client, headers: HeaderMap::new(), body: serde_json::Map::new() }
    }

    /// Sends this header with every request (e.g. `authorization`).
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.insert(name, value);
        self
    }

    /// Sends a bearer token with every request.
    pub fn bearer_token(self, token: &str) -> Result<Self, ClientError> {
        let value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| ClientError::Transport("the token is not a valid header value".into()))?;
        Ok(self.header(reqwest::header::AUTHORIZATION, value))
    }

    /// Adds this field to every request body (the AI SDK's `body` option).
    pub fn body_field(mut self, name: impl Into<String>, value: Value) -> Self {
        self.body.insert(name.into(), value);
        self
    }

    async fn post(&self, request: TransportRequest) -> Result<ChunkStream, ClientError> {
        let mut body = self.body.clone();
        if let Value::Object(fields) = request.body() {
            body.extend(fields);
        }
        let response = self
            .client
            .post(&self.api)
            .headers(self.headers.clone())
            .json(&body)
            .send()
            .await
            .map_err(|error| ClientError::Transport(format!("POST {}: {error}", self.api)))?;
        Ok(chunk_stream(accepted(response).await?.bytes_stream()))
    }

    async fn get_stream(&self, chat_id: &str) -> Result<Option<ChunkStream>, ClientError> {
        let mut url = reqwest::Url::parse(&self.api)
            .map_err(|error| ClientError::Transport(format!("invalid endpoint `{}`: {error}", self.api)))?;
        url.path_segments_mut()
            .map_err(|()| ClientError::Transport(format!("invalid endpoint `{}`", self.api)))?
            .pop_if_empty()
            .extend([chat_id, "stream"]);
        let response = self
            .client
            .get(url.clone())
            .headers(self.headers.clone())
            .send()
            .await
            .map_err(|error| ClientError::Transport(format!("GET {url}: {error}")))?;
        if response.status() == reqwest::StatusCode::NO_CONTENT || response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        Ok(Some(chunk_stream(accepted(response).await?.bytes_stream())))
    }
}

impl ChatTransport for HttpTransport {
    fn send(&self, request: TransportRequest) -> BoxFuture<'_, Result<ChunkStream, ClientError>> {
        Box::pin(self.post(request))
    }

    fn reconnect(&self, chat_id: &str) -> BoxFuture<'_, Result<Option<ChunkStream>, ClientError>> {
        let chat_id = chat_id.to_owned();
        Box::pin(async move { self.get_stream(&chat_id).await })
    }
}

/// The response if its status is a success, else its error as [`ClientError::Rejected`].
pub(crate) async fn accepted(response: reqwest::Response) -> Result<reqwest::Response, ClientError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let text = response.text().await.unwrap_or_default();
    // toolgate answers `{"error": {"code", "message"}}`; other servers send text.
    let parsed: Option<Value> = serde_json::from_str(&text).ok();
    let error = parsed.as_ref().and_then(|value| value.get("error"));
    let field = |name: &str| error.and_then(|error| error.get(name)).and_then(Value::as_str).map(str::to_owned);
    Err(ClientError::Rejected {
        status: Some(status.as_u16()),
        code: field("code").unwrap_or_else(|| "http_error".into()),
        message: field("message").unwrap_or_else(|| if text.is_empty() { status.to_string() } else { text }),
    })
}
