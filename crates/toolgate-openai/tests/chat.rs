//! Chat Completions: fixture streams replayed part by part, request bodies,
//! and the non-streamed form.

mod common;

use common::part::*;
use common::*;
use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate::LanguageModel;
use toolgate::protocol::{FinishReason, ModelContent, ModelRequest, ModelToolCall, ToolChoice, ToolSpec, Usage};
use toolgate_openai::OpenAiChatModel;

const ROUTE: &str = "/v1/chat/completions";

async fn stream_fixture(name: &str, done: bool) -> (Vec<toolgate::protocol::ModelStreamPart>, wiremock::MockServer) {
    let server = server_with(ROUTE, sse(sse_fixture(name, done))).await;
    let model = OpenAiChatModel::new(config(&server), "test-model").unwrap();
    let parts = parts(model.stream(ModelRequest::default()).await.unwrap()).await;
    (parts, server)
}

#[tokio::test]
async fn empty_ids_on_continuations_and_a_usage_only_chunk() {
    let (parts, _) = stream_fixture("chat-get-weather-empty-continuation-ids.chunks.txt", true).await;
    let id = "call_tg4f1c9a07d2e8";
    let usage = Usage { cached_input_tokens: Some(0), ..usage(184, 21, 205) };
    assert_eq!(
        parts,
        vec![
            input_start(id, "get_weather"),
            input(id, "{\"city\": \"Lyon"),
            input(id, "\", \"unit\": \"celsius\"}"),
            input_end(id),
            call(id, "get_weather", "{\"city\": \"Lyon\", \"unit\": \"celsius\"}"),
            finish(FinishReason::ToolCalls, usage),
        ]
    );
}

#[tokio::test]
async fn text_then_a_call_at_index_one() {
    let (parts, _) = stream_fixture("chat-text-then-call-at-index-1.sse", false).await;
    let id = "toolu_tg01StatNotes";
    assert_eq!(
        parts,
        vec![
            text_start("text-0"),
            text("text-0", "Checking"),
            text("text-0", " the file first."),
            text_end("text-0"),
            input_start(id, "stat_file"),
            input(id, "{\"path\":"),
            input(id, " \"notes/todo.md\"}"),
            input_end(id),
            call(id, "stat_file", "{\"path\": \"notes/todo.md\"}"),
            finish(FinishReason::ToolCalls, Usage::default()),
        ]
    );
}

#[tokio::test]
async fn llama_cpp_repeated_ids_and_names_and_explicit_nulls() {
    let (parts, _) = stream_fixture("llama-cpp-forced-tool-call.sse", false).await;
    let id = "call__0_delete_file_cmpl-tg9b27e4c1-5d3a-4f86-b0e2-61c8a4d7f305";
    let fragments = ["{", " \"path", "\":", " \"drafts/old-plan.md", "\"", " }", " "];
    let mut expected = vec![input_start(id, "delete_file")];
    expected.extend(fragments.iter().map(|fragment| input(id, fragment)));
    expected.push(input_end(id));
    expected.push(call(id, "delete_file", &fragments.concat()));
    expected.push(finish(FinishReason::ToolCalls, Usage::default()));
    assert_eq!(parts, expected);
}

#[tokio::test]
async fn request_body_carries_tools_choice_results_and_denials() {
    let server = server_with(ROUTE, sse(sse_fixture("chat-get-weather-empty-continuation-ids.chunks.txt", true))).await;
    let model = OpenAiChatModel::new(config(&server), "gpt-4o-mini").unwrap();
    let prompt = toolgate::protocol::parse_messages(json!([
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "delete a.txt and b.txt, then check the weather"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "On it."},
            {"type": "reasoning", "text": "hidden"},
            {"type": "tool-call", "toolCallId": "c1", "toolName": "delete_file", "input": {"path": "a.txt"}},
            {"type": "tool-call", "toolCallId": "c2", "toolName": "delete_file", "input": {"path": "b.txt"}},
            {"type": "tool-call", "toolCallId": "c3", "toolName": "get_weather", "input": {"city": "Paris"}}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "c1", "toolName": "delete_file", "output": {"type": "json", "value": {"deleted": "a.txt"}}},
            {"type": "tool-result", "toolCallId": "c2", "toolName": "delete_file", "output": {"type": "execution-denied", "reason": "keep b"}},
            {"type": "tool-result", "toolCallId": "c3", "toolName": "get_weather", "output": {"type": "error-text", "value": "service down"}}
        ]},
        {"role": "user", "content": "and c.txt?"},
        {"role": "assistant", "content": [
            {"type": "tool-call", "toolCallId": "c4", "toolName": "delete_file", "input": {"path": "c.txt"}}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "c4", "toolName": "delete_file", "output": {"type": "execution-denied"}}
        ]}
    ]))
    .unwrap();
    let request = ModelRequest {
        prompt: prompt.into(),
        tools: vec![ToolSpec::Function {
            name: "delete_file".into(),
            description: Some("Delete a file".into()),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        tool_choice: ToolChoice::Tool { tool_name: "delete_file".into() },
        max_output_tokens: Some(100),
        temperature: Some(0.0),
        provider_options: Some(json!({"openai": {"parallelToolCalls": false}}).as_object().unwrap().clone()),
        ..ModelRequest::default()
    };
    drop(model.stream(request).await.unwrap());
    let body = &bodies(&server).await[0];
    assert_eq!(
        body,
        &json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "delete a.txt and b.txt, then check the weather"},
                {"role": "assistant", "content": "On it.", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "delete_file", "arguments": "{\"path\":\"a.txt\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "delete_file", "arguments": "{\"path\":\"b.txt\"}"}},
                    {"id": "c3", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "{\"deleted\":\"a.txt\"}"},
                {"role": "tool", "tool_call_id": "c2", "content": "keep b"},
                {"role": "tool", "tool_call_id": "c3", "content": "service down"},
                {"role": "user", "content": "and c.txt?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c4", "type": "function", "function": {"name": "delete_file", "arguments": "{\"path\":\"c.txt\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "c4", "content": "Tool call execution denied."}
            ],
            "tools": [{"type": "function", "function": {
                "name": "delete_file", "description": "Delete a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}
            }}],
            "tool_choice": {"type": "function", "function": {"name": "delete_file"}},
            "parallel_tool_calls": false,
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_completion_tokens": 100,
            "temperature": 0.0
        })
    );
    let request = &server.received_requests().await.unwrap()[0];
    assert_eq!(request.headers["authorization"], "Bearer sk-test");
}

#[tokio::test]
async fn compatible_servers_get_max_tokens_and_no_key() {
    let server = server_with(ROUTE, sse(sse_fixture("llama-cpp-forced-tool-call.sse", false))).await;
    let config = toolgate_openai::OpenAiConfig::compatible(format!("{}/v1/", server.uri()));
    let model = OpenAiChatModel::new(config, "local").unwrap();
    assert_eq!(model.provider(), "openai-compatible");
    let request = ModelRequest {
        prompt: vec![toolgate::ModelMessage::user("hi")].into(),
        tool_choice: ToolChoice::None,
        max_output_tokens: Some(5),
        ..ModelRequest::default()
    };
    drop(model.stream(request).await.unwrap());
    let body = &bodies(&server).await[0];
    assert_eq!(
        body,
        &json!({
            "model": "local",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 5
        })
    );
    assert!(!server.received_requests().await.unwrap()[0].headers.contains_key("authorization"));
}

#[tokio::test]
async fn provider_tools_are_refused() {
    let server = server_with(ROUTE, sse(String::new())).await;
    let model = OpenAiChatModel::new(config(&server), "gpt-4o-mini").unwrap();
    let request = ModelRequest {
        tools: vec![ToolSpec::Provider { name: "files".into(), id: "openai.mcp".into(), args: json!({}) }],
        ..ModelRequest::default()
    };
    let error = model.stream(request).await.err().unwrap();
    assert!(matches!(error, toolgate::ModelError::Configuration { .. }), "{error:?}");
}

#[tokio::test]
async fn generate_reads_a_whole_completion() {
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Deleting.",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "delete_file", "arguments": "{\"path\":\"a.txt\"}"}}]
        }}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                  "completion_tokens_details": {"reasoning_tokens": 2}}
    });
    let server = server_with(ROUTE, wiremock::ResponseTemplate::new(200).set_body_json(body)).await;
    let model = OpenAiChatModel::new(config(&server), "gpt-4o-mini").unwrap();
    let response = model.generate(ModelRequest::default()).await.unwrap();
    assert_eq!(
        response.content,
        vec![
            ModelContent::Text { text: "Deleting.".into() },
            ModelContent::ToolCall(ModelToolCall {
                tool_call_id: "call_1".into(),
                tool_name: "delete_file".into(),
                input: "{\"path\":\"a.txt\"}".into(),
                provider_executed: None,
                provider_metadata: None,
            }),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage, Usage { reasoning_tokens: Some(2), ..usage(10, 5, 15) });
    assert_eq!(bodies(&server).await[0]["stream"], json!(false));
}

#[tokio::test]
async fn malformed_chunks_and_error_chunks_are_typed_errors() {
    let body = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {not json\n\n".to_owned();
    let server = server_with(ROUTE, sse(body)).await;
    let model = OpenAiChatModel::new(config(&server), "m").unwrap();
    let items = collect(model.stream(ModelRequest::default()).await.unwrap()).await;
    assert_eq!(items.len(), 4, "{items:?}");
    assert!(matches!(items[3], Err(toolgate::ModelError::InvalidResponse { .. })), "{items:?}");

    let body = "data: {\"error\":{\"message\":\"model overloaded\",\"code\":\"overloaded_error\"}}\n\n".to_owned();
    let server = server_with(ROUTE, sse(body)).await;
    let model = OpenAiChatModel::new(config(&server), "m").unwrap();
    let items = collect(model.stream(ModelRequest::default()).await.unwrap()).await;
    assert_eq!(items, vec![Err(toolgate::ModelError::Server { status: 529, message: "model overloaded".into() })]);
}

#[tokio::test]
async fn a_clean_end_without_finish_is_an_interruption_after_complete_calls() {
    let body = concat!(
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"delete_file\",\"arguments\":\"{\\\"path\\\":\\\"a\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"c2\",\"function\":{\"name\":\"delete_file\",\"arguments\":\"{\\\"pa\"}}]}}]}\n\n",
    );
    let server = server_with(ROUTE, sse(body.to_owned())).await;
    let model = OpenAiChatModel::new(config(&server), "m").unwrap();
    let items = collect(model.stream(ModelRequest::default()).await.unwrap()).await;
    let (last, parts) = items.split_last().unwrap();
    let parts: Vec<_> = parts.iter().cloned().map(Result::unwrap).collect();
    assert_eq!(
        parts,
        vec![
            input_start("c1", "delete_file"),
            input("c1", "{\"path\":\"a\"}"),
            input_start("c2", "delete_file"),
            input("c2", "{\"pa"),
            input_end("c1"),
            call("c1", "delete_file", "{\"path\":\"a\"}"),
        ]
    );
    assert!(matches!(last, Err(toolgate::ModelError::StreamInterrupted { .. })), "{last:?}");
}

#[tokio::test]
async fn calls_that_all_claim_index_zero_stay_apart() {
    let chunk = |id: &str, path: &str| {
        let call = json!({"index": 0, "id": id, "type": "function",
            "function": {"name": "delete_file", "arguments": format!("{{\"path\":\"{path}\"}}")}});
        format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}))
    };
    let done = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
    let server = server_with(ROUTE, sse(format!("{}{}{done}", chunk("a", "1"), chunk("b", "2")))).await;
    let model = OpenAiChatModel::new(config(&server), "m").unwrap();
    let parts = parts(model.stream(ModelRequest::default()).await.unwrap()).await;
    assert_eq!(
        parts,
        vec![
            input_start("a", "delete_file"),
            input("a", "{\"path\":\"1\"}"),
            input_start("b", "delete_file"),
            input("b", "{\"path\":\"2\"}"),
            input_end("a"),
            call("a", "delete_file", "{\"path\":\"1\"}"),
            input_end("b"),
            call("b", "delete_file", "{\"path\":\"2\"}"),
            finish(FinishReason::ToolCalls, Usage::default()),
        ]
    );
}
