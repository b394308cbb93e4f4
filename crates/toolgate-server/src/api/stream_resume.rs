//! `GET /api/chat/{id}/stream`: the AI SDK's resumable streams. A stored
//! chat's response runs on whether or not its client stays; a client that
//! lost its connection (or reloaded) reattaches here and gets the response
//! from its first frame, then follows it to the end. 204 when the chat has
//! no response running (nothing to resume, or the server has no store).
//!
//! A response is bound to the principal of the request that started it: with
//! principals configured, nobody else can reattach to it. Frames are kept
//! only while their response runs.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use toolgate_ui::UI_MESSAGE_STREAM_HEADERS;

use crate::app::AppState;
use crate::caller::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::http::sse_response;
use crate::running::lock;

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
    let running = state.run_context().running().get(&key).filter(|log| log.principal == principal);
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
