//! Retries before the first byte, typed HTTP errors, and a stream cut after a
//! tool call (the approval request survives in the engine's error).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use futures::StreamExt;
use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate::protocol::{AssistantPart, ModelRequest};
use toolgate::{EngineError, LanguageModel, ModelError, ModelMessage, TextRequest, stream_text};
use toolgate_openai::{OpenAiChatModel, OpenAiConfig, RetryPolicy};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

const OK_STREAM: &str = "chat-get-weather-empty-continuation-ids.chunks.txt";

async fn model_with(server: &MockServer, retries: u32) -> OpenAiChatModel {
    OpenAiChatModel::new(config(server).retry(RetryPolicy::immediate(retries)), "m").unwrap()
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.unwrap().len()
}

fn error_body(message: &str) -> serde_json::Value {
    json!({"error": {"message": message, "type": "test_error", "code": null}})
}

#[tokio::test]
async fn a_429_then_a_200_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after-ms", "5").set_body_json(error_body("slow")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST")).respond_with(sse(sse_fixture(OK_STREAM, true))).mount(&server).await;
    let model = model_with(&server, 2).await;
    let parts = parts(model.stream(ModelRequest::default()).await.unwrap()).await;
    assert_eq!(parts.len(), 6);
    assert_eq!(requests(&server).await, 2);
}

#[tokio::test]
async fn repeated_5xx_give_a_server_error_after_the_retry_budget() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_json(error_body("overloaded")))
        .mount(&server)
        .await;
    let model = model_with(&server, 3).await;
    let error = model.stream(ModelRequest::default()).await.err().unwrap();
    assert_eq!(error, ModelError::Server { status: 503, message: "overloaded".into() });
    assert_eq!(requests(&server).await, 4);
}

#[tokio::test]
async fn auth_and_bad_requests_fail_at_once_with_the_provider_message() {
    let cases = [
        (401, ModelError::Authentication { message: "Incorrect API key provided".into() }),
        (400, ModelError::BadRequest { status: 400, message: "Incorrect API key provided".into() }),
    ];
    for (status, expected) in cases {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(status).set_body_json(error_body("Incorrect API key provided")))
            .mount(&server)
            .await;
        let model = model_with(&server, 3).await;
        assert_eq!(model.stream(ModelRequest::default()).await.err().unwrap(), expected);
        assert_eq!(requests(&server).await, 1, "no retry for {status}");
    }
}

#[tokio::test]
async fn a_retry_after_beyond_the_limit_is_not_waited_for() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429).insert_header("retry-after", "3600").set_body_json(error_body("quota")),
        )
        .mount(&server)
        .await;
    let model = model_with(&server, 3).await;
    let error = model.stream(ModelRequest::default()).await.err().unwrap();
    assert_eq!(
        error,
        ModelError::RateLimited { message: "quota".into(), retry_after: Some(Duration::from_secs(3600)) }
    );
    assert_eq!(requests(&server).await, 1);
}

#[tokio::test]
async fn connection_errors_are_retried_then_reported_as_transport() {
    // A loopback server that accepts each connection and drops it at once.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        for connection in listener.incoming() {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(connection);
        }
    });
    let config = OpenAiConfig::new("k").base_url(format!("http://{address}/v1")).retry(RetryPolicy::immediate(2));
    let model = OpenAiChatModel::new(config, "m").unwrap();
    let error = model.stream(ModelRequest::default()).await.err().unwrap();
    assert!(matches!(error, ModelError::Transport { .. }), "{error:?}");
    assert_eq!(accepted.load(Ordering::SeqCst), 3, "one attempt and two retries");
}

#[tokio::test]
async fn a_stream_cut_after_a_tool_call_keeps_the_approval_request() {
    let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
        "function": {"name": "delete_file", "arguments": "{\"path\":\"notes.txt\"}"}}]}, "finish_reason": null}]});
    let base = toolgate_http::testing::serve_cut_stream(format!("data: {chunk}\n\n")).await;
    let config = OpenAiConfig::new("k").base_url(format!("{base}/v1")).retry(RetryPolicy::none());
    let model = OpenAiChatModel::new(config, "m").unwrap();
    let request = TextRequest::new(vec![ModelMessage::user("delete notes.txt")]).toolkit(toolgate::demo::toolkit());
    let mut stream = stream_text(&model, request).await.unwrap();
    let mut types = Vec::new();
    while let Some(part) = stream.next().await {
        types.push(serde_json::to_value(part).unwrap()["type"].as_str().unwrap().to_owned());
    }
    assert!(types.contains(&"tool-approval-request".to_owned()), "{types:?}");
    let Err(EngineError::Model { source, response_messages }) = stream.finish().await else {
        panic!("the cut stream must fail the call");
    };
    assert!(matches!(source, ModelError::StreamInterrupted { .. }), "{source:?}");
    let ModelMessage::Assistant(assistant) = &response_messages[0] else { panic!("{response_messages:?}") };
    let parts = assistant.part_slice();
    assert!(matches!(&parts[0], AssistantPart::ToolCall(call)
        if call.tool_call_id == "call_1" && call.input == json!({"path": "notes.txt"})));
    assert!(matches!(&parts[1], AssistantPart::ToolApprovalRequest(request) if request.tool_call_id == "call_1"));
}
