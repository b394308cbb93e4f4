//! `POST /ag-ui`: AG-UI 1.0 runs; approvals pause a run with an interrupt outcome.
//!
//! A body that is not a decodable `RunAgentInput` gets a 4xx JSON error like
//! every other endpoint. Everything after that, including resume problems
//! and forged approvals, is reported in the stream as `RUN_ERROR`, as the
//! AG-UI contract asks; nothing runs in either case.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::Response;
use futures::StreamExt;
use toolgate_agui::{EncoderOptions, RunAgentInput, run_events};

use crate::app::AppState;
use crate::chat::{body_error, require_json, sse_response};
use crate::error::ApiError;

/// The headers of an AG-UI event stream.
const AGUI_STREAM_HEADERS: &[(&str, &str)] =
    &[("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("x-accel-buffering", "no")];

/// Runs the agent for one `RunAgentInput` and streams the events.
pub(crate) async fn run(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    require_json(&headers)?;
    let principal = state.principal(&headers)?;
    let input = RunAgentInput::from_json(&body.map_err(body_error)?)?;
    let ledger = state.ledger(&input.thread_id, principal)?;
    tracing::info!(thread = %input.thread_id, run = %input.run_id, resumes = input.resume.as_ref().map_or(0, Vec::len), "ag-ui run");
    let request_state = state.clone();
    let events = run_events(state.model(), input, EncoderOptions::default(), move |messages| {
        let request = request_state.text_request(messages);
        match ledger {
            Some(ledger) => request.ledger(ledger),
            None => request,
        }
    })
    .map(|event| Ok::<_, Infallible>(Bytes::from(event.to_sse())));
    Ok(sse_response(events, AGUI_STREAM_HEADERS))
}
