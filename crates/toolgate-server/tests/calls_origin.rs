//! Which approvals are the call-gating API's: the path that holds a record is
//! a stored field (`ApprovalRecord::origin`), set where it is issued, never
//! read from its ids or its conversation's name. A chat's approval and a
//! gateway's held call are unknown at `/api/calls/{id}` (404
//! `unknown_call`), even to their owner and even where their ids and names
//! look like the API's; an API call is found, by its owner only.

mod calls_support;
mod common;

use std::sync::Arc;
use std::time::Duration;

use calls_support::*;
use common::*;
use serde_json::{Value, json};
use toolgate::approval::lifecycle::held::{self, HeldCall};
use toolgate::ledger::{LedgerConfig, LedgerStore, ManualClock, MemoryStore, Origin};
use toolgate_server::CallsDefault;

const RULES: &str = r#"
[[rule]]
name = "reads"
action = "allow"
tool = "read_file"
"#;

/// A held call of `tool` issued by the path `origin` in alice's conversation `name`, as that path issues it.
async fn held_by(store: Arc<dyn LedgerStore>, clock: Arc<ManualClock>, origin: Origin, name: &str) -> String {
    let config = LedgerConfig::new(store).clock(clock);
    let ledger = config.owned(Some("alice"), name).principal("alice").origin(origin);
    let input = json!({"path": "a.txt"});
    let call = HeldCall::new("read_file", &input);
    let attached = held::attach(&ledger, call, Duration::from_secs(600)).await.unwrap();
    attached.into_record().approval_id
}

fn unknown(reply: &Reply) {
    assert_eq!((reply.status, code(reply)), (404, "unknown_call".to_owned()), "{}", reply.body);
}

#[tokio::test]
async fn only_the_apis_own_calls_are_calls() {
    let (store, clock): (Arc<dyn LedgerStore>, _) = (Arc::new(MemoryStore::new()), Arc::new(ManualClock::new(T0)));
    let server = server_with(RULES, store.clone(), clock.clone(), CallsDefault::Ask).await;

    // A chat's approval, asked in alice's chat.
    let turn = json!({"id": "chat-1", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]}
    ]});
    let chat = call(&server, "POST", "/api/chat", "alice", Some(turn)).await;
    let chunks = chat.chunks();
    let request = chunks.iter().find(|chunk| chunk["type"] == "tool-approval-request").expect("an approval request");
    let chat_approval = request["approvalId"].as_str().unwrap();
    unknown(&status(&server, "alice", chat_approval).await);
    unknown(&start_call(&server, "alice", chat_approval).await);

    // A gateway's held call, in its session's conversation; and one whose conversation is named like the API's.
    for name in ["mcp:alice:claude", "api:default"] {
        let gateway_call = held_by(store.clone(), clock.clone(), Origin::Gateway, name).await;
        assert!(gateway_call.starts_with("held_"), "{gateway_call}");
        unknown(&status(&server, "alice", &gateway_call).await);
        unknown(&start_call(&server, "alice", &gateway_call).await);
        unknown(&finish_call(&server, "alice", &gateway_call, json!({"output": 1})).await);
    }

    // The API's own call: found by its owner, unknown to others.
    let allowed = gate(&server, "alice", json!({"tool": "read_file", "input": {"path": "b.txt"}})).await.json();
    let id = text(&allowed, "callId");
    let shown = status(&server, "alice", id).await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert_eq!(text(&shown.json(), "state"), "approved");
    unknown(&status(&server, "mallory", id).await);
    let stored = store.approvals(&[id.to_owned()]).await.unwrap().pop().unwrap();
    assert_eq!(stored.origin, Origin::Calls, "issued by the API, stored as its");
    // A call issued by the API's path in any conversation is the API's.
    let api_made = held_by(store.clone(), clock.clone(), Origin::Calls, "api:run-2").await;
    let shown: Value = status(&server, "alice", &api_made).await.json();
    assert_eq!(text(&shown, "state"), "pending", "{shown}");
}
