//! Server-side continuation of AG-UI threads: alice's run pauses on a
//! `delete_file` call routed to bob; bob approves in the inbox; the server
//! resumes the thread itself (the call runs once, the model answers), and
//! alice's client, which still holds the thread as it paused, is caught up
//! by its next run's `MESSAGES_SNAPSHOT`, with or without a new message.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::http::HeaderName;
use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::ledger::{LedgerConfig, MemoryStore};
use toolgate_policy::{Policy, PolicyHandle};
use toolgate_server::PrincipalSource;

const RULE: &str =
    "[[rule]]\nname = \"bob-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\napprovers = [\"bob\"]\n";

struct Thread {
    server: Server,
    runs: Arc<AtomicUsize>,
}

impl Thread {
    async fn start() -> Self {
        Self::start_with(RULE).await
    }

    /// A thread on a server with these rules.
    async fn start_with(rules: &'static str) -> Self {
        let runs = Arc::new(AtomicUsize::new(0));
        let toolkit = counting_toolkit(runs.clone());
        let server = start_configured(agui_script(), move |config| {
            config.toolkit = toolkit;
            config.policy = PolicyHandle::new(Policy::from_toml_str(rules).unwrap());
            config.principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
            config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
        })
        .await;
        Self { server, runs }
    }

    async fn run(&self, input: Value) -> Vec<Value> {
        let headers = [("content-type", "application/json"), ("x-user", "alice")];
        agui_events(&send(&self.server, "POST", "/ag-ui", &headers, input.to_string().as_bytes()).await)
    }

    fn model_calls(&self) -> usize {
        self.server.trace_text().lines().count()
    }

    /// Alice's first run pauses; bob approves; the server continues. Returns
    /// the messages alice's client holds (as it paused) and the interrupt id.
    async fn paused_then_continued(&self) -> (Value, Value) {
        let first = self.run(input("r1", json!([{"id": "m1", "role": "user", "content": "delete notes.txt"}]))).await;
        let interrupt = last_event(&first, "RUN_FINISHED")["outcome"]["interrupts"][0]["id"].clone();
        let held = last_event(&first, "MESSAGES_SNAPSHOT")["messages"].clone();
        let path = format!("/api/approvals/{}", interrupt.as_str().unwrap());
        let headers = [("content-type", "application/json"), ("x-user", "bob")];
        let vote = send(&self.server, "POST", &path, &headers, br#"{"decision":"approve"}"#).await;
        assert_eq!(vote.status, 200, "{}", vote.body);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.model_calls() < 2 {
            assert!(Instant::now() < deadline, "the server did not continue the thread");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(self.runs.load(Ordering::SeqCst), 1, "the approved call ran once, on the server");
        (held, interrupt)
    }
}

fn input(run_id: &str, messages: Value) -> Value {
    json!({"threadId": "t1", "runId": run_id, "state": {}, "tools": [], "context": [], "messages": messages})
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|event| event["type"].as_str().unwrap()).collect()
}

/// The roles and texts of a snapshot's messages.
fn outline(snapshot: &Value) -> Vec<(String, String)> {
    snapshot["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap_or("").to_owned()))
        .collect()
}

#[tokio::test]
async fn a_resume_after_the_server_continued_gets_the_thread_and_runs_nothing() {
    let thread = Thread::start().await;
    let (held, interrupt) = thread.paused_then_continued().await;
    let calls = thread.model_calls();
    let mut resume = input("r2", held);
    resume["resume"] = json!([{"interruptId": interrupt, "status": "resolved", "payload": {"approved": true}}]);
    let events = thread.run(resume).await;
    assert_eq!(kinds(&events), ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"], "{events:#?}");
    let messages = outline(last_event(&events, "MESSAGES_SNAPSHOT"));
    assert_eq!(messages.last().unwrap(), &("assistant".to_owned(), "Done.".to_owned()), "{messages:?}");
    assert!(messages.iter().any(|(role, content)| role == "tool" && content.contains("notes.txt")), "{messages:?}");
    assert_eq!(last_event(&events, "STATE_SNAPSHOT")["snapshot"]["toolgate"]["pendingApprovals"], json!([]));
    assert_eq!((thread.runs.load(Ordering::SeqCst), thread.model_calls()), (1, calls), "nothing ran again");

    // Caught up: the next run from the snapshot goes on as usual.
    let mut history = last_event(&events, "MESSAGES_SNAPSHOT")["messages"].as_array().unwrap().clone();
    history.push(json!({"id": "m2", "role": "user", "content": "anything else?"}));
    let next = thread.run(input("r3", Value::Array(history))).await;
    assert_eq!(last_event(&next, "RUN_FINISHED")["outcome"]["type"], "success", "{next:#?}");
}

#[tokio::test]
async fn a_new_message_after_the_server_continued_goes_on_from_the_stored_thread() {
    let thread = Thread::start().await;
    let (held, _) = thread.paused_then_continued().await;
    let mut messages = held.as_array().unwrap().clone();
    messages.push(json!({"id": "m2", "role": "user", "content": "anything else?"}));
    let events = thread.run(input("r2", Value::Array(messages))).await;
    assert_eq!(&kinds(&events)[..2], ["RUN_STARTED", "MESSAGES_SNAPSHOT"], "{events:#?}");
    let caught_up = outline(&events[1]);
    let roles: Vec<&str> = caught_up.iter().map(|(role, _)| role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant", "user"], "{caught_up:?}");
    let text: String = events.iter().filter_map(|event| event["delta"].as_str()).collect();
    assert_eq!(text, "Nothing else to do.");
    assert_eq!(last_event(&events, "RUN_FINISHED")["outcome"]["type"], "success");
    assert_eq!(thread.runs.load(Ordering::SeqCst), 1, "the call did not run again");
}

/// An AG-UI resume whose `editedArgs` the rules route to bob: alice's own
/// interrupt is superseded by a new approval routed to him, the run reports
/// the interrupt and runs nothing, and once bob approves, the server
/// continues the thread and the edited call runs once.
#[tokio::test]
async fn a_resumed_edit_past_a_routed_rule_waits_for_its_approver_then_runs_once() {
    let rule = "[[rule]]\nname = \"etc-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\napprovers = [\"bob\"]\n\
                [rule.input]\n\"/path\" = { glob = \"/etc/*\" }\n";
    let thread = Thread::start_with(rule).await;
    let first = thread.run(input("r1", json!([{"id": "m1", "role": "user", "content": "delete notes.txt"}]))).await;
    let interrupt = last_event(&first, "RUN_FINISHED")["outcome"]["interrupts"][0]["id"].clone();
    let held = last_event(&first, "MESSAGES_SNAPSHOT")["messages"].clone();
    let mut resume = input("r2", held);
    resume["resume"] = json!([{"interruptId": interrupt, "status": "resolved",
        "payload": {"approved": true, "editedArgs": {"path": "/etc/passwd"}}}]);
    let events = thread.run(resume).await;
    assert_eq!(kinds(&events), ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"], "{events:#?}");
    assert_eq!(thread.runs.load(Ordering::SeqCst), 0, "nothing ran on alice's edit");
    let original = send(
        &thread.server,
        "GET",
        &format!("/api/approvals/{}", interrupt.as_str().unwrap()),
        &[("x-user", "alice")],
        b"",
    )
    .await
    .json();
    assert_eq!(original["state"], "superseded", "{original}");
    let successor = original["supersededBy"].as_str().unwrap().to_owned();
    let headers = [("content-type", "application/json"), ("x-user", "bob")];
    let vote =
        send(&thread.server, "POST", &format!("/api/approvals/{successor}"), &headers, br#"{"decision":"approve"}"#)
            .await;
    assert_eq!(vote.status, 200, "{}", vote.body);
    let deadline = Instant::now() + Duration::from_secs(10);
    while thread.runs.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the server did not continue the thread");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stored = send(&thread.server, "GET", "/api/audit", &[("x-user", "alice")], b"").await;
    let executed: Vec<Value> = stored
        .body
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["kind"] == "executed")
        .collect();
    assert_eq!(executed.len(), 1, "{}", stored.body);
    assert_eq!(executed[0]["data"]["input"], json!({"path": "/etc/passwd"}), "the edit ran, as bob approved it");
    assert_eq!(thread.runs.load(Ordering::SeqCst), 1);
}
