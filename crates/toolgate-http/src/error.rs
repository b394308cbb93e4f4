//! Mapping HTTP failures and provider error payloads to [`ModelError`].
//!
//! | failure | error |
//! |---|---|
//! | 401, 403 | [`ModelError::Authentication`] |
//! | 429 | [`ModelError::RateLimited`] (with `retry-after`) |
//! | other 4xx | [`ModelError::BadRequest`] with the provider's message, or [`ModelError::ContextTooLong`] when the provider says the prompt is too long |
//! | 5xx (and Anthropic's 529) | [`ModelError::Server`] |
//! | anything else that is not 2xx | [`ModelError::InvalidResponse`] |
//!
//! The provider's message is taken from the usual JSON error envelopes
//! (`{"error":{"message","code","type"}}`, `{"error":"..."}`, `{"message"}`,
//! `{"detail"}`); a body that is none of these is quoted, shortened.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value;
use toolgate_model::ModelError;

/// Longest body excerpt quoted in an error message.
const MAX_QUOTED_BODY: usize = 500;

/// A provider's error message and its machine-readable code or type, if any.
struct ProviderMessage {
    /// The human-readable message.
    message: String,
    /// `error.code` or `error.type`, e.g. `context_length_exceeded`, `overloaded_error`.
    code: Option<String>,
}

/// The error for a non-2xx response with this status, headers and body.
pub fn error_from_status(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> ModelError {
    let ProviderMessage { message, code } = provider_message(body);
    let message =
        if message.is_empty() { status.canonical_reason().unwrap_or("no message").to_owned() } else { message };
    match status.as_u16() {
        401 | 403 => ModelError::Authentication { message },
        429 => ModelError::RateLimited { message, retry_after: retry_after(headers) },
        400..=499 if says_context_too_long(&message, code.as_deref()) => ModelError::ContextTooLong { message },
        status @ 400..=499 => ModelError::BadRequest { status, message },
        status @ 500..=599 => ModelError::Server { status, message },
        _ => ModelError::InvalidResponse { message: format!("unexpected HTTP status {status}: {message}") },
    }
}

/// The error for an error event inside a stream (OpenAI `error` /
/// `response.failed`, Anthropic `error`), classified by its code or type.
pub fn error_from_event(code: Option<&str>, message: impl Into<String>) -> ModelError {
    let message = message.into();
    let message = if message.is_empty() { code.unwrap_or("unknown error").to_owned() } else { message };
    let code_lower = code.map(str::to_ascii_lowercase).unwrap_or_default();
    if says_context_too_long(&message, code) {
        return ModelError::ContextTooLong { message };
    }
    match code_lower.as_str() {
        "authentication_error" | "permission_error" | "invalid_api_key" | "unauthorized" => {
            ModelError::Authentication { message }
        }
        "rate_limit_error" | "rate_limit_exceeded" | "insufficient_quota" => {
            ModelError::RateLimited { message, retry_after: None }
        }
        "invalid_request_error" | "invalid_prompt" | "not_found_error" | "request_too_large" => {
            ModelError::BadRequest { status: 400, message }
        }
        "overloaded_error" => ModelError::Server { status: 529, message },
        _ => ModelError::Server { status: 500, message },
    }
}

/// Extracts the message and code from an error body.
fn provider_message(body: &[u8]) -> ProviderMessage {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        let text = String::from_utf8_lossy(body);
        return ProviderMessage { message: shorten(text.trim()), code: None };
    };
    let envelope = value.get("error").unwrap_or(&value);
    let text_of = |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let message = match envelope {
        Value::String(message) => Some(message.clone()),
        _ => text_of(envelope, "message").or_else(|| text_of(&value, "message")).or_else(|| text_of(&value, "detail")),
    };
    let code = text_of(envelope, "code").or_else(|| text_of(envelope, "type"));
    ProviderMessage { message: message.unwrap_or_else(|| shorten(&value.to_string())), code }
}

/// The wait a 429 or 503 asks for: `retry-after-ms` (OpenAI) or `retry-after` in seconds.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::trim);
    if let Some(millis) = header("retry-after-ms").and_then(|value| value.parse::<f64>().ok())
        && millis.is_finite()
        && millis >= 0.0
    {
        return Some(Duration::from_secs_f64(millis / 1000.0));
    }
    header("retry-after")
        .and_then(|value| value.parse::<f64>().ok())
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
        .map(Duration::from_secs_f64)
}

fn says_context_too_long(message: &str, code: Option<&str>) -> bool {
    let lower = message.to_ascii_lowercase();
    code == Some("context_length_exceeded")
        || lower.contains("maximum context length")
        || lower.contains("prompt is too long")
        || lower.contains("context window")
        || lower.contains("exceeds the context")
}

fn shorten(text: &str) -> String {
    if text.len() <= MAX_QUOTED_BODY {
        return text.to_owned();
    }
    let mut end = MAX_QUOTED_BODY;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use reqwest::header::HeaderValue;

    fn status_error(status: u16, body: &str) -> ModelError {
        error_from_status(StatusCode::from_u16(status).unwrap(), &HeaderMap::new(), body.as_bytes())
    }

    #[test]
    fn statuses_map_to_typed_errors_with_the_provider_message() {
        let openai =
            r#"{"error":{"message":"Invalid 'tools[0].function.name'","type":"invalid_request_error","code":null}}"#;
        assert_eq!(
            status_error(400, openai),
            ModelError::BadRequest { status: 400, message: "Invalid 'tools[0].function.name'".into() }
        );
        let anthropic = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
        assert_eq!(status_error(401, anthropic), ModelError::Authentication { message: "invalid x-api-key".into() });
        assert_eq!(status_error(403, "nope"), ModelError::Authentication { message: "nope".into() });
        assert_eq!(
            status_error(529, r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#),
            ModelError::Server { status: 529, message: "Overloaded".into() }
        );
        assert_eq!(status_error(502, ""), ModelError::Server { status: 502, message: "Bad Gateway".into() });
        assert_eq!(
            status_error(400, r#"{"error":{"message":"too many tokens","code":"context_length_exceeded"}}"#),
            ModelError::ContextTooLong { message: "too many tokens".into() }
        );
        assert_eq!(
            status_error(422, r#"{"detail":"bad field"}"#),
            ModelError::BadRequest { status: 422, message: "bad field".into() }
        );
        assert_eq!(
            status_error(404, r#"{"error":"model not found"}"#),
            ModelError::BadRequest { status: 404, message: "model not found".into() }
        );
    }

    #[test]
    fn rate_limits_carry_retry_after() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("2"));
        let error = error_from_status(StatusCode::TOO_MANY_REQUESTS, &headers, b"{}");
        assert_eq!(error, ModelError::RateLimited { message: "{}".into(), retry_after: Some(Duration::from_secs(2)) });
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
    }

    #[test]
    fn stream_error_events_are_classified() {
        assert_eq!(
            error_from_event(Some("overloaded_error"), "Overloaded"),
            ModelError::Server { status: 529, message: "Overloaded".into() }
        );
        assert_eq!(
            error_from_event(Some("rate_limit_exceeded"), "slow down"),
            ModelError::RateLimited { message: "slow down".into(), retry_after: None }
        );
        assert_eq!(error_from_event(None, ""), ModelError::Server { status: 500, message: "unknown error".into() });
    }
}
