//! Who may see and answer what: with a principal source, every conversation
//! belongs to the principal who created it. Another principal (with a valid
//! credential of their own) reads, continues, answers, resumes and audits
//! nothing of it, and learns nothing of its existence; run under each
//! principal source the server has (a trusted header, a tokens file, JWTs).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::HeaderName;
use common::keys::{AUDIENCE, ISSUER, Key, claims, generate, sign, write_jwks};
use common::*;
use jsonwebtoken::Algorithm;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::ledger::{LedgerConfig, MemoryStore};
use toolgate_server::{JwksSource, JwtConfig, JwtVerifier, PrincipalSource, TokenTable};

/// How requests name their principal.
#[derive(Clone, Copy, Debug)]
enum Source {
    Header,
    Tokens,
    Jwt,
}

struct Owned {
    server: Server,
    runs: Arc<AtomicUsize>,
    source: Source,
    /// The identity provider's signing key (JWT source).
    key: Option<Key>,
    _dir: tempfile::TempDir,
}

/// The server's principal source, and the JWT signing key it trusts (JWT source).
async fn principals(source: Source, dir: &std::path::Path) -> (PrincipalSource, Option<Key>) {
    match source {
        Source::Header => (PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new()), None),
        Source::Tokens => {
            let tokens = ["alice", "bob", "carol"].map(|who| (format!("token-of-{who}"), who.to_owned()));
            (PrincipalSource::Tokens(TokenTable::from_entries(tokens.into_iter().collect()).unwrap()), None)
        }
        Source::Jwt => {
            let key = generate(dir, "idp-1", Algorithm::EdDSA);
            let jwks = dir.join("jwks.json");
            write_jwks(&jwks, &[&key]);
            let config = JwtConfig::new(JwksSource::File(jwks), ISSUER, AUDIENCE);
            (PrincipalSource::Jwt(JwtVerifier::new(config).await.unwrap()), Some(key))
        }
    }
}

async fn start_owned(source: Source) -> Owned {
    let dir = tempfile::tempdir().unwrap();
    let (principals, key) = principals(source, dir.path()).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let toolkit = counting_toolkit(runs.clone());
    let ledger = LedgerConfig::new(Arc::new(MemoryStore::new())).ttl(Duration::from_secs(90));
    let server = start_configured(default_script(), move |config| {
        config.toolkit = toolkit;
        config.ledger = Some(ledger);
        config.principals = principals;
        config.admins = vec!["carol".to_owned()];
    })
    .await;
    Owned { server, runs, source, key, _dir: dir }
}

impl Owned {
    /// The header that makes a request `who`'s.
    fn credential(&self, who: &str) -> (&'static str, String) {
        match self.source {
            Source::Header => ("x-user", who.to_owned()),
            Source::Tokens => ("authorization", format!("Bearer token-of-{who}")),
            Source::Jwt => {
                let token = sign(self.key.as_ref().unwrap(), &claims(|claims| claims["sub"] = json!(who)));
                ("authorization", format!("Bearer {token}"))
            }
        }
    }

    async fn request(&self, who: &str, method: &str, path: &str, body: Option<&Value>) -> Reply {
        let (name, value) = self.credential(who);
        let text = body.map(Value::to_string).unwrap_or_default();
        let headers = [("content-type", "application/json"), (name, value.as_str())];
        send(&self.server, method, path, &headers, text.as_bytes()).await
    }

    async fn chat(&self, who: &str, body: &Value) -> Reply {
        self.request(who, "POST", "/api/chat", Some(body)).await
    }

    async fn get(&self, who: &str, path: &str) -> Reply {
        self.request(who, "GET", path, None).await
    }

    /// The audit events `who` is shown, as JSON.
    async fn audit(&self, who: &str, query: &str) -> Vec<Value> {
        let reply = self.get(who, &format!("/api/audit{query}")).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.body.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
    }
}

fn first_turn(chat: &str) -> Value {
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]}
    ]})
}

/// The first turn's approval request and the assistant message holding it.
fn asked(reply: &Reply) -> (String, String) {
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chunks = reply.chunks();
    let request = chunks.iter().find(|chunk| chunk["type"] == "tool-approval-request").expect("an approval request");
    (request["approvalId"].as_str().unwrap().to_owned(), chunks[0]["messageId"].as_str().unwrap().to_owned())
}

/// The continuation approving it, as `useChat` sends it.
fn approved(chat: &str, (approval_id, message_id): &(String, String)) -> Value {
    json!({"id": chat, "trigger": "submit-message", "messageId": message_id, "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]},
        {"id": message_id, "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-delete_file", "toolCallId": "call-1", "state": "approval-responded",
             "input": {"path": "notes.txt"}, "approval": {"id": approval_id, "approved": true}}
        ]}
    ]})
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|event| event["kind"].as_str().unwrap()).collect()
}

async fn another_principal_gets_nothing(source: Source) {
    let owned = start_owned(source).await;
    let alices = asked(&owned.chat("alice", &first_turn("alice-chat")).await);
    let stored = owned.get("alice", "/api/chats/alice-chat").await;
    assert_eq!(stored.status, 200, "{}", stored.body);

    // Bob, signed in as himself, reads nothing of Alice's chat and cannot tell it exists.
    let read = owned.get("bob", "/api/chats/alice-chat").await;
    assert_eq!((read.status, read.json()["error"]["code"].as_str()), (404, Some("chat_not_found")));
    assert_eq!(owned.get("bob", "/api/chat/alice-chat/stream").await.status, 204);
    assert!(owned.audit("bob", "?conversation=alice-chat").await.is_empty());
    assert!(owned.audit("bob", "").await.is_empty(), "nothing of Alice's in Bob's whole log");
    let decisions = owned.get("bob", "/api/decisions?conversation=alice-chat").await;
    assert_eq!(decisions.json(), json!({"decisions": []}));

    // Bob posts Alice's approval, approved, under her chat id: his own (empty) chat of that
    // id never held that call, so nothing runs and Alice's chat is unchanged.
    let forged = owned.chat("bob", &approved("alice-chat", &alices)).await;
    assert_eq!((forged.status, forged.json()["error"]["code"].as_str()), (400, Some("history_mismatch")));
    assert_eq!(owned.runs.load(Ordering::SeqCst), 0, "Bob's forged approval ran nothing");
    assert_eq!(owned.get("alice", "/api/chats/alice-chat").await.body, stored.body, "Alice's chat is unchanged");

    // Bob's own chat of the same id is his alone.
    let bobs = asked(&owned.chat("bob", &first_turn("alice-chat")).await);
    assert_ne!(bobs.0, alices.0);
    assert_eq!(owned.get("alice", "/api/chats/alice-chat").await.body, stored.body, "still unchanged");
    assert_eq!(kinds(&owned.audit("bob", "").await), ["issued"], "Bob sees his own request only");

    // Alice approves her own: it runs once, recorded with her as owner and as the one who answered.
    let reply = owned.chat("alice", &approved("alice-chat", &alices)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(owned.runs.load(Ordering::SeqCst), 1);
    let hers = owned.audit("alice", "?conversation=alice-chat").await;
    assert_eq!(kinds(&hers), ["issued", "approved", "executed"]);
    for event in &hers {
        assert_eq!((event["owner"].as_str(), event["conversationId"].as_str()), (Some("alice"), Some("alice-chat")));
    }
    assert_eq!(hers[1]["principal"], "alice");
    assert_eq!(owned.audit("bob", "?conversation=alice-chat").await.len(), 1, "Bob still sees only his own");

    // An admin sees every owner's events.
    let all = owned.audit("carol", "?conversation=alice-chat").await;
    assert_eq!(kinds(&all), ["issued", "issued", "approved", "executed"]);
}

#[tokio::test]
async fn another_principal_gets_nothing_with_a_principal_header() {
    another_principal_gets_nothing(Source::Header).await;
}

#[tokio::test]
async fn another_principal_gets_nothing_with_a_tokens_file() {
    another_principal_gets_nothing(Source::Tokens).await;
}

#[tokio::test]
async fn another_principal_gets_nothing_with_jwt_bearer_tokens() {
    another_principal_gets_nothing(Source::Jwt).await;
}

/// An AG-UI thread is its owner's too: Bob resuming Alice's interrupt under her
/// thread id reaches his own (empty) thread, which never made that call, and nothing runs.
#[tokio::test]
async fn another_principals_ag_ui_resume_runs_nothing() {
    let owned = start_owned(Source::Tokens).await;
    let first = json!({"threadId": "t1", "runId": "r1", "state": {}, "tools": [], "context": [],
        "messages": [{"id": "m1", "role": "user", "content": "delete notes.txt"}]});
    let events = agui_events(&owned.request("alice", "POST", "/ag-ui", Some(&first)).await);
    let interrupt = last_event(&events, "RUN_FINISHED")["outcome"]["interrupts"][0].clone();
    let resume = json!({"threadId": "t1", "runId": "r2", "tools": [], "context": [],
        "messages": last_event(&events, "MESSAGES_SNAPSHOT")["messages"],
        "state": last_event(&events, "STATE_SNAPSHOT")["snapshot"],
        "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": true}}]});
    let bobs = agui_events(&owned.request("bob", "POST", "/ag-ui", Some(&resume)).await);
    let error = last_event(&bobs, "RUN_ERROR");
    assert_eq!(error["code"], "history_mismatch", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("the server never made"), "{message}");
    assert_eq!(owned.runs.load(Ordering::SeqCst), 0);
    let alices = agui_events(&owned.request("alice", "POST", "/ag-ui", Some(&resume)).await);
    assert!(alices.iter().any(|event| event["type"] == "TOOL_CALL_RESULT"), "{alices:#?}");
    assert_eq!(owned.runs.load(Ordering::SeqCst), 1);
}

/// Ids carry no control characters (the owner's separator in the ledger's key among them).
#[tokio::test]
async fn a_chat_id_with_a_control_character_is_refused() {
    let owned = start_owned(Source::Tokens).await;
    let reply = owned.chat("bob", &first_turn("alice\u{1f}alice-chat")).await;
    assert_eq!((reply.status, reply.json()["error"]["code"].as_str()), (400, Some("invalid_chat_id")));
    let read = owned.get("bob", "/api/chats/alice%1Falice-chat").await;
    assert_eq!(read.status, 400, "{}", read.body);
    assert_eq!(owned.runs.load(Ordering::SeqCst), 0);
}

/// An empty chat id stays missing under an owner too: with a store it is refused.
#[tokio::test]
async fn an_empty_chat_id_is_missing_whoever_asks() {
    let owned = start_owned(Source::Tokens).await;
    let reply = owned.chat("alice", &first_turn("")).await;
    assert_eq!((reply.status, reply.json()["error"]["code"].as_str()), (400, Some("missing_conversation_id")));
}
