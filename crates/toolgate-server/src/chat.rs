//! `POST /api/chat`: the AI SDK v6 UI message stream.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use futures::{Stream, StreamExt};
use toolgate::stream_text;
use toolgate_ui::{
    ChatRequest, EncoderOptions, SSE_DONE, UI_MESSAGE_STREAM_HEADERS, UiStreamEncoder, convert_to_model_messages,
    sse_frame,
};

use crate::app::AppState;
use crate::error::ApiError;

/// Answers one chat request with a UI message stream.
pub(crate) async fn chat(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    require_json(&headers)?;
    let request = ChatRequest::from_json(&body.map_err(body_error)?)?;
    let message_id = request
        .continued_message_id()
        .map(str::to_owned)
        .unwrap_or_else(|| format!("msg-{}", uuid::Uuid::now_v7().simple()));
    let messages = convert_to_model_messages(&request.messages)?;
    tracing::info!(chat = %request.id, messages = messages.len(), "chat request");

    let stream = stream_text(state.model(), state.text_request(messages)).await.map_err(|error| {
        tracing::warn!(chat = %request.id, %error, "chat request rejected");
        ApiError::from(error)
    })?;
    let mut encoder =
        UiStreamEncoder::new(EncoderOptions { message_id, signature_field: state.config().signature_field });
    let frames = stream
        .flat_map(move |part| futures::stream::iter(encoder.encode(&part)))
        .map(|chunk| Ok::<_, Infallible>(Bytes::from(sse_frame(&chunk))))
        .chain(futures::stream::once(async { Ok(Bytes::from_static(SSE_DONE.as_bytes())) }));

    Ok(sse_response(frames, UI_MESSAGE_STREAM_HEADERS))
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

/// A body that could not be read: too large, or cut off.
pub(crate) fn body_error(rejection: BytesRejection) -> ApiError {
    let code = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE { "body_too_large" } else { "unreadable_body" };
    ApiError::new(rejection.status(), code, rejection.body_text())
}

/// Rejects bodies that are not declared as JSON.
pub(crate) fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
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
