//! History terms (`[rule.history]`) over the call-gating API's calls: a
//! count limit holds under concurrent `POST /api/calls` on SQLite and on two
//! Postgres replicas (one conditional write: the history read and the
//! call's own entry); calls approved by a person and run are counted as a
//! chat's are, a call a rule let through is counted once however it ends,
//! and a denial by a history rule is `denied`, naming the figures; 50
//! approved calls started at once against a limit of 10: exactly 10 start
//! (each claim judged again on the history, in one conditional write).
//!
//! Postgres runs when `TOOLGATE_TEST_POSTGRES_URL` is set:
//! `bash scripts/with-postgres.sh cargo test -p toolgate-server --test calls_history`.

mod calls_support;
mod common;

use calls_support::*;
use serde_json::json;
use toolgate_server::CallsDefault;

/// Texts are allowed, ten a day for everyone; notes three; payments are the owner's to approve, one a day.
const RULES: &str = r#"
[[rule]]
name = "texts"
action = "allow"
tool = "send_text"

[[rule]]
name = "ten-texts"
action = "deny"
tool = "send_text"
reason = "ten texts a day"
history = { window = "24h", scope = "everyone", count = { gte = 10 } }

[[rule]]
name = "notes"
action = "allow"
tool = "note"

[[rule]]
name = "three-notes"
action = "deny"
tool = "note"
history = { window = "24h", scope = "everyone", count = { gte = 3 } }

[[rule]]
name = "payments"
action = "ask"
tool = "pay"

[[rule]]
name = "one-payment"
action = "deny"
tool = "pay"
history = { window = "24h", scope = "everyone", count = { gte = 1 } }

[[rule]]
name = "transfers"
action = "ask"
tool = "transfer"

[[rule]]
name = "ten-transfers"
action = "deny"
tool = "transfer"
reason = "ten transfers a day"
history = { window = "24h", scope = "everyone", count = { gte = 10 } }
"#;

/// 50 concurrent calls, spread over the replicas, against a limit of 10: exactly 10 pass.
async fn exactly_ten_of_fifty(backend: Backend) {
    let Some(replicas) = replicas(backend, RULES, CallsDefault::Ask).await else { return };
    let servers = replicas.all();
    let calls = (0..50).map(|n| {
        let server = servers[n % servers.len()];
        let user = ["alice", "bob"][n % 2];
        gate(server, user, json!({"tool": "send_text", "input": {"n": n}, "idempotencyKey": format!("text-{n}")}))
    });
    let replies = futures::future::join_all(calls).await;
    let mut decisions = std::collections::BTreeMap::<String, usize>::new();
    for reply in &replies {
        assert_eq!(reply.status, 200, "{}", reply.body);
        *decisions.entry(text(&reply.json(), "decision").to_owned()).or_default() += 1;
    }
    assert_eq!(decisions, [("allow".to_owned(), 10), ("deny".to_owned(), 40)].into(), "{backend:?}");
    let denied = replies.iter().map(|reply| reply.json()).find(|body| body["decision"] == "deny").unwrap();
    let reason = text(&denied, "reason");
    assert!(reason.contains("ten texts a day") && reason.contains("10 earlier calls vs >= 10"), "{reason}");
    // A retry of an allowed call is the same call, not one more.
    let first = replies.iter().map(|reply| reply.json()).find(|body| body["decision"] == "allow").unwrap();
    let id = text(&first, "callId");
    let again = replies.iter().position(|reply| reply.json()["callId"] == id).unwrap();
    let retry = json!({"tool": "send_text", "input": {"n": again}, "idempotencyKey": format!("text-{again}")});
    let retried = gate(replicas.second(), ["alice", "bob"][again % 2], retry).await.json();
    assert_eq!((text(&retried, "callId"), text(&retried, "decision")), (id, "allow"));
}

#[tokio::test]
async fn a_count_limit_lets_exactly_ten_of_fifty_concurrent_calls_pass_in_memory() {
    exactly_ten_of_fifty(Backend::Memory).await;
}

#[tokio::test]
async fn a_count_limit_lets_exactly_ten_of_fifty_concurrent_calls_pass_on_sqlite_replicas() {
    exactly_ten_of_fifty(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_count_limit_lets_exactly_ten_of_fifty_concurrent_calls_pass_on_postgres_replicas() {
    exactly_ten_of_fifty(Backend::Postgres).await;
}

/// Run calls count as a chat's do: a rule-allowed call once (however it
/// ends), a call a person approved once it ran; a history denial names the figures.
async fn run_calls_are_counted(backend: Backend) {
    let Some(replicas) = replicas(backend, RULES, CallsDefault::Ask).await else { return };
    let (first, second) = (&replicas.first, replicas.second());
    for n in 0..2 {
        let allowed = gate(first, "alice", json!({"tool": "note", "input": {"n": n}})).await.json();
        assert_eq!(text(&allowed, "decision"), "allow", "{allowed}");
        let id = text(&allowed, "callId");
        assert_eq!(start_call(second, "alice", id).await.status, 200);
        assert_eq!(finish_call(first, "alice", id, json!({"output": "ok"})).await.status, 200);
    }
    // Two notes ran: the third passes (each counted once, not by its `allowed` and its `executed` both).
    let third = gate(second, "alice", json!({"tool": "note", "input": {"n": 2}})).await.json();
    assert_eq!(text(&third, "decision"), "allow", "{third}");
    let fourth = gate(first, "bob", json!({"tool": "note", "input": {"n": 3}})).await.json();
    assert_eq!(text(&fourth, "decision"), "deny", "{fourth}");
    assert!(text(&fourth, "reason").contains("3 earlier calls vs >= 3 in the last 24h (everyone)"), "{fourth}");
    let shown = status(first, "bob", text(&fourth, "callId")).await.json();
    assert_eq!(text(&shown, "state"), "denied");
    assert!(text(&shown, "reason").contains("3 earlier calls"), "{shown}");

    // A payment its owner approves, started and finished, is one payment.
    let asked = gate(first, "alice", json!({"tool": "pay", "input": {"amount": 5}})).await;
    assert_eq!(asked.status, 202, "{}", asked.body);
    let asked = asked.json();
    assert_eq!(vote(second, text(&asked, "approvalId"), "alice", json!({"decision": "approve"})).await.status, 200);
    // Approved, not run yet: not counted.
    let meanwhile = gate(second, "bob", json!({"tool": "pay", "input": {"amount": 6}})).await;
    assert_eq!((meanwhile.status, text(&meanwhile.json(), "decision").to_owned()), (202, "pending".to_owned()));
    let id = text(&asked, "callId");
    assert_eq!(start_call(first, "alice", id).await.status, 200);
    assert_eq!(finish_call(second, "alice", id, json!({"output": "paid"})).await.status, 200);
    let next = gate(first, "carol", json!({"tool": "pay", "input": {"amount": 7}})).await.json();
    assert_eq!(text(&next, "decision"), "deny", "{next}");
    assert!(text(&next, "reason").contains("1 earlier call vs >= 1"), "{next}");
}

#[tokio::test]
async fn run_calls_are_counted_in_memory() {
    run_calls_are_counted(Backend::Memory).await;
}

#[tokio::test]
async fn run_calls_are_counted_on_sqlite_replicas() {
    run_calls_are_counted(Backend::Sqlite).await;
}

#[tokio::test]
async fn run_calls_are_counted_on_postgres_replicas() {
    run_calls_are_counted(Backend::Postgres).await;
}

/// 50 calls asked, each approved by its owner, then started at once over the
/// replicas against a limit of 10: exactly 10 start; the others are denied
/// by the rule as they start (409 `call_not_approved`, the call `denied`
/// with the rule's reason), and never run.
async fn exactly_ten_of_fifty_approved_calls_start(backend: Backend) {
    let Some(replicas) = replicas(backend, RULES, CallsDefault::Ask).await else { return };
    let servers = replicas.all();
    let mut ids = Vec::new();
    for n in 0..50 {
        let user = ["alice", "bob"][n % 2];
        let asked = gate(servers[n % servers.len()], user, json!({"tool": "transfer", "input": {"n": n}})).await;
        assert_eq!(asked.status, 202, "{}", asked.body);
        let asked = asked.json();
        let voted =
            vote(servers[(n + 1) % servers.len()], text(&asked, "approvalId"), user, json!({"decision": "approve"}));
        assert_eq!(voted.await.status, 200);
        ids.push((user, text(&asked, "callId").to_owned()));
    }
    let starts = ids.iter().enumerate().map(|(n, (user, id))| start_call(servers[n % servers.len()], user, id));
    let replies = futures::future::join_all(starts).await;
    let started = replies.iter().filter(|reply| reply.status == 200).count();
    let refused: Vec<_> = replies.iter().filter(|reply| reply.status == 409).collect();
    assert_eq!((started, refused.len()), (10, 40), "{backend:?}");
    assert!(refused.iter().all(|reply| code(reply) == "call_not_approved"), "{}", refused[0].body);
    assert!(refused[0].body.contains("ten transfers a day"), "{}", refused[0].body);
    let (n, _) = replies.iter().enumerate().find(|(_, reply)| reply.status == 409).unwrap();
    let (user, id) = &ids[n];
    let shown = status(&replicas.first, user, id).await.json();
    assert_eq!(text(&shown, "state"), "denied", "{shown}");
    let reason = text(&shown, "reason");
    assert!(reason.contains("ten transfers a day") && reason.contains("10 earlier calls vs >= 10"), "{reason}");
}

#[tokio::test]
async fn exactly_ten_of_fifty_approved_calls_start_in_memory() {
    exactly_ten_of_fifty_approved_calls_start(Backend::Memory).await;
}

#[tokio::test]
async fn exactly_ten_of_fifty_approved_calls_start_on_sqlite_replicas() {
    exactly_ten_of_fifty_approved_calls_start(Backend::Sqlite).await;
}

#[tokio::test]
async fn exactly_ten_of_fifty_approved_calls_start_on_postgres_replicas() {
    exactly_ten_of_fifty_approved_calls_start(Backend::Postgres).await;
}
