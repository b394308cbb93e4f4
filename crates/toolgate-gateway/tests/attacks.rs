//! The attacker's suite for the gateway (see `docs/src/threat-model.md`):
//! a client name crafted to forge the requester, and an out-of-band edit
//! past a routed rule. Each failed before its fix. And the way such an edit
//! does run: as a new approval its approvers decide.

mod support;

use serde_json::json;
use support::{Client, Setup, call, connect, text, try_connect};
use toolgate::approval::lifecycle::{self, Decision, EditRoute, Route, VoteOptions, Voter, cast};
use toolgate::ledger::{ApprovalStore, AuditKind, AuditQuery, AuditStore, LedgerConfig, SystemClock};

/// Attack 2: the conversation is `mcp:<principal>:<client>`, and a client
/// name holding the owner separator made the requester read as someone
/// else; such a name is refused at `initialize`.
#[tokio::test]
async fn a_client_name_with_a_control_character_is_refused_at_initialize() {
    let setup = Setup::new("", |_| {}).await;
    for name in ["cli\u{1f}x", "cli\nx", &"x".repeat(129)] {
        let client = Client { name: Some(name.to_owned()), ..Client::default() };
        let refused = try_connect(&setup.gateway, client, "alice").await;
        assert!(refused.is_err(), "{name:?} was accepted");
    }
    let fine = Client { name: Some("Claude Code".to_owned()), ..Client::default() };
    assert!(try_connect(&setup.gateway, fine, "alice").await.is_ok());
}

/// Bumps labelled `prod*` wait for carol.
const PROD_BUMPS: &str = r#"
    [[rule]]
    name = "prod-bumps"
    action = "ask"
    tool = "count__bump"
    approvers = ["carol"]
    input = { "/label" = { glob = "prod*" } }
"#;

/// Attack 1 (gateway): an edit decided out of band that the rules route to
/// other approvers does not run, even when the vote skipped the check.
#[tokio::test]
async fn an_out_of_band_edit_past_a_routed_rule_does_not_run() {
    let setup = Setup::new(PROD_BUMPS, |_| {}).await;
    let session = connect(&setup.gateway, Client::default(), "alice").await;
    let pending = call(&session, "count__bump", json!({"label": "dev"})).await;
    let id = pending["_meta"]["toolgate/approval"]["id"].as_str().unwrap().to_owned();
    let edit = Decision::Approve { edited_input: Some(json!({"label": "prod-1"})) };
    let alice = Voter::new(Some("alice".to_owned()));
    cast(&*setup.store, &SystemClock, &id, &alice, edit, VoteOptions::default()).await.unwrap();
    let result = call(&session, "count__bump", json!({"label": "dev"})).await;
    assert_eq!(result["isError"], json!(true), "{result}");
    let said = text(&result);
    assert!(said.contains("does not run") && said.contains("prod-bumps") && said.contains("`carol`"), "{said}");
    assert_eq!(setup.counter.count(), 0, "the edited call never reached the upstream server");
    let events = setup.store.audit(&AuditQuery::default()).await.unwrap();
    assert!(events.iter().any(|event| event.kind == AuditKind::Failed), "the refusal is on record");
}

/// An edit that needs other approvers, superseded as the inbox supersedes
/// it: the held call follows the link, waits for Carol's vote on the new
/// approval, and then runs once, with the edited input.
#[tokio::test]
async fn a_held_call_follows_its_superseding_approval_and_runs_the_edit() {
    let setup = Setup::new(PROD_BUMPS, |_| {}).await;
    let session = connect(&setup.gateway, Client::default(), "alice").await;
    let pending = call(&session, "count__bump", json!({"label": "dev"})).await;
    let id = pending["_meta"]["toolgate/approval"]["id"].as_str().unwrap().to_owned();
    let record = setup.store.approvals(std::slice::from_ref(&id)).await.unwrap().pop().unwrap();
    assert_eq!(record.origin, toolgate::ledger::Origin::Gateway, "the gateway's path holds it, as a field");
    let config = LedgerConfig::new(setup.store.clone());
    let route = Route { approvers: vec!["carol".to_owned()], quorum: 1, ..Route::default() };
    let why = EditRoute { route: &route, reason: "rule `prod-bumps` matched" };
    let alice = Voter::new(Some("alice".to_owned()));
    let edit = json!({"label": "prod-1"});
    let superseded = lifecycle::supersede(&config, &record, &alice, &edit, why).await.unwrap();
    let successor = superseded.successor.approval_id.clone();
    assert_eq!(superseded.successor.origin, toolgate::ledger::Origin::Gateway, "its successor keeps it");
    // The retry holds the new approval: it waits for Carol.
    let waiting = call(&session, "count__bump", json!({"label": "dev"})).await;
    assert_eq!(waiting["_meta"]["toolgate/approval"]["id"], json!(successor), "{waiting}");
    assert_eq!(waiting["_meta"]["toolgate/approval"]["state"], json!("pending"), "{waiting}");
    assert_eq!(setup.counter.count(), 0);
    let carol = Voter::new(Some("carol".to_owned()));
    cast(&*setup.store, &SystemClock, &successor, &carol, Decision::APPROVE, VoteOptions::default()).await.unwrap();
    let result = call(&session, "count__bump", json!({"label": "dev"})).await;
    assert_ne!(result["isError"], json!(true), "{result}");
    assert_eq!(setup.counter.count(), 1, "ran once");
    let events = setup.store.audit(&AuditQuery::default()).await.unwrap();
    let executed: Vec<_> = events.iter().filter(|event| event.kind == AuditKind::Executed).collect();
    assert_eq!(executed.len(), 1, "{events:?}");
    assert_eq!((executed[0].approval_id.as_str(), &executed[0].data["input"]), (successor.as_str(), &edit));
    // Once more: the outcome on record, nothing runs again.
    call(&session, "count__bump", json!({"label": "dev"})).await;
    assert_eq!(setup.counter.count(), 1);
}

/// Item 9: a client could open unlimited held calls; past `max_held_calls`
/// pending approvals a new one is refused, while a retry still attaches.
#[tokio::test]
async fn held_calls_are_capped_per_principal() {
    let setup = Setup::new("", |options| options.max_held_calls = 2).await;
    let session = connect(&setup.gateway, Client::default(), "alice").await;
    for label in ["a", "b"] {
        let pending = call(&session, "count__bump", json!({"label": label})).await;
        assert_eq!(pending["_meta"]["toolgate/approval"]["state"], json!("pending"), "{pending}");
    }
    let refused = call(&session, "count__bump", json!({"label": "c"})).await;
    assert_eq!(refused["isError"], json!(true));
    assert!(text(&refused).contains("--max-held-calls"), "{}", text(&refused));
    let retry = call(&session, "count__bump", json!({"label": "a"})).await;
    assert_eq!(retry["_meta"]["toolgate/approval"]["state"], json!("pending"), "a retry attaches: {retry}");
    // Another principal has room of their own.
    let bob = connect(&setup.gateway, Client::default(), "bob").await;
    let theirs = call(&bob, "count__bump", json!({"label": "c"})).await;
    assert_eq!(theirs["_meta"]["toolgate/approval"]["state"], json!("pending"));
}
