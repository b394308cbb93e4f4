//! Errors a model call can end with.

use std::time::Duration;

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The provider rejected the credentials.
    #[error("authentication failed: {message}")]
    Authentication {
        /// The provider's message.
        message: String,
    },
    /// The provider rejected the request (HTTP 4xx other than 401/403/429).
    #[error("the provider rejected the request (HTTP {status}): {message}")]
    BadRequest {
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// Too many requests, after retries.
    #[error("rate limited: {message}")]
    RateLimited {
        /// The provider's message.
        message: String,
        /// How long the provider asked to wait.
        retry_after: Option<Duration>,
    },
    /// The provider failed (HTTP 5xx), after retries.
    #[error("the provider failed (HTTP {status}): {message}")]
    Server {
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The connection failed before a response arrived.
    #[error("could not reach the provider: {message}")]
    Transport {
        /// What failed.
        message: String,
    },
    /// The response stream broke off part way.
    #[error("the model stream was cut off: {message}")]
    StreamInterrupted {
        /// What happened.
        message: String,
    },
    /// The provider answered with something that is not its documented format.
    #[error("invalid response from the model: {message}")]
    InvalidResponse {
        /// What is wrong.
        message: String,
    },
    /// The prompt does not fit the model's context.
    #[error("the prompt is too long for the model: {message}")]
    ContextTooLong {
        /// Details.
        message: String,
    },
    /// The model is misconfigured (missing key, unknown model, bad script).
    #[error("model configuration error: {message}")]
    Configuration {
        /// What is wrong.
        message: String,
    },
}
