//! The JSON Schemas of what the server sends besides its HTTP answers
//! (`docs/src/schemas/`) hold for what it really sends: the webhook bodies
//! of notifications, the `data-toolgate-*` parts of the UI message stream
//! (and of stored chats), and the `CUSTOM` events of AG-UI runs. Each
//! scenario drives a real server with a scripted model; every payload of
//! its kind must validate, and each kind must have been seen. The schemas
//! are strict (no unknown fields), so a change of shape fails here.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::HeaderName;
use common::*;
use serde_json::{Value, json};
use toolgate::ledger::{LedgerConfig, ManualClock, MemoryStore};
use toolgate_notify::{Channels, NotifyConfig};
use toolgate_policy::{Policy, PolicyHandle};
use toolgate_server::{Notifications, PrincipalSource, ServerConfig};
use toolgate_testkit::webhook::WebhookReceiver;

const NOTIFICATION: &str = include_str!("../../../docs/src/schemas/notification.schema.json");
const UI_DATA_PARTS: &str = include_str!("../../../docs/src/schemas/ui-data-parts.schema.json");
const AGUI_CUSTOM_EVENTS: &str = include_str!("../../../docs/src/schemas/agui-custom-events.schema.json");

const PUBLIC: &str = "http://toolgate.test";
const SECRET: &str = "hook-secret";

/// A schema's validator (with formats checked); the schema must itself be valid JSON Schema 2020-12.
fn validator(text: &str) -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(text).unwrap();
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    if let Err(error) = jsonschema::meta::validate(&schema) {
        panic!("{} is not a valid JSON Schema: {error}", schema["$id"]);
    }
    jsonschema::options().should_validate_formats(true).build(&schema).unwrap()
}

/// Fails unless `instance` is valid, naming every error.
fn assert_valid(validator: &jsonschema::Validator, instance: &Value) {
    let errors: Vec<String> =
        validator.iter_errors(instance).map(|error| format!("{error} at {}", error.instance_path())).collect();
    assert!(errors.is_empty(), "{errors:#?}\nin {instance:#}");
}

/// A JSON request as `user` (principals come from `x-user`).
/// Waits until `check` holds (or fails after 15 s).
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A server with `rules`, principals from `x-user`, the finance group, a memory store and `notifications`.
async fn routed_server(script: Value, rules: &str, notifications: Option<Arc<Notifications>>) -> Server {
    let rules = rules.to_owned();
    start_configured(script, move |config: &mut ServerConfig| {
        config.toolkit = counting_toolkit(Arc::default());
        config.policy = PolicyHandle::new(Policy::from_toml_str(&rules).unwrap());
        config.principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
        let finance = ["bob", "carol", "erin"].map(str::to_owned).to_vec();
        config.groups = BTreeMap::from([("finance".to_owned(), finance)]);
        config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
        config.notifications = notifications;
    })
    .await
}

/// A one-user server with a store on a manual clock, whose approvals last 90 s.
async fn expiring_server(script: Value) -> (Server, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let ledger = LedgerConfig::new(Arc::new(MemoryStore::new())).clock(clock.clone()).ttl(Duration::from_secs(90));
    let server = start_configured(script, move |config| {
        config.toolkit = counting_toolkit(Arc::default());
        config.ledger = Some(ledger);
    })
    .await;
    (server, clock)
}

#[tokio::test]
async fn webhook_notifications_match_the_notification_schema() {
    let schema = validator(NOTIFICATION);
    let receiver = WebhookReceiver::start(SECRET);
    let hook = format!(
        "[[notify]]\nname = \"ops\"\nwebhook = \"{}\"\nsecret_env = \"HOOK_SECRET\"\nformat = \"json\"\n",
        receiver.url()
    );
    #[derive(serde::Deserialize)]
    struct File {
        notify: Vec<NotifyConfig>,
    }
    let file: File = toml::from_str(&hook).unwrap();
    let channels = Channels::from_config(&file.notify, &BTreeMap::new(), |_| Some(SECRET.into())).unwrap();
    let notifications = Notifications::with_timeout(channels, Some(PUBLIC), Duration::from_secs(2)).unwrap();
    let rules = "[[rule]]\nname = \"finance-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n\
                 approvers = [\"group:finance\"]\nquorum = 2\nreason = \"finance signs off deletions\"\n";
    let server = routed_server(default_script(), rules, Some(Arc::new(notifications))).await;
    let ask = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]});
    let asked = call(&server, "POST", "/api/chat", "alice", Some(ask)).await;
    let request = asked.chunks().into_iter().find(|c| c["type"] == "tool-approval-request").expect("an approval");
    let id = request["approvalId"].as_str().unwrap().to_owned();
    // Links go with an approval still pending when its event is sent.
    receiver.wait_for(|r| r.iter().any(|r| r.event_type == "approval.requested"), Duration::from_secs(10)).await;
    for voter in ["bob", "carol"] {
        let path = format!("/api/approvals/{id}");
        assert_eq!(call(&server, "POST", &path, voter, Some(json!({"decision": "approve"}))).await.status, 200);
    }
    let kinds = ["approval.requested", "approval.decided", "approval.executed"];
    let received = receiver
        .wait_for(|r| kinds.iter().all(|kind| r.iter().any(|r| r.event_type == *kind)), Duration::from_secs(15))
        .await;
    for request in &received {
        assert_eq!(request.body["type"], request.event_type.as_str());
        assert_valid(&schema, &request.body);
    }
    let requested = received.iter().find(|r| r.event_type == "approval.requested").unwrap().body.clone();
    assert!(requested["links"].is_object(), "the request's notification carries links: {requested:#}");

    // The schema has teeth: an unknown field, a missing link, or links on a decided event fail.
    let mut extra = requested.clone();
    extra["approval"]["extra"] = json!(1);
    assert!(!schema.is_valid(&extra));
    let mut partial = requested.clone();
    partial["links"].as_object_mut().unwrap().remove("view");
    assert!(!schema.is_valid(&partial));
    let mut decided = received.iter().find(|r| r.event_type == "approval.decided").unwrap().body.clone();
    assert_valid(&schema, &decided);
    decided["links"] = requested["links"].clone();
    assert!(!schema.is_valid(&decided));
}

/// Rules of the chat scenario: `big.txt` is bob's to decide, `secret.txt` is
/// denied, any other deletion asks the requester; each says why.
const CHAT_RULES: &str = "[[rule]]\nname = \"big-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n\
    approvers = [\"bob\"]\nreason = \"bob signs off big deletions\"\n[rule.input]\n\"/path\" = { equals = \"big.txt\" }\n\n\
    [[rule]]\nname = \"no-secrets\"\naction = \"deny\"\ntool = \"delete_file\"\nreason = \"secrets stay\"\n\
    [rule.input]\n\"/path\" = { equals = \"secret.txt\" }\n\n\
    [[rule]]\nname = \"ask-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\nreason = \"deletions need a yes\"\n";

/// The `data-toolgate-*` chunks or parts among `items`.
fn data_parts(items: &[Value]) -> Vec<Value> {
    let toolgate = |item: &&Value| item["type"].as_str().is_some_and(|kind| kind.starts_with("data-toolgate-"));
    items.iter().filter(toolgate).cloned().collect()
}

/// Alice's stored chat `chat-1`.
async fn stored_chat(server: &Server) -> Vec<Value> {
    let reply = call(server, "GET", "/api/chats/chat-1", "alice", None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["messages"].as_array().unwrap().clone()
}

/// The chat scenario: reasons (ask, routed ask, deny), then the routed
/// approval's states while the step waits for bob and after he decides.
async fn chat_data_parts() -> Vec<Value> {
    let script = json!({"turns": [
        [{"type": "tool-call", "toolCallId": "call-big", "toolName": "delete_file", "input": {"path": "big.txt"}},
         {"type": "tool-call", "toolCallId": "call-small", "toolName": "delete_file", "input": {"path": "small.txt"}},
         {"type": "tool-call", "toolCallId": "call-secret", "toolName": "delete_file", "input": {"path": "secret.txt"}}],
        [{"type": "text", "text": "Handled."}]
    ]});
    let server = routed_server(script, CHAT_RULES, None).await;
    let ask = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete them"}]}]});
    let first = call(&server, "POST", "/api/chat", "alice", Some(ask)).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let mut parts = data_parts(&first.chunks());

    // Alice approves her own call, as her client would, from the server's copy of the chat.
    let mut messages = stored_chat(&server).await;
    let assistant = messages.last_mut().unwrap();
    let small = assistant["parts"].as_array_mut().unwrap().iter_mut().find(|p| p["toolCallId"] == "call-small");
    let small = small.expect("the small call's part");
    small["state"] = json!("approval-responded");
    small["approval"]["approved"] = json!(true);
    let answer = json!({"id": "chat-1", "messages": messages});
    let waiting = call(&server, "POST", "/api/chat", "alice", Some(answer)).await;
    assert_eq!(waiting.status, 200, "{}", waiting.body);
    parts.extend(data_parts(&waiting.chunks()));

    let big = parts.iter().find(|p| p["type"] == "data-toolgate-approval").expect("the routed approval's part");
    let big = big["id"].as_str().unwrap().to_owned();
    let path = format!("/api/approvals/{big}");
    assert_eq!(call(&server, "POST", &path, "bob", Some(json!({"decision": "approve"}))).await.status, 200);
    let executed = |messages: &[Value]| {
        let parts = messages.last().map(|m| m["parts"].as_array().cloned().unwrap_or_default()).unwrap_or_default();
        data_parts(&parts).iter().any(|p| p["type"] == "data-toolgate-approval" && p["data"]["state"] == "executed")
    };
    eventually("the server's continuation", || async { executed(&stored_chat(&server).await) }).await;
    for message in stored_chat(&server).await {
        parts.extend(data_parts(message["parts"].as_array().unwrap()));
    }
    parts
}

/// The expiry scenario: an answer after the approval expired is a warning.
async fn warning_data_parts() -> Vec<Value> {
    let (server, clock) = expiring_server(default_script()).await;
    let ask = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]});
    let asked = post(&server, "/api/chat", "application/json", ask.to_string().as_bytes()).await.chunks();
    let request = asked.iter().find(|c| c["type"] == "tool-approval-request").expect("an approval");
    let message_id = asked[0]["messageId"].clone();
    clock.advance(Duration::from_secs(91));
    let answer = json!({"id": "chat-1", "messageId": message_id, "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]},
        {"id": message_id, "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-delete_file", "toolCallId": "call-1", "state": "approval-responded",
             "input": {"path": "notes.txt"}, "approval": {"id": request["approvalId"], "approved": true}}]}]});
    let reply = post(&server, "/api/chat", "application/json", answer.to_string().as_bytes()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    data_parts(&reply.chunks())
}

#[tokio::test]
async fn the_ui_streams_data_parts_match_the_ui_data_parts_schema() {
    let schema = validator(UI_DATA_PARTS);
    let mut parts = chat_data_parts().await;
    parts.extend(warning_data_parts().await);
    let mut seen = BTreeSet::new();
    for part in &parts {
        assert_valid(&schema, part);
        let kind = part["type"].as_str().unwrap();
        let detail = part["data"]["decision"].as_str().or(part["data"]["state"].as_str()).unwrap_or("");
        seen.insert(format!("{kind}:{detail}"));
        if part["data"]["approvers"].is_array() && kind == "data-toolgate-reason" {
            seen.insert("routed reason".to_owned());
        }
    }
    for expected in [
        "data-toolgate-reason:ask",
        "data-toolgate-reason:deny",
        "routed reason",
        "data-toolgate-approval:pending",
        "data-toolgate-approval:approved",
        "data-toolgate-approval:executed",
        "data-toolgate-warning:",
    ] {
        assert!(seen.contains(expected), "no {expected} among {seen:#?}");
    }

    // The schema has teeth: an unknown part, an unknown field, or a malformed state fail.
    let approval = parts.iter().find(|p| p["type"] == "data-toolgate-approval").unwrap().clone();
    let mut unknown = approval.clone();
    unknown["type"] = json!("data-toolgate-something");
    assert!(!schema.is_valid(&unknown));
    let mut extra = approval.clone();
    extra["data"]["extra"] = json!(true);
    assert!(!schema.is_valid(&extra));
    let mut state = approval;
    state["data"]["state"] = json!("maybe");
    assert!(!schema.is_valid(&state));
}

/// The `CUSTOM` events of a run.
async fn run_custom_events(server: &Server, user: &str, input: Value) -> (Vec<Value>, Vec<Value>) {
    let headers = [("content-type", "application/json"), ("x-user", user)];
    let events = agui_events(&send(server, "POST", "/ag-ui", &headers, input.to_string().as_bytes()).await);
    let custom = events.iter().filter(|event| event["type"] == "CUSTOM").cloned().collect();
    (events, custom)
}

fn agui_input(run_id: &str, messages: Value) -> Value {
    json!({"threadId": "t1", "runId": run_id, "state": {}, "tools": [], "context": [], "messages": messages})
}

#[tokio::test]
async fn the_ag_ui_custom_events_match_the_agui_custom_events_schema() {
    let schema = validator(AGUI_CUSTOM_EVENTS);
    let first = json!([{"id": "m1", "role": "user", "content": "delete notes.txt"}]);

    // An approval routed to bob: `toolgate.approval` with the interrupt.
    let rule = "[[rule]]\nname = \"bob-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\napprovers = [\"bob\"]\n";
    let routed = routed_server(agui_script(), rule, None).await;
    let (_, mut custom) = run_custom_events(&routed, "alice", agui_input("r1", first.clone())).await;

    // A resume after the approval expired: `toolgate.warning`, and the run goes on.
    let (expiring, clock) = expiring_server(agui_script()).await;
    let (events, _) = run_custom_events(&expiring, "alice", agui_input("r1", first)).await;
    let interrupt = last_event(&events, "RUN_FINISHED")["outcome"]["interrupts"][0]["id"].clone();
    clock.advance(Duration::from_secs(91));
    let mut resume = agui_input("r2", last_event(&events, "MESSAGES_SNAPSHOT")["messages"].clone());
    resume["state"] = last_event(&events, "STATE_SNAPSHOT")["snapshot"].clone();
    resume["resume"] = json!([{"interruptId": interrupt, "status": "resolved", "payload": {"approved": true}}]);
    let (_, warnings) = run_custom_events(&expiring, "alice", resume).await;
    custom.extend(warnings);

    let names: BTreeSet<&str> = custom.iter().filter_map(|event| event["name"].as_str()).collect();
    assert_eq!(names, BTreeSet::from(["toolgate.approval", "toolgate.warning"]), "{custom:#?}");
    for event in &custom {
        assert_valid(&schema, event);
    }

    // The schema has teeth: an unknown name, or a value of another shape, fail.
    let approval = custom.iter().find(|event| event["name"] == "toolgate.approval").unwrap().clone();
    let mut unknown = approval.clone();
    unknown["name"] = json!("toolgate.other");
    assert!(!schema.is_valid(&unknown));
    let mut missing = approval;
    missing["value"].as_object_mut().unwrap().remove("quorum");
    assert!(!schema.is_valid(&missing));
}
