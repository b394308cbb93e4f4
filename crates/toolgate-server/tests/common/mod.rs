//! A server on a real socket and a minimal HTTP/1.1 client, shared by the server tests.
#![allow(dead_code)]

pub mod keys;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolgate::{ScriptedModel, Tool, ToolError, Toolkit};
use toolgate_server::{AppState, ApprovalSecret, ServerConfig, serve_listener};

pub struct Server {
    pub addr: SocketAddr,
    pub trace: PathBuf,
    pub state: AppState,
    _dir: TempDir,
}

impl Server {
    /// The prompt trace so far, once every line observed is written.
    pub fn trace_text(&self) -> String {
        self.state.flush_trace();
        std::fs::read_to_string(&self.trace).unwrap_or_default()
    }
}

pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

pub async fn start(max_body_bytes: Option<usize>) -> Server {
    start_with(default_script(), max_body_bytes).await
}

/// The scripted model most tests use: delete notes.txt, then say done.
pub fn default_script() -> Value {
    json!({"turns": [
        [{"type": "text", "text": "Deleting."},
         {"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}}],
        [{"type": "text", "text": "Done."}]
    ]})
}

/// The AG-UI tests' model: asks to delete `notes.txt`, says "Done." after
/// the result, then answers a follow-up.
pub fn agui_script() -> Value {
    json!({"turns": [
        [{"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}}],
        [{"type": "text", "text": "Done."}],
        [{"type": "text", "text": "Nothing else to do."}]
    ]})
}

/// The input of the counted `delete_file`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct PathInput {
    /// The file to delete.
    pub path: String,
}

/// A gated `delete_file` that deletes nothing and counts its executions in `runs`.
pub fn counting_toolkit(runs: Arc<AtomicUsize>) -> Toolkit {
    Toolkit::new([Tool::function::<PathInput>("delete_file").needs_approval(true).handler(
        move |input: PathInput, _| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ToolError>(json!({"deleted": input.path}))
            }
        },
    )])
    .unwrap()
}

/// Starts a server playing `script`.
pub async fn start_with(script: Value, max_body_bytes: Option<usize>) -> Server {
    start_configured(script, |config| {
        if let Some(limit) = max_body_bytes {
            config.max_body_bytes = limit;
        }
    })
    .await
}

/// Starts a server playing `script`, with the configuration changed by `configure`.
pub async fn start_configured(script: Value, configure: impl FnOnce(&mut ServerConfig)) -> Server {
    start_until(script, configure, std::future::pending()).await
}

/// [`start_configured`], stopped (its background tasks too) when the returned sender is used or dropped.
pub async fn start_stoppable(
    script: Value,
    configure: impl FnOnce(&mut ServerConfig),
) -> (Server, tokio::sync::oneshot::Sender<()>) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = start_until(script, configure, async move {
        let _ = stopped.await;
    })
    .await;
    (server, stop)
}

/// Starts a server that serves until `shutdown` completes.
async fn start_until(
    script: Value,
    configure: impl FnOnce(&mut ServerConfig),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Server {
    let dir = std::env::temp_dir().join(format!("toolgate-server-test-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = ScriptedModel::from_json(&script.to_string()).unwrap();
    let secret = ApprovalSecret::resolve(Some("test-secret"), &dir).unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), toolgate::demo::toolkit(), secret);
    config.trace_prompts = Some(dir.join("prompts.jsonl"));
    configure(&mut config);
    let state = AppState::new(config, Arc::new(model)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = state.clone();
    tokio::spawn(async move { serve_listener(listener, served, shutdown).await.unwrap() });
    Server { addr, trace: dir.join("prompts.jsonl"), state, _dir: TempDir(dir) }
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn chunks(&self) -> Vec<Value> {
        assert!(self.body.ends_with("data: [DONE]\n\n"), "{}", self.body);
        self.body
            .split("\n\n")
            .filter_map(|frame| frame.strip_prefix("data: "))
            .filter(|data| *data != "[DONE]")
            .map(|data| serde_json::from_str(data).unwrap())
            .collect()
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A minimal HTTP/1.1 client, so the test sees exactly what goes over the wire.
pub async fn post(server: &Server, path: &str, content_type: &str, body: &[u8]) -> Reply {
    post_with(server, path, &[("content-type", content_type)], body).await
}

/// A POST with these headers.
pub async fn post_with(server: &Server, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    send(server, "POST", path, headers, body).await
}

/// A JSON request as `user` (the `x-user` header), with an optional body.
pub async fn call(server: &Server, method: &str, path: &str, user: &str, body: Option<Value>) -> Reply {
    let body = body.map(|body| body.to_string()).unwrap_or_default();
    let headers = [("content-type", "application/json"), ("x-user", user)];
    send(server, method, path, &headers, body.as_bytes()).await
}

/// A request with any method, these headers and this body.
pub async fn send(server: &Server, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let extra: String = headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.ok();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.ok();
    parse_reply(&raw)
}

fn parse_reply(raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v == "chunked");
    let body = if chunked { dechunk(body) } else { body.to_owned() };
    Reply { status, headers, body }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

pub async fn get(server: &Server, path: &str) -> Reply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    parse_reply(&raw)
}

/// The AG-UI events of a 200 `text/event-stream` reply.
pub fn agui_events(reply: &Reply) -> Vec<Value> {
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    reply
        .body
        .split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// The last event of this type.
pub fn last_event<'e>(events: &'e [Value], kind: &str) -> &'e Value {
    events.iter().rev().find(|e| e["type"] == kind).unwrap_or_else(|| panic!("no {kind} in {events:#?}"))
}
