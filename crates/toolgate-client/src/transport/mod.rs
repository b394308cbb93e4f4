//! Transports: how a chat's requests reach a server and its response
//! streams come back, as UI message stream chunks.
//!
//! Contract: [`ChatTransport::send`] resolves once the server accepted the
//! request (an error status is [`ClientError::Rejected`]); the chunk stream
//! then yields the response's chunks in order and ends after the last one. A
//! stream that breaks off before the response finished yields
//! [`ClientError::Disconnected`] as its last item. Chunk types a transport
//! does not know are skipped, so newer servers keep working.

mod agui;
mod http;
mod in_process;
mod sse;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use toolgate_ui::{UiChunk, UiMessage};

pub use agui::AguiTransport;
pub use http::HttpTransport;
pub use in_process::{InProcessTransport, RequestFactory};

use crate::error::ClientError;

/// A response: its chunks, in order.
pub type ChunkStream = BoxStream<'static, Result<UiChunk, ClientError>>;

/// Why a request is sent (the AI SDK's `trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A new message, or answers to approvals and client tool calls.
    SubmitMessage,
    /// A new response to replace the last one.
    RegenerateMessage,
}

impl Trigger {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SubmitMessage => "submit-message",
            Self::RegenerateMessage => "regenerate-message",
        }
    }
}

/// One request of a chat: the AI SDK's `DefaultChatTransport` body.
#[derive(Debug, Clone, PartialEq)]
pub struct TransportRequest {
    /// The chat id.
    pub chat_id: String,
    /// The conversation as the server should see it.
    pub messages: Vec<UiMessage>,
    /// Why it is sent.
    pub trigger: Trigger,
    /// The last message's id (the message a continuation extends), or the regenerated one.
    pub message_id: Option<String>,
}

impl TransportRequest {
    /// The JSON body `useChat` would send.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.chat_id,
            "messages": self.messages,
            "trigger": self.trigger.as_str(),
            "messageId": self.message_id,
        })
    }
}

/// Carries a chat's requests. Object-safe, so a chat can hold any transport.
pub trait ChatTransport: Send + Sync + 'static {
    /// Sends one request; resolves to its response stream once accepted.
    fn send(&self, request: TransportRequest) -> BoxFuture<'_, Result<ChunkStream, ClientError>>;

    /// Reattaches to the response stream still running for this chat, if the
    /// server has one (`None`: nothing is running, or the server cannot resume).
    fn reconnect(&self, chat_id: &str) -> BoxFuture<'_, Result<Option<ChunkStream>, ClientError>>;
}
