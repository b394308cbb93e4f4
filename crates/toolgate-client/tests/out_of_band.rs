//! Approvals decided out of band, with the Rust client against `toolgate serve`
//! (in process, over HTTP, bearer tokens, a ledger in memory): alice's chat
//! gets the approval request and her client goes away; the approval is
//! decided in the inbox (`POST /api/approvals/{id}`); the server continues the
//! run by itself; a new client for alice reattaches to the running
//! continuation with [`Chat::resume`], or starts from the stored chat
//! (`GET /api/chats/{id}`) once it is over.
//!
//! - Quorum: a rule routes `archive_file` to `group:finance` (bob, carol) with
//!   a quorum of 2. The tool waits for the test, so the continuation is still
//!   running when alice's new client resumes: it attaches mid-run every time.
//! - Inbox: a plain `ask` rule; alice decides her own approval in the inbox.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde::Deserialize;
use serde_json::{Value, json};
use support::{call, text, text_of, tool_parts};
use tokio::sync::{Notify, Semaphore, oneshot};
use toolgate::ledger::{LedgerConfig, MemoryStore};
use toolgate::model::ScriptedModel;
use toolgate::{Tool, ToolError, Toolkit};
use toolgate_client::transport::ChunkStream;
use toolgate_client::{
    Chat, ChatOptions, ChatTransport, ClientError, Decision, HttpTransport, Status, ToolState, TransportRequest,
    UiMessage, UiPart,
};
use toolgate_policy::{Policy, PolicyHandle};
use toolgate_server::{AppState, ApprovalSecret, PrincipalSource, ServerConfig, TokenTable, serve_listener};
use toolgate_ui::parse_ui_messages;

/// Each principal's bearer token.
const TOKENS: [(&str, &str); 4] =
    [("alice", "alice-token"), ("bob", "bob-token"), ("carol", "carol-token"), ("mallory", "mallory-token")];

/// `archive_file` needs two of finance.
const QUORUM_RULES: &str = "[[rule]]\nname = \"finance-archives\"\naction = \"ask\"\ntool = \"archive_file\"\n\
                            approvers = [\"group:finance\"]\nquorum = 2\nreason = \"finance signs off archiving\"\n";
/// `archive_file` asks its requester.
const ASK_RULES: &str = "[[rule]]\nname = \"ask-archives\"\naction = \"ask\"\ntool = \"archive_file\"\n";

const CHAT: &str = "chat-oob";
const OPENING: &str = "I will archive q3.csv.";
const CLOSING: &str = "q3.csv is archived.";

fn token(principal: &str) -> &'static str {
    TOKENS.iter().find(|(name, _)| *name == principal).map(|(_, token)| *token).expect("a known principal")
}

#[derive(Deserialize, schemars::JsonSchema)]
struct PathInput {
    path: String,
}

/// A `toolgate serve` on a loopback port, and what its tool saw.
struct Server {
    base: String,
    state: AppState,
    trace: PathBuf,
    /// Calls of `archive_file` so far (counted when a call starts).
    runs: Arc<AtomicUsize>,
    /// Notified when a call starts.
    started: Arc<Notify>,
    /// A call finishes once it gets a permit (the test holds them when it needs the run to wait).
    permits: Arc<Semaphore>,
    http: reqwest::Client,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(dir) = self.trace.parent() {
            std::fs::remove_dir_all(dir).ok();
        }
    }
}

/// The server with these rules, finance = bob and carol, bearer tokens, and
/// `archive_file` counting its calls, each waiting for a permit.
async fn serve(rules: &str) -> Server {
    let (runs, started, permits) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()), Arc::new(Semaphore::new(0)));
    let archive = {
        let (runs, started, permits) = (runs.clone(), started.clone(), permits.clone());
        Tool::function::<PathInput>("archive_file").needs_approval(true).handler(move |input: PathInput, _| {
            let (runs, started, permits) = (runs.clone(), started.clone(), permits.clone());
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                started.notify_waiters();
                let _permit = permits.acquire().await.map_err(|_| ToolError::text("closed"))?;
                Ok::<_, ToolError>(json!({"archived": input.path}))
            }
        })
    };
    let turns = json!([[text(OPENING), call("call-1", "archive_file", json!({"path": "q3.csv"}))], [text(CLOSING)]]);
    let model = ScriptedModel::from_json(&json!({ "turns": turns }).to_string()).unwrap();
    let dir = std::env::temp_dir().join(format!("toolgate-client-oob-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = ApprovalSecret::resolve(Some("client-oob-secret"), &dir).unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), Toolkit::new([archive]).unwrap(), secret);
    config.policy = PolicyHandle::new(Policy::from_toml_str(rules).unwrap());
    let tokens: HashMap<String, String> =
        TOKENS.iter().map(|(principal, token)| ((*token).to_owned(), (*principal).to_owned())).collect();
    config.principals = PrincipalSource::Tokens(TokenTable::from_entries(tokens).unwrap());
    config.groups = BTreeMap::from([("finance".to_owned(), vec!["bob".to_owned(), "carol".to_owned()])]);
    config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
    config.trace_prompts = Some(dir.join("prompts.jsonl"));
    let state = AppState::new(config, Arc::new(model)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let served = state.clone();
    tokio::spawn(async move { serve_listener(listener, served, std::future::pending()).await.unwrap() });
    Server { base, state, trace: dir.join("prompts.jsonl"), runs, started, permits, http: reqwest::Client::new() }
}

impl Server {
    /// A transport to the chat endpoint as `principal`.
    fn transport(&self, principal: &str) -> HttpTransport {
        HttpTransport::new(format!("{}/api/chat", self.base)).bearer_token(token(principal)).unwrap()
    }

    /// A JSON request as `principal`: (status, body).
    async fn call(&self, method: reqwest::Method, path: &str, principal: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(token(principal));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// A vote in the inbox.
    async fn vote(&self, approval_id: &str, principal: &str, decision: &str) -> (u16, Value) {
        let body = json!({ "decision": decision });
        self.call(reqwest::Method::POST, &format!("/api/approvals/{approval_id}"), principal, Some(body)).await
    }

    /// The inbox item of an approval, as `principal` sees it.
    async fn approval(&self, approval_id: &str, principal: &str) -> Value {
        let (status, item) =
            self.call(reqwest::Method::GET, &format!("/api/approvals/{approval_id}"), principal, None).await;
        assert_eq!(status, 200, "{item}");
        item
    }

    /// Alice's stored chat.
    async fn stored(&self) -> Vec<UiMessage> {
        let (status, chat) = self.call(reqwest::Method::GET, &format!("/api/chats/{CHAT}"), "alice", None).await;
        assert_eq!(status, 200, "{chat}");
        parse_ui_messages(chat["messages"].clone()).unwrap()
    }

    /// Alice's stored chat once the server's continuation stored it (polled: it runs on its own).
    async fn continued(&self) -> Vec<UiMessage> {
        for _ in 0..200 {
            let messages = self.stored().await;
            let tools = tool_parts(&messages);
            if !tools.is_empty() && tools.iter().all(|tool| tool.state.as_str().starts_with("output-")) {
                return messages;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the server did not continue the chat within 5 s: {:?}", self.stored().await);
    }

    /// Every model prompt so far.
    fn prompts(&self) -> Vec<Value> {
        self.state.flush_trace();
        let text = std::fs::read_to_string(&self.trace).unwrap_or_default();
        text.lines().map(|line| serde_json::from_str::<Value>(line).unwrap()["prompt"].clone()).collect()
    }
}

fn code(reply: &(u16, Value)) -> (u16, &str) {
    (reply.0, reply.1["error"]["code"].as_str().unwrap_or_default())
}

/// The `data-<name>` part of a message with this id.
fn data_part<'a>(message: &'a UiMessage, name: &str, id: &str) -> &'a Value {
    message
        .parts
        .iter()
        .find_map(|part| match part {
            UiPart::Other(value) if value["type"] == format!("data-{name}") && value["id"] == id => {
                Some(&value["data"])
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no data-{name} part `{id}` in {message:?}"))
}

/// (call id, state, output) of every tool part.
fn outcomes(messages: &[UiMessage]) -> Vec<(String, ToolState, Option<Value>)> {
    tool_parts(messages).into_iter().map(|tool| (tool.tool_call_id, tool.state, tool.output)).collect()
}

/// Alice asks; her call waits. Returns the approval id and the assistant message.
async fn alice_asks(server: &Server) -> (String, UiMessage) {
    let alice = Chat::new(CHAT, server.transport("alice"));
    alice.send_message("archive q3.csv").await.unwrap();
    assert_eq!(alice.status(), Status::Ready);
    let messages = alice.messages();
    assert_eq!(messages.len(), 2);
    let tool = messages[1].tool_parts().next().unwrap().1.clone();
    assert_eq!((tool.tool_call_id.as_str(), tool.state), ("call-1", ToolState::ApprovalRequested));
    let approval_id = tool.approval.unwrap().id;
    // Alice's client goes away: dropped, as a closed tab.
    drop(alice);
    (approval_id, messages[1].clone())
}

/// HTTP, reporting each reconnect the server accepted with a running response.
struct ReportingTransport {
    http: HttpTransport,
    attached: std::sync::Mutex<Option<oneshot::Sender<bool>>>,
}

impl ChatTransport for ReportingTransport {
    fn send(&self, request: TransportRequest) -> BoxFuture<'_, Result<ChunkStream, ClientError>> {
        self.http.send(request)
    }

    fn reconnect(&self, chat_id: &str) -> BoxFuture<'_, Result<Option<ChunkStream>, ClientError>> {
        let chat_id = chat_id.to_owned();
        Box::pin(async move {
            let stream = self.http.reconnect(&chat_id).await?;
            if let Some(attached) = self.attached.lock().unwrap().take() {
                let _ = attached.send(stream.is_some());
            }
            Ok(stream)
        })
    }
}

#[tokio::test]
async fn finance_approves_in_the_inbox_and_alices_new_client_resumes_the_servers_continuation() {
    let server = serve(QUORUM_RULES).await;
    let (approval_id, asked) = alice_asks(&server).await;
    let reason = data_part(&asked, "toolgate-reason", "call-1");
    assert_eq!((reason["approvers"].clone(), reason["quorum"].clone()), (json!(["group:finance"]), json!(2)));

    // Alice cannot approve it herself: not in the inbox, not in the chat.
    assert_eq!(code(&server.vote(&approval_id, "alice", "approve").await), (403, "not_an_approver"));
    let in_chat = Chat::with_messages(CHAT, server.transport("alice"), server.stored().await, ChatOptions::default());
    let refused = in_chat.add_tool_approval_response(&approval_id, Decision::Approve).await;
    assert!(
        matches!(&refused, Err(ClientError::Rejected { status: Some(403), code, .. }) if code == "not_an_approver"),
        "{refused:?}"
    );
    drop(in_chat);
    assert_eq!(code(&server.vote(&approval_id, "mallory", "approve").await), (404, "unknown_approval"));

    // The approvers vote; the second vote reaches the quorum and the server runs the call (held by the tool).
    let started = server.started.notified();
    let (status, first) = server.vote(&approval_id, "bob", "approve").await;
    assert_eq!((status, first["state"].as_str()), (200, Some("pending")), "{first}");
    let (status, second) = server.vote(&approval_id, "carol", "approve").await;
    assert_eq!((status, second["state"].as_str()), (200, Some("approved")), "{second}");
    tokio::time::timeout(Duration::from_secs(10), started).await.expect("the server runs the approved call");
    assert_eq!(server.prompts().len(), 1, "the model is not called again before the call ends");

    // Alice's new client: the stored chat, then resume() while the continuation runs.
    let stored = server.stored().await;
    assert_eq!(outcomes(&stored)[0].1, ToolState::ApprovalRequested, "stored when the run ends");
    let (attached, on_attach) = oneshot::channel();
    let transport =
        ReportingTransport { http: server.transport("alice"), attached: std::sync::Mutex::new(Some(attached)) };
    let alice = Chat::with_messages(CHAT, transport, stored, ChatOptions::default());
    let resuming = {
        let alice = alice.clone();
        tokio::spawn(async move { alice.resume().await })
    };
    assert!(on_attach.await.unwrap(), "the continuation was running: there was a stream to attach to");
    assert_eq!(server.runs.load(Ordering::SeqCst), 1);
    server.permits.add_permits(1);
    tokio::time::timeout(Duration::from_secs(10), resuming).await.expect("the resumed stream ends").unwrap().unwrap();

    // Alice sees the output and the answer, in the message that asked.
    assert_eq!(alice.status(), Status::Ready, "{:?}", alice.error());
    let messages = alice.messages();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1].id, asked.id, "the continuation extends the message that asked");
    assert_eq!(
        outcomes(&messages),
        [("call-1".to_owned(), ToolState::OutputAvailable, Some(json!({"archived": "q3.csv"})))]
    );
    assert_eq!(text_of(&messages[1]), format!("{OPENING}{CLOSING}"));
    let report = data_part(&messages[1], "toolgate-approval", &approval_id);
    assert_eq!(report["state"], "executed");
    assert_eq!(report["votes"].as_array().unwrap().len(), 2);

    // The stored chat says the same; the call ran once; the model read its result.
    let stored = server.continued().await;
    assert_eq!(outcomes(&stored), outcomes(&messages));
    assert_eq!(text_of(&stored[1]), text_of(&messages[1]));
    assert_eq!(server.runs.load(Ordering::SeqCst), 1, "the approved call ran once");
    let prompts = server.prompts();
    assert_eq!(prompts.len(), 2);
    assert!(prompts[1].to_string().contains(r#"{"archived":"q3.csv"}"#), "{}", prompts[1]);
    assert_eq!(server.approval(&approval_id, "bob").await["state"], "executed");
    assert_eq!(alice.resume().await, Err(ClientError::NothingToResume), "nothing runs any more");
    assert_eq!(code(&server.vote(&approval_id, "bob", "deny").await), (409, "approval_already_decided"));
}

#[tokio::test]
async fn alice_decides_her_own_approval_in_the_inbox_and_a_new_client_loads_the_stored_chat() {
    let server = serve(ASK_RULES).await;
    server.permits.add_permits(100); // nothing is held here
    let (approval_id, asked) = alice_asks(&server).await;
    assert!(data_part(&asked, "toolgate-reason", "call-1")["reason"].as_str().unwrap().contains("ask-archives"));

    // Her own approval: another principal does not see it; she decides it alone.
    assert_eq!(code(&server.vote(&approval_id, "bob", "approve").await), (404, "unknown_approval"));
    let (status, item) = server.vote(&approval_id, "alice", "approve").await;
    assert_eq!((status, item["state"].as_str(), item["approvers"].clone()), (200, Some("approved"), json!(["alice"])));

    // Once the server stored the run, a new client starts from the stored chat.
    let stored = server.continued().await;
    let alice = Chat::with_messages(CHAT, server.transport("alice"), stored, ChatOptions::default());
    assert_eq!(alice.resume().await, Err(ClientError::NothingToResume), "the run is over");
    let messages = alice.messages();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1].id, asked.id);
    assert_eq!(
        outcomes(&messages),
        [("call-1".to_owned(), ToolState::OutputAvailable, Some(json!({"archived": "q3.csv"})))]
    );
    assert_eq!(text_of(&messages[1]), format!("{OPENING}{CLOSING}"));
    let tool = messages[1].tool_parts().next().unwrap().1;
    assert_eq!(tool.approval.as_ref().and_then(|approval| approval.approved), Some(true));
    assert_eq!(server.runs.load(Ordering::SeqCst), 1);
    assert_eq!(server.approval(&approval_id, "alice").await["state"], "executed");

    // The restored client goes on; the decided call is not run again.
    alice.send_message("thanks").await.unwrap();
    assert_eq!(alice.status(), Status::Ready, "{:?}", alice.error());
    assert_eq!(alice.messages().len(), 4);
    assert_eq!(server.runs.load(Ordering::SeqCst), 1);
    assert_eq!(server.prompts().len(), 3);
}
