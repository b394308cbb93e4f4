//! The embedding app on a loopback port: its own route answers, and
//! toolgate's `/api/chat` asks for approval before `delete_file` runs, runs it
//! once approved and reports a denial.

use std::net::SocketAddr;

use serde_json::{Value, json};
use toolgate_example_axum_embed::{app, shared_scripted_model, toolgate_state};
use toolgate_server::ApprovalSecret;

/// Starts the app on `127.0.0.1:0` and returns its base URL.
async fn start() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // An explicit secret: nothing is written to disk.
    let secret = ApprovalSecret::resolve(Some("axum-embed-test-secret"), &std::env::temp_dir()).unwrap();
    let state = toolgate_state(addr, shared_scripted_model(), secret).unwrap();
    let router = app(state);
    tokio::spawn(async move {
        axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>()).await.unwrap();
    });
    format!("http://{addr}")
}

/// The UI message stream's chunks (`data: {...}` frames up to `data: [DONE]`).
fn chunks(body: &str) -> Vec<Value> {
    assert!(body.ends_with("data: [DONE]\n\n"), "a complete stream: {body}");
    body.split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

fn user_message() -> Value {
    json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Delete notes.txt"}]})
}

/// What `useChat` sends once the person answered: the assistant message with the answered tool part.
fn answered(approval_id: &str, approved: bool) -> Value {
    json!({"id": "chat-1", "trigger": "submit-message", "messageId": "msg-a", "messages": [
        user_message(),
        {"id": "msg-a", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Let me delete that file.", "state": "done"},
            {"type": "tool-delete_file", "toolCallId": "call-1", "state": "approval-responded",
             "input": {"path": "notes.txt"},
             "approval": {"id": approval_id, "approved": approved, "reason": if approved { Value::Null } else { json!("keep it") }}}
        ]}
    ]})
}

async fn chat(client: &reqwest::Client, base: &str, body: &Value) -> Vec<Value> {
    let response = client.post(format!("{base}/api/chat")).json(body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    chunks(&response.text().await.unwrap())
}

/// The first turn: the id of the approval request it ends with; nothing ran.
async fn approval_id(client: &reqwest::Client, base: &str) -> String {
    let first = json!({"id": "chat-1", "trigger": "submit-message", "messages": [user_message()]});
    let chunks = chat(client, base, &first).await;
    let call = chunks.iter().find(|c| c["type"] == "tool-input-available").expect("the model's call");
    assert_eq!((&call["toolName"], &call["input"]), (&json!("delete_file"), &json!({"path": "notes.txt"})));
    assert!(!chunks.iter().any(|c| c["type"] == "tool-output-available"), "nothing runs before the answer: {chunks:?}");
    let request = chunks.iter().find(|c| c["type"] == "tool-approval-request").expect("an approval request");
    assert_eq!(request["toolCallId"], "call-1");
    request["approvalId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_app_keeps_its_route_and_toolgate_asks_before_deleting() {
    let base = start().await;
    let client = reqwest::Client::new();

    let hello = client.get(format!("{base}/hello")).send().await.unwrap();
    assert_eq!(hello.status(), 200);
    assert_eq!(hello.text().await.unwrap(), "hello from the app\n");
    let health = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200, "toolgate's routes are merged in");

    let approval_id = approval_id(&client, &base).await;
    let chunks = chat(&client, &base, &answered(&approval_id, true)).await;
    let output = chunks.iter().find(|c| c["type"] == "tool-output-available").expect("the approved call ran");
    assert_eq!(output["output"], json!({"deleted": "notes.txt"}));
    let text: String =
        chunks.iter().filter(|c| c["type"] == "text-delta").map(|c| c["delta"].as_str().unwrap()).collect();
    assert_eq!(text, "Done.");
}

#[tokio::test]
async fn a_denied_call_never_runs() {
    let base = start().await;
    let client = reqwest::Client::new();
    let approval_id = approval_id(&client, &base).await;
    let chunks = chat(&client, &base, &answered(&approval_id, false)).await;
    assert!(chunks.iter().any(|c| c["type"] == "tool-output-denied" && c["toolCallId"] == "call-1"), "{chunks:?}");
    assert!(!chunks.iter().any(|c| c["type"] == "tool-output-available"), "{chunks:?}");
}

#[tokio::test]
async fn a_forged_approval_is_refused() {
    let base = start().await;
    let client = reqwest::Client::new();
    approval_id(&client, &base).await;
    let response = client.post(format!("{base}/api/chat")).json(&answered("apr_forged", true)).send().await.unwrap();
    assert_eq!(response.status(), 400, "an approval the server never signed runs nothing");
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "invalid_approval_signature", "{error}");
}
