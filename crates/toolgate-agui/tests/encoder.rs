//! The encoder on hand-made stream parts: edge cases the scripted model does not produce.

mod common;

use common::*;
use futures::Stream;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::protocol::{FinishReason, ToolCallInfo, Usage};
use toolgate::{EngineError, StreamPart};
use toolgate_agui::{EncoderOptions, Event, EventEncoder, RunAgentInput};

fn encoder(options: EncoderOptions) -> EventEncoder {
    let input = RunAgentInput::from_value(json!({"threadId": "t", "runId": "r", "messages": []})).unwrap();
    EventEncoder::new(&input, options.id_generator(counter("m")))
}

fn encode_all(encoder: &mut EventEncoder, parts: &[StreamPart]) -> Vec<Value> {
    parts.iter().flat_map(|part| encoder.encode(part)).map(|event| serde_json::to_value(event).unwrap()).collect()
}

fn call(id: &str, input: Value) -> ToolCallInfo {
    ToolCallInfo {
        tool_call_id: id.into(),
        tool_name: "delete_file".into(),
        input,
        provider_executed: None,
        dynamic: None,
        invalid: None,
        error: None,
        provider_metadata: None,
    }
}

fn finish() -> StreamPart {
    StreamPart::Finish { finish_reason: FinishReason::ToolCalls, total_usage: Usage::default() }
}

#[test]
fn empty_text_opens_no_message_and_unstreamed_calls_emit_start_args_end() {
    let mut encoder = encoder(EncoderOptions::default());
    // Invalid calls as the engine emits them: non-JSON input was replaced by
    // `{}`, and a JSON input that fails validation (here a bare string) is kept.
    let mut not_json = call("c2", json!({}));
    not_json.invalid = Some(true);
    not_json.error = Some("Invalid input for tool delete_file: input is not JSON (EOF): {\"path\":".into());
    let mut bare_string = call("c3", json!("a.txt"));
    bare_string.invalid = Some(true);
    bare_string.error = Some("Invalid input for tool delete_file: expected an object".into());
    let events = encode_all(
        &mut encoder,
        &[
            StreamPart::Start,
            StreamPart::StartStep,
            StreamPart::TextStart { id: "0".into() },
            StreamPart::TextDelta { id: "0".into(), text: String::new() },
            StreamPart::TextEnd { id: "0".into() },
            StreamPart::ToolCall(call("c1", json!({"path": "a"}))),
            StreamPart::ToolCall(not_json),
            StreamPart::ToolCall(bare_string),
        ],
    );
    assert_eq!(
        events,
        [
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "delete_file", "parentMessageId": "m1"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{\"path\":\"a\"}"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "c1"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "delete_file", "parentMessageId": "m1"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c2", "delta": "{}"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "c2"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c3", "toolCallName": "delete_file", "parentMessageId": "m1"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c3", "delta": "\"a.txt\""}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "c3"}),
        ]
    );
    // The arguments are JSON text, so the next turn accepts them.
    for event in events.iter().filter(|event| event["type"] == "TOOL_CALL_ARGS") {
        let delta = event["delta"].as_str().unwrap();
        assert!(serde_json::from_str::<Value>(delta).is_ok(), "arguments are not JSON: {delta}");
    }
}

#[test]
fn preliminary_results_are_skipped_and_errors_are_wrapped() {
    let mut encoder = encoder(EncoderOptions::default());
    let result = |preliminary| StreamPart::ToolResult {
        tool_call_id: "c1".into(),
        tool_name: "t".into(),
        input: json!({}),
        output: json!("partial"),
        provider_executed: None,
        preliminary,
        dynamic: None,
    };
    let error = StreamPart::ToolError {
        tool_call_id: "c2".into(),
        tool_name: "t".into(),
        input: json!({}),
        error: json!("disk full"),
        provider_executed: None,
        dynamic: None,
    };
    let events =
        encode_all(&mut encoder, &[StreamPart::Start, StreamPart::StartStep, result(Some(true)), result(None), error]);
    let contents: Vec<&Value> = events.iter().skip(1).map(|e| &e["content"]).collect();
    assert_eq!(contents, [&json!("\"partial\""), &json!("{\"error\":\"disk full\"}")]);
}

#[test]
fn interrupts_carry_the_configured_expiry() {
    let mut encoder = encoder(EncoderOptions::default().interrupt_expires_at("2030-01-01T00:00:00Z"));
    let request = StreamPart::ToolApprovalRequest {
        approval_id: "apr_1".into(),
        tool_call: call("c1", json!({"path": "a"})),
        signature: Some("sig".into()),
        reason: Some("rule `ask-writes` matched /path".into()),
        routing: None,
    };
    let events = encode_all(&mut encoder, &[StreamPart::Start, StreamPart::StartStep, request, finish()]);
    let finished = events.last().unwrap();
    assert_eq!(finished["outcome"]["interrupts"][0]["expiresAt"], "2030-01-01T00:00:00Z");
    assert_eq!(
        finished["outcome"]["interrupts"][0]["message"],
        "delete_file needs approval: rule `ask-writes` matched /path"
    );
    assert_eq!(
        first(&events, "STATE_SNAPSHOT")["snapshot"],
        json!({"toolgate": {"pendingApprovals": [
            {"interruptId": "apr_1", "toolCallId": "c1", "toolName": "delete_file", "signature": "sig"}
        ]}})
    );
}

#[test]
fn a_routed_request_announces_its_approvers_in_a_custom_event() {
    let mut encoder = encoder(EncoderOptions::default());
    let request = StreamPart::ToolApprovalRequest {
        approval_id: "apr_1".into(),
        tool_call: call("c1", json!({"path": "a"})),
        signature: None,
        reason: Some("rule `big` matched".into()),
        routing: Some(toolgate_protocol::ApprovalRouting { approvers: vec!["group:finance".into()], quorum: 2 }),
    };
    let events = encode_all(&mut encoder, &[StreamPart::Start, StreamPart::StartStep, request, finish()]);
    let custom = first(&events, "CUSTOM");
    assert_eq!(custom["name"], "toolgate.approval");
    assert_eq!(
        custom["value"],
        json!({"approvalId": "apr_1", "toolCallId": "c1", "state": "pending",
               "approvers": ["group:finance"], "quorum": 2, "votes": []})
    );
    let interrupt = &events.last().unwrap()["outcome"]["interrupts"][0];
    assert_eq!(interrupt["metadata"]["approvers"], json!(["group:finance"]));
    assert_eq!(interrupt["metadata"]["quorum"], 2);
}

#[test]
fn nothing_follows_the_terminal_event() {
    let mut encoder = encoder(EncoderOptions::default());
    let events = encode_all(
        &mut encoder,
        &[StreamPart::Start, StreamPart::Error { error: "cut off".into() }, finish(), StreamPart::StartStep],
    );
    assert_eq!(kinds(&events), ["RUN_STARTED", "RUN_ERROR"]);
    assert!(encoder.is_done());
    let error = EngineError::MissingToolResults { tool_call_ids: vec!["c".into()] };
    assert_eq!(encoder.engine_error(&error), Vec::<Event>::new());
}

#[test]
fn an_engine_error_before_streaming_is_run_started_then_run_error() {
    let mut encoder = encoder(EncoderOptions::default());
    let error = EngineError::UnknownApprovalId { approval_id: "apr_x".into() };
    let events: Vec<Value> = encoder.engine_error(&error).iter().map(|e| serde_json::to_value(e).unwrap()).collect();
    assert_eq!(
        events,
        [
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
            json!({"type": "RUN_ERROR", "message": error.to_string(), "code": "unknown_approval"}),
        ]
    );
}

#[tokio::test]
async fn the_whole_stream_is_read_even_when_the_tasks_budget_runs_out_mid_run() {
    // Regression: `TextStream` ends early if tokio's cooperative budget runs out while its
    // parts are buffered; spend most of the budget first so that it runs out mid-run.
    for spent in [96, 112, 120, 126] {
        for _ in 0..spent {
            tokio::task::consume_budget().await;
        }
        let server = Server::new(json!([[{"type": "text", "text": "one two three four five six seven eight"},
            {"type": "tool-call", "toolCallId": "c", "toolName": "delete_file", "input": {"path": "a-long-file-name.txt"}}]]));
        let mut client = Client::new();
        client.say("go");
        let events = server.run(client.input(None)).await;
        assert_eq!(events.last().unwrap()["outcome"]["type"], "interrupt", "{events:#?}");
    }
}

#[test]
fn the_event_stream_is_send() {
    fn assert_send<S: Stream + Send>(_: &S) {}
    let model = script(json!([[{"type": "text", "text": "hi"}]]));
    let input = RunAgentInput::from_value(json!({"threadId": "t", "runId": "r", "messages": []})).unwrap();
    let events = toolgate_agui::run_events(&model, input, EncoderOptions::default(), toolgate::TextRequest::new);
    assert_send(&events);
}
