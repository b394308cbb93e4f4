//! The engine in the same process: no server, no HTTP. Each request's UI
//! messages become model messages, the engine streams its response, and the
//! response goes through the same UI stream encoder `toolgate serve` uses, so
//! a chat behaves the same over both transports.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use toolgate::approval::ApprovalSigner;
use toolgate::{SharedModel, TextRequest, Toolkit, stream_text};
use toolgate_protocol::ModelMessage;
use toolgate_ui::{EncoderOptions, UiRole, UiStreamEncoder, convert_to_model_messages};

use crate::error::ClientError;
use crate::transport::{ChatTransport, ChunkStream, TransportRequest};

/// Makes the engine request for a chat's messages: tools, system prompt,
/// signer, ledger. Gets the chat id (a ledger's conversation id).
pub type RequestFactory = Arc<dyn Fn(&str, Vec<ModelMessage>) -> TextRequest + Send + Sync>;

/// A transport that runs the engine directly.
#[derive(Clone)]
pub struct InProcessTransport {
    model: SharedModel,
    factory: RequestFactory,
}

impl std::fmt::Debug for InProcessTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessTransport").finish_non_exhaustive()
    }
}

impl InProcessTransport {
    /// The engine over `model` with these tools, approvals signed with a
    /// random key of this transport.
    pub fn new(model: SharedModel, toolkit: Toolkit) -> Result<Self, ClientError> {
        let signer = Self::random_signer()?;
        Ok(Self::with_requests(model, move |_, messages| {
            TextRequest::new(messages).toolkit(toolkit.clone()).approval_signer(signer.clone())
        }))
    }

    /// The engine over `model`, each request made by `factory` (to add a
    /// system prompt, a ledger, step limits...).
    pub fn with_requests(
        model: SharedModel,
        factory: impl Fn(&str, Vec<ModelMessage>) -> TextRequest + Send + Sync + 'static,
    ) -> Self {
        Self { model, factory: Arc::new(factory) }
    }

    /// A signer with a random key of its own, for a [`RequestFactory`]
    /// (approvals it signs are valid only for requests it also checks).
    pub fn random_signer() -> Result<ApprovalSigner, ClientError> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|error| ClientError::Transport(format!("no random key: {error}")))?;
        ApprovalSigner::new(key).map_err(|error| ClientError::Transport(error.to_string()))
    }

    async fn run(&self, request: TransportRequest) -> Result<ChunkStream, ClientError> {
        let messages = convert_to_model_messages(&request.messages).map_err(|error| ClientError::Rejected {
            status: None,
            code: "invalid_message".into(),
            message: error.to_string(),
        })?;
        let message_id = match request.messages.last() {
            Some(last) if last.role == UiRole::Assistant => last.id.clone(),
            _ => format!("msg-{}", uuid::Uuid::now_v7().simple()),
        };
        let text_request = (self.factory)(&request.chat_id, messages);
        let stream = stream_text(Arc::clone(&self.model), text_request).await.map_err(|error| {
            ClientError::Rejected { status: None, code: error.code().into(), message: error.to_string() }
        })?;
        let mut encoder = UiStreamEncoder::new(EncoderOptions { message_id, signature_field: false });
        Ok(Box::pin(stream.flat_map(move |part| futures::stream::iter(encoder.encode(&part).into_iter().map(Ok)))))
    }
}

impl ChatTransport for InProcessTransport {
    fn send(&self, request: TransportRequest) -> BoxFuture<'_, Result<ChunkStream, ClientError>> {
        Box::pin(self.run(request))
    }

    fn reconnect(&self, _chat_id: &str) -> BoxFuture<'_, Result<Option<ChunkStream>, ClientError>> {
        // Nothing here can drop a connection.
        Box::pin(async { Ok(None) })
    }
}
