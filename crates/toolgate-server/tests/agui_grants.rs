//! A grant given through an AG-UI resume: an approving entry's payload
//! carries the inbox's grant object, checked and kept through the one grant
//! function (`toolgate_policy::grants::issue`); a later matching call in
//! that thread runs without asking and spends a use. An invalid grant, or
//! one with a denial, is `RUN_ERROR` with the inbox's code, and nothing runs.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::ledger::{AuditKind, AuditQuery, AuditStore, ConversationStore, LedgerConfig, MemoryStore};

/// The model: deletes `a.txt` (asked), says so, then deletes `b.txt` on the follow-up.
fn script() -> Value {
    json!({"turns": [
        [{"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "a.txt"}}],
        [{"type": "text", "text": "Done."}],
        [{"type": "tool-call", "toolCallId": "call-2", "toolName": "delete_file", "input": {"path": "b.txt"}}],
        [{"type": "text", "text": "Deleted b.txt too."}]
    ]})
}

struct Thread {
    server: Server,
    store: Arc<MemoryStore>,
    runs: Arc<AtomicUsize>,
}

impl Thread {
    async fn start() -> Self {
        let runs = Arc::new(AtomicUsize::new(0));
        let toolkit = counting_toolkit(runs.clone());
        let store = Arc::new(MemoryStore::new());
        let ledger = LedgerConfig::new(store.clone());
        let server = start_configured(script(), move |config| {
            config.toolkit = toolkit;
            config.ledger = Some(ledger);
        })
        .await;
        Self { server, store, runs }
    }

    async fn run(&self, input: Value) -> Vec<Value> {
        agui_events(&post(&self.server, "/ag-ui", "application/json", input.to_string().as_bytes()).await)
    }

    /// The first run, which asks; the resume's input answering its interrupt with `payload`.
    async fn asked(&self, payload: Value) -> Value {
        let first = self.run(input("r1", json!([{"id": "m1", "role": "user", "content": "delete a.txt"}]))).await;
        let interrupt = last_event(&first, "RUN_FINISHED")["outcome"]["interrupts"][0]["id"].clone();
        let mut resume = input("r2", last_event(&first, "MESSAGES_SNAPSHOT")["messages"].clone());
        resume["resume"] = json!([{"interruptId": interrupt, "status": "resolved", "payload": payload}]);
        resume
    }

    /// The live grants' uses left.
    async fn uses_left(&self) -> Vec<Option<i64>> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
        let live = self.store.decisions_by(None, i64::try_from(now).unwrap()).await.unwrap();
        live.iter().map(|grant| grant.uses_left).collect()
    }
}

fn input(run_id: &str, messages: Value) -> Value {
    json!({"threadId": "t1", "runId": run_id, "state": {}, "tools": [], "context": [], "messages": messages})
}

#[tokio::test]
async fn a_grant_given_with_the_resume_lets_a_later_call_in_the_thread_run_without_asking() {
    let thread = Thread::start().await;
    let grant = json!({"uses": 2, "within": "1h", "input": {"/path": {"glob": "*.txt"}}, "scope": "conversation"});
    let resume = thread.asked(json!({"approved": true, "grant": grant})).await;
    let resumed = thread.run(resume.clone()).await;
    assert_eq!(last_event(&resumed, "RUN_FINISHED")["outcome"]["type"], "success", "{resumed:#?}");
    assert_eq!(thread.runs.load(Ordering::SeqCst), 1, "the approved call ran: {resumed:#?}");
    assert_eq!(thread.uses_left().await, [Some(2)], "the grant is kept, no use spent yet");

    // The follow-up: the model deletes b.txt, which the grant covers.
    let mut held = match resumed.iter().rev().find(|event| event["type"] == "MESSAGES_SNAPSHOT") {
        Some(snapshot) => snapshot["messages"].as_array().unwrap().clone(),
        None => resume["messages"].as_array().unwrap().clone(),
    };
    let result = last_event(&resumed, "TOOL_CALL_RESULT");
    if !held.iter().any(|message| message["id"] == result["messageId"]) {
        held.push(
            json!({"id": result["messageId"], "role": "tool", "toolCallId": "call-1", "content": result["content"]}),
        );
    }
    let answer = last_event(&resumed, "TEXT_MESSAGE_START")["messageId"].clone();
    held.push(json!({"id": answer, "role": "assistant", "content": "Done."}));
    held.push(json!({"id": "m2", "role": "user", "content": "and b.txt"}));
    let events = thread.run(input("r3", Value::Array(held))).await;
    let finished = last_event(&events, "RUN_FINISHED");
    assert_eq!(finished["outcome"]["type"], "success", "no interrupt: {finished}");
    assert_eq!(thread.runs.load(Ordering::SeqCst), 2, "the covered call ran without asking");
    assert_eq!(thread.uses_left().await, [Some(1)], "one use spent");
    let audit = thread.store.audit(&AuditQuery::default()).await.unwrap();
    let granted: Vec<_> = audit.iter().filter(|event| event.kind == AuditKind::Granted).collect();
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert_eq!((granted[0].tool_call_id.as_str(), &granted[0].data["input"]), ("call-2", &json!({"path": "b.txt"})));
}

#[tokio::test]
async fn an_invalid_grant_or_one_with_a_denial_is_refused_and_nothing_runs() {
    for (payload, code) in [
        (json!({"approved": true, "grant": {"uses": 0}}), "invalid_grant"),
        (json!({"approved": true, "grant": {"within": "soon"}}), "invalid_grant"),
        (json!({"approved": true, "grant": {"input": {"/path": {"between": 1}}}}), "invalid_grant"),
        (json!({"approved": true, "grant": "five more"}), "invalid_grant"),
        (json!({"approved": false, "grant": {"uses": 5}}), "invalid_grant"),
    ] {
        let thread = Thread::start().await;
        let resume = thread.asked(payload.clone()).await;
        let events = thread.run(resume).await;
        let kinds: Vec<&str> = events.iter().map(|event| event["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["RUN_STARTED", "RUN_ERROR"], "{payload}: {events:#?}");
        assert_eq!(last_event(&events, "RUN_ERROR")["code"], code, "{payload}");
        assert_eq!(thread.runs.load(Ordering::SeqCst), 0, "{payload}: nothing ran");
        assert_eq!(thread.uses_left().await, Vec::<Option<i64>>::new(), "{payload}: no grant kept");
    }
}

#[tokio::test]
async fn a_resume_that_does_not_answer_its_interrupts_exactly_once_keeps_no_grant() {
    let grant = json!({"uses": 5, "within": "1h", "scope": "conversation"});
    let approving = json!({"approved": true, "grant": grant});
    for case in ["the same interrupt answered twice", "an interrupt that is not pending"] {
        let thread = Thread::start().await;
        let mut resume = thread.asked(approving.clone()).await;
        let entry = resume["resume"][0].clone();
        let second = match case {
            "the same interrupt answered twice" => entry.clone(),
            _ => json!({"interruptId": "not-pending", "status": "resolved", "payload": approving}),
        };
        resume["resume"] = json!([entry, second]);
        let events = thread.run(resume).await;
        assert!(events.iter().any(|event| event["type"] == "RUN_ERROR"), "{case}: {events:#?}");
        assert_eq!(thread.runs.load(Ordering::SeqCst), 0, "{case}: nothing ran");
        assert_eq!(thread.uses_left().await, Vec::<Option<i64>>::new(), "{case}: no grant kept");
    }
}
