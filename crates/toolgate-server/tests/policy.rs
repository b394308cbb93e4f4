//! Declarative rules and sticky decisions over HTTP: what a rule decides
//! reaches the client with its reason, and `/api/decisions` adds, lists and
//! revokes people's standing answers, each bound to whoever made it.

mod common;

use std::sync::Arc;

use axum::http::HeaderName;
use common::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::ledger::{ConversationStore, DecisionQuery, LedgerConfig, LedgerStore, MemoryStore};
use toolgate_policy::{Policy, PolicyHandle};
use toolgate_server::PrincipalSource;

fn rules(toml: &str) -> PolicyHandle {
    PolicyHandle::new(Policy::from_toml_str(toml).unwrap())
}

fn first_turn(chat: &str) -> Value {
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]}
    ]})
}

async fn chat_as(server: &Server, chat: &str, user: Option<&str>) -> Vec<Value> {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(user) = user {
        headers.push(("x-user", user));
    }
    let reply = post_with(server, "/api/chat", &headers, first_turn(chat).to_string().as_bytes()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.chunks()
}

/// What happened to call-1: `asked`, `ran` or `denied`, and the reason sent with it.
fn outcome(chunks: &[Value]) -> (&'static str, Option<String>) {
    let reason = chunks
        .iter()
        .find(|chunk| chunk["type"] == "data-toolgate-reason")
        .map(|chunk| chunk["data"]["reason"].as_str().unwrap().to_owned());
    let kind = |name: &str| chunks.iter().any(|chunk| chunk["type"] == name);
    let what = if kind("tool-approval-request") {
        "asked"
    } else if kind("tool-output-available") {
        "ran"
    } else if kind("tool-output-denied") {
        "denied"
    } else {
        panic!("no outcome for the call: {chunks:?}")
    };
    (what, reason)
}

async fn decide(server: &Server, user: Option<&str>, body: Value) -> Reply {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(user) = user {
        headers.push(("x-user", user));
    }
    send(server, "POST", "/api/decisions", &headers, body.to_string().as_bytes()).await
}

async fn listed(server: &Server, user: Option<&str>, chat: &str) -> Vec<String> {
    let headers: Vec<(&str, &str)> = user.map(|user| vec![("x-user", user)]).unwrap_or_default();
    let reply = send(server, "GET", &format!("/api/decisions?conversation={chat}"), &headers, b"").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["decisions"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap().to_owned()).collect()
}

fn always_allow(chat: &str) -> Value {
    json!({"action": "allow", "tool": "delete_file", "scope": "conversation", "conversationId": chat})
}

async fn with_rules(toml: &str) -> Server {
    let policy = rules(toml);
    start_configured(default_script(), move |config| config.policy = policy).await
}

#[tokio::test]
async fn a_deny_rule_refuses_the_call_before_anyone_is_asked_and_says_which_rule() {
    let server = with_rules(
        "[[rule]]\nname = \"no-notes\"\naction = \"deny\"\ntool = \"delete_*\"\n[rule.input]\n\"/path\" = { glob = \"notes*\" }\n",
    )
    .await;
    let chunks = chat_as(&server, "chat-1", None).await;
    let (what, reason) = outcome(&chunks);
    assert_eq!(what, "denied");
    let reason = reason.unwrap();
    assert!(reason.contains("rule `no-notes`") && reason.contains("/path"), "{reason}");
    let model_saw = &server.trace_text().lines().nth(1).map(|line| serde_json::from_str::<Value>(line).unwrap());
    let result = &model_saw.as_ref().unwrap()["prompt"][2]["content"][0]["output"];
    assert_eq!(result["type"], "execution-denied");
    assert_eq!(result["reason"].as_str(), Some(reason.as_str()), "the model reads the same reason");
}

#[tokio::test]
async fn an_ask_rule_puts_its_reason_before_the_approval_request() {
    let server = with_rules("[[rule]]\nname = \"ask-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n").await;
    let chunks = chat_as(&server, "chat-1", None).await;
    let reason_at = chunks.iter().position(|chunk| chunk["type"] == "data-toolgate-reason").unwrap();
    let request_at = chunks.iter().position(|chunk| chunk["type"] == "tool-approval-request").unwrap();
    assert_eq!(reason_at + 1, request_at);
    assert_eq!(chunks[reason_at]["data"]["decision"], "ask");
    assert_eq!(chunks[reason_at]["data"]["approvalId"], chunks[request_at]["approvalId"]);
    assert!(chunks[reason_at]["data"]["reason"].as_str().unwrap().contains("rule `ask-deletes`"));
}

#[tokio::test]
async fn a_replaced_policy_decides_the_next_request() {
    let policy = PolicyHandle::default();
    let handle = policy.clone();
    let server = start_configured(default_script(), move |config| config.policy = policy).await;
    assert_eq!(outcome(&chat_as(&server, "chat-1", None).await).0, "asked");
    handle.replace(Policy::from_toml_str("[[rule]]\naction = \"deny\"\ntool = \"delete_file\"\n").unwrap());
    assert_eq!(outcome(&chat_as(&server, "chat-2", None).await).0, "denied");
}

#[tokio::test]
async fn always_allow_in_a_chat_applies_to_that_chat_only_until_revoked() {
    let server = start(None).await;
    let reply = decide(&server, None, always_allow("chat-1")).await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    let decision = reply.json();
    let id = decision["id"].as_str().unwrap().to_owned();
    assert_eq!(decision["scope"], json!({"kind": "conversation", "conversationId": "chat-1"}));

    let (what, _) = outcome(&chat_as(&server, "chat-1", None).await);
    assert_eq!(what, "ran", "the sticky allow lifts the tool's own approval in chat-1");
    assert_eq!(outcome(&chat_as(&server, "chat-2", None).await).0, "asked", "not in another chat");
    assert_eq!(listed(&server, None, "chat-1").await, vec![id.clone()]);
    assert!(listed(&server, None, "chat-2").await.is_empty());

    let revoked = send(&server, "DELETE", &format!("/api/decisions/{id}?conversation=chat-1"), &[], b"").await;
    assert_eq!(revoked.status, 204, "{}", revoked.body);
    assert_eq!(outcome(&chat_as(&server, "chat-1", None).await).0, "asked");
    let again = send(&server, "DELETE", &format!("/api/decisions/{id}?conversation=chat-1"), &[], b"").await;
    assert_eq!(again.status, 404);
    assert_eq!(again.json()["error"]["code"], "unknown_decision");
}

/// With a store, a request reads its conversation and its sticky decisions
/// together: what the gate decides must be what the store holds now.
#[tokio::test]
async fn with_a_store_sticky_decisions_gate_stored_chats() {
    let dir = std::env::temp_dir().join(format!("toolgate-policy-{}", uuid::Uuid::now_v7().simple()));
    let sqlite = toolgate_store::StoreSpec::Sqlite(dir.join("ledger.db"));
    let stores: Vec<Arc<dyn LedgerStore>> =
        vec![Arc::new(MemoryStore::new()), toolgate_store::open_store(&sqlite).await.unwrap().unwrap()];
    for store in stores {
        let ledger = LedgerConfig::new(store);
        let server = &start_configured(default_script(), move |config| config.ledger = Some(ledger)).await;
        let turn = |chat: &str, message: &str| {
            json!({"id": chat, "trigger": "submit-message", "messages": [
                {"id": message, "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]}
            ]})
        };
        let chat = |body: Value| async move {
            let reply = post(server, "/api/chat", "application/json", body.to_string().as_bytes()).await;
            assert_eq!(reply.status, 200, "{}", reply.body);
            outcome(&reply.chunks()).0
        };
        let made = decide(server, None, always_allow("chat-1")).await;
        assert_eq!(made.status, 201, "{}", made.body);
        assert_eq!(chat(turn("chat-1", "u1")).await, "ran", "the sticky allow applies to the stored chat");
        assert_eq!(chat(turn("chat-2", "u1")).await, "asked", "and to no other chat");
        let made = decide(server, None, always_allow("chat-3")).await;
        let id = made.json()["id"].as_str().unwrap().to_owned();
        let revoked = send(server, "DELETE", &format!("/api/decisions/{id}?conversation=chat-3"), &[], b"").await;
        assert_eq!(revoked.status, 204, "{}", revoked.body);
        assert_eq!(chat(turn("chat-3", "u1")).await, "asked", "a revoked decision no longer applies");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn exact_input_never_allow_and_sticky_allows_lift_only_their_authors_questions() {
    let server = with_rules("[[rule]]\nname = \"ask-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\n").await;
    assert_eq!(decide(&server, None, always_allow("chat-1")).await.status, 201);
    let (what, _) = outcome(&chat_as(&server, "chat-1", None).await);
    assert_eq!(what, "ran", "a sticky allow is a grant: it lifts the question its author would be asked");
    let routed =
        "[[rule]]\nname = \"ask-deletes\"\naction = \"ask\"\ntool = \"delete_file\"\napprovers = [\"carol\"]\n";
    let server = with_rules(routed).await;
    assert_eq!(decide(&server, None, always_allow("chat-1")).await.status, 201);
    let (what, reason) = outcome(&chat_as(&server, "chat-1", None).await);
    assert_eq!(what, "asked", "an ask routed to someone else is not lifted");
    assert!(reason.unwrap().contains("ask-deletes"));

    let plain = start(None).await;
    let other_input = json!({"action": "allow", "tool": "delete_file", "input": {"path": "other.txt"},
        "scope": "conversation", "conversationId": "chat-1"});
    assert_eq!(decide(&plain, None, other_input).await.status, 201);
    assert_eq!(outcome(&chat_as(&plain, "chat-1", None).await).0, "asked", "only that exact input is allowed");
    let never = json!({"action": "deny", "tool": "delete_file", "scope": "global", "note": "no deleting"});
    let made = decide(&plain, None, never).await;
    assert_eq!(made.status, 201, "{}", made.body);
    let (what, reason) = outcome(&chat_as(&plain, "chat-9", None).await);
    assert_eq!(what, "denied");
    assert!(reason.unwrap().contains(made.json()["id"].as_str().unwrap()), "the reason names the decision");
}

#[tokio::test]
async fn decisions_belong_to_who_made_them() {
    let principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
    let server = start_configured(default_script(), move |config| config.principals = principals).await;
    let made = decide(&server, Some("alice"), always_allow("chat-1")).await;
    assert_eq!(made.status, 201, "{}", made.body);
    assert_eq!(made.json()["createdBy"], "alice");
    let id = made.json()["id"].as_str().unwrap().to_owned();

    assert_eq!(outcome(&chat_as(&server, "chat-1", Some("alice")).await).0, "ran");
    assert_eq!(outcome(&chat_as(&server, "chat-1", Some("bob")).await).0, "asked", "alice cannot allow for bob");
    assert!(listed(&server, Some("bob"), "chat-1").await.is_empty());
    let bob_revokes =
        send(&server, "DELETE", &format!("/api/decisions/{id}?conversation=chat-1"), &[("x-user", "bob")], b"").await;
    assert_eq!(bob_revokes.status, 404);
    assert_eq!(listed(&server, Some("alice"), "chat-1").await, [id]);

    let global =
        decide(&server, Some("alice"), json!({"action": "allow", "tool": "delete_file", "scope": "global"})).await;
    assert_eq!(global.status, 403);
    assert_eq!(global.json()["error"]["code"], "global_decision_forbidden");
    let mine =
        decide(&server, Some("bob"), json!({"action": "allow", "tool": "delete_file", "scope": "principal"})).await;
    assert_eq!(mine.status, 201);
    assert_eq!(mine.json()["scope"], json!({"kind": "principal", "principal": "bob"}));
    assert_eq!(outcome(&chat_as(&server, "chat-7", Some("bob")).await).0, "ran");
    assert_eq!(outcome(&chat_as(&server, "chat-7", Some("carol")).await).0, "asked");
}

#[tokio::test]
async fn bad_decisions_are_refused_with_what_is_wrong() {
    let server = start(None).await;
    let cases = [
        (json!({"action": "allow", "tool": "rm_rf", "scope": "global"}), "unknown_tool", "rm_rf"),
        (json!({"action": "maybe", "tool": "delete_file", "scope": "global"}), "invalid_decision", "maybe"),
        (
            json!({"action": "allow", "tool": "delete_file", "scope": "global", "colour": 1}),
            "invalid_decision",
            "colour",
        ),
        (
            json!({"action": "allow", "tool": "delete_file", "scope": "conversation"}),
            "invalid_decision",
            "conversationId",
        ),
        (json!({"action": "allow", "tool": "delete_file", "scope": "principal"}), "invalid_decision", "principal"),
        (
            json!({"action": "allow", "tool": "delete_file", "input": {"path": 3}, "scope": "global"}),
            "invalid_decision",
            "input",
        ),
        (
            json!({"action": "allow", "tool": "delete_file", "scope": "global", "ttl": "soon"}),
            "invalid_decision",
            "ttl",
        ),
    ];
    for (body, code, named) in cases {
        let reply = decide(&server, None, body.clone()).await;
        assert_eq!(reply.status, 400, "{body}: {}", reply.body);
        assert_eq!(reply.json()["error"]["code"], code, "{body}");
        assert!(reply.json()["error"]["message"].as_str().unwrap().contains(named), "{body}: {}", reply.body);
    }
    let bad_query = send(&server, "GET", "/api/decisions?chat=1", &[], b"").await;
    assert_eq!(bad_query.status, 400);
    assert!(listed(&server, None, "chat-1").await.is_empty(), "nothing was recorded");
}

#[tokio::test]
async fn with_a_store_decisions_live_in_it_and_expire() {
    let store = Arc::new(MemoryStore::new());
    let ledger = LedgerConfig::new(store.clone());
    let server = start_configured(default_script(), move |config| config.ledger = Some(ledger)).await;
    let body = json!({"action": "allow", "tool": "delete_file", "scope": "conversation", "conversationId": "chat-1",
        "ttl": "1h"});
    let made = decide(&server, None, body).await.json();
    let query = DecisionQuery { conversation_id: Some("chat-1".into()), principal: None, now: 0 };
    let stored = store.decisions(&query).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].id, made["id"].as_str().unwrap());
    let expires = made["expiresAt"].as_i64().unwrap();
    assert_eq!(expires - made["createdAt"].as_i64().unwrap(), 3_600_000);
    let later = DecisionQuery { now: expires, ..query };
    assert!(store.decisions(&later).await.unwrap().is_empty(), "expired decisions are not read");
}

#[tokio::test]
async fn what_every_request_reads_stays_small() {
    let principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
    let server = start_configured(default_script(), move |config| config.principals = principals).await;
    let huge = json!({"action": "allow", "tool": "delete_file", "scope": "conversation", "conversationId": "chat-1",
        "input": {"path": "x".repeat(toolgate_server::MAX_DECISION_INPUT_BYTES)}});
    let refused = decide(&server, Some("alice"), huge).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.json()["error"]["message"].as_str().unwrap().contains("`input`"), "{}", refused.body);

    let nth = |n: usize| {
        json!({"action": "allow", "tool": "delete_file", "scope": "conversation",
        "conversationId": "chat-1", "input": {"path": format!("f{n}.txt")}})
    };
    for n in 0..toolgate_server::MAX_DECISIONS_PER_SCOPE {
        assert_eq!(decide(&server, Some("alice"), nth(n)).await.status, 201);
    }
    let full = decide(&server, Some("alice"), nth(999)).await;
    assert_eq!(full.status, 409, "{}", full.body);
    assert_eq!(full.json()["error"]["code"], "too_many_decisions");
    assert_eq!(decide(&server, Some("bob"), nth(999)).await.status, 201, "the limit is per author");
    let alices = listed(&server, Some("alice"), "chat-1").await;
    assert_eq!(alices.len(), toolgate_server::MAX_DECISIONS_PER_SCOPE);

    // Principals named by a header are as many as a client likes, but each one's
    // `chat-1` is a conversation of their own: nobody crowds Alice's scope, so what
    // her requests read stays within her own cap.
    for author in 0..3 {
        let user = format!("user-{author}");
        for n in 0..toolgate_server::MAX_DECISIONS_PER_SCOPE {
            assert_eq!(decide(&server, Some(&user), nth(n)).await.status, 201, "{user} #{n}");
        }
        assert_eq!(decide(&server, Some(&user), nth(999)).await.status, 409, "{user}'s own cap");
    }
    assert_eq!(listed(&server, Some("alice"), "chat-1").await.len(), toolgate_server::MAX_DECISIONS_PER_SCOPE);
    assert_eq!(listed(&server, Some("user-0"), "chat-1").await.len(), toolgate_server::MAX_DECISIONS_PER_SCOPE);
    let elsewhere =
        json!({"action": "allow", "tool": "delete_file", "scope": "conversation", "conversationId": "chat-2"});
    assert_eq!(decide(&server, Some("alice"), elsewhere).await.status, 201, "the limit is per conversation");
}

#[tokio::test]
async fn a_history_term_counts_what_ran_and_explain_shows_its_figures() {
    let policy = rules(
        "[[rule]]\nname = \"once-a-day\"\naction = \"deny\"\ntool = \"transfer_money\"\n\
         history = { window = \"24h\", scope = \"everyone\", count = { gte = 1 } }\n",
    );
    let script = json!({"turns": [
        [{"type": "tool-call", "toolCallId": "t-1", "toolName": "transfer_money", "input": {"amount": 50, "to": "bob"}}],
        [{"type": "text", "text": "Sent."}]
    ]});
    let ledger = toolgate::ledger::LedgerConfig::new(std::sync::Arc::new(toolgate::ledger::MemoryStore::new()));
    let server = start_configured(script, move |config| {
        config.policy = policy;
        config.toolkit = toolgate::demo::toolkit();
        config.ledger = Some(ledger);
    })
    .await;
    let before = explain_transfer(&server).await;
    assert_eq!(before.status, 200, "{}", before.body);
    assert_eq!(before.json()["decision"], "allow", "{}", before.body);

    let first = chat_as(&server, "chat-1", None).await;
    assert!(first.iter().any(|chunk| chunk["type"] == "tool-output-available"), "the first transfer runs");
    let after = explain_transfer(&server).await.json();
    assert_eq!(after["decision"], "deny", "{after}");
    let reason = after["reason"].as_str().unwrap();
    assert!(reason.contains("history: 1 earlier call vs >= 1 in the last 24h (everyone)"), "{reason}");
    assert_eq!(after["matches"][0]["source"], "once-a-day");

    let second = chat_as(&server, "chat-2", None).await;
    let (what, reason) = outcome(&second);
    assert_eq!(what, "denied", "the second transfer is refused");
    assert!(reason.unwrap().contains("1 earlier call"));

    let bad =
        send(&server, "POST", "/api/policy/explain", &[("content-type", "application/json")], b"{\"tol\": 1}").await;
    assert_eq!((bad.status, bad.json()["error"]["code"].as_str()), (400, Some("invalid_explain")));
}

async fn explain_transfer(server: &Server) -> Reply {
    let body = json!({"tool": "transfer_money", "input": {"amount": 5, "to": "bob"}, "conversation": "chat-9"});
    send(server, "POST", "/api/policy/explain", &[("content-type", "application/json")], body.to_string().as_bytes())
        .await
}
