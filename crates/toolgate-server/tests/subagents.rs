//! Sub-agents over HTTP: a depth-2 gated call asked on `/api/chat` as a
//! call the stock AI SDK client answers (`addToolApprovalResponse` on the
//! surfaced part), its lineage kept in the stored conversation, and the
//! approved call run once.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::ledger::{LedgerConfig, MemoryStore};
use toolgate::{Agent, ScriptedModel, Tool, Toolkit};
use toolgate_policy::{Policy, PolicyHandle};
use toolgate_server::{PrincipalSource, ServerConfig};

fn turns(tool: &str, input: Value, done: &str) -> ScriptedModel {
    let script = json!({"turns": [
        [{"type": "tool-call", "toolCallId": "call-1", "toolName": tool, "input": input}],
        [{"type": "text", "text": done}]
    ]});
    ScriptedModel::from_json(&script.to_string()).unwrap()
}

async fn start_tree(runs: Arc<AtomicUsize>) -> Server {
    start_tree_with(runs, |_| {}).await
}

async fn start_tree_with(runs: Arc<AtomicUsize>, configure: impl FnOnce(&mut ServerConfig)) -> Server {
    let janitor =
        Agent::new(turns("delete_file", json!({"path": "notes.txt"}), "Deleted.")).toolkit(counting_toolkit(runs));
    let manager = Agent::new(turns("janitor", json!({"task": "delete notes.txt"}), "The janitor deleted it."))
        .toolkit(Toolkit::new([Tool::agent("janitor", janitor)]).unwrap());
    let toolkit = Toolkit::new([Tool::agent("manager", manager)]).unwrap();
    let root = json!({"turns": [
        [{"type": "tool-call", "toolCallId": "call-1", "toolName": "manager", "input": {"task": "tidy up"}}],
        [{"type": "text", "text": "All tidy."}]
    ]});
    start_configured(root, move |config| {
        config.toolkit = toolkit;
        config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
        configure(config);
    })
    .await
}

async fn chat(server: &Server, body: &Value) -> Reply {
    post(server, "/api/chat", "application/json", body.to_string().as_bytes()).await
}

#[tokio::test]
async fn a_depth_two_approval_is_answered_as_the_stock_client_answers_any_other() {
    let runs = Arc::new(AtomicUsize::new(0));
    let server = start_tree(runs.clone()).await;
    let user = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "tidy up"}]});
    let reply = chat(&server, &json!({"id": "chat-1", "trigger": "submit-message", "messages": [user]})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chunks = reply.chunks();
    let call = chunks.iter().find(|c| c["type"] == "tool-input-available" && c["toolCallId"] == "call-1/call-1/call-1");
    let call = call.expect("the nested call is a call of the root message");
    assert_eq!(call["toolName"], "delete_file");
    assert_eq!(
        call["providerMetadata"]["toolgate"]["subAgent"]["lineage"],
        json!([{"agent": "manager", "toolCallId": "call-1"}, {"agent": "janitor", "toolCallId": "call-1"}])
    );
    let request = chunks.iter().find(|c| c["type"] == "tool-approval-request").unwrap();
    assert_eq!(request["toolCallId"], "call-1/call-1/call-1");
    let approval_id = request["approvalId"].as_str().unwrap().to_owned();
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    // The client's copy of the message, as the stream built it, with the person's answer on the nested part.
    let stored = get(&server, "/api/chats/chat-1").await.json();
    let mut assistant = stored["messages"][1].clone();
    let parts = assistant["parts"].as_array_mut().unwrap();
    let nested = parts.iter_mut().find(|part| part["toolCallId"] == "call-1/call-1/call-1").unwrap();
    assert_eq!(nested["callProviderMetadata"], call["providerMetadata"], "the lineage is kept with the part");
    nested["state"] = json!("approval-responded");
    nested["approval"] = json!({"id": approval_id, "approved": true});
    let message_id = assistant["id"].clone();
    let body =
        json!({"id": "chat-1", "trigger": "submit-message", "messageId": message_id, "messages": [user, assistant]});
    let reply = chat(&server, &body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chunks = reply.chunks();
    let output = chunks
        .iter()
        .find(|c| c["type"] == "tool-output-available" && c["toolCallId"] == "call-1" && c["preliminary"].is_null())
        .unwrap();
    assert_eq!(output["output"], "The janitor deleted it.");
    let text: String =
        chunks.iter().filter(|c| c["type"] == "text-delta").map(|c| c["delta"].as_str().unwrap()).collect();
    assert_eq!(text, "All tidy.");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // Sent again: the stored outcome, nothing runs twice.
    let again = chat(&server, &body).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

const RULES: &str = "[[rule]]\nname = \"finance-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n\
                     approvers = [\"group:finance\"]\nquorum = 2\n";

#[tokio::test]
async fn a_routed_depth_two_approval_decided_in_the_inbox_continues_the_root_without_its_client() {
    let runs = Arc::new(AtomicUsize::new(0));
    let server = start_tree_with(runs.clone(), |config| {
        config.policy = PolicyHandle::new(Policy::from_toml_str(RULES).unwrap());
        config.principals = PrincipalSource::Header(axum::http::HeaderName::from_static("x-user"), Vec::new());
        let finance = ["bob", "carol", "erin"].map(str::to_owned).to_vec();
        config.groups = std::collections::BTreeMap::from([("finance".to_owned(), finance)]);
    })
    .await;
    let body = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "tidy up"}]}]});
    let reply = call(&server, "POST", "/api/chat", "alice", Some(body)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chunks = reply.chunks();
    let request = chunks.iter().find(|c| c["type"] == "tool-approval-request").expect("asked at the root");
    let id = request["approvalId"].as_str().unwrap().to_owned();
    let reason = chunks.iter().find(|c| c["type"] == "data-toolgate-reason").unwrap();
    assert_eq!((&reason["data"]["approvers"], &reason["data"]["quorum"]), (&json!(["group:finance"]), &json!(2)));
    assert_eq!(
        reason["data"]["lineage"],
        json!([{"agent": "manager", "toolCallId": "call-1"}, {"agent": "janitor", "toolCallId": "call-1"}])
    );

    // Alice's client is gone; two of finance decide in the inbox.
    for user in ["bob", "carol"] {
        let voted =
            call(&server, "POST", &format!("/api/approvals/{id}"), user, Some(json!({"decision": "approve"}))).await;
        assert_eq!(voted.status, 200, "{user}: {}", voted.body);
    }
    let mut text = String::new();
    for _ in 0..100 {
        let chat = call(&server, "GET", "/api/chats/chat-1", "alice", None).await.json();
        let last = chat["messages"].as_array().and_then(|messages| messages.last()).cloned().unwrap_or_default();
        text = last["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["type"] == "text")
            .map(|p| p["text"].as_str().unwrap().to_owned())
            .collect();
        if text == "All tidy." {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(text, "All tidy.", "the server continued the root after the depth-2 decision");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_ag_ui_interrupt_names_the_sub_run_and_a_resume_runs_the_depth_two_call_once() {
    let runs = Arc::new(AtomicUsize::new(0));
    let server = start_tree(runs.clone()).await;
    let run = |input: Value| {
        let server = &server;
        async move { agui_events(&post(server, "/ag-ui", "application/json", input.to_string().as_bytes()).await) }
    };
    let first = run(json!({"threadId": "t1", "runId": "r1", "state": {}, "tools": [], "context": [],
        "messages": [{"id": "m1", "role": "user", "content": "tidy up"}]}))
    .await;
    let finished = last_event(&first, "RUN_FINISHED");
    let interrupt = &finished["outcome"]["interrupts"][0];
    assert_eq!(interrupt["toolCallId"], "call-1/call-1/call-1");
    assert_eq!(interrupt["subagentRunId"], "call-1/call-1");
    assert_eq!(interrupt["metadata"]["toolName"], "delete_file");
    assert_eq!(
        interrupt["metadata"]["lineage"],
        json!([{"agent": "manager", "toolCallId": "call-1"}, {"agent": "janitor", "toolCallId": "call-1"}])
    );
    let resumed = run(json!({"threadId": "t1", "runId": "r2", "tools": [], "context": [],
        "messages": last_event(&first, "MESSAGES_SNAPSHOT")["messages"],
        "state": last_event(&first, "STATE_SNAPSHOT")["snapshot"],
        "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": true}}]}))
    .await;
    assert_eq!(last_event(&resumed, "RUN_FINISHED")["outcome"]["type"], "success", "{resumed:#?}");
    let result = resumed.iter().find(|e| e["type"] == "TOOL_CALL_RESULT" && e["toolCallId"] == "call-1").unwrap();
    assert_eq!(result["content"], "\"The janitor deleted it.\"");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// The channels of a `[[notify]]` text, the hook's secret `hook-secret`.
fn channels(text: &str) -> toolgate_notify::Channels {
    #[derive(serde::Deserialize)]
    struct File {
        notify: Vec<toolgate_notify::NotifyConfig>,
        emails: std::collections::BTreeMap<String, String>,
    }
    let file: File = toml::from_str(text).unwrap();
    toolgate_notify::Channels::from_config(&file.notify, &file.emails, |name| {
        (name == "HOOK_SECRET").then(|| "hook-secret".into())
    })
    .unwrap()
}

#[tokio::test]
async fn a_depth_two_approval_names_its_lineage_in_the_inbox_and_in_notifications() {
    let receiver = toolgate_testkit::webhook::WebhookReceiver::start("hook-secret");
    let sink = toolgate_testkit::smtp::SmtpSink::start();
    let notify = format!(
        "[emails]\nbob = \"bob@example.com\"\ncarol = \"carol@example.com\"\n\
         [[notify]]\nname = \"hook\"\nwebhook = \"{}\"\nsecret_env = \"HOOK_SECRET\"\nformat = \"json\"\n\
         [[notify]]\nname = \"mail\"\nsmtp = \"smtp://127.0.0.1:{}\"\ntls = \"none\"\n\
         from = \"toolgate <approvals@example.com>\"\nto = [\"approvers\"]\nevents = [\"approval.requested\"]\n",
        receiver.url(),
        sink.port()
    );
    let notifications = Arc::new(
        toolgate_server::Notifications::with_timeout(
            channels(&notify),
            Some("http://toolgate.test"),
            std::time::Duration::from_secs(2),
        )
        .unwrap(),
    );
    let server = start_tree_with(Arc::default(), |config| {
        config.policy = PolicyHandle::new(Policy::from_toml_str(RULES).unwrap());
        config.principals = PrincipalSource::Header(axum::http::HeaderName::from_static("x-user"), Vec::new());
        let finance = ["bob", "carol"].map(str::to_owned).to_vec();
        config.groups = std::collections::BTreeMap::from([("finance".to_owned(), finance)]);
        config.notifications = Some(notifications);
    })
    .await;
    let body = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "tidy up"}]}]});
    let reply = call(&server, "POST", "/api/chat", "alice", Some(body)).await;
    let chunks = reply.chunks();
    let request = chunks.iter().find(|c| c["type"] == "tool-approval-request").expect("asked at the root");
    let id = request["approvalId"].as_str().unwrap().to_owned();
    let lineage = json!([{"agent": "manager", "toolCallId": "call-1"}, {"agent": "janitor", "toolCallId": "call-1"}]);

    // The inbox item: the lineage as the reason part has it, in the root conversation.
    let item = call(&server, "GET", &format!("/api/approvals/{id}"), "bob", None).await.json();
    assert_eq!(
        (&item["lineage"], &item["conversationId"], &item["tool"]),
        (&lineage, &json!("chat-1"), &json!("delete_file"))
    );
    let listed = call(&server, "GET", "/api/approvals", "bob", None).await.json();
    assert_eq!(listed["approvals"][0]["lineage"], lineage, "{listed}");
    // The requester finds it under the chat's id, as the page's watch asks for it.
    let mine = call(&server, "GET", "/api/approvals?state=all&conversation=chat-1", "alice", None).await.json();
    assert_eq!(mine["approvals"][0]["id"], id.as_str(), "{mine}");

    // The webhook's body is the inbox item; the mail names the path from the root.
    let requested = receiver
        .wait_for(|r| r.iter().any(|r| r.event_type == "approval.requested"), std::time::Duration::from_secs(10))
        .await;
    let hook = requested.iter().find(|r| r.event_type == "approval.requested").unwrap();
    assert_eq!(hook.body["approval"], item);
    let mails = sink.wait_for(1, std::time::Duration::from_secs(15)).await;
    let text = mails[0].text.clone().unwrap_or_default();
    assert!(text.contains("manager \u{203a} janitor \u{203a} delete_file"), "{text}");
}
