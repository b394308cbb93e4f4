//! Every call that runs is on record: with a ledger, a call its policy or a
//! gate allows is an `executed` (or `failed`) audit event, a call a gate
//! denies a `denied` one, each with its tool, input, principal and
//! conversation; an approved call's `executed` event names its tool too.

mod common;

use std::sync::Arc;

use common::*;
use futures::FutureExt;
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::approval::lifecycle::direct::DECIDED_BY_POLICY;
use toolgate::ledger::{AuditEvent, AuditKind, AuditQuery, AuditStore, LedgerConfig, ManualClock, MemoryStore};
use toolgate::protocol::ModelMessage;
use toolgate::{CallGate, GateCall, TextRequest, Tool, ToolError, Toolkit, Verdict, generate_text};

const T0: i64 = 1_700_000_000_000;

/// Denies every `transfer_money` to `mallory`; silent about the rest.
struct NoMallory;

impl CallGate for NoMallory {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<Verdict>> {
        let denied = call.tool_name == "transfer_money" && call.input["to"] == "mallory";
        futures::future::ready(denied.then(|| Verdict::deny("rule `no-mallory`: never to mallory"))).boxed()
    }
}

struct Fixture {
    store: Arc<MemoryStore>,
    config: LedgerConfig,
    log: Executions,
}

impl Fixture {
    fn new() -> Self {
        let store = Arc::new(MemoryStore::new());
        let config = LedgerConfig::new(store.clone()).clock(Arc::new(ManualClock::new(T0)));
        Self { store, config, log: Executions::default() }
    }

    fn request(&self, toolkit: Toolkit, conversation: &str) -> TextRequest {
        TextRequest::new(vec![ModelMessage::user("go")])
            .toolkit(toolkit)
            .gate(Arc::new(NoMallory))
            .principal("alice")
            .ledger(self.config.conversation(conversation).principal("alice"))
    }

    async fn events(&self, conversation: &str) -> Vec<AuditEvent> {
        let query = AuditQuery { conversation_id: Some(conversation.into()), ..AuditQuery::default() };
        self.store.audit(&query).await.unwrap()
    }
}

fn calls(parts: Value) -> toolgate::ScriptedModel {
    let mut first: Vec<Value> = parts.as_array().unwrap().clone();
    first.push(json!({"type": "finish", "finishReason": "tool-calls"}));
    script(json!([first, [{"type": "text", "text": "done"}, {"type": "finish", "finishReason": "stop"}]]))
}

fn call(id: &str, tool: &str, input: Value) -> Value {
    json!({"type": "tool-call", "toolCallId": id, "toolName": tool, "input": input})
}

#[tokio::test]
async fn an_allowed_call_and_a_denied_one_are_on_record() {
    let fixture = Fixture::new();
    let model = calls(json!([
        call("t1", "transfer_money", json!({"amount": 50, "to": "bob"})),
        call("t2", "transfer_money", json!({"amount": 5, "to": "mallory"})),
    ]));
    let offered = toolkit(&fixture.log);
    // The tool's definition as offered: its events name it, as an approval's `issued` event does.
    let digest = toolgate::receipt::tool_digest(offered.get("transfer_money").unwrap()).unwrap();
    generate_text(&model, fixture.request(offered, "chat-1")).await.unwrap();
    assert_eq!(fixture.log.call_ids(), ["t1"]);

    let events = fixture.events("chat-1").await;
    let seen: Vec<(AuditKind, &str, &str, Option<&str>)> = events
        .iter()
        .map(|event| (event.kind, event.tool_call_id.as_str(), event.approval_id.as_str(), event.principal.as_deref()))
        .collect();
    assert_eq!(seen, [(AuditKind::Executed, "t1", "", Some("alice")), (AuditKind::Denied, "t2", "", Some("alice"))]);
    assert_eq!(events[0].conversation_id, "chat-1");
    assert_eq!(events[0].at, T0);
    assert_eq!(
        events[0].data,
        json!({
            "toolName": "transfer_money",
            "input": {"amount": 50, "to": "bob"},
            "result": {"type": "json", "value": {"transferred": 50.0}},
            "decidedBy": DECIDED_BY_POLICY,
            "toolDigest": digest,
        })
    );
    assert_eq!(
        events[1].data,
        json!({
            "toolName": "transfer_money",
            "input": {"amount": 5, "to": "mallory"},
            "reason": "rule `no-mallory`: never to mallory",
            "decidedBy": DECIDED_BY_POLICY,
            "toolDigest": digest,
        })
    );
}

#[tokio::test]
async fn a_call_that_fails_is_on_record_as_failed() {
    let fixture = Fixture::new();
    let broken = Tool::function::<Value>("broken")
        .handler(|_: Value, _| async { Err::<Value, _>(ToolError::text("the disk is full")) });
    let model = calls(json!([call("b1", "broken", json!({}))]));
    let toolkit = Toolkit::new(vec![broken]).unwrap();
    generate_text(&model, fixture.request(toolkit, "chat-2")).await.unwrap();

    let events = fixture.events("chat-2").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, AuditKind::Failed);
    assert_eq!(events[0].data["toolName"], "broken");
    assert_eq!(events[0].data["error"], "the disk is full");
}

#[tokio::test]
async fn a_call_that_asks_is_not_on_record_until_it_runs() {
    let fixture = Fixture::new();
    let model = calls(json!([call("d1", "delete_file", json!({"path": "a.txt"}))]));
    let result = generate_text(&model, fixture.request(toolkit(&fixture.log), "chat-3")).await.unwrap();
    assert_eq!(result.approval_requests().len(), 1);
    let kinds: Vec<AuditKind> = fixture.events("chat-3").await.iter().map(|event| event.kind).collect();
    assert_eq!(kinds, [AuditKind::Issued]);
}

#[tokio::test]
async fn without_a_ledger_nothing_is_recorded_and_the_call_still_runs() {
    let log = Executions::default();
    let model = calls(json!([call("w1", "get_weather", json!({"city": "Oslo"}))]));
    let request = TextRequest::new(vec![ModelMessage::user("go")]).toolkit(toolkit(&log));
    generate_text(&model, request).await.unwrap();
    assert_eq!(log.call_ids(), ["w1"]);
}

#[tokio::test]
async fn a_held_call_that_runs_once_its_batch_is_decided_is_on_record() {
    let fixture = Fixture::new();
    let model = calls(json!([
        call("d", "delete_file", json!({"path": "a.txt"})),
        call("w", "get_weather", json!({"city": "Oslo"})),
    ]));
    let hold = |request: TextRequest| request.hold_batch_for_approval(true);
    let first = generate_text(&model, hold(fixture.request(toolkit(&fixture.log), "chat-4"))).await.unwrap();
    assert!(fixture.log.all().is_empty(), "the batch is held");
    let approval_id = first.approval_requests()[0].approval_id.clone();
    let mut history = vec![ModelMessage::user("go")];
    history.extend(first.response_messages);
    history.extend(messages(json!([{"role": "tool", "content": [
        {"type": "tool-approval-response", "approvalId": approval_id, "approved": true}
    ]}])));
    let request = TextRequest::new(history)
        .toolkit(toolkit(&fixture.log))
        .gate(Arc::new(NoMallory))
        .hold_batch_for_approval(true)
        .ledger(fixture.config.conversation("chat-4").principal("alice"));
    generate_text(&ok_model(), request).await.unwrap();
    assert_eq!(fixture.log.call_ids(), ["d", "w"]);

    let ran: Vec<(String, String, Value)> = fixture
        .events("chat-4")
        .await
        .into_iter()
        .filter(|event| event.kind == AuditKind::Executed)
        .map(|event| (event.tool_call_id, event.approval_id, event.data["toolName"].clone()))
        .collect();
    assert_eq!(
        ran,
        [
            ("d".to_owned(), approval_id.clone(), json!("delete_file")),
            ("w".to_owned(), String::new(), json!("get_weather")),
        ]
    );
}
