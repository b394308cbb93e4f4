//! Grants through the gateway: a question a grant covers is issued approved
//! on one of its uses, the use spent in the write that issues the call's
//! record, so concurrent retries of one call spend one use and run it once.

mod support;

use std::time::Duration;

use serde_json::json;
use support::{Client, Setup, call, connect, text};
use toolgate::approval::lifecycle::grant::GrantSpec;
use toolgate::approval::lifecycle::{Decision, VoteOptions, Voter, cast};
use toolgate::ledger::{
    ApprovalQuery, AuditKind, AuditQuery, AuditStore, Clock, ConversationStore, InboxStore, SystemClock,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_retries_of_a_granted_call_spend_one_use_and_run_once() {
    let setup = Setup::new("", |options| options.hold = Duration::from_millis(50)).await;
    let session = connect(&setup.gateway, Client::default(), "alice").await;
    let first = call(&session, "count__bump", json!({"label": "a"})).await;
    let id = first["_meta"]["toolgate/approval"]["id"].as_str().unwrap().to_owned();
    // alice approves it out of band with a grant of three more uses.
    let query = ApprovalQuery { limit: 10, ..ApprovalQuery::default() };
    let record = setup.store.list_approvals(&query).await.unwrap().into_iter().find(|r| r.approval_id == id).unwrap();
    let voter = Voter::new(Some("alice".to_owned()));
    let spec: GrantSpec = serde_json::from_value(json!({"uses": 3})).unwrap();
    let grant = toolgate_policy::grants::issue(&record, &voter, &spec, SystemClock.now()).unwrap();
    toolgate::approval::lifecycle::grant::save(&*setup.store, &grant).await.unwrap();
    let approve = Decision::Approve { edited_input: None };
    cast(&*setup.store, &SystemClock, &id, &voter, approve, VoteOptions { continuation: true, note: None })
        .await
        .unwrap();
    assert_eq!(text(&call(&session, "count__bump", json!({"label": "a"})).await), "bumped a #1");

    // Ten identical calls at once: the grant lets one call run, once, on one use.
    let calls = (0..10).map(|_| call(&session, "count__bump", json!({"label": "b"})));
    let results = futures::future::join_all(calls).await;
    // Each gets the outcome, or (held past the hold while the first runs it) is told it is running.
    let running = |result: &serde_json::Value| result["_meta"]["toolgate/approval"]["state"] == json!("executing");
    assert!(results.iter().all(|result| text(result) == "bumped b #2" || running(result)), "{results:?}");
    assert_eq!(setup.counter.count(), 2);
    let left = |store: &std::sync::Arc<toolgate::ledger::MemoryStore>| {
        let store = store.clone();
        async move { store.decisions_by(None, SystemClock.now()).await.unwrap()[0].uses_left }
    };
    assert_eq!(left(&setup.store).await, Some(2), "one use spent");
    let events = setup.store.audit(&AuditQuery::default()).await.unwrap();
    let granted: Vec<_> = events.iter().filter(|event| event.kind == AuditKind::Granted).collect();
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert_eq!(granted[0].data["grant"], json!(grant.id));
}
