//! Responses API: fixture streams replayed part by part (hosted MCP approval
//! turns, a function call), the non-streamed form, request bodies and errors.

mod common;

use common::part::*;
use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::protocol::{
    FinishReason, ModelContent, ModelRequest, ModelStreamPart, ModelToolCall, ModelToolResult, ProviderOptions,
    ToolChoice, ToolSpec, Usage, parse_messages,
};
use toolgate::{LanguageModel, ModelError};
use toolgate_openai::OpenAiResponsesModel;
use toolgate_openai::responses::{ApprovalMode, McpServer, RequireApproval};

const ROUTE: &str = "/v1/responses";
const MCPR_1: &str = "mcpr_tg01d0f4b6c8e2a3";
const MCPR_3: &str = "mcpr_tg03f8b2d4a6c0e2";
const ARGS: &str = r#"{"path":"reports/2025-q3.csv","permanent":false}"#;

fn openai(key: &str, value: &str) -> Option<ProviderOptions> {
    json!({"openai": {key: value}}).as_object().cloned()
}

fn full_usage(input: u64, output: u64, total: u64, reasoning: u64) -> Usage {
    Usage { cached_input_tokens: Some(0), reasoning_tokens: Some(reasoning), ..usage(input, output, total) }
}

fn approval_call(id: &str, approval: &str) -> ModelStreamPart {
    ModelStreamPart::ToolCall(ModelToolCall {
        tool_call_id: id.into(),
        tool_name: "mcp.delete_file".into(),
        input: ARGS.into(),
        provider_executed: Some(true),
        provider_metadata: openai("approvalRequestId", approval),
    })
}

fn finished(reason: FinishReason, usage: Usage, response_id: &str) -> ModelStreamPart {
    ModelStreamPart::Finish { finish_reason: reason, usage, provider_metadata: openai("responseId", response_id) }
}

/// The text deltas of a fixture stream, read straight from its events.
fn fixture_text(name: &str) -> (String, Vec<String>) {
    let mut item = String::new();
    let mut deltas = Vec::new();
    for line in fixture(name).lines().filter(|line| !line.trim().is_empty()) {
        let event: Value = serde_json::from_str(line).unwrap();
        if event["type"] == "response.output_text.delta" {
            item = event["item_id"].as_str().unwrap().to_owned();
            deltas.push(event["delta"].as_str().unwrap().to_owned());
        }
    }
    (item, deltas)
}

async fn stream_fixture(name: &str, request: ModelRequest) -> Vec<ModelStreamPart> {
    let server = server_with(ROUTE, sse(sse_fixture(name, false))).await;
    let model = OpenAiResponsesModel::new(config(&server), "gpt-5-mini").unwrap();
    parts(model.stream(request).await.unwrap()).await
}

#[tokio::test]
async fn turn_one_approval_request_becomes_a_provider_call_and_an_approval_request() {
    let parts = stream_fixture("responses-mcp-approval.1.chunks.txt", ModelRequest::default()).await;
    assert_eq!(
        parts,
        vec![
            approval_call("id-0", MCPR_1),
            ModelStreamPart::ToolApprovalRequest { approval_id: MCPR_1.into(), tool_call_id: "id-0".into() },
            finished(FinishReason::ToolCalls, full_usage(402, 61, 463, 32), "resp_tg01a7c3e9f0b2d4"),
        ]
    );
}

#[tokio::test]
async fn turn_two_denied_streams_text_only() {
    let parts = stream_fixture("responses-mcp-approval.2.chunks.txt", ModelRequest::default()).await;
    let (item, deltas) = fixture_text("responses-mcp-approval.2.chunks.txt");
    assert_eq!(item, "msg_tg02b4d8f0a2c6e8");
    assert_eq!(deltas.len(), 19);
    let mut expected = vec![text_start(&item)];
    expected.extend(deltas.iter().map(|delta| text(&item, delta)));
    expected.push(text_end(&item));
    let (last, body) = parts.split_last().unwrap();
    assert_eq!(body, expected.as_slice());
    assert!(matches!(last, ModelStreamPart::Finish { finish_reason: FinishReason::Stop, .. }), "{last:?}");
}

#[tokio::test]
async fn turn_three_new_approval_request() {
    let parts = stream_fixture("responses-mcp-approval.3.chunks.txt", ModelRequest::default()).await;
    assert_eq!(
        parts,
        vec![
            approval_call("id-0", MCPR_3),
            ModelStreamPart::ToolApprovalRequest { approval_id: MCPR_3.into(), tool_call_id: "id-0".into() },
            finished(FinishReason::ToolCalls, full_usage(531, 57, 588, 24), "resp_tg03c5e9a1d3f7b9"),
        ]
    );
}

#[tokio::test]
async fn turn_four_mcp_call_is_aliased_to_the_call_in_the_prompt() {
    let prompt = parse_messages(json!([
        {"role": "user", "content": "delete the Q3 report"},
        {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "earlier-call", "toolName": "mcp.delete_file",
            "input": {}, "providerExecuted": true, "providerOptions": {"openai": {"approvalRequestId": MCPR_3}}}]},
        {"role": "tool", "content": [{"type": "tool-approval-response", "approvalId": MCPR_3, "approved": true, "providerExecuted": true}]}
    ]))
    .unwrap();
    let parts = stream_fixture(
        "responses-mcp-approval.4.chunks.txt",
        ModelRequest { prompt: prompt.into(), ..ModelRequest::default() },
    )
    .await;
    let mcp_id = "mcp_tg04b0d4f6c8e2a4";
    let output = fixture("responses-mcp-approval.4.chunks.txt")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|event| event["type"] == "response.output_item.done" && event["item"]["type"] == "mcp_call")
        .unwrap()["item"]["output"]
        .clone();
    assert_eq!(output, "Moved reports/2025-q3.csv to the trash (12.4 KB). Restore id: trash_tg7c21.");
    let (item, deltas) = fixture_text("responses-mcp-approval.4.chunks.txt");
    assert_eq!((item.as_str(), deltas.len()), ("msg_tg04d2f6b8e0a4c6", 18));
    let mut expected = vec![
        ModelStreamPart::ToolCall(ModelToolCall {
            tool_call_id: "earlier-call".into(),
            tool_name: "mcp.delete_file".into(),
            input: ARGS.into(),
            provider_executed: Some(true),
            provider_metadata: openai("itemId", mcp_id),
        }),
        ModelStreamPart::ToolResult(ModelToolResult {
            tool_call_id: "earlier-call".into(),
            tool_name: "mcp.delete_file".into(),
            result: json!({"type": "call", "serverLabel": "files", "name": "delete_file", "arguments": ARGS, "output": output}),
            is_error: false,
            provider_metadata: openai("itemId", mcp_id),
        }),
        text_start(&item),
    ];
    expected.extend(deltas.iter().map(|delta| text(&item, delta)));
    expected.push(text_end(&item));
    expected.push(finished(FinishReason::Stop, full_usage(612, 74, 686, 16), "resp_tg04a9c3e5b7d1f3"));
    assert_eq!(parts, expected);
}

#[tokio::test]
async fn azure_function_call_streams_its_arguments() {
    let parts = stream_fixture("azure-responses-function-call.chunks.txt", ModelRequest::default()).await;
    let id = "call_tg06Wx4pQ9rT2m";
    let mut expected = vec![input_start(id, "get_weather")];
    expected.extend(["{\"", "city", "\":\"", "Lyon", "\",\"unit\":\"", "celsius", "\"}"].iter().map(|d| input(id, d)));
    expected.push(input_end(id));
    expected.push(ModelStreamPart::ToolCall(ModelToolCall {
        tool_call_id: id.into(),
        tool_name: "get_weather".into(),
        input: "{\"city\":\"Lyon\",\"unit\":\"celsius\"}".into(),
        provider_executed: None,
        provider_metadata: openai("itemId", "fc_tg06d8f2b4e6a0c2"),
    }));
    expected.push(finished(FinishReason::ToolCalls, full_usage(58, 23, 81, 0), "resp_tg06c7e1a3d5f9b1"));
    assert_eq!(parts, expected);
}

#[tokio::test]
async fn generate_reads_the_fixture_response_object() {
    let body: Value = serde_json::from_str(&fixture("responses-mcp-approval-request.json")).unwrap();
    let server = server_with(ROUTE, wiremock::ResponseTemplate::new(200).set_body_json(body)).await;
    let model = OpenAiResponsesModel::new(config(&server), "gpt-5-mini").unwrap();
    let response = model.generate(ModelRequest::default()).await.unwrap();
    let approval = "mcpr_tg05a5c9e1b3d7f9";
    assert_eq!(
        response.content,
        vec![
            ModelContent::ToolCall(ModelToolCall {
                tool_call_id: "id-0".into(),
                tool_name: "mcp.delete_file".into(),
                input: r#"{"path":"reports/2025-q2.csv","permanent":true}"#.into(),
                provider_executed: Some(true),
                provider_metadata: openai("approvalRequestId", approval),
            }),
            ModelContent::ToolApprovalRequest { approval_id: approval.into(), tool_call_id: "id-0".into() },
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.provider_metadata, openai("responseId", "resp_tg05b6d0f2c4e8a0"));
    assert_eq!(bodies(&server).await[0]["stream"], json!(false));
}

fn mcp_tool() -> ToolSpec {
    ToolSpec::Provider {
        name: "files".into(),
        id: "openai.mcp".into(),
        args: McpServer::new("files", "https://mcp.toolgate.test/files")
            .require_approval(RequireApproval::Mode(ApprovalMode::Always))
            .description("File manager")
            .args(),
    }
}

async fn request_body(request: ModelRequest) -> Value {
    let server = server_with(ROUTE, sse(sse_fixture("responses-mcp-approval.3.chunks.txt", false))).await;
    let model = OpenAiResponsesModel::new(config(&server), "gpt-5-mini").unwrap();
    drop(model.stream(request).await.unwrap());
    bodies(&server).await.remove(0)
}

fn approval_history() -> Vec<toolgate::ModelMessage> {
    parse_messages(json!([
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "delete reports/2025-q3.csv and check the weather"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool-call", "toolCallId": "call_w", "toolName": "weather", "input": {"location": "SF"}},
            {"type": "tool-call", "toolCallId": "id-9", "toolName": "mcp.delete_file", "input": {},
             "providerExecuted": true, "providerOptions": {"openai": {"approvalRequestId": MCPR_1}}}
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "toolCallId": "call_w", "toolName": "weather", "output": {"type": "execution-denied", "reason": "no"}},
            {"type": "tool-approval-response", "approvalId": MCPR_1, "approved": false, "reason": "not that file", "providerExecuted": true},
            {"type": "tool-approval-response", "approvalId": MCPR_1, "approved": false, "providerExecuted": true}
        ]},
        {"role": "assistant", "content": [
            {"type": "tool-call", "toolCallId": "id-8", "toolName": "mcp.delete_file", "input": {}, "providerExecuted": true},
            {"type": "tool-result", "toolCallId": "id-8", "toolName": "mcp.delete_file", "output": {"type": "json", "value": {}},
             "providerOptions": {"openai": {"itemId": "mcp_1"}}},
            {"type": "text", "text": "Done."}
        ]}
    ]))
    .unwrap()
}

#[tokio::test]
async fn request_body_sends_tools_outputs_references_and_approval_responses() {
    let request = ModelRequest {
        prompt: approval_history().into(),
        tools: vec![
            ToolSpec::Function { name: "weather".into(), description: None, input_schema: json!({"type": "object"}) },
            mcp_tool(),
        ],
        tool_choice: ToolChoice::Tool { tool_name: "files".into() },
        max_output_tokens: Some(64),
        provider_options: json!({"openai": {"parallelToolCalls": false, "reasoningEffort": "low"}})
            .as_object()
            .cloned(),
        ..ModelRequest::default()
    };
    assert_eq!(
        request_body(request).await,
        json!({
            "model": "gpt-5-mini",
            "input": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "input_text", "text": "delete reports/2025-q3.csv and check the weather"}]},
                {"role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
                {"type": "function_call", "call_id": "call_w", "name": "weather", "arguments": "{\"location\":\"SF\"}"},
                {"type": "function_call_output", "call_id": "call_w", "output": "no"},
                {"type": "item_reference", "id": MCPR_1},
                {"type": "mcp_approval_response", "approval_request_id": MCPR_1, "approve": false, "reason": "not that file"},
                {"type": "item_reference", "id": "mcp_1"},
                {"role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}
            ],
            "tools": [
                {"type": "function", "name": "weather", "parameters": {"type": "object"}, "strict": false},
                {"type": "mcp", "server_label": "files", "server_url": "https://mcp.toolgate.test/files",
                 "server_description": "File manager", "require_approval": "always"}
            ],
            "tool_choice": {"type": "mcp", "server_label": "files"},
            "parallel_tool_calls": false,
            "max_output_tokens": 64,
            "reasoning": {"effort": "low"},
            "stream": true
        })
    );
}

#[tokio::test]
async fn no_item_references_without_server_side_storage() {
    for options in [json!({"openai": {"store": false}}), json!({"openai": {"previousResponseId": "resp_1"}})] {
        let request = ModelRequest {
            prompt: approval_history().into(),
            provider_options: options.as_object().cloned(),
            ..ModelRequest::default()
        };
        let body = request_body(request).await;
        let types: Vec<&str> =
            body["input"].as_array().unwrap().iter().filter_map(|item| item["type"].as_str()).collect();
        assert_eq!(types, ["function_call", "function_call_output", "mcp_approval_response"], "{options}");
        assert_eq!(body.get("store"), options["openai"].get("store"));
        assert_eq!(body.get("previous_response_id"), options["openai"].get("previousResponseId"));
    }
}

#[tokio::test]
async fn failures_in_the_stream_are_typed_errors() {
    let failed = r#"data: {"type":"response.failed","response":{"id":"r","status":"failed","error":{"code":"server_error","message":"boom"}}}"#;
    let error_event = r#"data: {"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null}"#;
    let garbage = r#"data: {"type":"response.output_item.done","item":{"type":"function_call"}}"#;
    let cases = [
        (failed, ModelError::Server { status: 500, message: "boom".into() }),
        (error_event, ModelError::RateLimited { message: "slow down".into(), retry_after: None }),
    ];
    for (event, expected) in cases {
        let server = server_with(ROUTE, sse(format!("{event}\n\n"))).await;
        let model = OpenAiResponsesModel::new(config(&server), "m").unwrap();
        assert_eq!(collect(model.stream(ModelRequest::default()).await.unwrap()).await, vec![Err(expected)]);
    }
    let server = server_with(ROUTE, sse(format!("{garbage}\n\n"))).await;
    let model = OpenAiResponsesModel::new(config(&server), "m").unwrap();
    let items = collect(model.stream(ModelRequest::default()).await.unwrap()).await;
    assert!(matches!(items.as_slice(), [Err(ModelError::InvalidResponse { .. })]), "{items:?}");
    // A stream that ends without `response.completed` is cut.
    let cut = sse_fixture("responses-mcp-approval.1.chunks.txt", false);
    let cut = cut.split("data: {\"type\":\"response.completed\"").next().unwrap().to_owned();
    let server = server_with(ROUTE, sse(cut)).await;
    let model = OpenAiResponsesModel::new(config(&server), "m").unwrap();
    let items = collect(model.stream(ModelRequest::default()).await.unwrap()).await;
    assert_eq!(items.len(), 3, "{items:?}");
    assert!(matches!(items[1], Ok(ModelStreamPart::ToolApprovalRequest { .. })));
    assert!(matches!(items[2], Err(ModelError::StreamInterrupted { .. })));
}

#[tokio::test]
async fn a_cut_stream_salvages_complete_calls_with_the_same_item_ids_as_done_items() {
    let events = [
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "weather", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{\"city\":\"SF\"}"}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "call_id": "call_2", "name": "weather", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "call_2", "delta": "{}"}),
        json!({"type": "response.output_item.added", "output_index": 2, "item": {"id": "fc_3", "type": "function_call", "call_id": "call_3", "name": "weather", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_3", "delta": "{\"city\""}),
    ];
    let body: String = events.iter().map(|event| format!("data: {event}\n\n")).collect();
    let server = server_with(ROUTE, sse(body)).await;
    let model = OpenAiResponsesModel::new(config(&server), "m").unwrap();
    let items = collect(model.stream(ModelRequest::default()).await.unwrap()).await;
    let (last, salvaged) = items.split_last().unwrap();
    assert!(matches!(last, Err(ModelError::StreamInterrupted { .. })), "{last:?}");
    let salvaged: Vec<ModelStreamPart> = salvaged.iter().cloned().map(Result::unwrap).collect();
    let with_item = ModelStreamPart::ToolCall(ModelToolCall {
        tool_call_id: "call_1".into(),
        tool_name: "weather".into(),
        input: r#"{"city":"SF"}"#.into(),
        provider_executed: None,
        provider_metadata: openai("itemId", "fc_1"),
    });
    assert_eq!(
        salvaged,
        vec![
            input_start("call_1", "weather"),
            input("call_1", r#"{"city":"SF"}"#),
            input_start("call_2", "weather"),
            input("call_2", "{}"),
            input_start("call_3", "weather"),
            input("call_3", r#"{"city""#),
            // Sorted by key (`call_2` before `fc_1`); the incomplete `call_3` is dropped.
            input_end("call_2"),
            call("call_2", "weather", "{}"),
            input_end("call_1"),
            with_item,
        ]
    );
}

#[tokio::test]
async fn reasoning_summaries_become_reasoning_parts_and_truncation_is_length() {
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "rs_1", "type": "reasoning", "summary": []}}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "summary_index": 0, "delta": "Thinking"}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Thinking"}]}}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": {"id": "msg_1", "type": "message", "content": [{"type": "refusal", "refusal": "No."}]}}),
        json!({"type": "response.some_future_event", "whatever": true}),
        json!({"type": "response.incomplete", "response": {"id": "resp_1", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}}),
    ];
    let body: String = events.iter().map(|event| format!("data: {event}\n\n")).collect();
    let server = server_with(ROUTE, sse(body)).await;
    let model = OpenAiResponsesModel::new(config(&server), "m").unwrap();
    assert_eq!(
        parts(model.stream(ModelRequest::default()).await.unwrap()).await,
        vec![
            ModelStreamPart::ReasoningStart { id: "rs_1:0".into() },
            ModelStreamPart::ReasoningDelta { id: "rs_1:0".into(), delta: "Thinking".into() },
            ModelStreamPart::ReasoningEnd { id: "rs_1:0".into() },
            text_start("msg_1"),
            text("msg_1", "No."),
            text_end("msg_1"),
            finished(FinishReason::Length, Usage::default(), "resp_1"),
        ]
    );
}
