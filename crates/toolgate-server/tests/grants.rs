//! Grants over HTTP: an approver approves with a grant in the inbox
//! (`POST /api/approvals/{id}` with `grant`), later calls it covers run
//! without asking (each a `granted` audit event naming it) until its uses
//! are spent; `GET /api/grants` lists it to its granter and its requester,
//! `DELETE /api/grants/{id}` revokes it; a grant never lifts a deny rule,
//! and a quorum cannot be granted away.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderName;
use common::*;
use serde_json::{Value, json};
use toolgate::ledger::{LedgerConfig, ManualClock, MemoryStore};
use toolgate_policy::{Policy, PolicyHandle};
use toolgate_server::{CallsDefault, PrincipalSource, ServerConfig};

const RULES: &str = r#"
[[rule]]
name = "no-eve"
action = "deny"
tool = "transfer"
input = { "/to" = { equals = "eve" } }

[[rule]]
name = "payments"
action = "ask"
tool = "transfer"
approvers = ["group:finance"]

[[rule]]
name = "wires"
action = "ask"
tool = "wire"
approvers = ["bob", "carol"]
quorum = 2
"#;

const T0: i64 = 1_800_000_000_000;

async fn server() -> (Server, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0));
    let ledger = LedgerConfig::new(Arc::new(MemoryStore::new())).clock(clock.clone()).ttl(Duration::from_secs(3600));
    let server = start_configured(default_script(), move |config: &mut ServerConfig| {
        config.policy = PolicyHandle::new(Policy::from_toml_str(RULES).unwrap());
        config.principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
        config.groups = BTreeMap::from([("finance".to_owned(), vec!["bob".to_owned()])]);
        config.ledger = Some(ledger);
        config.calls.default = CallsDefault::Ask;
    })
    .await;
    (server, clock)
}

/// alice's call of `tool`; its reply.
async fn ask(server: &Server, tool: &str, input: Value) -> Value {
    let reply = call(server, "POST", "/api/calls", "alice", Some(json!({"tool": tool, "input": input}))).await;
    assert!(reply.status == 200 || reply.status == 202, "{}", reply.body);
    reply.json()
}

fn text<'v>(value: &'v Value, key: &str) -> &'v str {
    value[key].as_str().unwrap_or_else(|| panic!("`{key}` in {value}"))
}

async fn vote(server: &Server, approval: &str, user: &str, body: Value) -> Reply {
    call(server, "POST", &format!("/api/approvals/{approval}"), user, Some(body)).await
}

async fn granted_events(server: &Server) -> Vec<Value> {
    let audit = call(server, "GET", "/api/audit", "alice", None).await;
    assert_eq!(audit.status, 200, "{}", audit.body);
    let events = audit.body.lines().map(|line| serde_json::from_str::<Value>(line).unwrap());
    events.filter(|event| event["kind"] == "granted").collect()
}

fn transfer(amount: u32, to: &str) -> Value {
    json!({"amount": amount, "to": to})
}

#[tokio::test]
async fn an_approval_with_a_grant_lets_the_next_calls_like_it_run() {
    let (server, _) = server().await;
    let first = ask(&server, "transfer", transfer(10, "bob")).await;
    assert_eq!(text(&first, "state"), "pending");
    let grant = json!({
        "uses": 2, "within": "1h", "input": {"/amount": {"le": 1000}, "/to": {"equals": "bob"}}, "scope": "principal"
    });
    let voted = vote(&server, text(&first, "approvalId"), "bob", json!({"decision": "approve", "grant": grant})).await;
    assert_eq!(voted.status, 200, "{}", voted.body);

    let listed = call(&server, "GET", "/api/grants", "bob", None).await.json();
    let [grant] = listed["grants"].as_array().unwrap().as_slice() else { panic!("{listed}") };
    assert_eq!((grant["usesLeft"].as_i64(), grant["createdBy"].as_str()), (Some(2), Some("bob")));
    assert_eq!(grant["requester"], "alice");
    let id = text(grant, "id").to_owned();
    let alices = call(&server, "GET", "/api/grants", "alice", None).await.json();
    assert_eq!(alices["grants"].as_array().map(Vec::len), Some(1), "the requester sees it: {alices}");
    let others = call(&server, "GET", "/api/grants", "carol", None).await.json();
    assert_eq!(others["grants"], json!([]), "nobody else does");

    assert_eq!(text(&ask(&server, "transfer", transfer(500, "bob")).await, "state"), "approved");
    assert_eq!(text(&ask(&server, "transfer", transfer(5000, "bob")).await, "state"), "pending", "not covered");
    assert_eq!(text(&ask(&server, "transfer", transfer(20, "eve")).await, "state"), "denied", "never a deny");
    assert_eq!(text(&ask(&server, "transfer", transfer(600, "bob")).await, "state"), "approved");
    assert_eq!(text(&ask(&server, "transfer", transfer(700, "bob")).await, "state"), "pending", "spent");

    let events = granted_events(&server).await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events.iter().all(|event| event["data"]["grant"] == id.as_str()), "{events:?}");
    let listed = call(&server, "GET", "/api/grants", "bob", None).await.json();
    assert_eq!(listed["grants"], json!([]), "a spent grant is not listed");
}

#[tokio::test]
async fn a_revoked_or_expired_grant_lifts_nothing() {
    let (server, clock) = server().await;
    let first = ask(&server, "transfer", transfer(10, "bob")).await;
    let grant = json!({"uses": 5, "within": "10m"});
    vote(&server, text(&first, "approvalId"), "bob", json!({"decision": "approve", "grant": grant})).await;
    assert_eq!(text(&ask(&server, "transfer", transfer(11, "bob")).await, "state"), "approved");
    clock.advance(Duration::from_secs(600));
    assert_eq!(text(&ask(&server, "transfer", transfer(12, "bob")).await, "state"), "pending", "expired");

    let second = ask(&server, "transfer", transfer(13, "bob")).await;
    vote(&server, text(&second, "approvalId"), "bob", json!({"decision": "approve", "grant": {"uses": 5}})).await;
    let listed = call(&server, "GET", "/api/grants", "bob", None).await.json();
    let id = text(&listed["grants"][0], "id").to_owned();
    let refused = call(&server, "DELETE", &format!("/api/grants/{id}"), "carol", None).await;
    assert_eq!((refused.status, refused.json()["error"]["code"].clone()), (404, json!("unknown_grant")));
    let revoked = call(&server, "DELETE", &format!("/api/grants/{id}"), "bob", None).await;
    assert_eq!(revoked.status, 204, "{}", revoked.body);
    assert_eq!(text(&ask(&server, "transfer", transfer(14, "bob")).await, "state"), "pending", "revoked");
}

#[tokio::test]
async fn a_bad_grant_or_a_quorum_is_refused_and_the_vote_not_cast() {
    let (server, _) = server().await;
    let first = ask(&server, "transfer", transfer(10, "bob")).await;
    let approval = text(&first, "approvalId");
    for (grant, code) in [
        (json!({"uses": 0}), "invalid_grant"),
        (json!({"within": "soon"}), "invalid_grant"),
        (json!({"input": {"/amount": {"between": 1}}}), "invalid_grant"),
        (json!({"scope": "everyone"}), "invalid_body"),
    ] {
        let refused = vote(&server, approval, "bob", json!({"decision": "approve", "grant": grant})).await;
        assert_eq!(refused.json()["error"]["code"], code, "{grant}: {}", refused.body);
    }
    let denial = vote(&server, approval, "bob", json!({"decision": "deny", "grant": {"uses": 1}})).await;
    assert_eq!(denial.json()["error"]["code"], "invalid_grant");
    assert_eq!(text(&ask(&server, "transfer", transfer(10, "bob")).await, "state"), "pending", "no vote counted");

    let wire = ask(&server, "wire", json!({"amount": 1})).await;
    let refused =
        vote(&server, text(&wire, "approvalId"), "bob", json!({"decision": "approve", "grant": {"uses": 1}})).await;
    assert_eq!((refused.status, refused.json()["error"]["code"].clone()), (403, json!("grant_not_allowed")));
}

/// A chat's approving answer may carry a grant (the UI approval's `grant`):
/// kept once, as its approver's, with the answer; a repeated request keeps
/// nothing more, and a grant with a denial is refused.
#[tokio::test]
async fn a_chat_answer_with_a_grant_keeps_it_once() {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let toolkit = counting_toolkit(runs.clone());
    let ledger = LedgerConfig::new(Arc::new(MemoryStore::new())).clock(Arc::new(ManualClock::new(T0)));
    let server = start_configured(default_script(), move |config: &mut ServerConfig| {
        config.toolkit = toolkit;
        config.ledger = Some(ledger);
    })
    .await;
    let first = json!({"id": "chat-1", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]}
    ]});
    let reply = post(&server, "/api/chat", "application/json", first.to_string().as_bytes()).await;
    let chunks = reply.chunks();
    let request = chunks.iter().find(|chunk| chunk["type"] == "tool-approval-request").expect("asked");
    let (approval, message) = (request["approvalId"].clone(), chunks[0]["messageId"].clone());
    let answer = |approved: bool| {
        json!({"id": "chat-1", "trigger": "submit-message", "messageId": message, "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]},
            {"id": message, "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "tool-delete_file", "toolCallId": "call-1", "state": "approval-responded",
                 "input": {"path": "notes.txt"},
                 "approval": {"id": approval, "approved": approved, "grant": {"uses": 3, "within": "1h"}}}
            ]}
        ]})
    };
    let refused = post(&server, "/api/chat", "application/json", answer(false).to_string().as_bytes()).await;
    assert!(refused.body.contains("invalid_grant"), "{} {}", refused.status, refused.body);
    for _ in 0..2 {
        let reply = post(&server, "/api/chat", "application/json", answer(true).to_string().as_bytes()).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    let listed = get(&server, "/api/grants").await.json();
    let [grant] = listed["grants"].as_array().unwrap().as_slice() else { panic!("{listed}") };
    assert_eq!((grant["usesLeft"].as_i64(), &grant["approvalId"]), (Some(3), &approval));
    assert_eq!(grant["scope"], json!({"kind": "conversation", "conversationId": "chat-1"}));
}
