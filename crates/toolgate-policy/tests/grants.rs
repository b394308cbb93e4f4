//! Grants through the gate and the lifecycle: a grant lifts a question for
//! the calls it covers, one use each; it is spent, expires and is revoked;
//! it never lifts a deny, an ask routed to others, or a quorum; an "always
//! allow" sticky decision is a grant without a use limit.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate::approval::lifecycle::grant::{self, GrantRefusal, GrantScope, GrantSpec};
use toolgate::approval::lifecycle::{Voter, direct};
use toolgate::ledger::{
    ApprovalRecord, AuditKind, AuditQuery, AuditStore, ConversationStore, DecisionScope, LedgerConfig, ManualClock,
    MemoryStore, StoredDecision,
};
use toolgate::tool::{ApprovalContext, Caller, GateAction};
use toolgate::{Tool, ToolError};
use toolgate_policy::{Policy, StickyAction, StickyDecision, StoredGate, to_stored};

const NOW: i64 = 1_700_000_000_000;

const ASK: &str = r#"
    [[rule]]
    name = "ask-transfers"
    action = "ask"
    tool = "transfer_money"
"#;

/// The record of an approval of `transfer_money` by `alice` in chat `c`, routed as `routing` says.
fn approval(routing: Value) -> ApprovalRecord {
    let mut record = json!({
        "approvalId": "ap1", "conversationId": "c", "owner": "alice", "toolCallId": "call-0",
        "toolName": "transfer_money", "input": {"amount": 10, "to": "bob"}, "inputDigest": "d",
        "issuedAt": NOW, "expiresAt": NOW + 60_000, "state": "pending", "updatedAt": NOW,
    });
    if !routing.is_null() {
        record["routing"] = routing;
    }
    serde_json::from_value(record).unwrap()
}

fn voter(principal: &str, groups: &[&str]) -> Voter {
    Voter {
        principal: Some(principal.into()),
        groups: groups.iter().map(|group| (*group).to_owned()).collect(),
        ..Voter::default()
    }
}

fn spec(value: Value) -> GrantSpec {
    serde_json::from_value(value).unwrap()
}

/// The grant `voter` makes with an approval of [`approval`], saved.
async fn granted(store: &MemoryStore, routing: Value, by: &Voter, spec: GrantSpec) -> StoredDecision {
    toolgate_policy::grants::check_spec(&spec).unwrap();
    let made = grant::issue(&approval(routing), by, &spec, NOW, grant::new_id()).unwrap();
    grant::save(store, &made).await.unwrap();
    made
}

/// What alice's call of `transfer_money` with `input` in chat `c` gets at `at`, under `rules`.
async fn call(store: &Arc<MemoryStore>, rules: &str, id: &str, input: Value, at: i64) -> GateAction {
    let policy = Arc::new(Policy::from_toml_str(rules).unwrap());
    let config = LedgerConfig::new(store.clone()).clock(Arc::new(ManualClock::new(at)));
    let ledger = config.conversation("c").principal("alice");
    let gate = StoredGate::new(policy, store.clone(), Some("c".into()), Some("alice".into()), at);
    let tool = Tool::function::<Value>("transfer_money").handler(|_: Value, _| async { Ok::<_, ToolError>(json!(1)) });
    let caller = Caller { gate: Some(&gate), conversation_id: Some("c"), principal: Some("alice"), groups: &[] };
    direct::admit(Some(&ledger), caller, &tool, &input, ApprovalContext::new(id, Vec::new())).await.action
}

async fn granted_events(store: &MemoryStore) -> Vec<Value> {
    let events = store.audit(&AuditQuery::default()).await.unwrap();
    events.into_iter().filter(|event| event.kind == AuditKind::Granted).map(|event| event.data).collect()
}

fn small() -> Value {
    json!({"amount": 100, "to": "bob"})
}

#[tokio::test]
async fn a_grant_lets_its_uses_run_then_asks() {
    let store = Arc::new(MemoryStore::new());
    let spec = spec(json!({"uses": 2, "input": {"/amount": {"le": 1000}, "/to": {"equals": "bob"}}}));
    let made = granted(&store, Value::Null, &voter("alice", &[]), spec).await;
    assert_eq!(call(&store, ASK, "t1", small(), NOW + 1).await, GateAction::Allow);
    assert_eq!(call(&store, ASK, "t2", json!({"amount": 5000, "to": "bob"}), NOW + 1).await, GateAction::Ask);
    assert_eq!(call(&store, ASK, "t3", json!({"amount": 5, "to": "eve"}), NOW + 1).await, GateAction::Ask);
    assert_eq!(call(&store, ASK, "t4", small(), NOW + 1).await, GateAction::Allow);
    assert_eq!(call(&store, ASK, "t5", small(), NOW + 1).await, GateAction::Ask, "exhausted");
    let events = granted_events(&store).await;
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["grant"], made.id.as_str());
    assert_eq!(events[0]["grantedBy"], "alice");
    assert_eq!(events[0]["decidedBy"], "grant");
}

#[tokio::test]
async fn a_grant_expires() {
    let store = Arc::new(MemoryStore::new());
    granted(&store, Value::Null, &voter("alice", &[]), spec(json!({"uses": 5, "within": "1h"}))).await;
    assert_eq!(call(&store, ASK, "t1", small(), NOW + 3_599_999).await, GateAction::Allow);
    assert_eq!(call(&store, ASK, "t2", small(), NOW + 3_600_000).await, GateAction::Ask, "expired at its edge");
}

#[tokio::test]
async fn a_revoked_grant_lifts_nothing() {
    let store = Arc::new(MemoryStore::new());
    let made = granted(&store, Value::Null, &voter("alice", &[]), spec(json!({"uses": 5}))).await;
    assert_eq!(call(&store, ASK, "t1", small(), NOW + 1).await, GateAction::Allow);
    store.revoke_decision(&made.id).await.unwrap().expect("revoked");
    assert_eq!(call(&store, ASK, "t2", small(), NOW + 1).await, GateAction::Ask);
}

#[tokio::test]
async fn a_grant_never_lifts_a_deny() {
    let store = Arc::new(MemoryStore::new());
    granted(&store, Value::Null, &voter("alice", &[]), spec(json!({"uses": 5}))).await;
    let deny = r#"
        [[rule]]
        action = "deny"
        tool = "transfer_money"
        input = { "/to" = { equals = "bob" } }
    "#;
    assert_eq!(call(&store, deny, "t1", small(), NOW + 1).await, GateAction::Deny);
    assert!(granted_events(&store).await.is_empty(), "no use spent");
}

#[tokio::test]
async fn a_grant_lifts_a_routed_ask_only_when_its_granter_is_an_approver() {
    let routed = r#"
        [[rule]]
        action = "ask"
        tool = "transfer_money"
        approvers = ["group:finance", "dave"]
    "#;
    let routing =
        json!({"approvers": ["group:finance", "dave"], "members": ["dave"], "quorum": 1, "selfApproval": false});
    for (by, lifts) in [
        (voter("carol", &[]), false),
        (voter("dave", &[]), true),
        (voter("erin", &["finance"]), true),
        (voter("alice", &["finance"]), false),
    ] {
        let store = Arc::new(MemoryStore::new());
        granted(&store, routing.clone(), &by, spec(json!({"uses": 1}))).await;
        let expected = if lifts { GateAction::Allow } else { GateAction::Ask };
        assert_eq!(call(&store, routed, "t1", small(), NOW + 1).await, expected, "granted by {:?}", by.principal);
    }
}

#[tokio::test]
async fn a_grant_never_lifts_another_persons_question_or_a_quorum() {
    let store = Arc::new(MemoryStore::new());
    granted(&store, Value::Null, &voter("bob", &[]), spec(json!({"uses": 5}))).await;
    assert_eq!(call(&store, ASK, "t1", small(), NOW + 1).await, GateAction::Ask, "alice decides her own calls");

    let quorum = r#"
        [[rule]]
        action = "ask"
        tool = "transfer_money"
        approvers = ["bob", "dave"]
        quorum = 2
    "#;
    assert_eq!(call(&store, quorum, "t2", small(), NOW + 1).await, GateAction::Ask);
    let routing = json!({"approvers": ["bob", "dave"], "members": ["bob", "dave"], "quorum": 2, "selfApproval": false});
    let refused = grant::issue(&approval(routing), &voter("bob", &[]), &spec(json!({"uses": 1})), NOW, "g".into());
    assert!(matches!(refused, Err(GrantRefusal::Quorum { quorum: 2, .. })), "{refused:?}");
    assert!(granted_events(&store).await.is_empty());
}

#[tokio::test]
async fn an_always_allow_decision_is_a_grant_without_a_use_limit() {
    let store = Arc::new(MemoryStore::new());
    let always = StickyDecision::new(
        "dec_1",
        StickyAction::Allow,
        "transfer_money",
        DecisionScope::Conversation { conversation_id: "c".into() },
        NOW,
    )
    .created_by("alice");
    store.save_decision(&to_stored(&always)).await.unwrap();
    for id in ["t1", "t2", "t3"] {
        assert_eq!(call(&store, ASK, id, small(), NOW + 1).await, GateAction::Allow);
    }
    assert_eq!(granted_events(&store).await.len(), 3, "every use is on record");
}

#[test]
fn a_bad_grant_is_refused_naming_what_is_wrong() {
    for (bad, says) in [
        (json!({"uses": 0}), "`uses` must be at least 1"),
        (json!({"within": "soon"}), "`within`"),
        (json!({"within": "0m"}), "longer than zero"),
        (json!({"input": {"amount": {"le": 1}}}), "not a JSON pointer"),
        (json!({"input": {"/amount": {"between": 1}}}), "between"),
        (json!({"input": {"/to": {"regex": "("}}}), "/to"),
    ] {
        let error = toolgate_policy::grants::check_spec(&spec(bad.clone())).unwrap_err();
        assert!(error.to_string().contains(says), "{bad}: {error}");
        assert_eq!(error.code(), "invalid_grant");
    }
    let principal = spec(json!({"scope": "principal"}));
    assert_eq!(principal.scope, GrantScope::Principal);
    let made = grant::issue(&approval(Value::Null), &voter("alice", &[]), &principal, NOW, "g".into()).unwrap();
    assert_eq!(made.scope, DecisionScope::Principal { principal: "alice".into() });
    assert_eq!(made.uses_left, None);
}
