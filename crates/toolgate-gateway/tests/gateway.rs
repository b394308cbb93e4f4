//! The gateway end to end in process: an MCP client (with or without
//! elicitation) -> the gateway -> a counting upstream server, on a memory
//! store. The official TypeScript and Python clients run the same paths in
//! `scripts/e2e-mcp-gateway.sh`.

mod support;

use std::time::Duration;

use serde_json::json;
use support::{Client, Setup, call, connect, text};
use toolgate::approval::lifecycle::{Decision, VoteOptions, Voter, cast};
use toolgate::ledger::{ApprovalQuery, ApprovalState, AuditKind, AuditQuery, StateFilter, SystemClock};

const NO_RULES: &str = "";

async fn pending_ids(setup: &Setup) -> Vec<String> {
    let query = ApprovalQuery { states: StateFilter::Pending, limit: 100, ..ApprovalQuery::default() };
    let listed = toolgate::ledger::InboxStore::list_approvals(&*setup.store, &query).await.unwrap();
    listed.into_iter().map(|record| record.approval_id).collect()
}

async fn vote(setup: &Setup, id: &str, by: &str, decision: Decision) {
    let voter = Voter::new(Some(by.to_owned()));
    cast(&*setup.store, &SystemClock, id, &voter, decision, VoteOptions { continuation: true, note: None })
        .await
        .unwrap();
}

const APPROVE: Decision = Decision::Approve { edited_input: None };

#[tokio::test]
async fn lists_upstream_tools_and_runs_trusted_read_only_ones_without_asking() {
    let setup = Setup::new(NO_RULES, |_| {}).await;
    let client = Client::eliciting([]);
    let session = connect(&setup.gateway, client.clone(), "alice").await;
    let tools = session.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["count__bump", "count__peek"]);
    assert_eq!(tools[1].annotations.as_ref().unwrap().read_only_hint, Some(true));
    let result = call(&session, "count__peek", json!({})).await;
    assert_eq!(text(&result), "count 0");
    assert!(client.asked().is_empty(), "a trusted read-only tool runs without asking");
}

#[tokio::test]
async fn elicitation_approve_runs_once_and_is_recorded_in_the_session_conversation() {
    let setup = Setup::new(NO_RULES, |_| {}).await;
    let client = Client::eliciting([json!({"action": "accept", "content": {"decision": "approve"}})]);
    let session = connect(&setup.gateway, client.clone(), "alice").await;
    let result = call(&session, "count__bump", json!({"label": "a"})).await;
    assert_eq!(text(&result), "bumped a #1");
    assert_eq!(setup.counter.count(), 1);
    let asked = client.asked();
    assert_eq!(asked.len(), 1);
    let message = asked[0]["message"].as_str().unwrap();
    assert!(message.contains("count__bump") && message.contains("\"label\": \"a\""), "{message}");
    assert_eq!(
        asked[0]["requestedSchema"]["properties"]["decision"]["enum"],
        json!(["approve", "approve_always", "deny"])
    );
    assert_eq!(asked[0]["requestedSchema"]["required"], json!(["decision"]));
    let events = toolgate::ledger::AuditStore::audit(&*setup.store, &AuditQuery::default()).await.unwrap();
    let kinds: Vec<AuditKind> = events.iter().map(|event| event.kind).collect();
    assert_eq!(kinds, [AuditKind::Issued, AuditKind::Approved, AuditKind::Executed]);
    assert!(events.iter().all(|event| event.conversation_id == "mcp:alice:test-client"));
    assert_eq!(events[0].owner.as_deref(), Some("alice"));
    assert_eq!(events[1].principal.as_deref(), Some("alice"));
    // What its receipts name: the MCP tool's definition as listed, and the rules config.
    let tools = session.peer().list_all_tools().await.unwrap();
    let bump = tools.iter().find(|tool| tool.name == "count__bump").unwrap();
    let schema = serde_json::Value::Object((*bump.input_schema).clone());
    let listed = toolgate::receipt::definition_digest("count__bump", bump.description.as_deref(), &schema).unwrap();
    assert_eq!(events[0].data["toolDigest"], json!(listed), "{}", events[0].data);
    let rules = toolgate_policy::Policy::from_toml_str(NO_RULES).unwrap();
    assert_eq!(events[0].data["configDigest"], json!(rules.digest().unwrap()));
}

#[tokio::test]
async fn elicitation_deny_decline_and_cancel_never_reach_upstream() {
    let setup = Setup::new(NO_RULES, |_| {}).await;
    let client = Client::eliciting([
        json!({"action": "accept", "content": {"decision": "deny", "reason": "not today"}}),
        json!({"action": "accept", "content": {"decision": "deny"}}),
        json!({"action": "decline"}),
        json!({"action": "cancel"}),
    ]);
    let session = connect(&setup.gateway, client.clone(), "alice").await;
    let first = call(&session, "count__bump", json!({"label": "1"})).await;
    assert_eq!(first["isError"], json!(true));
    assert_eq!(text(&first), "denied by the user: not today");
    for label in ["2", "3", "4"] {
        let result = call(&session, "count__bump", json!({"label": label})).await;
        assert_eq!(result["isError"], json!(true));
        assert_eq!(text(&result), "denied by the user: the user declined");
    }
    assert_eq!(setup.counter.count(), 0);
    assert_eq!(client.asked().len(), 4);
}

#[tokio::test]
async fn approve_always_stops_the_next_ask_in_this_session_only() {
    let setup = Setup::new(NO_RULES, |_| {}).await;
    let client = Client::eliciting([json!({"action": "accept", "content": {"decision": "approve_always"}})]);
    let session = connect(&setup.gateway, client.clone(), "alice").await;
    assert_eq!(text(&call(&session, "count__bump", json!({"label": "a"})).await), "bumped a #1");
    assert_eq!(text(&call(&session, "count__bump", json!({"label": "b"})).await), "bumped b #2");
    assert_eq!(client.asked().len(), 1, "the sticky decision answers the second call");
    // Another principal's session is asked again.
    let other = Client::eliciting([json!({"action": "decline"})]);
    let bob = connect(&setup.gateway, other.clone(), "bob").await;
    assert!(text(&call(&bob, "count__bump", json!({"label": "c"})).await).starts_with("denied by the user"));
    assert_eq!(other.asked().len(), 1);
}

#[tokio::test]
async fn a_rule_deny_answers_at_once_and_names_the_rule() {
    let rules = r#"
        [[rule]]
        name = "no-secrets"
        action = "deny"
        tool = "count__bump"
        reason = "secrets stay put"
        input = { "/label" = { glob = "secret*" } }
    "#;
    let setup = Setup::new(rules, |_| {}).await;
    let client = Client::eliciting([]);
    let session = connect(&setup.gateway, client.clone(), "alice").await;
    let result = call(&session, "count__bump", json!({"label": "secret-1"})).await;
    assert_eq!(result["isError"], json!(true));
    let text = text(&result);
    assert!(text.starts_with("denied by policy: rule `no-secrets`") && text.ends_with("secrets stay put"), "{text}");
    assert_eq!(setup.counter.count(), 0);
    assert!(client.asked().is_empty());
    assert!(pending_ids(&setup).await.is_empty(), "a denied call records no approval");
    let events = toolgate::ledger::AuditStore::audit(&*setup.store, &AuditQuery::default()).await.unwrap();
    assert_eq!(events.len(), 1, "the refusal is on record: {events:?}");
    assert_eq!((events[0].kind, events[0].approval_id.as_str()), (AuditKind::Denied, ""));
    assert_eq!(events[0].principal.as_deref(), Some("alice"));
    assert_eq!(events[0].data["toolName"], json!("count__bump"));
    assert_eq!(events[0].data["input"], json!({"label": "secret-1"}));
    assert!(events[0].data["reason"].as_str().unwrap().contains("secrets stay put"));
}

#[tokio::test]
async fn a_call_that_runs_without_asking_is_on_record() {
    let setup = Setup::new(NO_RULES, |_| {}).await;
    let session = connect(&setup.gateway, Client::eliciting([]), "alice").await;
    assert_eq!(text(&call(&session, "count__peek", json!({})).await), "count 0");
    let events = toolgate::ledger::AuditStore::audit(&*setup.store, &AuditQuery::default()).await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!((event.kind, event.approval_id.as_str()), (AuditKind::Executed, ""));
    assert_eq!(event.conversation_id, "mcp:alice:test-client");
    assert_eq!((event.owner.as_deref(), event.principal.as_deref()), (Some("alice"), Some("alice")));
    assert_eq!(event.data["toolName"], json!("count__peek"));
    assert_eq!(event.data["input"], json!({}));
    assert_eq!(event.data["decidedBy"], json!("policy"));
    assert_eq!(event.data["result"]["content"][0]["text"], json!("count 0"));
}

#[tokio::test]
async fn out_of_band_pending_then_retry_gets_the_outcome_and_runs_once() {
    let setup = Setup::new(NO_RULES, |options| options.public_url = Some("https://tg.example".into())).await;
    let session = connect(&setup.gateway, Client::default(), "alice").await;
    let first = call(&session, "count__bump", json!({"label": "x"})).await;
    assert_eq!(first["isError"], json!(true));
    let meta = &first["_meta"]["toolgate/approval"];
    assert_eq!(meta["state"], json!("pending"));
    let id = meta["id"].as_str().unwrap().to_owned();
    assert_eq!(meta["url"], json!(format!("https://tg.example/approvals/{id}")));
    assert!(text(&first).contains("Call the same tool again with the same arguments"), "{}", text(&first));
    // A retry while pending attaches to the same approval.
    let again = call(&session, "count__bump", json!({"label": "x"})).await;
    assert_eq!(again["_meta"]["toolgate/approval"]["id"], json!(id));
    assert_eq!(pending_ids(&setup).await, std::slice::from_ref(&id));
    vote(&setup, &id, "alice", APPROVE).await;
    // Ten concurrent retries: the upstream runs once, every retry gets its result.
    let retries = (0..10).map(|_| call(&session, "count__bump", json!({"label": "x"})));
    let results = futures::future::join_all(retries).await;
    assert_eq!(setup.counter.count(), 1);
    for result in &results {
        assert_eq!(text(result), "bumped x #1", "{result}");
    }
}

#[tokio::test]
async fn out_of_band_decision_while_held_returns_the_result() {
    let setup = Setup::new(NO_RULES, |options| options.hold = Duration::from_secs(20)).await;
    let session = connect(&setup.gateway, Client::default(), "alice").await;
    let decide = async {
        loop {
            if let Some(id) = pending_ids(&setup).await.pop() {
                vote(&setup, &id, "alice", APPROVE).await;
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (result, ()) = tokio::join!(call(&session, "count__bump", json!({"label": "held"})), decide);
    assert_eq!(text(&result), "bumped held #1");
    assert_eq!(setup.counter.count(), 1);
}

#[tokio::test]
async fn a_rule_with_approvers_goes_out_of_band_even_with_elicitation() {
    let rules = r#"
        [[rule]]
        name = "bob-decides"
        action = "ask"
        tool = "count__bump"
        approvers = ["bob"]
    "#;
    let setup = Setup::new(rules, |_| {}).await;
    let client = Client::eliciting([]);
    let session = connect(&setup.gateway, client.clone(), "alice").await;
    let first = call(&session, "count__bump", json!({"label": "y"})).await;
    assert!(text(&first).contains("waits for `bob`"), "{}", text(&first));
    assert!(client.asked().is_empty());
    let id = first["_meta"]["toolgate/approval"]["id"].as_str().unwrap().to_owned();
    vote(&setup, &id, "bob", Decision::Deny { reason: Some("nope".into()) }).await;
    let retry = call(&session, "count__bump", json!({"label": "y"})).await;
    assert_eq!(retry["isError"], json!(true));
    assert_eq!(text(&retry), "denied by bob: nope");
    assert_eq!(setup.counter.count(), 0);
}

#[tokio::test]
async fn after_the_retry_window_an_identical_call_is_a_new_call() {
    let setup = Setup::new(NO_RULES, |options| options.retry_window = Duration::ZERO).await;
    let session = connect(&setup.gateway, Client::default(), "alice").await;
    let first = call(&session, "count__bump", json!({"label": "z"})).await;
    let id = first["_meta"]["toolgate/approval"]["id"].as_str().unwrap().to_owned();
    vote(&setup, &id, "alice", APPROVE).await;
    assert_eq!(text(&call(&session, "count__bump", json!({"label": "z"})).await), "bumped z #1");
    tokio::time::sleep(Duration::from_millis(5)).await;
    let later = call(&session, "count__bump", json!({"label": "z"})).await;
    let new_id = later["_meta"]["toolgate/approval"]["id"].as_str().unwrap();
    assert_ne!(new_id, id, "a new approval after the window");
    assert_eq!(setup.counter.count(), 1);
}

#[tokio::test]
async fn a_restarted_gateway_finds_the_pending_approval_and_runs_it_once() {
    let setup = Setup::new(NO_RULES, |_| {}).await;
    let session = connect(&setup.gateway, Client::default(), "alice").await;
    let first = call(&session, "count__bump", json!({"label": "r"})).await;
    let id = first["_meta"]["toolgate/approval"]["id"].as_str().unwrap().to_owned();
    drop(session);
    let restarted = setup.restarted(NO_RULES, |_| {});
    let session = connect(&restarted, Client::default(), "alice").await;
    vote(&setup, &id, "alice", APPROVE).await;
    assert_eq!(text(&call(&session, "count__bump", json!({"label": "r"})).await), "bumped r #1");
    assert_eq!(text(&call(&session, "count__bump", json!({"label": "r"})).await), "bumped r #1");
    assert_eq!(setup.counter.count(), 1);
    let records = toolgate::ledger::ApprovalStore::approvals(&*setup.store, &[id]).await.unwrap();
    assert_eq!(records[0].state, ApprovalState::Executed);
}

#[tokio::test]
async fn a_held_call_reports_progress_when_asked() {
    let setup = Setup::new(NO_RULES, |options| {
        options.hold = Duration::from_millis(700);
        options.progress_every = Duration::from_millis(200);
    })
    .await;
    let client = Client::default();
    let session = connect(&setup.gateway, client.clone(), "alice").await;
    let mut params = rmcp::model::CallToolRequestParams::new("count__bump")
        .with_arguments(serde_json::from_value(json!({"label": "p"})).unwrap());
    let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::String("tok".into()));
    params.meta = Some(rmcp::model::RequestMetaObject::with_progress_token(token));
    let result = session.peer().call_tool(params).await.unwrap();
    assert_eq!(result.is_error, Some(true));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let progress = client.progress.lock().unwrap().clone();
    assert!(progress.len() >= 2, "progress every 200 ms over 700 ms: {progress:?}");
    assert!(progress[0].message.as_deref().unwrap_or_default().contains("waits for"));
}

#[tokio::test]
async fn a_stateless_client_gets_input_required_with_the_approval_page() {
    let setup = Setup::new(NO_RULES, |options| options.public_url = Some("https://tg.example".into())).await;
    let client = Client { stateless: true, ..Client::default() };
    let session = connect(&setup.gateway, client, "alice").await;
    let params = rmcp::model::CallToolRequestParams::new("count__bump")
        .with_arguments(serde_json::from_value(json!({"label": "s"})).unwrap());
    let response = session.peer().call_tool_once(params).await.unwrap();
    let rmcp::model::CallToolResponse::InputRequired(required) = response else {
        panic!("expected input_required, got {response:?}");
    };
    let value = serde_json::to_value(&required).unwrap();
    assert_eq!(value["resultType"], json!("input_required"), "{value}");
    let ask = &value["inputRequests"]["approval"]["params"];
    assert_eq!(ask["mode"], json!("url"));
    let id = pending_ids(&setup).await.pop().unwrap();
    assert_eq!(ask["url"], json!(format!("https://tg.example/approvals/{id}")));
    assert_eq!(setup.counter.count(), 0);
}

#[tokio::test]
async fn a_call_a_rule_allows_is_recorded_naming_the_rule() {
    let rules = r#"
        [[rule]]
        name = "bumps-are-fine"
        action = "allow"
        tool = "count__bump"
    "#;
    let setup = Setup::new(rules, |_| {}).await;
    let client = Client::eliciting([]);
    let session = connect(&setup.gateway, client.clone(), "alice").await;
    assert_eq!(text(&call(&session, "count__bump", json!({"label": "a"})).await), "bumped a #1");
    assert!(client.asked().is_empty());
    let events = toolgate::ledger::AuditStore::audit(&*setup.store, &AuditQuery::default()).await.unwrap();
    let kinds: Vec<AuditKind> = events.iter().map(|event| event.kind).collect();
    assert_eq!(kinds, [AuditKind::Executed]);
    let rule = events[0].data["rule"].as_str().unwrap_or_default();
    assert!(rule.contains("bumps-are-fine"), "the executed event names the rule that allowed it: {}", events[0].data);
}

#[tokio::test]
async fn an_upstream_tool_list_change_reaches_the_client() {
    let rules = r#"
        [[rule]]
        action = "allow"
        tool = "count__bump"
    "#;
    let setup = Setup::new(rules, |_| {}).await;
    let client = Client::default();
    let session = connect(&setup.gateway, client.clone(), "alice").await;
    assert_eq!(text(&call(&session, "count__bump", json!({"label": "grow"})).await), "bumped grow #1");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while client.list_changes.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(std::time::Instant::now() < deadline, "no notifications/tools/list_changed reached the client");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let tools = session.peer().list_all_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "count__grow"), "{tools:?}");
}

#[tokio::test]
async fn upstream_resources_and_prompts_pass_through_unchanged() {
    let setup = Setup::new(NO_RULES, |_| {}).await;
    let session = connect(&setup.gateway, Client::default(), "alice").await;
    let peer = session.peer();
    let resources = peer.list_all_resources().await.unwrap();
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0].uri, "count://total");
    let read = peer.read_resource(rmcp::model::ReadResourceRequestParams::new("count://total")).await.unwrap();
    assert_eq!(serde_json::to_value(&read.contents).unwrap()[0]["text"], json!("0"));
    let missing = peer.read_resource(rmcp::model::ReadResourceRequestParams::new("count://nope")).await;
    assert!(missing.is_err());
    let prompts = peer.list_all_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "summarize");
    let prompt = peer.get_prompt(rmcp::model::GetPromptRequestParams::new("summarize")).await.unwrap();
    assert_eq!(serde_json::to_value(&prompt.messages).unwrap()[0]["content"]["text"], json!("Summarize as summarize"));
}
