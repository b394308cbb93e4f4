//! The client against `toolgate serve` over HTTP, with the approval ledger:
//! approve, deny, edit (as `editedInput`), chained approvals, the server's
//! typed refusals, and resuming a response after the connection dropped.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};
use support::{call, last_text, pending_approval, text, tool_parts};
use tokio::sync::{Semaphore, oneshot};
use toolgate::ledger::{LedgerConfig, MemoryStore};
use toolgate::model::ScriptedModel;
use toolgate::{Tool, ToolError, Toolkit};
use toolgate_client::transport::ChunkStream;
use toolgate_client::{
    Chat, ChatOptions, ChatTransport, ClientError, Decision, EditForm, HttpTransport, Status, ToolState,
    TransportRequest, UiMessage,
};
use toolgate_server::{AppState, ApprovalSecret, PrincipalSource, ServerConfig, serve_listener};

/// Starts `toolgate serve` on a loopback port with a ledger in memory; returns the chat endpoint.
async fn serve(turns: Value, toolkit: Toolkit, principals: PrincipalSource) -> String {
    let model = ScriptedModel::from_json(&json!({ "turns": turns }).to_string()).unwrap();
    let dir = std::env::temp_dir();
    let secret = ApprovalSecret::resolve(Some("client-test-secret"), &dir).unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), toolkit, secret);
    config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
    config.principals = principals;
    let state = AppState::new(config, Arc::new(model)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { serve_listener(listener, state, std::future::pending()).await.unwrap() });
    format!("http://{addr}/api/chat")
}

#[derive(Deserialize, schemars::JsonSchema)]
struct PathInput {
    path: String,
}

/// A gated `delete_file` counting its runs.
fn counted_delete(runs: Arc<AtomicUsize>) -> Tool {
    Tool::function::<PathInput>("delete_file").needs_approval(true).handler(move |input: PathInput, _| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ToolError>(json!({"deleted": input.path}))
        }
    })
}

fn tool_outputs(messages: &[UiMessage]) -> Vec<(String, ToolState, Option<Value>)> {
    tool_parts(messages).into_iter().map(|tool| (tool.tool_call_id, tool.state, tool.output)).collect()
}

/// Script turns asking for `a`, `b` and `c` one after another, then `closing` text.
fn chain_turns(opening: Option<&str>, closing: &str) -> Value {
    let first = match opening {
        Some(opening) => json!([text(opening), call("a", "delete_file", json!({"path": "a.txt"}))]),
        None => json!([call("a", "delete_file", json!({"path": "a.txt"}))]),
    };
    json!([
        first,
        [call("b", "delete_file", json!({"path": "b.txt"}))],
        [call("c", "delete_file", json!({"path": "c.txt"}))],
        [text(closing)]
    ])
}

/// Answers the chain: approve `a`, approve `b` with an edit, deny `c`; each
/// answer's continuation asks the next by itself. Checks what ran.
async fn answer_chain(chat: &Chat, runs: &AtomicUsize) {
    let approval = |call_id: &'static str| pending_approval(chat, move |tool| tool.tool_call_id == call_id);
    chat.add_tool_approval_response(&approval("a"), Decision::Approve).await.unwrap();
    let edit = Decision::ApproveWithInput(json!({"path": "b-old.txt"}));
    chat.add_tool_approval_response(&approval("b"), edit).await.unwrap();
    chat.add_tool_approval_response(&approval("c"), Decision::deny_because("keep c")).await.unwrap();

    assert_eq!(chat.status(), Status::Ready, "{:?}", chat.error());
    assert_eq!(
        tool_outputs(&chat.messages()),
        [
            ("a".to_owned(), ToolState::OutputAvailable, Some(json!({"deleted": "a.txt"}))),
            ("b".to_owned(), ToolState::OutputAvailable, Some(json!({"deleted": "b-old.txt"}))),
            ("c".to_owned(), ToolState::OutputDenied, None),
        ]
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(chat.messages().len(), 2, "one assistant message through every continuation");
}

#[tokio::test]
async fn chained_approvals_edits_and_denials_through_toolgate_serve() {
    let runs = Arc::new(AtomicUsize::new(0));
    let toolkit = Toolkit::new([counted_delete(runs.clone())]).unwrap();
    let endpoint = serve(chain_turns(None, "all done"), toolkit, PrincipalSource::None).await;
    let chat = Chat::new("chat-chain", HttpTransport::new(endpoint));
    chat.send_message("delete a, b and c").await.unwrap();
    answer_chain(&chat, &runs).await;
    assert_eq!(last_text(&chat), "all done");
}

#[tokio::test]
async fn a_replaced_input_is_refused_with_the_servers_error_code() {
    // toolgate binds an approval to the input it was issued for: a client
    // that swaps the input instead of sending `editedInput` is refused.
    let runs = Arc::new(AtomicUsize::new(0));
    let toolkit = Toolkit::new([counted_delete(runs.clone())]).unwrap();
    let turns = json!([[call("a", "delete_file", json!({"path": "a.txt"}))], [text("ok")]]);
    let options = ChatOptions { edit_form: EditForm::ReplaceInput, ..ChatOptions::default() };
    let transport = HttpTransport::new(serve(turns, toolkit, PrincipalSource::None).await);
    let chat = Chat::with_messages("chat-swap", transport, Vec::new(), options);
    chat.send_message("delete a").await.unwrap();
    let approval = pending_approval(&chat, |tool| tool.tool_call_id == "a");
    let refused = chat.add_tool_approval_response(&approval, Decision::ApproveWithInput(json!({"path": "/etc"}))).await;
    let Err(ClientError::Rejected { status: Some(status), code, .. }) = refused else {
        panic!("expected a refusal, got {refused:?}");
    };
    assert!((400..500).contains(&status), "{status}");
    assert!(["history_mismatch", "approval_mismatch", "invalid_approval"].contains(&code.as_str()), "{code}");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing ran");
    assert_eq!(chat.status(), Status::Error);
}

/// HTTP, but the first response breaks off after `cut_after` chunks, and
/// reconnects report when the server accepted them.
struct FlakyTransport {
    http: HttpTransport,
    cut_after: usize,
    reconnected: std::sync::Mutex<Option<oneshot::Sender<()>>>,
}

impl ChatTransport for FlakyTransport {
    fn send(&self, request: TransportRequest) -> BoxFuture<'_, Result<ChunkStream, ClientError>> {
        let cut_after = self.cut_after;
        Box::pin(async move {
            let stream = self.http.send(request).await?;
            let cut = stream.take(cut_after).chain(futures::stream::once(async { Err(ClientError::Disconnected) }));
            Ok(Box::pin(cut) as ChunkStream)
        })
    }

    fn reconnect(&self, chat_id: &str) -> BoxFuture<'_, Result<Option<ChunkStream>, ClientError>> {
        let chat_id = chat_id.to_owned();
        Box::pin(async move {
            let stream = self.http.reconnect(&chat_id).await?;
            if let Some(reconnected) = self.reconnected.lock().unwrap().take() {
                let _ = reconnected.send(());
            }
            Ok(stream)
        })
    }
}

#[tokio::test]
async fn a_dropped_connection_is_resumed_from_the_running_response() {
    // A tool that waits for the test, so the response is still running when the client comes back.
    let gate = Arc::new(Semaphore::new(0));
    let slow = {
        let gate = gate.clone();
        Tool::function::<PathInput>("slow_read").handler(move |input: PathInput, _| {
            let gate = gate.clone();
            async move {
                let _permit = gate.acquire().await.map_err(|_| ToolError::text("closed"))?;
                Ok::<_, ToolError>(json!({"read": input.path}))
            }
        })
    };
    let turns = json!([[call("r", "slow_read", json!({"path": "notes.txt"}))], [text("read it")]]);
    let principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
    let endpoint = serve(turns, Toolkit::new([slow]).unwrap(), principals).await;
    let as_user = |user: &'static str| {
        HttpTransport::new(endpoint.clone()).header(HeaderName::from_static("x-user"), HeaderValue::from_static(user))
    };
    let (reconnected, on_reconnect) = oneshot::channel();
    let transport =
        FlakyTransport { http: as_user("alice"), cut_after: 2, reconnected: std::sync::Mutex::new(Some(reconnected)) };
    let chat = Chat::new("chat-resume", transport);
    assert_eq!(chat.send_message("read notes.txt").await, Err(ClientError::Disconnected));
    assert_eq!(chat.status(), Status::Error);
    // The response is Alice's: another principal finds nothing to reattach to.
    assert!(as_user("mallory").reconnect("chat-resume").await.unwrap().is_none());

    let resuming = {
        let chat = chat.clone();
        tokio::spawn(async move { chat.resume().await })
    };
    on_reconnect.await.unwrap();
    gate.add_permits(1);
    resuming.await.unwrap().unwrap();

    assert_eq!(chat.status(), Status::Ready, "{:?}", chat.error());
    let messages = chat.messages();
    assert_eq!(messages.len(), 2);
    assert_eq!(
        tool_outputs(&messages),
        [("r".to_owned(), ToolState::OutputAvailable, Some(json!({"read": "notes.txt"})))],
        "the replay does not double what arrived before the drop"
    );
    assert_eq!(last_text(&chat), "read it");
    assert_eq!(chat.resume().await, Err(ClientError::NothingToResume), "204 once the response is over");
}

#[tokio::test]
async fn over_ag_ui_interrupts_are_answered_by_resumes() {
    use toolgate_client::AguiTransport;

    let runs = Arc::new(AtomicUsize::new(0));
    let toolkit = Toolkit::new([counted_delete(runs.clone())]).unwrap();
    let turns = chain_turns(Some("on it"), "all done");
    let endpoint = serve(turns, toolkit, PrincipalSource::None).await.replace("/api/chat", "/ag-ui");
    let chat = Chat::new("thread-1", AguiTransport::new(endpoint.clone()));
    chat.send_message("delete a, b and c").await.unwrap();
    let before_answer = chat.messages();
    answer_chain(&chat, &runs).await;
    assert_eq!(last_text(&chat), "on itall done");

    // Another client (no state snapshot) answering the settled interrupt again is refused with the server's code.
    let other = Chat::with_messages("thread-1", AguiTransport::new(endpoint), before_answer, ChatOptions::default());
    let approval = pending_approval(&other, |tool| tool.tool_call_id == "a");
    let refused = other.add_tool_approval_response(&approval, Decision::deny_because("no")).await;
    assert!(
        matches!(&refused, Err(ClientError::Rejected { code, .. }) if code == "no_pending_interrupts"),
        "{refused:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}
