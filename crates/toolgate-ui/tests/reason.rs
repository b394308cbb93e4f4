//! Why a call waits or was denied reaches the client as a `data-toolgate-reason`
//! part, sent before the chunk it explains and kept in the message, one per call.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::StreamPart;
use toolgate::protocol::ToolCallInfo;
use toolgate_ui::{EncoderOptions, UiChunk, UiMessageBuilder, UiStreamEncoder};

fn encoder() -> UiStreamEncoder {
    UiStreamEncoder::new(EncoderOptions { message_id: "m".into(), signature_field: false })
}

fn call(id: &str) -> ToolCallInfo {
    ToolCallInfo {
        tool_call_id: id.into(),
        tool_name: "delete_file".into(),
        input: json!({"path": "/tmp/a"}),
        provider_executed: None,
        dynamic: None,
        invalid: None,
        error: None,
        provider_metadata: None,
    }
}

fn asked(id: &str, reason: Option<&str>) -> StreamPart {
    StreamPart::ToolApprovalRequest {
        approval_id: format!("apr-{id}"),
        tool_call: call(id),
        signature: None,
        reason: reason.map(str::to_owned),
        routing: None,
    }
}

fn denied(id: &str, reason: Option<&str>) -> StreamPart {
    StreamPart::ToolOutputDenied {
        tool_call_id: id.into(),
        tool_name: "delete_file".into(),
        provider_executed: None,
        reason: reason.map(str::to_owned),
    }
}

fn json_of(chunks: &[UiChunk]) -> Vec<Value> {
    chunks.iter().map(|chunk| serde_json::to_value(chunk).unwrap()).collect()
}

#[test]
fn the_reason_comes_first_and_names_the_call_and_the_approval() {
    let chunks = encoder().encode(&asked("c1", Some("rule `ask-writes` matched /path")));
    assert_eq!(
        json_of(&chunks),
        vec![
            json!({"type": "data-toolgate-reason", "id": "c1", "data": {"toolCallId": "c1", "decision": "ask",
                "reason": "rule `ask-writes` matched /path", "approvalId": "apr-c1"}}),
            json!({"type": "tool-approval-request", "approvalId": "apr-c1", "toolCallId": "c1"}),
        ]
    );
    let chunks = encoder().encode(&denied("c2", Some("rule `no-etc` matched /path")));
    assert_eq!(
        json_of(&chunks)[0]["data"],
        json!({"toolCallId": "c2", "decision": "deny", "reason": "rule `no-etc` matched /path"})
    );
    assert_eq!(json_of(&chunks)[1], json!({"type": "tool-output-denied", "toolCallId": "c2"}));
}

#[test]
fn without_a_reason_only_the_chunk_itself_is_sent() {
    assert_eq!(encoder().encode(&asked("c1", None)).len(), 1);
    assert_eq!(encoder().encode(&denied("c1", None)).len(), 1);
}

#[test]
fn the_message_keeps_one_reason_per_call_the_latest() {
    let mut encoder = encoder();
    let mut builder = UiMessageBuilder::new("m");
    let parts = [
        StreamPart::ToolCall(call("c1")),
        asked("c1", Some("asked")),
        StreamPart::ToolCall(call("c2")),
        asked("c2", Some("asked too")),
        denied("c1", Some("the person said no")),
    ];
    for part in &parts {
        for chunk in encoder.encode(part) {
            builder.apply(&chunk);
        }
    }
    let message = serde_json::to_value(builder.message()).unwrap();
    let reasons: Vec<(Value, Value)> = message["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|part| part["type"] == "data-toolgate-reason")
        .map(|part| (part["id"].clone(), part["data"]["reason"].clone()))
        .collect();
    assert_eq!(reasons, vec![(json!("c1"), json!("the person said no")), (json!("c2"), json!("asked too"))]);

    // A continuation of the stored message finds the existing part again.
    let mut continued = UiMessageBuilder::continuing(builder.finish());
    for chunk in encoder.encode(&denied("c2", Some("later"))) {
        continued.apply(&chunk);
    }
    let parts = serde_json::to_value(continued.message()).unwrap()["parts"].clone();
    let count = parts.as_array().unwrap().iter().filter(|part| part["type"] == "data-toolgate-reason").count();
    assert_eq!(count, 2);
}

#[test]
fn a_policy_denial_keeps_its_reason_when_the_history_comes_back() {
    let messages = toolgate_ui::parse_ui_messages(json!([
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]},
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-delete_file", "toolCallId": "c1", "state": "output-denied", "input": {"path": "/etc/x"}},
            {"type": "tool-delete_file", "toolCallId": "c2", "state": "output-denied", "input": {"path": "a"},
             "approval": {"id": "apr-2", "approved": false, "reason": "the person said no"}},
            {"type": "step-start"},
            {"type": "data-toolgate-reason", "id": "c1",
             "data": {"toolCallId": "c1", "decision": "deny", "reason": "rule `no-etc` matched /path"}},
            {"type": "text", "text": "ok"}
        ]}
    ]))
    .unwrap();
    let model = toolgate_ui::convert_to_model_messages(&messages).unwrap();
    let results: Vec<Value> = serde_json::to_value(&model)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "tool")
        .flat_map(|message| message["content"].as_array().unwrap().clone())
        .filter(|part| part["type"] == "tool-result")
        .map(|part| part["output"].clone())
        .collect();
    assert_eq!(
        results,
        vec![
            json!({"type": "execution-denied", "reason": "rule `no-etc` matched /path"}),
            json!({"type": "execution-denied", "reason": "the person said no"}),
        ]
    );
}

#[test]
fn a_routed_request_names_its_approvers_and_the_approval_part_is_kept_once() {
    let mut routed = asked("c1", Some("rule `big-transfers` matched"));
    if let StreamPart::ToolApprovalRequest { routing, .. } = &mut routed {
        *routing = Some(toolgate::protocol::ApprovalRouting { approvers: vec!["group:finance".into()], quorum: 2 });
    }
    let chunks = encoder().encode(&routed);
    assert_eq!(json_of(&chunks)[0]["data"]["approvers"], json!(["group:finance"]));
    assert_eq!(json_of(&chunks)[0]["data"]["quorum"], 2);

    let mut builder = UiMessageBuilder::new("m");
    for chunk in chunks {
        builder.apply(&chunk);
    }
    for (state, votes) in [("pending", 1), ("approved", 2)] {
        let data = json!({"approvalId": "apr-c1", "toolCallId": "c1", "state": state, "votes": votes});
        builder.apply(&UiChunk::Approval { id: "apr-c1".into(), data });
    }
    let message = serde_json::to_value(builder.message()).unwrap();
    let approvals: Vec<&Value> =
        message["parts"].as_array().unwrap().iter().filter(|p| p["type"] == "data-toolgate-approval").collect();
    assert_eq!(approvals.len(), 1, "one part per approval: {message:#}");
    assert_eq!(approvals[0]["data"]["state"], "approved", "the latest state");
    let serialized = serde_json::to_value(UiChunk::Approval { id: "a".into(), data: json!({}) }).unwrap();
    assert_eq!(serialized, json!({"type": "data-toolgate-approval", "id": "a", "data": {}}));
}
