//! `GET /api/chat/{id}/stream`: the AI SDK's resumable streams. A stored
//! chat's response runs on whether or not its client stays; a client that
//! lost its connection (or reloaded) reattaches here and gets the response
//! from its first frame, then follows it to the end. 204 when the chat has
//! no response running (nothing to resume, or the server has no store).
//!
//! A response is bound to the principal of the request that started it: with
//! principals configured, nobody else can reattach to it. Frames are kept
//! only while their response runs.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use tokio::sync::Notify;
use toolgate_ui::UI_MESSAGE_STREAM_HEADERS;

use crate::app::AppState;
use crate::caller::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::http::sse_response;

/// The responses running now, by chat id.
#[derive(Debug, Default)]
pub(crate) struct RunningResponses {
    by_chat: Mutex<HashMap<String, Arc<ResponseLog>>>,
}

/// The frames of one running response.
#[derive(Debug, Default)]
pub(crate) struct ResponseLog {
    /// Who started the response.
    principal: Option<String>,
    frames: Mutex<LogState>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct LogState {
    frames: Vec<Bytes>,
    done: bool,
}

impl RunningResponses {
    /// Starts the log of a new response of a chat, by its conversation key (a
    /// newer response replaces an older one).
    pub(crate) fn start(self: &Arc<Self>, chat_id: &str, principal: Option<String>) -> RunningResponse {
        let log = Arc::new(ResponseLog { principal, ..ResponseLog::default() });
        lock(&self.by_chat).insert(chat_id.to_owned(), Arc::clone(&log));
        RunningResponse { responses: Arc::clone(self), chat_id: chat_id.to_owned(), log }
    }

    fn get(&self, chat_id: &str) -> Option<Arc<ResponseLog>> {
        lock(&self.by_chat).get(chat_id).cloned()
    }
}

/// The writer's end of a response log; ends the log when dropped, however the response ended.
pub(crate) struct RunningResponse {
    responses: Arc<RunningResponses>,
    chat_id: String,
    log: Arc<ResponseLog>,
}

impl RunningResponse {
    /// Records one frame.
    pub(crate) fn push(&self, frame: &Bytes) {
        lock(&self.log.frames).frames.push(frame.clone());
        self.log.changed.notify_waiters();
    }
}

impl Drop for RunningResponse {
    fn drop(&mut self) {
        lock(&self.log.frames).done = true;
        self.log.changed.notify_waiters();
        let mut by_chat = lock(&self.responses.by_chat);
        if by_chat.get(&self.chat_id).is_some_and(|log| Arc::ptr_eq(log, &self.log)) {
            by_chat.remove(&self.chat_id);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each critical section is a push or a copy: a panic cannot leave it half done.
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reattaches to a stored chat's running response (the AI SDK's resumable streams).
///
/// The response comes from its first frame, then onwards to its end. Another
/// principal's response is answered like no response (204), so chat ids
/// cannot be probed.
#[utoipa::path(
    get,
    path = "/api/chat/{id}/stream",
    operation_id = "resumeChatStream",
    tag = "chat",
    params(("id" = String, Path, description = "The chat id.")),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The running response's UI message stream, from its first frame.",
            content_type = "text/event-stream", body = String),
        (status = 204, description = "No response of this chat is running (or the server has no store)."),
        (status = 400, description = "A bad chat id.", body = ErrorBody, extensions(("x-error-codes" = json!(["invalid_chat_id"])))),
    )
)]
pub(crate) async fn resume(
    State(state): State<AppState>,
    Caller { principal, .. }: Caller,
    Path(chat_id): Path<String>,
) -> Result<Response, ApiError> {
    let key = state.conversation_key(principal.as_deref(), &chat_id)?;
    let running = state.running().get(&key).filter(|log| log.principal == principal);
    let Some(log) = running else {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NO_CONTENT;
        return Ok(response);
    };
    tracing::info!(chat = %chat_id, "a client reattached to a running response");
    let frames = futures::stream::unfold((log, 0usize), |(log, sent)| async move {
        loop {
            let next = {
                // Registered before the check, so a frame pushed in between still wakes us.
                let changed = log.changed.notified();
                let read = {
                    let state = lock(&log.frames);
                    if sent < state.frames.len() {
                        Some(Some((Bytes::from(state.frames[sent..].concat()), state.frames.len())))
                    } else if state.done {
                        Some(None)
                    } else {
                        None
                    }
                };
                if read.is_none() {
                    changed.await;
                }
                read
            };
            match next {
                Some(Some((batch, next))) => return Some((Ok::<_, Infallible>(batch), (log, next))),
                Some(None) => return None,
                None => continue,
            }
        }
    });
    Ok(sse_response(frames, UI_MESSAGE_STREAM_HEADERS))
}
