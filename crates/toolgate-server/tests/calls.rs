//! The call-gating API (`/api/calls`): allow, deny, `[calls] default`,
//! pending and waiting (on a decision, on an outcome), an approver's edit, a quorum of two, expiry,
//! idempotent retries, start once, finish, interruption, another
//! principal's call, the call stream; and two replicas on one SQLite file
//! and on one Postgres database (a call made on one, decided on the other).
//!
//! Postgres runs when `TOOLGATE_TEST_POSTGRES_URL` is set:
//! `bash scripts/with-postgres.sh cargo test -p toolgate-server --test calls`.

mod calls_support;
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use calls_support::*;
use common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use toolgate::ledger::{LedgerStore, ManualClock, MemoryStore};
use toolgate_server::CallsDefault;

async fn server() -> (Server, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(T0));
    (server_on(Arc::new(MemoryStore::new()), clock.clone(), CallsDefault::Ask).await, clock)
}

/// A server with the shared rules ([`RULES`]) on `store` at `clock`.
async fn server_on(store: Arc<dyn LedgerStore>, clock: Arc<ManualClock>, default: CallsDefault) -> Server {
    server_with(RULES, store, clock, default).await
}

#[tokio::test]
async fn a_rule_allows_or_denies_at_once_and_a_tool_nothing_names_waits_for_its_owner() {
    let (server, _) = server().await;
    let allowed = gate(&server, "alice", json!({"tool": "read_file", "input": {"path": "a.txt"}})).await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    let body = allowed.json();
    assert_eq!((text(&body, "decision"), text(&body, "state")), ("allow", "approved"));
    assert_eq!(body["input"], json!({"path": "a.txt"}));
    assert!(body["reason"].is_null());

    let denied = gate(&server, "alice", json!({"tool": "drop_table", "input": {"table": "users"}})).await;
    assert_eq!(denied.status, 200, "{}", denied.body);
    let body = denied.json();
    assert_eq!((text(&body, "decision"), text(&body, "state")), ("deny", "denied"));
    assert!(text(&body, "reason").contains("tables are never dropped"), "{body}");
    let shown = status(&server, "alice", text(&body, "callId")).await.json();
    assert_eq!(text(&shown, "state"), "denied");
    assert!(text(&shown, "reason").contains("tables are never dropped"));

    let asked = gate(&server, "alice", json!({"tool": "send_email", "input": {"to": "bob"}})).await;
    assert_eq!(asked.status, 202, "{}", asked.body);
    let body = asked.json();
    assert_eq!((text(&body, "decision"), text(&body, "state")), ("pending", "pending"));
    assert_eq!(body["approvers"], json!(["alice"]));
    assert_eq!(body["quorum"], 1);
    assert_eq!(text(&body, "url"), format!("/approvals/{}", text(&body, "approvalId")));
    assert!(text(&body, "expiresAt").ends_with('Z'));
    // The pending call is in its owner's inbox, as any approval.
    let inbox = call(&server, "GET", "/api/approvals", "alice", None).await.json();
    let ids: Vec<&str> = inbox["approvals"].as_array().unwrap().iter().map(|item| text(item, "id")).collect();
    assert_eq!(ids, [text(&body, "approvalId")]);
}

#[tokio::test]
async fn the_configured_default_decides_a_tool_nothing_names() {
    let clock = Arc::new(ManualClock::new(T0));
    let allow = server_on(Arc::new(MemoryStore::new()), clock.clone(), CallsDefault::Allow).await;
    let reply = gate(&allow, "alice", json!({"tool": "send_email", "input": {}})).await;
    assert_eq!((reply.status, text(&reply.json(), "decision").to_owned()), (200, "allow".to_owned()));
    let deny = server_on(Arc::new(MemoryStore::new()), clock, CallsDefault::Deny).await;
    let reply = gate(&deny, "alice", json!({"tool": "send_email", "input": {}})).await;
    assert_eq!((reply.status, text(&reply.json(), "decision").to_owned()), (200, "deny".to_owned()));
    assert!(text(&reply.json(), "reason").contains("[calls] default"));
    // A rule still wins over the default.
    let reply = gate(&deny, "alice", json!({"tool": "read_file", "input": {}})).await;
    assert_eq!(text(&reply.json(), "decision"), "allow");
}

#[tokio::test]
async fn a_waiting_get_and_a_waiting_post_answer_when_the_owner_decides() {
    let (server, _) = server().await;
    let server = Arc::new(server);
    let asked = gate(&server, "alice", json!({"tool": "send_email", "input": {"to": "bob"}})).await.json();
    let (call_id, approval) = (text(&asked, "callId").to_owned(), text(&asked, "approvalId").to_owned());
    let waiting = {
        let (server, call_id) = (server.clone(), call_id.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let reply = call(&server, "GET", &format!("/api/calls/{call_id}?wait=30s"), "alice", None).await;
            (reply, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let voted = vote(&server, &approval, "alice", json!({"decision": "approve"})).await;
    assert_eq!(voted.status, 200, "{}", voted.body);
    let (reply, waited) = waiting.await.unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(text(&reply.json(), "state"), "approved");
    assert!(waited < Duration::from_secs(10), "the vote answered the waiting request ({waited:?})");

    // A POST that waits: decided by a denial while it waits.
    let post = {
        let server = server.clone();
        tokio::spawn(async move {
            gate(&server, "alice", json!({"tool": "send_sms", "input": {"to": "carol"}, "wait": "30s"})).await
        })
    };
    let pending = loop {
        let inbox = call(&server, "GET", "/api/approvals", "alice", None).await.json();
        if let Some(item) = inbox["approvals"].as_array().unwrap().iter().find(|item| item["tool"] == "send_sms") {
            break text(item, "id").to_owned();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    vote(&server, &pending, "alice", json!({"decision": "deny", "reason": "not today"})).await;
    let reply = post.await.unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!((text(&reply.json(), "decision"), text(&reply.json(), "reason")), ("deny", "not today"));

    // A wait that ends undecided answers 202, and a wait over 60s is refused.
    let short = gate(&server, "alice", json!({"tool": "fax", "input": {}, "wait": "200ms"})).await;
    assert_eq!(short.status, 202, "{}", short.body);
    let long = gate(&server, "alice", json!({"tool": "fax", "input": {}, "wait": "2m"})).await;
    assert_eq!((long.status, code(&long)), (400, "invalid_body".to_owned()));
    let long = call(&server, "GET", &format!("/api/calls/{call_id}?wait=61s"), "alice", None).await;
    assert_eq!((long.status, code(&long)), (400, "invalid_query".to_owned()));
}

#[tokio::test]
async fn a_wait_on_a_started_call_answers_its_outcome_or_its_state_when_the_wait_ends() {
    let (server, _) = server().await;
    let server = Arc::new(server);
    let allowed = gate(&server, "alice", json!({"tool": "read_file", "input": {"path": "w.txt"}})).await.json();
    let id = text(&allowed, "callId").to_owned();
    let started = call(&server, "POST", &format!("/api/calls/{id}/start"), "alice", None).await;
    assert_eq!(started.status, 200, "{}", started.body);
    // A wait that ends before the outcome answers the call as it stands.
    let short = call(&server, "GET", &format!("/api/calls/{id}?wait=200ms"), "alice", None).await;
    assert_eq!((short.status, text(&short.json(), "state")), (200, "started"), "{}", short.body);
    let waiting = {
        let (server, id) = (server.clone(), id.clone());
        tokio::spawn(async move { call(&server, "GET", &format!("/api/calls/{id}?wait=60s"), "alice", None).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let output = json!({"output": {"lines": 3}});
    let finished = call(&server, "POST", &format!("/api/calls/{id}/finish"), "alice", Some(output)).await;
    assert_eq!(finished.status, 200, "{}", finished.body);
    // The outcome wakes the waiting request, which reads the call again (long before its wait would end).
    let reply = tokio::time::timeout(Duration::from_secs(30), waiting).await.expect("woken by the outcome").unwrap();
    assert_eq!((reply.status, text(&reply.json(), "state")), (200, "finished"), "{}", reply.body);
    assert_eq!(reply.json()["output"], json!({"lines": 3}));
}

#[tokio::test]
async fn an_approvers_edit_is_the_input_to_run() {
    let (server, _) = server().await;
    let asked = gate(&server, "alice", json!({"tool": "send_email", "input": {"to": "everyone"}})).await.json();
    let edit = json!({"decision": "approve", "editedInput": {"to": "bob"}});
    let voted = vote(&server, text(&asked, "approvalId"), "alice", edit).await;
    assert_eq!(voted.status, 200, "{}", voted.body);
    let shown = status(&server, "alice", text(&asked, "callId")).await.json();
    assert_eq!(text(&shown, "state"), "approved");
    assert_eq!((shown["input"].clone(), shown["edited"].clone()), (json!({"to": "bob"}), json!(true)));
    let started = call(&server, "POST", &format!("/api/calls/{}/start", text(&asked, "callId")), "alice", None).await;
    assert_eq!(started.json()["input"], json!({"to": "bob"}));
}

#[tokio::test]
async fn a_quorum_of_two_decides_with_the_second_approval() {
    let (server, _) = server().await;
    let asked = gate(&server, "alice", json!({"tool": "transfer", "input": {"amount": 100}})).await;
    assert_eq!(asked.status, 202, "{}", asked.body);
    let asked = asked.json();
    assert_eq!((asked["approvers"].clone(), asked["quorum"].clone()), (json!(["group:finance"]), json!(2)));
    let approval = text(&asked, "approvalId");
    // The requester is not an approver.
    let refused = vote(&server, approval, "alice", json!({"decision": "approve"})).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    vote(&server, approval, "bob", json!({"decision": "approve"})).await;
    assert_eq!(text(&status(&server, "alice", text(&asked, "callId")).await.json(), "state"), "pending");
    vote(&server, approval, "carol", json!({"decision": "approve"})).await;
    assert_eq!(text(&status(&server, "alice", text(&asked, "callId")).await.json(), "state"), "approved");
}

#[tokio::test]
async fn an_undecided_call_expires_and_never_starts() {
    let (server, clock) = server().await;
    let asked = gate(&server, "alice", json!({"tool": "send_email", "input": {}})).await.json();
    clock.advance(Duration::from_secs(3601));
    let shown = status(&server, "alice", text(&asked, "callId")).await.json();
    assert_eq!(text(&shown, "state"), "expired");
    let start = call(&server, "POST", &format!("/api/calls/{}/start", text(&asked, "callId")), "alice", None).await;
    assert_eq!((start.status, code(&start)), (409, "call_not_approved".to_owned()));
    let vote = vote(&server, text(&asked, "approvalId"), "alice", json!({"decision": "approve"})).await;
    assert_ne!(vote.status, 200, "{}", vote.body);
}

#[tokio::test]
async fn retries_attach_to_the_same_call() {
    let (server, clock) = server().await;
    let keyed = json!({"tool": "send_email", "input": {"to": "bob"}, "idempotencyKey": "run-7/step-3"});
    let first = gate(&server, "alice", keyed.clone()).await.json();
    let again = gate(&server, "alice", keyed.clone()).await.json();
    assert_eq!((&first["callId"], &first["approvalId"]), (&again["callId"], &again["approvalId"]));
    let inbox = call(&server, "GET", "/api/approvals", "alice", None).await.json();
    assert_eq!(inbox["approvals"].as_array().unwrap().len(), 1, "one approval for both requests");
    // The same key with another input is refused.
    let other =
        gate(&server, "alice", json!({"tool": "send_email", "input": {"to": "eve"}, "idempotencyKey": "run-7/step-3"}))
            .await;
    assert_eq!((other.status, code(&other)), (409, "idempotency_key_reused".to_owned()));
    // Another principal's key is theirs.
    let bobs = gate(&server, "bob", keyed.clone()).await.json();
    assert_ne!(bobs["callId"], first["callId"]);

    // Without a key: the same tool and input within the retry window.
    let plain = json!({"tool": "read_file", "input": {"path": "b.txt"}});
    let first = gate(&server, "alice", plain.clone()).await.json();
    let id = text(&first, "callId").to_owned();
    call(&server, "POST", &format!("/api/calls/{id}/start"), "alice", None).await;
    call(&server, "POST", &format!("/api/calls/{id}/finish"), "alice", Some(json!({"output": "text"}))).await;
    let retry = gate(&server, "alice", plain.clone()).await.json();
    assert_eq!((text(&retry, "callId"), text(&retry, "state")), (id.as_str(), "finished"));
    clock.advance(Duration::from_secs(11 * 60));
    let later = gate(&server, "alice", plain).await.json();
    assert_ne!(text(&later, "callId"), id, "after the retry window the same call is a new one");
    assert_eq!(text(&later, "state"), "approved");
    // A keyed call attaches whatever its age.
    let keyed_again = gate(&server, "alice", keyed).await.json();
    assert_eq!(keyed_again["callId"], first_key(&server).await);
}

/// The call id of alice's keyed `send_email`, as her inbox shows it.
async fn first_key(server: &Server) -> Value {
    let inbox = call(server, "GET", "/api/approvals?state=all", "alice", None).await.json();
    let item = inbox["approvals"].as_array().unwrap().iter().find(|item| item["tool"] == "send_email").cloned();
    item.unwrap()["id"].clone()
}

#[tokio::test]
async fn a_call_starts_once_and_finishes_with_its_output_or_error() {
    let (server, _) = server().await;
    let allowed = gate(&server, "alice", json!({"tool": "read_file", "input": {"path": "c.txt"}})).await.json();
    let id = text(&allowed, "callId");
    let early = call(&server, "POST", &format!("/api/calls/{id}/finish"), "alice", Some(json!({"output": 1}))).await;
    assert_eq!((early.status, code(&early)), (409, "call_not_started".to_owned()));
    let started = call(&server, "POST", &format!("/api/calls/{id}/start"), "alice", None).await;
    assert_eq!(started.status, 200, "{}", started.body);
    assert_eq!(text(&started.json(), "state"), "started");
    let twice = call(&server, "POST", &format!("/api/calls/{id}/start"), "alice", None).await;
    assert_eq!((twice.status, code(&twice)), (409, "call_already_started".to_owned()));
    let both = json!({"output": 1, "error": "x"});
    let bad = call(&server, "POST", &format!("/api/calls/{id}/finish"), "alice", Some(both)).await;
    assert_eq!((bad.status, code(&bad)), (400, "invalid_body".to_owned()));
    let output = json!({"output": {"text": "hello"}});
    let finished = call(&server, "POST", &format!("/api/calls/{id}/finish"), "alice", Some(output)).await;
    assert_eq!(finished.status, 200, "{}", finished.body);
    let shown = status(&server, "alice", id).await.json();
    assert_eq!((text(&shown, "state"), shown["output"].clone()), ("finished", json!({"text": "hello"})));
    let again = call(&server, "POST", &format!("/api/calls/{id}/finish"), "alice", Some(json!({"output": 2}))).await;
    assert_eq!((again.status, code(&again)), (409, "call_already_finished".to_owned()));
    let restart = call(&server, "POST", &format!("/api/calls/{id}/start"), "alice", None).await;
    assert_eq!((restart.status, code(&restart)), (409, "call_already_started".to_owned()));

    let failing = gate(&server, "alice", json!({"tool": "read_file", "input": {"path": "d.txt"}})).await.json();
    let id = text(&failing, "callId");
    call(&server, "POST", &format!("/api/calls/{id}/start"), "alice", None).await;
    let error = json!({"error": "disk on fire"});
    call(&server, "POST", &format!("/api/calls/{id}/finish"), "alice", Some(error)).await;
    let shown = status(&server, "alice", id).await.json();
    assert_eq!((text(&shown, "state"), shown["error"].clone()), ("finished", json!("disk on fire")));
    assert!(shown.get("output").is_none());
}

#[tokio::test]
async fn a_start_not_finished_within_the_lease_is_interrupted() {
    let (server, clock) = server().await;
    let allowed = gate(&server, "alice", json!({"tool": "read_file", "input": {"path": "e.txt"}})).await.json();
    let id = text(&allowed, "callId");
    call(&server, "POST", &format!("/api/calls/{id}/start"), "alice", None).await;
    clock.advance(toolgate::ledger::DEFAULT_EXECUTION_LEASE + Duration::from_secs(1));
    assert_eq!(text(&status(&server, "alice", id).await.json(), "state"), "interrupted");
    let late = call(&server, "POST", &format!("/api/calls/{id}/finish"), "alice", Some(json!({"output": 1}))).await;
    assert_eq!((late.status, code(&late)), (409, "call_not_started".to_owned()));
    let restart = call(&server, "POST", &format!("/api/calls/{id}/start"), "alice", None).await;
    assert_eq!((restart.status, code(&restart)), (409, "call_already_started".to_owned()));

    // A start may ask for a longer lease.
    let allowed = gate(&server, "alice", json!({"tool": "read_file", "input": {"path": "g.txt"}})).await.json();
    let id = text(&allowed, "callId");
    let started =
        call(&server, "POST", &format!("/api/calls/{id}/start"), "alice", Some(json!({"lease": "10m"}))).await;
    assert_eq!(started.status, 200, "{}", started.body);
    clock.advance(Duration::from_secs(5 * 60));
    assert_eq!(text(&status(&server, "alice", id).await.json(), "state"), "started");
    clock.advance(Duration::from_secs(5 * 60 + 1));
    assert_eq!(text(&status(&server, "alice", id).await.json(), "state"), "interrupted");
}

#[tokio::test]
async fn another_principals_call_is_unknown() {
    let (server, _) = server().await;
    let allowed = gate(&server, "alice", json!({"tool": "read_file", "input": {"path": "f.txt"}})).await.json();
    let id = text(&allowed, "callId");
    for (method, path) in [("GET", format!("/api/calls/{id}")), ("POST", format!("/api/calls/{id}/start"))] {
        let reply = call(&server, method, &path, "mallory", None).await;
        assert_eq!((reply.status, code(&reply)), (404, "unknown_call".to_owned()), "{method} {path}");
    }
    let finish = call(&server, "POST", &format!("/api/calls/{id}/finish"), "mallory", Some(json!({"output": 1}))).await;
    assert_eq!((finish.status, code(&finish)), (404, "unknown_call".to_owned()));
    // Nor is an approval of a chat a call.
    let unknown = status(&server, "alice", "held_0000").await;
    assert_eq!(unknown.status, 404);
    // And alice's call is still hers to start.
    let started = call(&server, "POST", &format!("/api/calls/{id}/start"), "alice", None).await;
    assert_eq!(started.status, 200, "{}", started.body);
}

/// An open `GET /api/calls/stream`, read frame by frame.
struct CallStream {
    reader: BufReader<tokio::net::TcpStream>,
}

impl CallStream {
    async fn open(server: &Server, user: &str, query: &str) -> Self {
        let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        let head = format!("GET /api/calls/stream{query} HTTP/1.1\r\nhost: localhost\r\nx-user: {user}\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).await.unwrap();
        assert!(line.contains(" 200 "), "{line}");
        Self { reader }
    }

    /// The next `event: call`'s data.
    async fn next(&mut self) -> Value {
        let read = async {
            let mut line = String::new();
            loop {
                line.clear();
                assert_ne!(self.reader.read_line(&mut line).await.unwrap(), 0, "the stream ended");
                if let Some(data) = line.trim_end().strip_prefix("data: ") {
                    return serde_json::from_str(data).unwrap();
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read).await.expect("an event within 10 s")
    }
}

#[tokio::test]
async fn the_stream_reports_the_listed_calls_and_their_changes() {
    let (server, _) = server().await;
    let first = gate(&server, "alice", json!({"tool": "send_email", "input": {"n": 1}})).await.json();
    let second = gate(&server, "alice", json!({"tool": "send_email", "input": {"n": 2}})).await.json();
    let ids = format!("?ids={},{}", text(&first, "callId"), text(&second, "callId"));
    let mut stream = CallStream::open(&server, "alice", &ids).await;
    let opening = [stream.next().await, stream.next().await];
    assert!(opening.iter().all(|event| event["state"] == "pending"), "{opening:?}");
    vote(&server, text(&second, "approvalId"), "alice", json!({"decision": "approve"})).await;
    let event = stream.next().await;
    assert_eq!((text(&event, "callId"), text(&event, "state")), (text(&second, "callId"), "approved"));
    vote(&server, text(&first, "approvalId"), "alice", json!({"decision": "deny", "reason": "no"})).await;
    let event = stream.next().await;
    assert_eq!((text(&event, "callId"), text(&event, "state")), (text(&first, "callId"), "denied"));
    // Another principal's stream hears nothing of alice's calls.
    let mut mallory = CallStream::open(&server, "mallory", "").await;
    let bobs = gate(&server, "mallory", json!({"tool": "read_file", "input": {}})).await.json();
    gate(&server, "alice", json!({"tool": "read_file", "input": {"x": 1}})).await;
    let event = mallory.next().await;
    assert_eq!(text(&event, "callId"), text(&bobs, "callId"));
}

/// Two servers on one store: a call made on the first waits there, is decided
/// on the second, runs once.
async fn across_replicas(first: &Server, second: &Server) {
    let asked = gate(first, "alice", json!({"tool": "transfer", "input": {"amount": 5}})).await.json();
    let (id, approval) = (text(&asked, "callId").to_owned(), text(&asked, "approvalId").to_owned());
    let waiting = {
        let (addr, id) = (first.addr, id.clone());
        tokio::spawn(async move {
            let path = format!("/api/calls/{id}?wait=30s");
            let started = Instant::now();
            (
                reqwest::Client::new()
                    .get(format!("http://{addr}{path}"))
                    .header("x-user", "alice")
                    .send()
                    .await
                    .unwrap()
                    .json::<Value>()
                    .await
                    .unwrap(),
                started.elapsed(),
            )
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(vote(second, &approval, "bob", json!({"decision": "approve"})).await.status, 200);
    assert_eq!(vote(second, &approval, "carol", json!({"decision": "approve"})).await.status, 200);
    let (shown, waited) = waiting.await.unwrap();
    assert_eq!(text(&shown, "state"), "approved", "{shown}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    let path = format!("/api/calls/{id}/start");
    let (a, b) = tokio::join!(call(first, "POST", &path, "alice", None), call(second, "POST", &path, "alice", None));
    let mut statuses = [a.status, b.status];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "one start wins: {} / {}", a.body, b.body);
    let finished =
        call(second, "POST", &format!("/api/calls/{id}/finish"), "alice", Some(json!({"output": "ok"}))).await;
    assert_eq!(finished.status, 200, "{}", finished.body);
    assert_eq!(text(&status(first, "alice", &id).await.json(), "state"), "finished");
}

#[tokio::test]
async fn two_replicas_on_one_sqlite_file() {
    let dir = std::env::temp_dir().join(format!("toolgate-calls-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = toolgate_store::StoreSpec::Sqlite(dir.join("ledger.db"));
    let one = toolgate_store::open_store(&spec).await.unwrap().unwrap();
    let two = toolgate_store::open_store(&spec).await.unwrap().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let first = server_on(one, clock.clone(), CallsDefault::Ask).await;
    let second = server_on(two, clock, CallsDefault::Ask).await;
    across_replicas(&first, &second).await;
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn two_replicas_on_one_postgres_database() {
    let Ok(url) = std::env::var("TOOLGATE_TEST_POSTGRES_URL") else {
        assert_ne!(
            std::env::var("TOOLGATE_TEST_REQUIRE_POSTGRES").as_deref(),
            Ok("1"),
            "no TOOLGATE_TEST_POSTGRES_URL"
        );
        eprintln!("note: skipped: TOOLGATE_TEST_POSTGRES_URL is not set (run under scripts/with-postgres.sh)");
        return;
    };
    let database = fresh_database(&url).await;
    let spec = toolgate_store::StoreSpec::Postgres(database);
    let one = toolgate_store::open_store(&spec).await.unwrap().unwrap();
    let two = toolgate_store::open_store(&spec).await.unwrap().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let first = server_on(one, clock.clone(), CallsDefault::Ask).await;
    let second = server_on(two, clock, CallsDefault::Ask).await;
    across_replicas(&first, &second).await;
}
