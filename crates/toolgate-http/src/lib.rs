//! Shared HTTP plumbing for toolgate's model providers.
//!
//! - [`HttpClient`]: a `reqwest` client that POSTs JSON and retries with
//!   exponential backoff and jitter (honouring `retry-after`) on 429, 5xx and
//!   connection failures, but only **before the first byte** of a successful
//!   response: once a 2xx response has arrived, nothing is retried.
//! - [`error`]: maps HTTP failures and provider error payloads to the typed
//!   [`toolgate_model::ModelError`] (401/403 authentication, other 4xx bad request
//!   with the provider's message, 429 rate limited, 5xx server).
//! - [`Endpoint`]: a provider model's config, model id, client and headers.
//! - [`decode_sse`]: turns a `text/event-stream` body into a
//!   [`toolgate_model::ModelStream`] through a provider's [`StreamDecoder`]; a body
//!   that breaks off mid-way ends it with [`ModelError::StreamInterrupted`].

mod client;
mod decode;
mod endpoint;
pub mod error;
mod retry;
mod sse;
#[cfg(feature = "test-util")]
pub mod testing;

pub use client::{HttpClient, HttpOptions, header_map};
pub use decode::{Parts, StreamDecoder, decode_sse};
pub use endpoint::Endpoint;
pub use retry::RetryPolicy;
pub use sse::SseEvent;
pub(crate) use sse::sse_events;
pub use toolgate_model::ModelError;

/// Reads a 2xx response body as JSON; a body that does not decode is an
/// [`ModelError::InvalidResponse`].
pub async fn read_json<T: serde::de::DeserializeOwned>(response: reqwest::Response) -> Result<T, ModelError> {
    let bytes = response.bytes().await.map_err(|error| ModelError::StreamInterrupted {
        message: format!("reading the response body failed: {error}"),
    })?;
    serde_json::from_slice(&bytes).map_err(|error| ModelError::InvalidResponse {
        message: format!("the response body is not the expected JSON: {error}"),
    })
}
