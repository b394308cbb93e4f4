//! A grant's use is bound to the call it lets run: concurrent requests for
//! the same call of the call-gating API (the same idempotency key, or the
//! same unkeyed input within the retry window), on one server or spread
//! over two replicas, spend exactly one use and all get the same call,
//! which runs once. In memory, on two replicas of one SQLite file and on
//! two replicas of one Postgres database (`bash scripts/with-postgres.sh
//! cargo test -p toolgate-server --test calls_grants`).

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

/// bob's grants as listed to him: `(id, usesLeft)`.
async fn uses_left(server: &Server) -> Vec<(String, Option<i64>)> {
    let listed = call(server, "GET", "/api/grants", "bob", None).await.json();
    let grants = listed["grants"].as_array().cloned().unwrap_or_default();
    grants.iter().map(|grant| (text(grant, "id").to_owned(), grant["usesLeft"].as_i64())).collect()
}

/// The `granted` audit events.
async fn granted_events(server: &Server) -> Vec<Value> {
    let audit = call(server, "GET", "/api/audit", "alice", None).await;
    assert_eq!(audit.status, 200, "{}", audit.body);
    let events = audit.body.lines().map(|line| serde_json::from_str::<Value>(line).unwrap());
    events.filter(|event| event["kind"] == "granted").collect()
}

/// Ten requests for `body` at once, alternating between the replicas; their replies.
async fn ten_at_once(replicas: &Replicas, body: &Value) -> Vec<Value> {
    let servers = replicas.all();
    let requests = (0..10).map(|index| gate(servers[index % servers.len()], "alice", body.clone()));
    let replies = futures::future::join_all(requests).await;
    replies
        .into_iter()
        .map(|reply| {
            assert_eq!(reply.status, 200, "{}", reply.body);
            reply.json()
        })
        .collect()
}

async fn concurrent_requests_for_one_call_spend_one_use(replicas: &Replicas) {
    let (one, two) = (&replicas.first, replicas.second());
    let first = gate(one, "alice", json!({"tool": "transfer", "input": {"amount": 1, "to": "bob"}})).await;
    assert_eq!(first.status, 202, "{}", first.body);
    let approval = text(&first.json(), "approvalId").to_owned();
    let granted = vote(two, &approval, "bob", json!({"decision": "approve", "grant": {"uses": 5}})).await;
    assert_eq!(granted.status, 200, "{}", granted.body);
    let listed = uses_left(one).await;
    assert!(listed.len() == 1 && listed[0].1 == Some(5), "one grant of 5 uses: {listed:?}");
    let grant = listed[0].0.clone();

    // Ten identical keyed requests at once: one call, one use, one run.
    let keyed = json!({"tool": "transfer", "input": {"amount": 2, "to": "bob"}, "idempotencyKey": "pay-2"});
    let replies = ten_at_once(replicas, &keyed).await;
    let id = text(&replies[0], "callId").to_owned();
    for reply in &replies {
        assert_eq!((text(reply, "callId"), text(reply, "state")), (id.as_str(), "approved"), "{reply}");
        assert_eq!(text(reply, "decision"), "allow", "{reply}");
    }
    assert_eq!(uses_left(two).await, [(grant.clone(), Some(4))], "exactly one use spent");
    let starts = replicas.all().into_iter().cycle().take(10).map(|server| start_call(server, "alice", &id));
    let started = futures::future::join_all(starts).await;
    assert_eq!(started.iter().filter(|reply| reply.status == 200).count(), 1, "the call runs once");
    assert!(started.iter().all(|reply| reply.status == 200 || code(reply) == "call_already_started"));

    // The same unkeyed input ten times at once, within the retry window: one call, one use.
    let unkeyed = json!({"tool": "transfer", "input": {"amount": 3, "to": "bob"}});
    let replies = ten_at_once(replicas, &unkeyed).await;
    let other = text(&replies[0], "callId").to_owned();
    assert_ne!(other, id);
    assert!(replies.iter().all(|reply| text(reply, "callId") == other), "{replies:?}");
    assert_eq!(uses_left(one).await, [(grant.clone(), Some(3))], "exactly one more use spent");

    // Sequential retries spend nothing; each use is on record once, naming the grant and its call.
    gate(two, "alice", keyed).await;
    gate(one, "alice", unkeyed).await;
    assert_eq!(uses_left(two).await, [(grant.clone(), Some(3))]);
    let events = granted_events(one).await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events.iter().all(|event| event["data"]["grant"] == grant.as_str()), "{events:?}");
    let mut calls: Vec<&str> = events.iter().map(|event| event["approvalId"].as_str().unwrap_or_default()).collect();
    calls.sort_unstable();
    // A call decided without a person is its approval.
    let mut expected = [id.as_str(), other.as_str()];
    expected.sort_unstable();
    assert_eq!(calls, expected, "each `granted` event names the approval it let run");
}

async fn on(backend: Backend) {
    let Some(replicas) = replicas(backend, RULES, CallsDefault::Ask).await else { return };
    concurrent_requests_for_one_call_spend_one_use(&replicas).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_memory() {
    on(Backend::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_sqlite_replicas() {
    on(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_postgres_replicas() {
    on(Backend::Postgres).await;
}
