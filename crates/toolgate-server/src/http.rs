//! The server's shared HTTP pieces: JSON request bodies and server-sent event responses.
//!
//! - [`JsonBody`] extracts the body of a `POST` that declares JSON: any other
//!   content type is 415 `unsupported_media_type`, a body over the limit 413
//!   `body_too_large`, one cut off 400 `unreadable_body`, each as the
//!   server's JSON error. Decoding the JSON is the handler's (each endpoint
//!   names its own problems).
//! - [`sse_response`] streams frames as they come; [`detached_sse`] streams
//!   them from a task of its own, so a run goes on (and records what it
//!   records when it ends) after its client went away.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use futures::{Stream, StreamExt};
use tracing::Instrument;

use crate::error::ApiError;

/// Frames buffered between a detached run and a slow client.
const FRAME_BUFFER: usize = 256;

/// The bytes of a request body declared as JSON (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct JsonBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        require_json(request.headers())?;
        Bytes::from_request(request, state).await.map(Self).map_err(body_error)
    }
}

/// A streamed response of these SSE frames with these headers.
pub(crate) fn sse_response(
    frames: impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
    headers: &[(&'static str, &'static str)],
) -> Response {
    let mut response = Response::new(Body::from_stream(frames));
    for (name, value) in headers {
        response.headers_mut().insert(*name, HeaderValue::from_static(value));
    }
    response
}

/// Streams `frames` from a task of its own that polls them to the end: a
/// client that goes away stops receiving, but the run (and what it records
/// when it ends) goes on.
pub(crate) fn detached_sse(
    frames: impl Stream<Item = Bytes> + Send + 'static,
    headers: &[(&'static str, &'static str)],
) -> Response {
    let (sender, receiver) = tokio::sync::mpsc::channel::<Bytes>(FRAME_BUFFER);
    // In the request's span (when traces are exported): the run is part of the request.
    tokio::spawn(
        async move {
            let mut frames = std::pin::pin!(frames);
            let mut connected = true;
            while let Some(frame) = frames.next().await {
                connected = connected && sender.send(frame).await.is_ok();
            }
        }
        .in_current_span(),
    );
    // Every frame that is ready goes out in one write.
    let frames = futures::stream::unfold(receiver, |mut receiver| async move {
        let first = receiver.recv().await?;
        let mut batch = Vec::new();
        while let Ok(next) = receiver.try_recv() {
            if batch.is_empty() {
                batch.extend_from_slice(&first);
            }
            batch.extend_from_slice(&next);
        }
        let frame = if batch.is_empty() { first } else { Bytes::from(batch) };
        Some((Ok::<_, Infallible>(frame), receiver))
    });
    sse_response(frames, headers)
}

/// A body that could not be read: too large, or cut off.
fn body_error(rejection: BytesRejection) -> ApiError {
    let code = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE { "body_too_large" } else { "unreadable_body" };
    ApiError::new(rejection.status(), code, rejection.body_text())
}

/// Rejects bodies that are not declared as JSON.
fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("expected content-type application/json, got `{content_type}`"),
        ))
    }
}
