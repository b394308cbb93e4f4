//! `POST /api/chat` with chat-message approvals: a user message holding
//! `{type: "tool-approval", toolCallId, approved}` answers the pending call,
//! as the engine accepts it; a contradicting second answer is refused.

mod common;

use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

async fn approval_id(server: &Server) -> String {
    let first = json!({"id": "chat-1", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]}
    ]});
    let reply = post(server, "/api/chat", "application/json", first.to_string().as_bytes()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let request = reply.chunks().into_iter().find(|c| c["type"] == "tool-approval-request").unwrap();
    request["approvalId"].as_str().unwrap().to_owned()
}

/// The conversation after the request, with the answer as a chat-message
/// approval (and, when `answered_in_the_part` is set, a second answer in the tool part).
fn answered_in_a_user_message(approval_id: &str, approval: Value, answered_in_the_part: Option<bool>) -> Value {
    let (state, part_approval) = match answered_in_the_part {
        None => ("approval-requested", json!({"id": approval_id})),
        Some(approved) => ("approval-responded", json!({"id": approval_id, "approved": approved})),
    };
    json!({"id": "chat-1", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]},
        {"id": "msg-a", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Deleting.", "state": "done"},
            {"type": "tool-delete_file", "toolCallId": "call-1", "state": state,
             "input": {"path": "notes.txt"}, "approval": part_approval}
        ]},
        {"id": "u2", "role": "user", "parts": [approval], "metadata": {"isToolApproval": true},
         "createdAt": "2026-11-24T10:00:00.000Z"}
    ]})
}

#[tokio::test]
async fn a_chat_message_approval_runs_the_call() {
    let server = start(None).await;
    let id = approval_id(&server).await;
    let body = answered_in_a_user_message(
        &id,
        json!({"type": "tool-approval", "toolCallId": "call-1", "approved": true}),
        None,
    );
    let reply = post(&server, "/api/chat", "application/json", body.to_string().as_bytes()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chunks = reply.chunks();
    let output = chunks.iter().find(|c| c["type"] == "tool-output-available").expect("the deletion ran");
    assert_eq!(output["output"], json!({"deleted": "notes.txt"}));
    assert!(chunks.iter().any(|c| c["type"] == "text-delta" && c["delta"].as_str().unwrap().contains("Done")));
}

#[tokio::test]
async fn a_chat_message_denial_carries_its_reason_to_the_model() {
    let server = start(None).await;
    let id = approval_id(&server).await;
    let body = answered_in_a_user_message(
        &id,
        json!({"type": "tool-approval", "toolCallId": "call-1", "approved": false, "reason": "no"}),
        None,
    );
    let reply = post(&server, "/api/chat", "application/json", body.to_string().as_bytes()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.chunks().iter().any(|c| c["type"] == "tool-output-denied" && c["toolCallId"] == "call-1"));
    let traces: Vec<Value> = server.trace_text().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(traces[1]["prompt"][2]["content"][0]["output"], json!({"type": "execution-denied", "reason": "no"}));
}

#[tokio::test]
async fn an_answer_contradicting_the_tool_part_is_refused() {
    let server = start(None).await;
    let id = approval_id(&server).await;
    for (in_the_part, in_the_message) in [(true, false), (false, true)] {
        let body = answered_in_a_user_message(
            &id,
            json!({"type": "tool-approval", "toolCallId": "call-1", "approved": in_the_message}),
            Some(in_the_part),
        );
        let reply = post(&server, "/api/chat", "application/json", body.to_string().as_bytes()).await;
        assert_eq!(reply.status, 400, "{}", reply.body);
        assert_eq!(reply.json()["error"]["code"], "conflicting_approval_responses", "{}", reply.body);
    }
    assert_eq!(server.trace_text().lines().count(), 1, "the model was called only for the first turn");
}
