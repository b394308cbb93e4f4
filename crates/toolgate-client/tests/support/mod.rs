//! Test helpers: a transport whose responses the test writes chunk by chunk,
//! so timing is in the test's hands.

#![allow(dead_code)]

pub mod ai_sdk_backend;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::channel::mpsc;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::Notify;
use toolgate_client::transport::ChunkStream;
use toolgate_client::{Chat, ChatTransport, ClientError, ToolState, TransportRequest, UiMessage, UiPart, UiToolPart};
use toolgate_ui::UiChunk;

/// What the next request gets.
enum Reply {
    Stream(mpsc::UnboundedReceiver<Result<UiChunk, ClientError>>),
    Refuse(ClientError),
}

#[derive(Default)]
struct Shared {
    requests: Vec<TransportRequest>,
    replies: VecDeque<Reply>,
    reconnects: VecDeque<Reply>,
}

/// A transport answering each request with the next queued reply.
#[derive(Clone, Default)]
pub struct TestTransport {
    shared: Arc<Mutex<Shared>>,
    requested: Arc<Notify>,
}

/// The test's end of one response.
pub struct Response {
    sender: mpsc::UnboundedSender<Result<UiChunk, ClientError>>,
}

impl Response {
    /// Sends one chunk (given as JSON, as a server writes it).
    pub fn chunk(&self, chunk: Value) {
        let chunk: UiChunk = serde_json::from_value(chunk).expect("a valid chunk");
        self.sender.unbounded_send(Ok(chunk)).expect("the chat reads the response");
    }

    /// Breaks the stream off with this error.
    pub fn fail(self, error: ClientError) {
        let _ = self.sender.unbounded_send(Err(error));
    }

    /// Ends the response.
    pub fn end(self) {}
}

impl TestTransport {
    /// Queues a streamed reply for the next request.
    pub fn respond(&self) -> Response {
        let (sender, receiver) = mpsc::unbounded();
        self.shared.lock().unwrap().replies.push_back(Reply::Stream(receiver));
        Response { sender }
    }

    /// Queues a refusal for the next request.
    pub fn refuse(&self, error: ClientError) {
        self.shared.lock().unwrap().replies.push_back(Reply::Refuse(error));
    }

    /// Queues a reply for the next reconnect.
    pub fn respond_to_reconnect(&self) -> Response {
        let (sender, receiver) = mpsc::unbounded();
        self.shared.lock().unwrap().reconnects.push_back(Reply::Stream(receiver));
        Response { sender }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<TransportRequest> {
        self.shared.lock().unwrap().requests.clone()
    }

    /// Waits until `count` requests were made.
    pub async fn wait_for_requests(&self, count: usize) {
        loop {
            let notified = self.requested.notified();
            if self.shared.lock().unwrap().requests.len() >= count {
                return;
            }
            tokio::time::timeout(std::time::Duration::from_secs(10), notified)
                .await
                .unwrap_or_else(|_| panic!("waited 10 s for request {count}"));
        }
    }
}

fn stream_of(reply: Reply) -> Result<ChunkStream, ClientError> {
    match reply {
        Reply::Stream(receiver) => Ok(receiver.boxed()),
        Reply::Refuse(error) => Err(error),
    }
}

impl ChatTransport for TestTransport {
    fn send(&self, request: TransportRequest) -> BoxFuture<'_, Result<ChunkStream, ClientError>> {
        let reply = {
            let mut shared = self.shared.lock().unwrap();
            shared.requests.push(request);
            shared.replies.pop_front().expect("the test queued a reply for every request")
        };
        self.requested.notify_waiters();
        Box::pin(async move { stream_of(reply) })
    }

    fn reconnect(&self, _chat_id: &str) -> BoxFuture<'_, Result<Option<ChunkStream>, ClientError>> {
        let reply = self.shared.lock().unwrap().reconnects.pop_front();
        Box::pin(async move { reply.map(stream_of).transpose() })
    }
}

/// The chunks of a response that asks to approve these calls (`(call id, tool, input)`).
pub fn approval_response(response: &Response, message_id: &str, calls: &[(&str, &str, Value)]) {
    response.chunk(json!({"type": "start", "messageId": message_id}));
    response.chunk(json!({"type": "start-step"}));
    for (call_id, tool, input) in calls {
        response
            .chunk(json!({"type": "tool-input-available", "toolCallId": call_id, "toolName": tool, "input": input}));
        response.chunk(
            json!({"type": "tool-approval-request", "approvalId": format!("ap-{call_id}"), "toolCallId": call_id}),
        );
    }
    response.chunk(json!({"type": "finish-step"}));
}

/// The chunks of a text-only response (no `start`: it continues or starts a message).
pub fn text_response(response: &Response, text: &str) {
    response.chunk(json!({"type": "start-step"}));
    response.chunk(json!({"type": "text-start", "id": "t"}));
    response.chunk(json!({"type": "text-delta", "id": "t", "delta": text}));
    response.chunk(json!({"type": "text-end", "id": "t"}));
    response.chunk(json!({"type": "finish-step"}));
    response.chunk(json!({"type": "finish", "finishReason": "stop"}));
}

/// A scripted model's tool call.
pub fn call(id: &str, tool: &str, input: Value) -> Value {
    json!({"type": "tool-call", "toolCallId": id, "toolName": tool, "input": input})
}

/// A scripted model's text.
pub fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// Every tool part of these messages, in order.
pub fn tool_parts(messages: &[UiMessage]) -> Vec<UiToolPart> {
    messages.iter().flat_map(|message| message.tool_parts().map(|(_, tool)| tool.clone())).collect()
}

/// The approval id of the first tool part of the chat matching `matches`
/// that is waiting for an answer.
pub fn pending_approval(chat: &Chat, matches: impl Fn(&UiToolPart) -> bool) -> String {
    tool_parts(&chat.messages())
        .into_iter()
        .find(|tool| matches(tool) && tool.state == ToolState::ApprovalRequested)
        .and_then(|tool| tool.approval)
        .map(|approval| approval.id)
        .unwrap_or_else(|| panic!("no pending approval of that kind: {:?}", chat.messages()))
}

/// The text parts of a message, joined.
pub fn text_of(message: &UiMessage) -> String {
    message
        .parts
        .iter()
        .filter_map(|part| if let UiPart::Text { text } = part { Some(text.as_str()) } else { None })
        .collect()
}

/// The text of the chat's last message.
pub fn last_text(chat: &Chat) -> String {
    chat.messages().last().map(text_of).unwrap_or_default()
}
