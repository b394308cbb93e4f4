//! The call-gating API's "done when" list on every store: allow, deny,
//! pending, wait, edit, quorum, expiry, idempotent retries, start twice,
//! finish, interrupted, another principal's call, each run in memory, on
//! two replicas of one SQLite file and on two replicas of one Postgres
//! database (`TOOLGATE_TEST_POSTGRES_URL`: `bash scripts/with-postgres.sh
//! cargo test -p toolgate-server --test calls_replicas`). On replicas the
//! requests alternate between them: a call made on one is waited on,
//! decided, started and finished on the other.

mod calls_support;
mod common;

use std::time::{Duration, Instant};

use calls_support::*;
use common::*;
use serde_json::{Value, json};
use toolgate_server::CallsDefault;

/// Allow and deny at once; a tool nothing names waits for its owner; an
/// owner's edit is the input to run; a quorum of two; another principal's call is unknown.
async fn deciding(replicas: &Replicas) {
    let (one, two) = (&replicas.first, replicas.second());
    let allowed = gate(one, "alice", json!({"tool": "read_file", "input": {"path": "a.txt"}})).await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    let allowed = allowed.json();
    assert_eq!((text(&allowed, "decision"), text(&allowed, "state")), ("allow", "approved"));
    assert_eq!(text(&status(two, "alice", text(&allowed, "callId")).await.json(), "state"), "approved");

    let denied = gate(two, "alice", json!({"tool": "drop_table", "input": {"table": "users"}})).await.json();
    assert_eq!((text(&denied, "decision"), text(&denied, "state")), ("deny", "denied"));
    let shown = status(one, "alice", text(&denied, "callId")).await.json();
    assert_eq!(text(&shown, "state"), "denied");
    assert!(text(&shown, "reason").contains("tables are never dropped"), "{shown}");
    let refused = start_call(one, "alice", text(&denied, "callId")).await;
    assert_eq!((refused.status, code(&refused)), (409, "call_not_approved".to_owned()));

    // Pending, decided by its owner on the other replica with an edit.
    let asked = gate(one, "alice", json!({"tool": "send_email", "input": {"to": "everyone"}})).await;
    assert_eq!(asked.status, 202, "{}", asked.body);
    let asked = asked.json();
    assert_eq!((asked["approvers"].clone(), asked["quorum"].clone()), (json!(["alice"]), json!(1)));
    let inbox = call(two, "GET", "/api/approvals", "alice", None).await.json();
    assert!(inbox["approvals"].as_array().unwrap().iter().any(|item| item["id"] == asked["approvalId"]), "{inbox}");
    let edit = json!({"decision": "approve", "editedInput": {"to": "bob"}});
    assert_eq!(vote(two, text(&asked, "approvalId"), "alice", edit).await.status, 200);
    let shown = status(one, "alice", text(&asked, "callId")).await.json();
    assert_eq!(
        (text(&shown, "state"), &shown["input"], &shown["edited"]),
        ("approved", &json!({"to": "bob"}), &json!(true))
    );
    let started = start_call(two, "alice", text(&asked, "callId")).await;
    assert_eq!(started.json()["input"], json!({"to": "bob"}), "{}", started.body);

    // A quorum of two finance approvers, one vote on each replica; the requester is none of them.
    let transfer = gate(two, "alice", json!({"tool": "transfer", "input": {"amount": 100}})).await.json();
    let (id, approval) = (text(&transfer, "callId"), text(&transfer, "approvalId"));
    assert_eq!((transfer["approvers"].clone(), transfer["quorum"].clone()), (json!(["group:finance"]), json!(2)));
    assert_eq!(vote(one, approval, "alice", json!({"decision": "approve"})).await.status, 403);
    assert_eq!(vote(one, approval, "bob", json!({"decision": "approve"})).await.status, 200);
    assert_eq!(text(&status(two, "alice", id).await.json(), "state"), "pending");
    assert_eq!(vote(two, approval, "carol", json!({"decision": "approve"})).await.status, 200);
    assert_eq!(text(&status(one, "alice", id).await.json(), "state"), "approved");

    // Another principal's call is unknown, on either replica.
    for server in [one, two] {
        for reply in [
            status(server, "mallory", id).await,
            start_call(server, "mallory", id).await,
            finish_call(server, "mallory", id, json!({"output": 1})).await,
        ] {
            assert_eq!((reply.status, code(&reply)), (404, "unknown_call".to_owned()), "{}", reply.body);
        }
    }
    assert_eq!(start_call(one, "alice", id).await.status, 200, "still alice's to start");
}

/// Waiting: a long-polled GET on one replica answered by a vote on the
/// other, a POST that waits, a wait that ends undecided; expiry.
async fn waiting(replicas: &Replicas) {
    let (one, two) = (&replicas.first, replicas.second());
    let asked = gate(one, "alice", json!({"tool": "send_email", "input": {"to": "bob"}})).await.json();
    let (id, approval) = (text(&asked, "callId").to_owned(), text(&asked, "approvalId").to_owned());
    let waiter = tokio::spawn(long_poll(one.addr, id.clone()));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(vote(two, &approval, "alice", json!({"decision": "approve"})).await.status, 200);
    let (shown, waited) = waiter.await.unwrap();
    assert_eq!(text(&shown, "state"), "approved", "{shown}");
    assert!(waited < Duration::from_secs(10), "answered by the vote ({waited:?})");

    // A POST that waits on one replica, denied on the other.
    let post = {
        let addr = two.addr;
        tokio::spawn(async move {
            let body = json!({"tool": "send_sms", "input": {"to": "carol"}, "wait": "30s"});
            let client = reqwest::Client::new();
            let reply = client.post(format!("http://{addr}/api/calls")).header("x-user", "alice").json(&body);
            reply.send().await.unwrap().json::<Value>().await.unwrap()
        })
    };
    let pending = loop {
        let inbox = call(one, "GET", "/api/approvals", "alice", None).await.json();
        if let Some(item) = inbox["approvals"].as_array().unwrap().iter().find(|item| item["tool"] == "send_sms") {
            break text(item, "id").to_owned();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    vote(one, &pending, "alice", json!({"decision": "deny", "reason": "not today"})).await;
    let answered = post.await.unwrap();
    assert_eq!((text(&answered, "decision"), text(&answered, "reason")), ("deny", "not today"));
    let short = gate(one, "alice", json!({"tool": "fax", "input": {}, "wait": "200ms"})).await;
    assert_eq!(short.status, 202, "{}", short.body);

    // Nobody decides: expired on either replica, never started, never voted on.
    let fax = short.json();
    replicas.clock.advance(Duration::from_secs(3601));
    assert_eq!(text(&status(two, "alice", text(&fax, "callId")).await.json(), "state"), "expired");
    assert_eq!(text(&status(one, "alice", text(&fax, "callId")).await.json(), "state"), "expired");
    let start = start_call(one, "alice", text(&fax, "callId")).await;
    assert_eq!((start.status, code(&start)), (409, "call_not_approved".to_owned()));
    assert_ne!(vote(two, text(&fax, "approvalId"), "alice", json!({"decision": "approve"})).await.status, 200);
}

/// `GET /api/calls/{id}?wait=30s` as alice, and how long it took.
async fn long_poll(addr: std::net::SocketAddr, id: String) -> (Value, Duration) {
    let started = Instant::now();
    let reply = reqwest::Client::new()
        .get(format!("http://{addr}/api/calls/{id}?wait=30s"))
        .header("x-user", "alice")
        .send()
        .await
        .unwrap();
    (reply.json::<Value>().await.unwrap(), started.elapsed())
}

/// Retries attach to the same call on either replica; a call starts once
/// (two starts racing on the two replicas: one wins, 409
/// `call_already_started`), finishes once with its output or error, and is
/// interrupted when its lease lapses.
async fn running(replicas: &Replicas) {
    let (one, two) = (&replicas.first, replicas.second());
    let keyed = json!({"tool": "send_email", "input": {"to": "bob"}, "idempotencyKey": "run-7/step-3"});
    let first = gate(one, "alice", keyed.clone()).await.json();
    let again = gate(two, "alice", keyed.clone()).await.json();
    assert_eq!((&first["callId"], &first["approvalId"]), (&again["callId"], &again["approvalId"]));
    let inbox = call(two, "GET", "/api/approvals", "alice", None).await.json();
    assert_eq!(inbox["approvals"].as_array().unwrap().len(), 1, "one approval for both requests");
    let other = json!({"tool": "send_email", "input": {"to": "eve"}, "idempotencyKey": "run-7/step-3"});
    let other = gate(one, "alice", other).await;
    assert_eq!((other.status, code(&other)), (409, "idempotency_key_reused".to_owned()));

    // Two starts at once, one on each replica: one runs.
    let allowed = gate(two, "alice", json!({"tool": "read_file", "input": {"path": "c.txt"}})).await.json();
    let id = text(&allowed, "callId");
    let early = finish_call(one, "alice", id, json!({"output": 1})).await;
    assert_eq!((early.status, code(&early)), (409, "call_not_started".to_owned()));
    let (a, b) = tokio::join!(start_call(one, "alice", id), start_call(two, "alice", id));
    let mut outcomes = [(a.status, code(&a)), (b.status, code(&b))];
    outcomes.sort();
    assert_eq!(outcomes, [(200, String::new()), (409, "call_already_started".to_owned())], "{} / {}", a.body, b.body);
    let finished = finish_call(two, "alice", id, json!({"output": {"text": "hello"}})).await;
    assert_eq!(finished.status, 200, "{}", finished.body);
    let shown = status(one, "alice", id).await.json();
    assert_eq!((text(&shown, "state"), &shown["output"]), ("finished", &json!({"text": "hello"})));
    let twice = finish_call(one, "alice", id, json!({"output": 2})).await;
    assert_eq!((twice.status, code(&twice)), (409, "call_already_finished".to_owned()));
    let restart = start_call(two, "alice", id).await;
    assert_eq!((restart.status, code(&restart)), (409, "call_already_started".to_owned()));
    // An unkeyed retry within the window is the same call, with its outcome.
    let retry = gate(two, "alice", json!({"tool": "read_file", "input": {"path": "c.txt"}})).await.json();
    assert_eq!((text(&retry, "callId"), text(&retry, "state")), (id, "finished"));

    // A failure is an outcome too.
    let failing = gate(one, "alice", json!({"tool": "read_file", "input": {"path": "d.txt"}})).await.json();
    let id = text(&failing, "callId");
    assert_eq!(start_call(two, "alice", id).await.status, 200);
    assert_eq!(finish_call(one, "alice", id, json!({"error": "disk on fire"})).await.status, 200);
    let shown = status(two, "alice", id).await.json();
    assert_eq!((text(&shown, "state"), &shown["error"]), ("finished", &json!("disk on fire")));

    // A start not finished within the lease is interrupted, on either replica.
    let lapsing = gate(one, "alice", json!({"tool": "read_file", "input": {"path": "e.txt"}})).await.json();
    let id = text(&lapsing, "callId");
    assert_eq!(start_call(one, "alice", id).await.status, 200);
    replicas.clock.advance(toolgate::ledger::DEFAULT_EXECUTION_LEASE + Duration::from_secs(1));
    assert_eq!(text(&status(two, "alice", id).await.json(), "state"), "interrupted");
    let late = finish_call(one, "alice", id, json!({"output": 1})).await;
    assert_eq!((late.status, code(&late)), (409, "call_not_started".to_owned()));
    let restart = start_call(two, "alice", id).await;
    assert_eq!((restart.status, code(&restart)), (409, "call_already_started".to_owned()));

    // After the retry window an unkeyed call is a new one; a keyed one attaches whatever its age.
    replicas.clock.advance(Duration::from_secs(11 * 60));
    let later = gate(two, "alice", json!({"tool": "read_file", "input": {"path": "c.txt"}})).await.json();
    assert_ne!(text(&later, "callId"), text(&retry, "callId"));
    assert_eq!(text(&later, "state"), "approved");
    let keyed_again = gate(one, "alice", keyed).await.json();
    assert_eq!(keyed_again["callId"], first["callId"]);
}

/// The scenario `$run` as a test per backend: in memory, on SQLite replicas, on Postgres replicas.
macro_rules! on_every_store {
    ($($run:ident),* $(,)?) => {$(
        mod $run {
            use super::*;

            async fn on(backend: Backend) {
                let Some(replicas) = replicas(backend, RULES, CallsDefault::Ask).await else { return };
                super::$run(&replicas).await;
            }

            #[tokio::test]
            async fn in_memory() {
                on(Backend::Memory).await;
            }

            #[tokio::test]
            async fn on_sqlite_replicas() {
                on(Backend::Sqlite).await;
            }

            #[tokio::test]
            async fn on_postgres_replicas() {
                on(Backend::Postgres).await;
            }
        }
    )*};
}

on_every_store!(deciding, waiting, running);
