//! [`Chat`]: a conversation with a server, driven through a transport.
//!
//! Contract (seed 003's continuation rules):
//! - Once every approval and client tool call of the last assistant step is
//!   answered, the chat sends once, by itself.
//! - An answer given while a response streams is recorded at once and sent
//!   when that response ends (`continuation_skipped` marks the check that was
//!   put off; the chat re-checks after every response).
//! - A state that was sent is not sent again: only answers not yet sent can
//!   start a continuation.
//! - A continuation that asks for new approvals waits for them the same way,
//!   so chained approvals need no user code.
//!
//! A `Chat` is a cheap handle: clone it to answer from another task while a
//! response streams.

use std::sync::{Arc, Mutex, MutexGuard};

use futures::{Stream, StreamExt};
use toolgate_ui::{UiMessage, UiPart};

use crate::decision::Decision;
use crate::error::ClientError;
use crate::event::{ChatEvent, Status};
use crate::options::ChatOptions;
use crate::state::{ChatState, StreamEnd, ToolOutput};
use crate::transport::{ChatTransport, ChunkStream, Trigger};

/// A chat with a server.
#[derive(Clone)]
pub struct Chat {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Arc<dyn ChatTransport>,
    state: Mutex<ChatState>,
}

impl std::fmt::Debug for Chat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("Chat").field("id", &state.id).field("status", &state.status()).finish_non_exhaustive()
    }
}

impl Chat {
    /// A new, empty chat with this id over `transport`.
    pub fn new(id: impl Into<String>, transport: impl ChatTransport) -> Self {
        Self::with_messages(id, transport, Vec::new(), ChatOptions::default())
    }

    /// A chat that starts from `messages` (e.g. restored from the server), with options.
    pub fn with_messages(
        id: impl Into<String>,
        transport: impl ChatTransport,
        messages: Vec<UiMessage>,
        options: ChatOptions,
    ) -> Self {
        let state = ChatState::new(id.into(), options, messages);
        Self { inner: Arc::new(Inner { transport: Arc::new(transport), state: Mutex::new(state) }) }
    }

    /// The chat id.
    pub fn id(&self) -> String {
        self.state().id.clone()
    }

    /// A copy of every message, the one streaming included.
    pub fn messages(&self) -> Vec<UiMessage> {
        self.state().messages()
    }

    /// The status.
    pub fn status(&self) -> Status {
        self.state().status()
    }

    /// The error of the last request, if it failed.
    pub fn error(&self) -> Option<ClientError> {
        self.state().error().cloned()
    }

    /// Every change from now on, in order, as a stream.
    pub fn subscribe(&self) -> impl Stream<Item = ChatEvent> + Send + Unpin + 'static {
        self.state().listeners().subscribe()
    }

    /// Calls `listener` with every change from now on, in order, on a task of
    /// its own (so it may call back into the chat). Needs a Tokio runtime.
    pub fn on_event(&self, mut listener: impl FnMut(&ChatEvent) + Send + 'static) -> tokio::task::JoinHandle<()> {
        let mut events = self.subscribe();
        tokio::spawn(async move {
            while let Some(event) = events.next().await {
                listener(&event);
            }
        })
    }

    /// Sends a user message with this text and streams the response (then any
    /// continuation the answers given meanwhile call for).
    pub async fn send_message(&self, text: impl Into<String>) -> Result<(), ClientError> {
        self.send_parts(vec![UiPart::Text { text: text.into() }]).await
    }

    /// Sends a user message made of these parts.
    pub async fn send_parts(&self, parts: Vec<UiPart>) -> Result<(), ClientError> {
        self.state().push_user_message(parts)?;
        self.respond(Trigger::SubmitMessage, None).await
    }

    /// Sends the conversation as it is (after a refused request, say).
    pub async fn resubmit(&self) -> Result<(), ClientError> {
        self.respond(Trigger::SubmitMessage, None).await
    }

    /// Answers an approval request. When this completes the last step, the
    /// chat sends the answers (now, or when the response in flight ends).
    pub async fn add_tool_approval_response(&self, approval_id: &str, decision: Decision) -> Result<(), ClientError> {
        self.state().answer(approval_id, decision)?;
        self.continue_if_ready().await
    }

    /// Gives the result of a client-executed tool call; continues like an answer.
    pub async fn add_tool_output(&self, tool_call_id: &str, output: ToolOutput) -> Result<(), ClientError> {
        self.state().add_output(tool_call_id, output)?;
        self.continue_if_ready().await
    }

    /// Stops the response in flight (what arrived stays; the status goes back to ready).
    pub fn stop(&self) {
        self.state().stop();
    }

    /// Replaces the last response with a new one.
    pub async fn regenerate(&self) -> Result<(), ClientError> {
        let removed = self.state().drop_last_response()?;
        self.respond(Trigger::RegenerateMessage, removed).await
    }

    /// Reattaches to the response the server is still producing for this chat
    /// (after a dropped connection); the response is applied from its start.
    pub async fn resume(&self) -> Result<(), ClientError> {
        let chat_id = self.id();
        if self.state().is_busy() {
            return Err(ClientError::Busy);
        }
        let stream = self.inner.transport.reconnect(&chat_id).await?.ok_or(ClientError::NothingToResume)?;
        let cancel = self.state().begin_resume()?;
        self.state().accepted();
        self.stream(stream, cancel).await?;
        self.after_response().await
    }

    /// Sends one request and streams its response, then continues if answers came in meanwhile.
    async fn respond(&self, trigger: Trigger, message_id: Option<String>) -> Result<(), ClientError> {
        self.request(trigger, message_id).await?;
        self.after_response().await
    }

    /// Sends one request and applies its response.
    async fn request(&self, trigger: Trigger, message_id: Option<String>) -> Result<(), ClientError> {
        let (request, cancel) = self.state().begin(trigger, message_id)?;
        let sent = tokio::select! {
            sent = self.inner.transport.send(request) => sent,
            () = cancel.cancelled() => {
                self.state().finish(StreamEnd::Stopped);
                return Ok(());
            }
        };
        match sent {
            Ok(stream) => {
                self.state().accepted();
                self.stream(stream, cancel).await
            }
            Err(error) => {
                self.state().finish(StreamEnd::Failed(error.clone()));
                Err(error)
            }
        }
    }

    async fn stream(
        &self,
        mut stream: ChunkStream,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<(), ClientError> {
        loop {
            let next = tokio::select! {
                next = stream.next() => next,
                () = cancel.cancelled() => {
                    self.state().finish(StreamEnd::Stopped);
                    return Ok(());
                }
            };
            match next {
                Some(Ok(chunk)) => self.state().apply(chunk),
                Some(Err(error)) => {
                    self.state().finish(StreamEnd::Failed(error.clone()));
                    return Err(error);
                }
                None => {
                    self.state().finish(StreamEnd::Completed);
                    return Ok(());
                }
            }
        }
    }

    /// After a response: a continuation check put off while it streamed runs now.
    async fn after_response(&self) -> Result<(), ClientError> {
        let skipped = std::mem::take(&mut self.state().continuation_skipped);
        if skipped { self.continue_if_ready().await } else { Ok(()) }
    }

    /// Seed 003's `checkForContinuation`, as a loop.
    async fn continue_if_ready(&self) -> Result<(), ClientError> {
        loop {
            {
                let mut state = self.state();
                if state.continuation_pending || state.is_busy() {
                    state.continuation_skipped = true;
                    return Ok(());
                }
                if !state.ready_to_continue() {
                    return Ok(());
                }
                state.continuation_pending = true;
                state.continuation_skipped = false;
            }
            let sent = self.request(Trigger::SubmitMessage, None).await;
            let skipped = {
                let mut state = self.state();
                state.continuation_pending = false;
                std::mem::take(&mut state.continuation_skipped)
            };
            sent?;
            if !skipped {
                return Ok(());
            }
        }
    }

    fn state(&self) -> MutexGuard<'_, ChatState> {
        // A panic while the lock was held cannot leave the state half-changed
        // in a way later calls depend on, so a poisoned lock is still used.
        self.inner.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
