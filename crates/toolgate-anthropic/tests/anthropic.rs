//! Anthropic Messages: fixture streams (`tests/fixtures`) replayed part by
//! part, request bodies, the non-streamed form, errors and a cut stream.

use futures::StreamExt;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::protocol::{
    AssistantPart, FinishReason, ModelContent, ModelRequest, ModelStreamPart, ModelToolCall, ToolChoice, ToolSpec,
    Usage, parse_messages,
};
use toolgate::{EngineError, LanguageModel, ModelError, ModelMessage, TextRequest, stream_text};
use toolgate_anthropic::{AnthropicConfig, AnthropicModel, RetryPolicy};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn fixture_sse(name: &str) -> String {
    let text = toolgate_http::testing::read_fixture(env!("CARGO_MANIFEST_DIR"), name);
    toolgate_http::testing::sse_from_chunks(&text, false)
}

async fn server_with(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/messages")).respond_with(response).mount(&server).await;
    server
}

fn sse(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

fn model(server: &MockServer, retries: u32) -> AnthropicModel {
    let config = AnthropicConfig::new("sk-ant-test")
        .base_url(format!("{}/v1", server.uri()))
        .retry(RetryPolicy::immediate(retries));
    AnthropicModel::new(config, "claude-haiku-4-5").unwrap()
}

async fn items(model: &AnthropicModel, request: ModelRequest) -> Vec<Result<ModelStreamPart, ModelError>> {
    model.stream(request).await.unwrap().collect().await
}

async fn parts(model: &AnthropicModel) -> Vec<ModelStreamPart> {
    items(model, ModelRequest::default()).await.into_iter().map(Result::unwrap).collect()
}

fn text_start(id: &str) -> ModelStreamPart {
    ModelStreamPart::TextStart { id: id.into() }
}
fn text(id: &str, delta: &str) -> ModelStreamPart {
    ModelStreamPart::TextDelta { id: id.into(), delta: delta.into() }
}
fn text_end(id: &str) -> ModelStreamPart {
    ModelStreamPart::TextEnd { id: id.into() }
}
fn call(id: &str, name: &str, input: &str) -> ModelStreamPart {
    ModelStreamPart::ToolCall(ModelToolCall {
        tool_call_id: id.into(),
        tool_name: name.into(),
        input: input.into(),
        provider_executed: None,
        provider_metadata: None,
    })
}
fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: Some(input),
        output_tokens: Some(output),
        total_tokens: Some(input + output),
        cached_input_tokens: Some(0),
        reasoning_tokens: None,
    }
}

#[tokio::test]
async fn tool_use_with_pings_and_an_empty_first_fragment() {
    let server = server_with(sse(fixture_sse("messages-text-ping-tool-use.chunks.txt"))).await;
    let id = "toolu_tg01GetWeatherLyon";
    let first = r#"{"city": "Lyon", "unit""#;
    let rest = r#": "celsius"}"#;
    assert_eq!(
        parts(&model(&server, 0)).await,
        vec![
            text_start("0"),
            text("0", "Let me check"),
            text("0", " the weather in Lyon."),
            text_end("0"),
            ModelStreamPart::ToolInputStart { id: id.into(), tool_name: "get_weather".into(), provider_executed: None },
            ModelStreamPart::ToolInputDelta { id: id.into(), delta: first.into() },
            ModelStreamPart::ToolInputDelta { id: id.into(), delta: rest.into() },
            ModelStreamPart::ToolInputEnd { id: id.into() },
            call(id, "get_weather", &format!("{first}{rest}")),
            ModelStreamPart::Finish {
                finish_reason: FinishReason::ToolCalls,
                usage: usage(612, 41),
                provider_metadata: None
            },
        ]
    );
}

#[tokio::test]
async fn a_tool_without_arguments_gets_an_empty_object() {
    let server = server_with(sse(fixture_sse("messages-tool-no-args.chunks.txt"))).await;
    let id = "toolu_tg02ListTrash";
    assert_eq!(
        parts(&model(&server, 0)).await,
        vec![
            text_start("0"),
            text("0", "I'll list what is in"),
            text("0", " the trash."),
            text_end("0"),
            ModelStreamPart::ToolInputStart { id: id.into(), tool_name: "list_trash".into(), provider_executed: None },
            ModelStreamPart::ToolInputEnd { id: id.into() },
            call(id, "list_trash", "{}"),
            ModelStreamPart::Finish {
                finish_reason: FinishReason::ToolCalls,
                usage: usage(538, 39),
                provider_metadata: None
            },
        ]
    );
}

#[tokio::test]
async fn request_body_has_system_tool_results_first_and_denials_as_errors() {
    let server = server_with(sse(fixture_sse("messages-tool-no-args.chunks.txt"))).await;
    let prompt = parse_messages(json!([
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "delete a.txt and b.txt"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Deleting."},
            {"type": "tool-call", "toolCallId": "toolu_a", "toolName": "delete_file", "input": {"path": "a.txt"}},
            {"type": "tool-call", "toolCallId": "toolu_b", "toolName": "delete_file", "input": {"path": "b.txt"}},
            {"type": "tool-call", "toolCallId": "toolu_c", "toolName": "delete_file", "input": {"path": "c.txt"}}
        ]},
        {"role": "user", "content": "also c"},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "toolu_a", "toolName": "delete_file", "output": {"type": "json", "value": {"deleted": "a.txt"}}},
            {"type": "tool-result", "toolCallId": "toolu_b", "toolName": "delete_file", "output": {"type": "execution-denied", "reason": "keep b"}},
            {"type": "tool-result", "toolCallId": "toolu_c", "toolName": "delete_file", "output": {"type": "execution-denied"}}
        ]},
        {"role": "user", "content": "thanks"}
    ]))
    .unwrap();
    let request = ModelRequest {
        prompt: prompt.into(),
        tools: vec![ToolSpec::Function {
            name: "delete_file".into(),
            description: Some("Delete a file".into()),
            input_schema: json!({"type": "object"}),
        }],
        tool_choice: ToolChoice::Required,
        provider_options: json!({"anthropic": {"disableParallelToolUse": true}}).as_object().cloned(),
        ..ModelRequest::default()
    };
    drop(model(&server, 0).stream(request).await.unwrap());
    let received = &server.received_requests().await.unwrap()[0];
    assert_eq!(received.headers["x-api-key"], "sk-ant-test");
    assert_eq!(received.headers["anthropic-version"], "2023-06-01");
    let body: Value = serde_json::from_slice(&received.body).unwrap();
    assert_eq!(
        body,
        json!({
            "model": "claude-haiku-4-5",
            "max_tokens": 4096,
            "system": "be brief",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "delete a.txt and b.txt"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Deleting."},
                    {"type": "tool_use", "id": "toolu_a", "name": "delete_file", "input": {"path": "a.txt"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "delete_file", "input": {"path": "b.txt"}},
                    {"type": "tool_use", "id": "toolu_c", "name": "delete_file", "input": {"path": "c.txt"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "{\"deleted\":\"a.txt\"}"},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "keep b", "is_error": true},
                    {"type": "tool_result", "tool_use_id": "toolu_c", "content": "Tool call execution denied.", "is_error": true},
                    {"type": "text", "text": "also c"},
                    {"type": "text", "text": "thanks"}
                ]}
            ],
            "tools": [{"name": "delete_file", "input_schema": {"type": "object"}, "description": "Delete a file"}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "stream": true
        })
    );
}

#[tokio::test]
async fn generate_reads_a_whole_message() {
    let body = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "Deleting."},
            {"type": "tool_use", "id": "toolu_1", "name": "delete_file", "input": {"path": "a.txt"}}
        ],
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0}
    });
    let server = server_with(ResponseTemplate::new(200).set_body_json(body)).await;
    let response = model(&server, 0).generate(ModelRequest::default()).await.unwrap();
    assert_eq!(
        response.content,
        vec![
            ModelContent::Text { text: "Deleting.".into() },
            ModelContent::ToolCall(ModelToolCall {
                tool_call_id: "toolu_1".into(),
                tool_name: "delete_file".into(),
                input: r#"{"path":"a.txt"}"#.into(),
                provider_executed: None,
                provider_metadata: None,
            }),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage, usage(10, 5));
}

#[tokio::test]
async fn errors_are_typed() {
    let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let server = server_with(ResponseTemplate::new(529).set_body_json(&overloaded)).await;
    let error = model(&server, 1).stream(ModelRequest::default()).await.err().unwrap();
    assert_eq!(error, ModelError::Server { status: 529, message: "Overloaded".into() });
    assert_eq!(server.received_requests().await.unwrap().len(), 2);

    let invalid =
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}});
    let server = server_with(ResponseTemplate::new(400).set_body_json(&invalid)).await;
    let error = model(&server, 3).stream(ModelRequest::default()).await.err().unwrap();
    assert_eq!(error, ModelError::BadRequest { status: 400, message: "max_tokens: too large".into() });

    let server = server_with(sse(format!("event: error\ndata: {overloaded}\n\n"))).await;
    let items = items(&model(&server, 0), ModelRequest::default()).await;
    assert_eq!(items, vec![Err(ModelError::Server { status: 529, message: "Overloaded".into() })]);
}

#[tokio::test]
async fn a_stream_cut_after_a_tool_call_keeps_the_approval_request() {
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "delete_file", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"notes.txt\"}"}}),
    ];
    let prefix: String = events.iter().map(|event| format!("data: {event}\n\n")).collect();
    let base = toolgate_http::testing::serve_cut_stream(prefix).await;
    let config = AnthropicConfig::new("k").base_url(format!("{base}/v1")).retry(RetryPolicy::none());
    let model = AnthropicModel::new(config, "claude").unwrap();
    let request = TextRequest::new(vec![ModelMessage::user("delete notes.txt")]).toolkit(toolgate::demo::toolkit());
    let mut stream = stream_text(&model, request).await.unwrap();
    while stream.next().await.is_some() {}
    let Err(EngineError::Model { source, response_messages }) = stream.finish().await else {
        panic!("the cut stream must fail the call");
    };
    assert!(matches!(source, ModelError::StreamInterrupted { .. }), "{source:?}");
    let ModelMessage::Assistant(assistant) = &response_messages[0] else { panic!("{response_messages:?}") };
    assert!(
        matches!(assistant.part_slice(), [AssistantPart::ToolCall(call), AssistantPart::ToolApprovalRequest(request)]
        if call.tool_call_id == "toolu_1" && call.input == json!({"path": "notes.txt"}) && request.tool_call_id == "toolu_1")
    );
}
