//! Designated approvers, quorum, the inbox and server-side continuation:
//! an `ask` rule routes `delete_file` to `group:finance` (bob, carol, erin)
//! with a quorum of 2; alice asks in the chat; the approvers decide through
//! `POST /api/approvals/{id}`; the server continues the run itself.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::HeaderName;
use common::*;
use serde_json::{Value, json};
use toolgate::ledger::{AuditKind, AuditQuery, LedgerConfig, MemoryStore};
use toolgate_policy::{Policy, PolicyHandle};
use toolgate_server::{PrincipalSource, ServerConfig};

const RULES: &str = "[[rule]]\nname = \"finance-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n\
                     approvers = [\"group:finance\"]\nquorum = 2\nreason = \"finance signs off deletions\"\n";

/// A server with the routed rule, principals from `x-user`, and a memory store.
async fn server(rules: &str, runs: Arc<AtomicUsize>) -> Server {
    let rules = rules.to_owned();
    start_configured(default_script(), move |config: &mut ServerConfig| {
        config.toolkit = counting_toolkit(runs);
        config.policy = PolicyHandle::new(Policy::from_toml_str(&rules).unwrap());
        config.principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
        let finance = ["bob", "carol", "erin"].map(str::to_owned).to_vec();
        config.groups = BTreeMap::from([("finance".to_owned(), finance)]);
        config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
    })
    .await
}

/// Alice's first turn; returns the approval id of the `delete_file` call and the chunks.
async fn ask(server: &Server) -> (String, Vec<Value>) {
    let body = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]});
    let reply = call(server, "POST", "/api/chat", "alice", Some(body)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chunks = reply.chunks();
    let request = chunks.iter().find(|c| c["type"] == "tool-approval-request").expect("an approval request");
    (request["approvalId"].as_str().unwrap().to_owned(), chunks)
}

async fn vote(server: &Server, id: &str, user: &str, body: Value) -> Reply {
    call(server, "POST", &format!("/api/approvals/{id}"), user, Some(body)).await
}

fn error_code(reply: &Reply) -> String {
    reply.json()["error"]["code"].as_str().unwrap_or_default().to_owned()
}

/// Alice's stored chat, once every call of its last message has an outcome (the server continued).
async fn continued(server: &Server) -> Vec<Value> {
    for _ in 0..100 {
        let reply = call(server, "GET", "/api/chats/chat-1", "alice", None).await;
        if reply.status == 200 {
            let messages = reply.json()["messages"].as_array().cloned().unwrap_or_default();
            // Every call of the last message has its outcome.
            let done = messages.last().is_some_and(|last| {
                let calls: Vec<&Value> = last["parts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|part| part["toolCallId"].is_string())
                    .collect();
                !calls.is_empty()
                    && calls.iter().all(|part| part["state"].as_str().unwrap_or("").starts_with("output-"))
            });
            if done {
                return messages;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let chat = call(server, "GET", "/api/chats/chat-1", "alice", None).await;
    panic!("the server did not continue the conversation within 5 s: {}", chat.body);
}

fn text_of(messages: &[Value]) -> String {
    let last = messages.last().unwrap();
    last["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "text")
        .map(|p| p["text"].as_str().unwrap())
        .collect()
}

async fn audit_kinds(server: &Server) -> Vec<AuditKind> {
    let store = &server.state.config().ledger.as_ref().unwrap().store;
    store.audit(&AuditQuery::default()).await.unwrap().into_iter().map(|event| event.kind).collect()
}

#[tokio::test]
async fn two_of_three_approvers_decide_and_the_server_runs_the_call_once() {
    let runs = Arc::new(AtomicUsize::new(0));
    let server = server(RULES, runs.clone()).await;
    let (id, chunks) = ask(&server).await;
    let reason = chunks.iter().find(|c| c["type"] == "data-toolgate-reason").unwrap();
    assert_eq!(reason["data"]["approvers"], json!(["group:finance"]));
    assert_eq!(reason["data"]["quorum"], 2);

    // Who sees it: the requester and the approvers; an outsider never learns it exists.
    for (user, seen) in [("alice", 1), ("bob", 1), ("mallory", 0)] {
        let list = call(&server, "GET", "/api/approvals", user, None).await;
        assert_eq!(list.json()["approvals"].as_array().unwrap().len(), seen, "{user}: {}", list.body);
    }
    let outsider = call(&server, "GET", &format!("/api/approvals/{id}"), "mallory", None).await;
    assert_eq!((outsider.status, error_code(&outsider).as_str()), (404, "unknown_approval"));
    let refused = vote(&server, &id, "mallory", json!({"decision": "approve"})).await;
    assert_eq!((refused.status, error_code(&refused).as_str()), (404, "unknown_approval"));

    // The requester is not an approver, in the inbox or in the chat.
    let own = vote(&server, &id, "alice", json!({"decision": "approve"})).await;
    assert_eq!((own.status, error_code(&own).as_str()), (403, "not_an_approver"), "{}", own.body);
    let in_chat = answer_in_chat(&server, &id, &chunks, true).await;
    assert_eq!((in_chat.status, error_code(&in_chat).as_str()), (403, "not_an_approver"), "{}", in_chat.body);

    let first = vote(&server, &id, "bob", json!({"decision": "approve"})).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.json()["state"], "pending");
    assert_eq!(first.json()["votes"][0]["principal"], "bob");
    let twice = vote(&server, &id, "bob", json!({"decision": "approve"})).await;
    assert_eq!((twice.status, error_code(&twice).as_str()), (409, "already_voted"));
    let edit = vote(&server, &id, "carol", json!({"decision": "approve", "editedInput": {"path": "x"}})).await;
    assert_eq!((edit.status, error_code(&edit).as_str()), (400, "edit_needs_single_approver"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0, "one approval of two runs nothing");

    let second = vote(&server, &id, "carol", json!({"decision": "approve"})).await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(second.json()["state"], "approved");
    let messages = continued(&server).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(text_of(&messages), "Deleting.Done.", "the model was called after the call ran");
    let late = vote(&server, &id, "erin", json!({"decision": "deny"})).await;
    assert_eq!((late.status, error_code(&late).as_str()), (409, "approval_already_decided"));
    let shown = call(&server, "GET", &format!("/api/approvals/{id}"), "bob", None).await;
    assert_eq!(shown.json()["state"], "executed");

    let kinds = audit_kinds(&server).await;
    assert_eq!(kinds.iter().filter(|kind| **kind == AuditKind::Voted).count(), 2);
    assert_eq!(kinds.iter().filter(|kind| **kind == AuditKind::Continued).count(), 1);
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "never run twice");
}

/// Alice's client answering the approval in the chat.
async fn answer_in_chat(server: &Server, id: &str, chunks: &[Value], approved: bool) -> Reply {
    let message_id = chunks.iter().find(|c| c["type"] == "start").unwrap()["messageId"].clone();
    let body = json!({"id": "chat-1", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]},
        {"id": message_id, "role": "assistant", "parts": [
            {"type": "text", "text": "Deleting."},
            {"type": "tool-delete_file", "toolCallId": "call-1", "state": "approval-responded",
             "input": {"path": "notes.txt"}, "approval": {"id": id, "approved": approved}}]}]});
    call(server, "POST", "/api/chat", "alice", Some(body)).await
}

#[tokio::test]
async fn one_denial_denies_with_its_reason() {
    let runs = Arc::new(AtomicUsize::new(0));
    let server = server(RULES, runs.clone()).await;
    let (id, _) = ask(&server).await;
    assert_eq!(vote(&server, &id, "bob", json!({"decision": "approve"})).await.status, 200);
    let denied = vote(&server, &id, "erin", json!({"decision": "deny", "reason": "keep the notes"})).await;
    assert_eq!(denied.json()["state"], "denied", "{}", denied.body);
    let messages = continued(&server).await;
    let part =
        messages.last().unwrap()["parts"].as_array().unwrap().iter().find(|p| p["toolCallId"] == "call-1").cloned();
    assert_eq!(part.unwrap()["state"], "output-denied");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let prompts = server.trace_text();
    assert!(prompts.contains("keep the notes"), "the model reads the approver's reason: {prompts}");
}

#[tokio::test]
async fn the_requester_withdraws_and_a_later_vote_is_refused() {
    let runs = Arc::new(AtomicUsize::new(0));
    let server = server(RULES, runs.clone()).await;
    let (id, _) = ask(&server).await;
    let bob = call(&server, "DELETE", &format!("/api/approvals/{id}"), "bob", None).await;
    assert_eq!((bob.status, error_code(&bob).as_str()), (403, "not_the_requester"));
    let withdrawn = call(&server, "DELETE", &format!("/api/approvals/{id}"), "alice", None).await;
    assert_eq!(withdrawn.json()["state"], "withdrawn", "{}", withdrawn.body);
    let late = vote(&server, &id, "bob", json!({"decision": "approve"})).await;
    assert_eq!((late.status, error_code(&late).as_str()), (409, "approval_already_decided"));
    continued(&server).await;
    assert!(server.trace_text().contains("withdrawn by the requester"));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(audit_kinds(&server).await.contains(&AuditKind::Withdrawn));
}

#[tokio::test]
async fn a_new_message_while_routed_approvals_wait_is_refused() {
    let server = server(RULES, Arc::new(AtomicUsize::new(0))).await;
    let (id, chunks) = ask(&server).await;
    let message_id = chunks.iter().find(|c| c["type"] == "start").unwrap()["messageId"].clone();
    let body = json!({"id": "chat-1", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]},
        {"id": message_id, "role": "assistant", "parts": [
            {"type": "text", "text": "Deleting."},
            {"type": "tool-delete_file", "toolCallId": "call-1", "state": "approval-requested",
             "input": {"path": "notes.txt"}, "approval": {"id": id}}]},
        {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "never mind"}]}]});
    let reply = call(&server, "POST", "/api/chat", "alice", Some(body)).await;
    assert_eq!((reply.status, error_code(&reply).as_str()), (409, "approvals_pending"), "{}", reply.body);
    assert!(reply.json()["error"]["message"].as_str().unwrap().contains("group `finance` (0 of 2)"));
}

#[tokio::test]
async fn an_owner_decides_their_own_approval_in_the_inbox_and_the_server_continues() {
    let runs = Arc::new(AtomicUsize::new(0));
    let ask_rule = "[[rule]]\nname = \"ask-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n";
    let server = server(ask_rule, runs.clone()).await;
    let (id, _) = ask(&server).await;
    let bob = vote(&server, &id, "bob", json!({"decision": "approve"})).await;
    assert_eq!((bob.status, error_code(&bob).as_str()), (404, "unknown_approval"), "another's approval is invisible");
    let item = vote(&server, &id, "alice", json!({"decision": "approve", "editedInput": {"path": "old.txt"}})).await;
    assert_eq!(item.json()["state"], "approved", "{}", item.body);
    assert_eq!(item.json()["approvers"], json!(["alice"]));
    continued(&server).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let prompts = server.trace_text();
    assert!(prompts.contains("old.txt"), "the edited input ran: {prompts}");
}

#[tokio::test]
async fn the_inbox_lists_by_state_and_refuses_bad_queries() {
    let server = server(RULES, Arc::new(AtomicUsize::new(0))).await;
    let (id, _) = ask(&server).await;
    let pending = call(&server, "GET", "/api/approvals?state=pending&limit=5", "carol", None).await;
    let items = pending.json()["approvals"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1);
    let item = &items[0];
    assert_eq!(item["id"], id.as_str());
    assert_eq!(item["tool"], "delete_file");
    assert_eq!(item["input"], json!({"path": "notes.txt"}));
    assert_eq!(item["requester"], "alice");
    assert_eq!(item["conversationId"], "chat-1");
    assert_eq!(item["quorum"], 2);
    assert!(item["reason"].as_str().unwrap().contains("finance signs off deletions"));
    assert!(item["createdAt"].as_str().unwrap().ends_with('Z') && item["expiresAt"].is_string());
    let decided = call(&server, "GET", "/api/approvals?state=decided", "carol", None).await;
    assert!(decided.json()["approvals"].as_array().unwrap().is_empty());
    let own = call(&server, "GET", "/api/approvals?conversation=chat-1", "alice", None).await;
    assert_eq!(own.json()["approvals"].as_array().unwrap().len(), 1);
    for bad in ["state=maybe", "limit=0", "limit=501", "colour=red"] {
        let reply = call(&server, "GET", &format!("/api/approvals?{bad}"), "carol", None).await;
        assert_eq!((reply.status, error_code(&reply).as_str()), (400, "invalid_query"), "{bad}");
    }
    let malformed = vote(&server, &id, "carol", json!({"decision": "perhaps"})).await;
    assert_eq!((malformed.status, error_code(&malformed).as_str()), (400, "invalid_body"));
}

#[tokio::test]
async fn a_mixed_step_records_the_requesters_answer_and_waits_for_the_approvers() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let server = start_configured(mixed_script(), move |config: &mut ServerConfig| {
        config.toolkit = counting_toolkit(counted);
        config.policy = PolicyHandle::new(Policy::from_toml_str(MIXED_RULES).unwrap());
        config.principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
        config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
    })
    .await;
    let (big, small, answer) = ask_mixed(&server).await;
    let waiting = call(&server, "POST", "/api/chat", "alice", Some(answer)).await;
    assert_eq!(waiting.status, 200, "{}", waiting.body);
    let chunks = waiting.chunks();
    let states: Vec<(String, String)> = chunks
        .iter()
        .filter(|c| c["type"] == "data-toolgate-approval")
        .map(|c| (c["id"].as_str().unwrap().to_owned(), c["data"]["state"].as_str().unwrap().to_owned()))
        .collect();
    assert!(states.contains(&(small.clone(), "approved".into())), "{chunks:#?}");
    assert!(states.contains(&(big.clone(), "pending".into())), "{chunks:#?}");
    assert_eq!(server.trace_text().lines().count(), 1, "the model was not called while the step waits");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing runs before the step is decided");

    let decided = vote(&server, &big, "bob", json!({"decision": "approve"})).await;
    assert_eq!(decided.json()["state"], "approved", "{}", decided.body);
    let messages = continued(&server).await;
    assert_eq!(runs.load(Ordering::SeqCst), 2, "both calls ran once the last approval was decided");
    assert!(text_of(&messages).ends_with("Both handled."));
    let parts = messages.last().unwrap()["parts"].as_array().unwrap().clone();
    let kept: Vec<&Value> = parts.iter().filter(|p| p["type"] == "data-toolgate-approval").collect();
    assert_eq!(kept.len(), 2, "one approval part per approval, kept in the stored message");
    assert!(kept.iter().all(|part| part["data"]["state"] == "executed"), "{kept:#?}");
}

#[tokio::test]
async fn a_single_user_server_has_an_inbox_too() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let server = start_configured(default_script(), move |config: &mut ServerConfig| {
        config.toolkit = counting_toolkit(counted);
        config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
    })
    .await;
    let body = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]});
    let headers = [("content-type", "application/json")];
    let first = send(&server, "POST", "/api/chat", &headers, body.to_string().as_bytes()).await.chunks();
    let id =
        first.iter().find(|c| c["type"] == "tool-approval-request").unwrap()["approvalId"].as_str().unwrap().to_owned();
    let listed = get(&server, "/api/approvals").await.json();
    assert_eq!(listed["approvals"][0]["id"], id.as_str());
    assert_eq!(listed["approvals"][0]["requester"], Value::Null);
    let decided = send(&server, "POST", &format!("/api/approvals/{id}"), &headers, br#"{"decision":"approve"}"#).await;
    assert_eq!(decided.json()["state"], "approved", "{}", decided.body);
    for _ in 0..100 {
        if runs.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the server continued the run");
}

/// The `approval` events of an inbox stream, as they arrive.
struct InboxStream(reqwest::Response, String);

impl InboxStream {
    async fn open(server: &Server, user: &str) -> Self {
        let url = format!("http://{}/api/approvals/stream", server.addr);
        let response = reqwest::Client::new().get(url).header("x-user", user).send().await.unwrap();
        assert_eq!(response.status(), 200);
        Self(response, String::new())
    }

    /// The next event's item, within 5 s.
    async fn next(&mut self) -> Value {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Some(end) = self.1.find("\n\n") {
                    let frame: String = self.1.drain(..end + 2).collect();
                    if let Some(data) = frame.lines().find_map(|line| line.strip_prefix("data: ")) {
                        return serde_json::from_str(data).unwrap();
                    }
                    continue;
                }
                let chunk = self.0.chunk().await.unwrap().expect("the stream stays open");
                self.1.push_str(&String::from_utf8_lossy(&chunk));
            }
        })
        .await
        .expect("an event within 5 s")
    }
}

#[tokio::test]
async fn the_inbox_stream_shows_an_approval_appear_and_change() {
    let server = server(RULES, Arc::new(AtomicUsize::new(0))).await;
    let mut bob = InboxStream::open(&server, "bob").await;
    let mut mallory = InboxStream::open(&server, "mallory").await;
    let (id, _) = ask(&server).await;
    let appeared = bob.next().await;
    assert_eq!((appeared["id"].as_str(), appeared["state"].as_str()), (Some(id.as_str()), Some("pending")));
    assert_eq!(vote(&server, &id, "carol", json!({"decision": "approve"})).await.status, 200);
    let voted = bob.next().await;
    assert_eq!(voted["votes"][0]["principal"], "carol");
    assert_eq!(vote(&server, &id, "erin", json!({"decision": "approve"})).await.status, 200);
    let decided = bob.next().await;
    assert_ne!(decided["state"], "pending", "{decided}");
    // Someone who may not decide it hears nothing: a keep-alive at most, no event.
    let nothing = tokio::time::timeout(Duration::from_millis(300), mallory.next()).await;
    assert!(nothing.is_err(), "mallory heard of an approval that is not hers");
}

#[tokio::test]
async fn a_request_that_continues_the_step_keeps_its_claim_while_it_runs() {
    // bob decides the routed call first; alice's own answer then completes the step, and her request
    // runs it (a slow tool, four continuation leases long): the server's worker must not run it again.
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let slow = toolgate::Toolkit::new([toolgate::Tool::function::<PathInput>("delete_file")
        .needs_approval(true)
        .handler(move |input: PathInput, _| {
            let runs = counted.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(600)).await;
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, toolgate::ToolError>(json!({"deleted": input.path}))
            }
        })])
    .unwrap();
    let server = start_configured(mixed_script(), move |config: &mut ServerConfig| {
        config.toolkit = slow;
        config.policy = PolicyHandle::new(Policy::from_toml_str(MIXED_RULES).unwrap());
        config.principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
        config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
        config.continuation_lease = Duration::from_millis(150);
    })
    .await;
    let (big, _, answer) = ask_mixed(&server).await;
    assert_eq!(vote(&server, &big, "bob", json!({"decision": "approve"})).await.json()["state"], "approved");
    tokio::time::sleep(Duration::from_millis(300)).await; // the worker finds alice's approval pending and stops
    let ran = call(&server, "POST", "/api/chat", "alice", Some(answer)).await;
    assert_eq!(ran.status, 200, "{}", ran.body);
    assert!(ran.body.contains("\"handled.\""), "alice's request ran the step: {}", ran.body);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 2, "each call ran once");
    assert_eq!(server.trace_text().lines().count(), 2, "the model was called once after the step, not twice");
}

/// Rules of the mixed step: `big.txt` is bob's to decide, any other deletion the requester's.
const MIXED_RULES: &str = "[[rule]]\nname = \"big-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n\
                           approvers = [\"bob\"]\n[rule.input]\n\"/path\" = { equals = \"big.txt\" }\n\n\
                           [[rule]]\nname = \"ask-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n";

/// The model of the mixed step: both deletions in one step, then an answer (and a second one, which
/// only a second continuation would reach).
fn mixed_script() -> Value {
    json!({"turns": [
        [{"type": "tool-call", "toolCallId": "call-big", "toolName": "delete_file", "input": {"path": "big.txt"}},
         {"type": "tool-call", "toolCallId": "call-small", "toolName": "delete_file", "input": {"path": "small.txt"}}],
        [{"type": "text", "text": "Both handled."}],
        [{"type": "text", "text": "A second model call: the step ran twice."}]
    ]})
}

/// Alice asks for both deletions; returns the approval ids (big, small) and her client's answer
/// approving her own (`small`) and leaving bob's (`big`) unanswered.
async fn ask_mixed(server: &Server) -> (String, String, Value) {
    let body = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete both"}]}]});
    let first = call(server, "POST", "/api/chat", "alice", Some(body)).await.chunks();
    let approval = |call_id: &str| {
        let request = first.iter().find(|c| c["type"] == "tool-approval-request" && c["toolCallId"] == call_id);
        request.unwrap()["approvalId"].as_str().unwrap().to_owned()
    };
    let (big, small) = (approval("call-big"), approval("call-small"));
    let message_id = first.iter().find(|c| c["type"] == "start").unwrap()["messageId"].clone();
    let answer = json!({"id": "chat-1", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete both"}]},
        {"id": message_id, "role": "assistant", "parts": [
            {"type": "tool-delete_file", "toolCallId": "call-big", "state": "approval-requested",
             "input": {"path": "big.txt"}, "approval": {"id": big}},
            {"type": "tool-delete_file", "toolCallId": "call-small", "state": "approval-responded",
             "input": {"path": "small.txt"}, "approval": {"id": small, "approved": true}}]}]});
    (big, small, answer)
}

#[tokio::test]
async fn a_request_without_a_principal_neither_sees_nor_decides_anothers_approval() {
    // Behind the principal header a request may come without one: it is nobody, not the one user.
    let runs = Arc::new(AtomicUsize::new(0));
    let ask_rule = "[[rule]]\nname = \"ask-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n";
    for rules in [RULES, ask_rule] {
        let server = server(rules, runs.clone()).await;
        let (id, _) = ask(&server).await;
        let headers = [("content-type", "application/json")];
        let listed = send(&server, "GET", "/api/approvals?state=all", &headers, b"").await;
        assert_eq!(listed.json()["approvals"], json!([]), "{}", listed.body);
        let shown = send(&server, "GET", &format!("/api/approvals/{id}"), &headers, b"").await;
        assert_eq!((shown.status, error_code(&shown).as_str()), (404, "unknown_approval"));
        let path = format!("/api/approvals/{id}");
        let voted = send(&server, "POST", &path, &headers, br#"{"decision":"approve"}"#).await;
        assert_eq!((voted.status, error_code(&voted).as_str()), (404, "unknown_approval"), "{}", voted.body);
        let withdrawn = send(&server, "DELETE", &path, &headers, b"").await;
        assert_eq!(withdrawn.status, 404, "{}", withdrawn.body);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}
