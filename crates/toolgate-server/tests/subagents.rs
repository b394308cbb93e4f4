//! Sub-agents over HTTP: a depth-2 gated call asked on `/api/chat` as a
//! call the stock AI SDK client answers (`addToolApprovalResponse` on the
//! surfaced part), its lineage kept in the stored conversation, and the
//! approved call run once.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::ledger::{LedgerConfig, MemoryStore};
use toolgate::{Agent, ScriptedModel, Tool, Toolkit};

fn turns(tool: &str, input: Value, done: &str) -> ScriptedModel {
    let script = json!({"turns": [
        [{"type": "tool-call", "toolCallId": "call-1", "toolName": tool, "input": input}],
        [{"type": "text", "text": done}]
    ]});
    ScriptedModel::from_json(&script.to_string()).unwrap()
}

async fn start_tree(runs: Arc<AtomicUsize>) -> Server {
    let janitor =
        Agent::new(turns("delete_file", json!({"path": "notes.txt"}), "Deleted.")).toolkit(counting_toolkit(runs));
    let manager = Agent::new(turns("janitor", json!({"task": "delete notes.txt"}), "The janitor deleted it."))
        .toolkit(Toolkit::new([Tool::agent("janitor", janitor)]).unwrap());
    let toolkit = Toolkit::new([Tool::agent("manager", manager)]).unwrap();
    let root = json!({"turns": [
        [{"type": "tool-call", "toolCallId": "call-1", "toolName": "manager", "input": {"task": "tidy up"}}],
        [{"type": "text", "text": "All tidy."}]
    ]});
    start_configured(root, move |config| {
        config.toolkit = toolkit;
        config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
    })
    .await
}

async fn chat(server: &Server, body: &Value) -> Reply {
    post(server, "/api/chat", "application/json", body.to_string().as_bytes()).await
}

#[tokio::test]
async fn a_depth_two_approval_is_answered_as_the_stock_client_answers_any_other() {
    let runs = Arc::new(AtomicUsize::new(0));
    let server = start_tree(runs.clone()).await;
    let user = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "tidy up"}]});
    let reply = chat(&server, &json!({"id": "chat-1", "trigger": "submit-message", "messages": [user]})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chunks = reply.chunks();
    let call = chunks.iter().find(|c| c["type"] == "tool-input-available" && c["toolCallId"] == "call-1/call-1/call-1");
    let call = call.expect("the nested call is a call of the root message");
    assert_eq!(call["toolName"], "delete_file");
    assert_eq!(
        call["providerMetadata"]["toolgate"]["subAgent"]["lineage"],
        json!([{"agent": "manager", "toolCallId": "call-1"}, {"agent": "janitor", "toolCallId": "call-1"}])
    );
    let request = chunks.iter().find(|c| c["type"] == "tool-approval-request").unwrap();
    assert_eq!(request["toolCallId"], "call-1/call-1/call-1");
    let approval_id = request["approvalId"].as_str().unwrap().to_owned();
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    // The client's copy of the message, as the stream built it, with the person's answer on the nested part.
    let stored = get(&server, "/api/chats/chat-1").await.json();
    let mut assistant = stored["messages"][1].clone();
    let parts = assistant["parts"].as_array_mut().unwrap();
    let nested = parts.iter_mut().find(|part| part["toolCallId"] == "call-1/call-1/call-1").unwrap();
    assert_eq!(nested["callProviderMetadata"], call["providerMetadata"], "the lineage is kept with the part");
    nested["state"] = json!("approval-responded");
    nested["approval"] = json!({"id": approval_id, "approved": true});
    let message_id = assistant["id"].clone();
    let body =
        json!({"id": "chat-1", "trigger": "submit-message", "messageId": message_id, "messages": [user, assistant]});
    let reply = chat(&server, &body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chunks = reply.chunks();
    let output = chunks.iter().find(|c| c["type"] == "tool-output-available" && c["toolCallId"] == "call-1").unwrap();
    assert_eq!(output["output"], "The janitor deleted it.");
    let text: String =
        chunks.iter().filter(|c| c["type"] == "text-delta").map(|c| c["delta"].as_str().unwrap()).collect();
    assert_eq!(text, "All tidy.");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // Sent again: the stored outcome, nothing runs twice.
    let again = chat(&server, &body).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
