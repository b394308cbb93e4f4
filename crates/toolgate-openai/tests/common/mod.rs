//! Helpers for the provider tests: fixtures, a mock server, collecting parts.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use serde_json::Value;
use toolgate::protocol::ModelStreamPart;
use toolgate::{ModelError, ModelStream};
use toolgate_openai::{OpenAiConfig, RetryPolicy};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A fixture file's text, from this crate's `tests/fixtures` (see the README there).
pub fn fixture(name: &str) -> String {
    toolgate_http::testing::read_fixture(env!("CARGO_MANIFEST_DIR"), name)
}

/// A fixture as an SSE body: `.sse` verbatim, `.chunks.txt` framed (with `[DONE]` if asked).
pub fn sse_fixture(name: &str, done: bool) -> String {
    let text = fixture(name);
    if name.ends_with(".sse") { text } else { toolgate_http::testing::sse_from_chunks(&text, done) }
}

/// An SSE response.
pub fn sse(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// A server answering POST `route` with `response`, every time.
pub async fn server_with(route: &str, response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path(route)).respond_with(response).mount(&server).await;
    server
}

/// A config pointing at the mock server, with deterministic ids and no retries.
pub fn config(server: &MockServer) -> OpenAiConfig {
    OpenAiConfig::new("sk-test").base_url(format!("{}/v1", server.uri())).retry(RetryPolicy::none()).id_generator(ids())
}

/// `id-0`, `id-1`, ...
pub fn ids() -> impl Fn() -> String + Send + Sync + 'static {
    let next = Arc::new(AtomicUsize::new(0));
    move || format!("id-{}", next.fetch_add(1, Ordering::SeqCst))
}

/// Every item of a model stream.
pub async fn collect(stream: ModelStream) -> Vec<Result<ModelStreamPart, ModelError>> {
    stream.collect().await
}

/// Every part of a stream that must not fail.
pub async fn parts(stream: ModelStream) -> Vec<ModelStreamPart> {
    collect(stream).await.into_iter().map(|part| part.expect("no stream error")).collect()
}

/// The JSON bodies of the requests the server received, in order.
pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|request| serde_json::from_slice(&request.body).expect("JSON request body"))
        .collect()
}

/// Shorthands for expected parts.
pub mod part {
    use toolgate::protocol::{FinishReason, ModelStreamPart, ModelToolCall, Usage};

    pub fn text_start(id: &str) -> ModelStreamPart {
        ModelStreamPart::TextStart { id: id.into() }
    }
    pub fn text(id: &str, delta: &str) -> ModelStreamPart {
        ModelStreamPart::TextDelta { id: id.into(), delta: delta.into() }
    }
    pub fn text_end(id: &str) -> ModelStreamPart {
        ModelStreamPart::TextEnd { id: id.into() }
    }
    pub fn input_start(id: &str, tool_name: &str) -> ModelStreamPart {
        ModelStreamPart::ToolInputStart { id: id.into(), tool_name: tool_name.into(), provider_executed: None }
    }
    pub fn input(id: &str, delta: &str) -> ModelStreamPart {
        ModelStreamPart::ToolInputDelta { id: id.into(), delta: delta.into() }
    }
    pub fn input_end(id: &str) -> ModelStreamPart {
        ModelStreamPart::ToolInputEnd { id: id.into() }
    }
    pub fn call(id: &str, tool_name: &str, input: &str) -> ModelStreamPart {
        ModelStreamPart::ToolCall(ModelToolCall {
            tool_call_id: id.into(),
            tool_name: tool_name.into(),
            input: input.into(),
            provider_executed: None,
            provider_metadata: None,
        })
    }
    pub fn finish(finish_reason: FinishReason, usage: Usage) -> ModelStreamPart {
        ModelStreamPart::Finish { finish_reason, usage, provider_metadata: None }
    }
    pub fn usage(input: u64, output: u64, total: u64) -> Usage {
        Usage { input_tokens: Some(input), output_tokens: Some(output), total_tokens: Some(total), ..Usage::default() }
    }
}
