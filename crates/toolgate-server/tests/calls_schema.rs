//! The `inputSchema` a caller sends with `POST /api/calls`: the caller's own
//! input must pass it (400 `invalid_tool_input`; a schema that is none is 400
//! `invalid_input_schema`), and it is kept with the call, so an approver's
//! edit that breaks it is refused by the one edit check (400
//! `invalid_tool_input`, naming where): nothing runs and the call stays
//! pending; an edit within it is the input to run. In memory, on SQLite
//! replicas and on Postgres replicas (`TOOLGATE_TEST_POSTGRES_URL`).

mod calls_support;
mod common;

use calls_support::*;
use common::*;
use serde_json::{Value, json};
use toolgate_server::CallsDefault;

const RULES: &str = r#"
[[rule]]
name = "payments"
action = "ask"
tool = "transfer"
approvers = ["group:finance"]
"#;

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"to": {"type": "string", "maxLength": 8}, "amount": {"type": "integer", "maximum": 1000}},
        "required": ["to", "amount"],
        "additionalProperties": false
    })
}

async fn the_schema_binds_caller_and_approvers(backend: Backend) {
    let Some(replicas) = replicas(backend, RULES, CallsDefault::Ask).await else { return };
    let (first, second) = (&replicas.first, replicas.second());

    // The caller's own input, and a schema that is none.
    let bad = json!({"tool": "send", "input": {"to": "bob", "amount": 5000}, "inputSchema": schema()});
    let reply = gate(first, "alice", bad).await;
    assert_eq!((reply.status, code(&reply)), (400, "invalid_tool_input".to_owned()), "{}", reply.body);
    assert!(reply.body.contains("/amount"), "names where: {}", reply.body);
    let nonsense = json!({"tool": "send", "input": {}, "inputSchema": {"type": 12}});
    let reply = gate(first, "alice", nonsense).await;
    assert_eq!((reply.status, code(&reply)), (400, "invalid_input_schema".to_owned()), "{}", reply.body);
    let inbox = call(first, "GET", "/api/approvals?state=all", "alice", None).await.json();
    assert_eq!(inbox["approvals"], json!([]), "nothing was recorded");

    // The owner's edit (no rule names `send`: she decides it).
    let asked = json!({"tool": "send", "input": {"to": "bob", "amount": 10}, "inputSchema": schema()});
    let asked = gate(first, "alice", asked).await;
    assert_eq!(asked.status, 202, "{}", asked.body);
    let asked = asked.json();
    let (id, approval) = (text(&asked, "callId"), text(&asked, "approvalId"));
    let breaking = json!({"decision": "approve", "editedInput": {"to": "everyone-at-once", "amount": 10}});
    let refused = vote(second, approval, "alice", breaking).await;
    assert_eq!((refused.status, code(&refused)), (400, "invalid_tool_input".to_owned()), "{}", refused.body);
    assert!(refused.body.contains("`/to`"), "names where: {}", refused.body);
    assert_eq!(text(&status(first, "alice", id).await.json(), "state"), "pending", "still pending");
    let early = start_call(first, "alice", id).await;
    assert_eq!((early.status, code(&early)), (409, "call_not_approved".to_owned()), "nothing runs");
    let extra = json!({"decision": "approve", "editedInput": {"to": "carol", "amount": 10, "memo": "x"}});
    assert_eq!(vote(second, approval, "alice", extra).await.status, 400, "additionalProperties holds too");
    let within = json!({"decision": "approve", "editedInput": {"to": "carol", "amount": 20}});
    let voted = vote(second, approval, "alice", within).await;
    assert_eq!(voted.status, 200, "{}", voted.body);
    let shown = status(first, "alice", id).await.json();
    assert_eq!(
        (text(&shown, "state"), &shown["input"], &shown["edited"]),
        ("approved", &json!({"to": "carol", "amount": 20}), &json!(true))
    );
    let started = start_call(second, "alice", id).await;
    assert_eq!(started.json()["input"], json!({"to": "carol", "amount": 20}));

    // A routed approver's edit is held to the caller's schema too.
    let routed = json!({"tool": "transfer", "input": {"to": "acme", "amount": 100}, "inputSchema": schema()});
    let routed = gate(first, "alice", routed).await.json();
    let approval = text(&routed, "approvalId");
    let breaking = json!({"decision": "approve", "editedInput": {"to": "acme", "amount": 100000}});
    let refused = vote(second, approval, "bob", breaking).await;
    assert_eq!((refused.status, code(&refused)), (400, "invalid_tool_input".to_owned()), "{}", refused.body);
    assert!(refused.body.contains("`/amount`"), "{}", refused.body);
    let shown = status(first, "alice", text(&routed, "callId")).await.json();
    assert_eq!((text(&shown, "state"), &shown["input"]), ("pending", &json!({"to": "acme", "amount": 100})));
    let within = json!({"decision": "approve", "editedInput": {"to": "acme", "amount": 90}});
    assert_eq!(vote(first, approval, "bob", within).await.status, 200);
    let shown = status(second, "alice", text(&routed, "callId")).await.json();
    assert_eq!((text(&shown, "state"), &shown["input"]), ("approved", &json!({"to": "acme", "amount": 90})));
}

#[tokio::test]
async fn the_schema_binds_caller_and_approvers_in_memory() {
    the_schema_binds_caller_and_approvers(Backend::Memory).await;
}

#[tokio::test]
async fn the_schema_binds_caller_and_approvers_on_sqlite_replicas() {
    the_schema_binds_caller_and_approvers(Backend::Sqlite).await;
}

#[tokio::test]
async fn the_schema_binds_caller_and_approvers_on_postgres_replicas() {
    the_schema_binds_caller_and_approvers(Backend::Postgres).await;
}
