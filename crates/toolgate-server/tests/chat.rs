//! `POST /api/chat` over a real socket: the approval round trip, forged and
//! tampered approvals, and bad input.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toolgate::ScriptedModel;
use toolgate_server::{AppState, ApprovalSecret, ServerConfig, router};

struct Server {
    addr: SocketAddr,
    trace: PathBuf,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

async fn start(max_body_bytes: Option<usize>) -> Server {
    let dir = std::env::temp_dir().join(format!("toolgate-server-test-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = ScriptedModel::from_json(
        &json!({"turns": [
            [{"type": "text", "text": "Deleting."},
             {"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}}],
            [{"type": "text", "text": "Done."}]
        ]})
        .to_string(),
    )
    .unwrap();
    let secret = ApprovalSecret::resolve(Some("test-secret"), &dir).unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), toolgate::demo::toolkit(), secret);
    config.trace_prompts = Some(dir.join("prompts.jsonl"));
    if let Some(limit) = max_body_bytes {
        config.max_body_bytes = limit;
    }
    let state = AppState::new(config, Arc::new(model)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router(state)).await.unwrap() });
    Server { addr, trace: dir.join("prompts.jsonl"), _dir: TempDir(dir) }
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn chunks(&self) -> Vec<Value> {
        assert!(self.body.ends_with("data: [DONE]\n\n"), "{}", self.body);
        self.body
            .split("\n\n")
            .filter_map(|frame| frame.strip_prefix("data: "))
            .filter(|data| *data != "[DONE]")
            .map(|data| serde_json::from_str(data).unwrap())
            .collect()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A minimal HTTP/1.1 client, so the test sees exactly what goes over the wire.
async fn post(server: &Server, path: &str, content_type: &str, body: &[u8]) -> Reply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
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

async fn get(server: &Server, path: &str) -> Reply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    parse_reply(&raw)
}

fn first_turn() -> Value {
    json!({"id": "chat-1", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]}
    ]})
}

fn continuation(approval_id: &str, input: Value, approved: bool) -> Value {
    json!({"id": "chat-1", "trigger": "submit-message", "messageId": "msg-a", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete notes.txt"}]},
        {"id": "msg-a", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Deleting.", "state": "done"},
            {"type": "tool-delete_file", "toolCallId": "call-1", "state": "approval-responded", "input": input,
             "approval": {"id": approval_id, "approved": approved, "reason": if approved { Value::Null } else { json!("no") }}}
        ]}
    ]})
}

fn trace_lines(server: &Server) -> Vec<Value> {
    std::fs::read_to_string(&server.trace)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

async fn approval_id(server: &Server) -> String {
    let reply = post(server, "/api/chat", "application/json", first_turn().to_string().as_bytes()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let request = reply.chunks().into_iter().find(|c| c["type"] == "tool-approval-request").unwrap();
    request["approvalId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn approval_round_trip_over_http() {
    let server = start(None).await;
    let reply = post(&server, "/api/chat", "application/json", first_turn().to_string().as_bytes()).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    assert_eq!(reply.header("x-vercel-ai-ui-message-stream"), Some("v1"));
    assert_eq!(reply.header("cache-control"), Some("no-cache"));
    let chunks = reply.chunks();
    assert_eq!(chunks[0]["type"], "start");
    let request = chunks.iter().find(|c| c["type"] == "tool-approval-request").unwrap();
    let approval_id = request["approvalId"].as_str().unwrap();
    assert!(approval_id.starts_with("apr_") && approval_id.contains('.'), "signed by default: {approval_id}");
    assert!(request.get("signature").is_none());

    let reply = post(
        &server,
        "/api/chat",
        "application/json",
        continuation(approval_id, json!({"path": "notes.txt"}), true).to_string().as_bytes(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chunks = reply.chunks();
    assert_eq!(chunks[0], json!({"type": "start", "messageId": "msg-a"}));
    assert_eq!(
        chunks[1],
        json!({"type": "tool-output-available", "toolCallId": "call-1", "output": {"deleted": "notes.txt"}})
    );
    assert_eq!(chunks[2], json!({"type": "start-step"}));

    let traces = trace_lines(&server);
    assert_eq!(traces.len(), 2, "one line per model call");
    assert_eq!(traces[0]["tools"][1]["name"], "delete_file");
    assert!(traces[0]["tools"][1]["inputSchema"].is_object());
    assert_eq!(traces[0]["toolChoice"], json!({"type": "auto"}));
    assert_eq!(
        traces[1]["prompt"][2],
        json!({"role": "tool", "content": [{"type": "tool-result", "toolCallId": "call-1", "toolName": "delete_file",
            "output": {"type": "json", "value": {"deleted": "notes.txt"}}}]})
    );
}

#[tokio::test]
async fn denial_reaches_the_model_as_a_result() {
    let server = start(None).await;
    let id = approval_id(&server).await;
    let reply = post(
        &server,
        "/api/chat",
        "application/json",
        continuation(&id, json!({"path": "notes.txt"}), false).to_string().as_bytes(),
    )
    .await;
    assert_eq!(reply.chunks()[1], json!({"type": "tool-output-denied", "toolCallId": "call-1"}));
    let traces = trace_lines(&server);
    assert_eq!(traces[1]["prompt"][2]["content"][0]["output"], json!({"type": "execution-denied", "reason": "no"}));
}

#[tokio::test]
async fn forged_and_tampered_approvals_are_refused_and_nothing_runs() {
    let server = start(None).await;
    let id = approval_id(&server).await;
    let cases = [
        ("apr_made_up".to_owned(), json!({"path": "notes.txt"}), "missing signature"),
        (id.clone(), json!({"path": "/etc/passwd"}), "invalid signature"),
        (format!("{id}A"), json!({"path": "notes.txt"}), "invalid signature"),
    ];
    for (approval_id, input, reason) in cases {
        let reply = post(
            &server,
            "/api/chat",
            "application/json",
            continuation(&approval_id, input, true).to_string().as_bytes(),
        )
        .await;
        assert_eq!(reply.status, 400, "{}", reply.body);
        let error = reply.json();
        assert_eq!(error["error"]["code"], "invalid_approval_signature");
        assert!(error["error"]["message"].as_str().unwrap().contains(reason), "{error}");
    }
    assert_eq!(trace_lines(&server).len(), 1, "the model was never called again");
}

#[tokio::test]
async fn bad_input_gets_a_4xx_naming_the_problem_and_the_server_keeps_serving() {
    let server = start(Some(2048)).await;
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("text/plain", b"{}".to_vec(), 415, "unsupported_media_type"),
        ("application/json", b"{not json".to_vec(), 400, "invalid_json"),
        ("application/json", br#"{"messages": 3}"#.to_vec(), 400, "invalid_body"),
        (
            "application/json",
            br#"{"messages": [{"id": "u", "role": "user", "parts": [{"type": "telepathy"}]}]}"#.to_vec(),
            400,
            "invalid_message",
        ),
        ("application/json", vec![b' '; 4096], 413, "body_too_large"),
    ];
    for (content_type, body, status, code) in cases {
        let reply = post(&server, "/api/chat", content_type, &body).await;
        assert_eq!(reply.status, status, "{}", reply.body);
        assert_eq!(reply.json()["error"]["code"], code, "{}", reply.body);
    }
    let unknown = post(
        &server,
        "/api/chat",
        "application/json",
        br#"{"messages": [{"id": "u", "role": "user", "parts": [{"type": "telepathy"}]}]}"#,
    )
    .await;
    assert!(unknown.json()["error"]["message"].as_str().unwrap().contains("telepathy"));
    assert_eq!(get(&server, "/healthz").await.body, "ok");
}

#[tokio::test]
async fn the_page_is_served() {
    let server = start(None).await;
    let page = get(&server, "/").await;
    assert_eq!(page.status, 200);
    assert!(page.header("content-type").unwrap().starts_with("text/html"));
    assert!(page.body.contains("app.js"));
    let script = get(&server, "/app.js").await;
    assert!(script.header("content-type").unwrap().starts_with("text/javascript"));
    assert!(!script.body.is_empty());
}

#[test]
fn the_secret_is_generated_once_and_kept() {
    let dir = std::env::temp_dir().join(format!("toolgate-secret-test-{}", uuid::Uuid::now_v7().simple()));
    let _cleanup = TempDir(dir.clone());
    // The environment wins over the file; this test only makes sense without it.
    if std::env::var("TOOLGATE_APPROVAL_SECRET").is_ok() {
        return;
    }
    let first = ApprovalSecret::resolve(None, &dir).unwrap();
    assert!(matches!(first.source(), toolgate_server::SecretSource::Generated(_)));
    let second = ApprovalSecret::resolve(None, &dir).unwrap();
    assert!(matches!(second.source(), toolgate_server::SecretSource::File(_)));
    let issued = first.signer().issue("n", "c", "t", &json!({}));
    let request = toolgate::protocol::ToolApprovalRequestPart {
        approval_id: issued.approval_id,
        tool_call_id: "c".into(),
        signature: None,
    };
    assert_eq!(second.signer().verify(&request, "t", &json!({})), Ok(()), "restarts keep approvals valid");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("approval-secret")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
