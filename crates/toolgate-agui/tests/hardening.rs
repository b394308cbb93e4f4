//! A forged state listing one call twice, and warnings that do not end a run.

mod common;

use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::StreamPart;
use toolgate::protocol::{FinishReason, Usage};
use toolgate_agui::{AguiError, EncoderOptions, EventEncoder, ResumeError, RunAgentInput, WARNING_EVENT, prepare_run};

fn resume_of(pending: Value, resume: Value) -> Result<toolgate_agui::PreparedRun, AguiError> {
    let input = json!({
        "threadId": "t", "runId": "r", "state": {"toolgate": {"pendingApprovals": pending}}, "resume": resume,
        "messages": [
            {"id": "u1", "role": "user", "content": "delete a.txt"},
            {"id": "a1", "role": "assistant", "toolCalls": [
                {"id": "call-1", "type": "function", "function": {"name": "delete_file", "arguments": "{\"path\":\"a.txt\"}"}}
            ]}
        ]
    });
    prepare_run(&RunAgentInput::from_value(input).unwrap())
}

fn entry(interrupt_id: &str, approved: bool) -> Value {
    json!({"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": approved}})
}

#[test]
fn a_second_pending_interrupt_for_one_call_is_refused() {
    let error = resume_of(
        json!([
            {"interruptId": "apr_1", "toolCallId": "call-1", "toolName": "delete_file"},
            {"interruptId": "apr_2", "toolCallId": "call-1", "toolName": "delete_file"}
        ]),
        json!([entry("apr_1", true), entry("apr_2", true)]),
    )
    .unwrap_err();
    let expected =
        ResumeError::DuplicatePending { first: "apr_1".into(), second: "apr_2".into(), tool_call_id: "call-1".into() };
    assert_eq!(error, AguiError::Resume(expected.clone()));
    assert_eq!(expected.code(), "duplicate_pending_interrupt");

    let twice = resume_of(
        json!([
            {"interruptId": "apr_1", "toolCallId": "call-1", "toolName": "delete_file"},
            {"interruptId": "apr_1", "toolCallId": "call-1", "toolName": "delete_file"}
        ]),
        json!([entry("apr_1", true)]),
    )
    .unwrap_err();
    assert!(matches!(twice, AguiError::Resume(ResumeError::DuplicatePending { .. })), "{twice:?}");
}

#[test]
fn one_pending_interrupt_answered_once_still_prepares() {
    let prepared = resume_of(
        json!([{"interruptId": "apr_1", "toolCallId": "call-1", "toolName": "delete_file"}]),
        json!([entry("apr_1", false)]),
    )
    .unwrap();
    assert_eq!(prepared.resolutions.len(), 1);
}

#[test]
fn a_warning_is_a_custom_event_and_the_run_goes_on() {
    let input = RunAgentInput::from_value(json!({"threadId": "t", "runId": "r", "messages": []})).unwrap();
    let mut encoder = EventEncoder::new(&input, EncoderOptions::default().id_generator(counter("m")));
    let parts = [
        StreamPart::Start,
        StreamPart::StartStep,
        StreamPart::Warning { code: toolgate::UNKNOWN_CALL_APPROVAL.into(), message: "no such call".into() },
        StreamPart::TextStart { id: "0".into() },
        StreamPart::TextDelta { id: "0".into(), text: "still here".into() },
        StreamPart::TextEnd { id: "0".into() },
        StreamPart::FinishStep { finish_reason: FinishReason::Stop, usage: Usage::default() },
        StreamPart::Finish { finish_reason: FinishReason::Stop, total_usage: Usage::default() },
    ];
    let events: Vec<Value> =
        parts.iter().flat_map(|part| encoder.encode(part)).map(|e| serde_json::to_value(e).unwrap()).collect();
    let custom = events.iter().find(|e| e["type"] == "CUSTOM").expect("a CUSTOM event");
    assert_eq!(
        custom,
        &json!({"type": "CUSTOM", "name": WARNING_EVENT,
            "value": {"code": "tool_call_not_found_for_approval", "message": "no such call"}})
    );
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    assert!(!events.iter().any(|e| e["type"] == "RUN_ERROR"));
}
