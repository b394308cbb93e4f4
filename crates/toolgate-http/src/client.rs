//! The HTTP client providers share: JSON POSTs with retries before the first byte.

use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use toolgate_model::ModelError;

use crate::RetryPolicy;
use crate::error::error_from_status;

/// How the client connects and retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// Retries before the first byte (see [`RetryPolicy`]).
    pub retry: RetryPolicy,
    /// Longest wait for a connection.
    pub connect_timeout: Duration,
    /// Longest wait between two reads of a response (a stalled stream fails after it).
    pub read_timeout: Duration,
    /// Longest time for a whole request including its body; `None` means no limit
    /// (streams may legitimately run for minutes).
    pub timeout: Option<Duration>,
}

impl Default for HttpOptions {
    /// Default retries, 10 s to connect, 5 minutes between reads, no overall limit.
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
            timeout: None,
        }
    }
}

/// Headers from `(name, value)` pairs; a later pair replaces an earlier one of
/// the same name. A name or value that is not a valid header is a
/// [`ModelError::Configuration`] naming the header.
pub fn header_map<N, V>(pairs: impl IntoIterator<Item = (N, V)>) -> Result<HeaderMap, ModelError>
where
    N: AsRef<str>,
    V: AsRef<str>,
{
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        let (name, value) = (name.as_ref(), value.as_ref());
        let invalid = || ModelError::Configuration { message: format!("invalid header {name}") };
        let value = HeaderValue::from_str(value).map_err(|_| invalid())?;
        headers.insert(HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?, value);
    }
    Ok(headers)
}

/// A `reqwest` client with a retry policy.
#[derive(Debug, Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    retry: RetryPolicy,
}

impl HttpClient {
    /// Builds a client; fails only when the TLS backend cannot be set up.
    pub fn new(options: &HttpOptions) -> Result<Self, ModelError> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .read_timeout(options.read_timeout)
            .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION")));
        if let Some(timeout) = options.timeout {
            builder = builder.timeout(timeout);
        }
        let client = builder.build().map_err(|error| ModelError::Configuration {
            message: format!("could not build the HTTP client: {error}"),
        })?;
        Ok(Self { client, retry: options.retry })
    }

    /// POSTs `body` as JSON with `headers` and returns the first 2xx response.
    ///
    /// Retries on 429, 5xx and connection errors per the policy, then fails
    /// with the typed error of the last attempt; other statuses fail at once
    /// (see [`crate::error`]). The body is serialized once.
    pub async fn post_json<B: serde::Serialize + ?Sized>(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &B,
    ) -> Result<reqwest::Response, ModelError> {
        let body = serde_json::to_vec(body).map_err(|error| ModelError::Configuration {
            message: format!("could not serialize the request: {error}"),
        })?;
        let mut retry = 0;
        loop {
            let request = self
                .client
                .post(url)
                .headers(headers.clone())
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .header(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"))
                .body(body.clone());
            let (error, retryable, retry_after) = match request.send().await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status();
                    let response_headers = response.headers().clone();
                    let bytes = response.bytes().await.unwrap_or_default();
                    let error = error_from_status(status, &response_headers, &bytes);
                    let retryable = status.as_u16() == 429 || status.is_server_error();
                    (error, retryable, crate::error::retry_after(&response_headers))
                }
                Err(error) => {
                    let retryable = !error.is_builder();
                    (ModelError::Transport { message: toolgate_model::error_chain(&error) }, retryable, None)
                }
            };
            if !retryable || retry >= self.retry.max_retries {
                return Err(error);
            }
            let Some(wait) = self.retry.wait(retry, retry_after) else {
                return Err(error);
            };
            tracing::warn!(%error, attempt = retry + 1, wait_ms = wait.as_millis() as u64, "model request failed; retrying");
            tokio::time::sleep(wait).await;
            retry += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn header_map_keeps_the_last_value_and_names_a_bad_header() {
        let headers = header_map([("x-a", "1"), ("X-A", "2"), ("x-b", "3")]).unwrap();
        assert_eq!(headers.len(), 2);
        assert_eq!(headers["x-a"], "2");
        assert_eq!(headers["x-b"], "3");
        assert_eq!(
            header_map([("bad name", "1")]).unwrap_err(),
            ModelError::Configuration { message: "invalid header bad name".into() }
        );
        assert_eq!(
            header_map([("x-c", "line\nbreak")]).unwrap_err(),
            ModelError::Configuration { message: "invalid header x-c".into() }
        );
    }
}
