//! The chat against the engine in this process: approvals, denials, edits,
//! chained approvals and client tool results, end to end.

mod support;

use std::sync::Arc;

use futures::StreamExt;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::{call, last_text, pending_approval, text, tool_parts};
use toolgate::ledger::AuditStore;
use toolgate::model::ScriptedModel;
use toolgate::{SharedModel, demo};
use toolgate_client::{Chat, ChatEvent, Decision, InProcessTransport, Status, ToolOutput, ToolState, UiMessage};

fn scripted(turns: Value) -> SharedModel {
    Arc::new(ScriptedModel::from_json(&json!({ "turns": turns }).to_string()).expect("a valid script"))
}

fn chat(turns: Value) -> Chat {
    let transport = InProcessTransport::new(scripted(turns), demo::toolkit()).expect("a transport");
    Chat::new("chat-1", transport)
}

/// The tool parts of every message, as (call id, state).
fn tool_states(messages: &[UiMessage]) -> Vec<(String, ToolState)> {
    tool_parts(messages).into_iter().map(|tool| (tool.tool_call_id, tool.state)).collect()
}

#[tokio::test]
async fn an_approved_call_runs_and_the_chat_continues_by_itself() {
    let chat = chat(json!([[call("c1", "delete_file", json!({"path": "notes.txt"}))], [text("deleted it")]]));
    let events = chat.subscribe();
    chat.send_message("delete notes.txt").await.unwrap();
    assert_eq!(tool_states(&chat.messages()), vec![("c1".into(), ToolState::ApprovalRequested)]);
    assert_eq!(chat.status(), Status::Ready);

    chat.add_tool_approval_response(&pending_approval(&chat, |tool| tool.tool_call_id == "c1"), Decision::Approve)
        .await
        .unwrap();
    let messages = chat.messages();
    assert_eq!(messages.len(), 2, "the continuation extends the assistant message");
    assert_eq!(tool_states(&messages), vec![("c1".into(), ToolState::OutputAvailable)]);
    let output = messages[1].tool_parts().next().unwrap().1.output.clone();
    assert_eq!(output, Some(json!({"deleted": "notes.txt"})));
    assert_eq!(last_text(&chat), "deleted it");

    drop(chat);
    let events: Vec<ChatEvent> = events.collect().await;
    assert!(events.iter().any(|event| matches!(event, ChatEvent::ApprovalRequested { tool_name, reason, .. }
                if tool_name == "delete_file" && reason.as_deref() == Some("tool `delete_file` requires approval"))));
}

#[tokio::test]
async fn a_client_tool_result_is_sent_once_given() {
    let chat = chat(json!([[call("q1", "ask_user", json!({"question": "which file?"}))], [text("thanks")]]));
    chat.send_message("ask me").await.unwrap();
    assert_eq!(tool_states(&chat.messages()), vec![("q1".into(), ToolState::InputAvailable)]);
    chat.add_tool_output("q1", ToolOutput::Output(json!("notes.txt"))).await.unwrap();
    assert_eq!(tool_states(&chat.messages()), vec![("q1".into(), ToolState::OutputAvailable)]);
    assert_eq!(last_text(&chat), "thanks");
}

#[tokio::test]
async fn with_a_ledger_every_answer_is_recorded_and_audited() {
    use toolgate::TextRequest;
    use toolgate::approval::ApprovalSigner;
    use toolgate::ledger::{AuditKind, AuditQuery, LedgerConfig, MemoryStore};

    let store = Arc::new(MemoryStore::new());
    let ledger = LedgerConfig::new(store.clone());
    let signer = ApprovalSigner::new("in-process-test").unwrap();
    let model = scripted(json!([
        [call("a", "delete_file", json!({"path": "a.txt"}))],
        [call("b", "delete_file", json!({"path": "b.txt"}))],
        [text("done")]
    ]));
    let transport = InProcessTransport::with_requests(model, move |chat_id, messages| {
        TextRequest::new(messages)
            .toolkit(demo::toolkit())
            .approval_signer(signer.clone())
            .ledger(ledger.conversation(chat_id))
    });
    let chat = Chat::new("ledgered", transport);
    chat.send_message("delete a and b").await.unwrap();
    chat.add_tool_approval_response(&pending_approval(&chat, |tool| tool.tool_call_id == "a"), Decision::Approve)
        .await
        .unwrap();
    chat.add_tool_approval_response(
        &pending_approval(&chat, |tool| tool.tool_call_id == "b"),
        Decision::deny_because("keep b"),
    )
    .await
    .unwrap();
    assert_eq!(last_text(&chat), "done");
    assert_eq!(
        tool_states(&chat.messages()),
        vec![("a".into(), ToolState::OutputAvailable), ("b".into(), ToolState::OutputDenied)]
    );

    let query = AuditQuery { conversation_id: Some("ledgered".into()), ..AuditQuery::default() };
    let kinds: Vec<AuditKind> = store.audit(&query).await.unwrap().into_iter().map(|event| event.kind).collect();
    assert_eq!(
        kinds,
        [AuditKind::Issued, AuditKind::Approved, AuditKind::Executed, AuditKind::Issued, AuditKind::Denied]
    );
}
