//! `POST /ag-ui`: AG-UI 1.0 runs; approvals pause a run with an interrupt outcome.
//!
//! A body that is not a decodable `RunAgentInput` gets a 4xx JSON error like
//! every other endpoint. Everything after that, including resume problems
//! and forged approvals, is reported in the stream as `RUN_ERROR`, as the
//! AG-UI contract asks; nothing runs in either case.
//!
//! With a store, approvals are bound to the conversation `ag-ui:<threadId>`
//! (keyed with its owner), and the server keeps each thread as it keeps
//! `/api/chat` conversations: the messages each run leaves behind (the input
//! with the run's events applied, as the client holds them) and its open
//! interrupts (toolgate's part of the last state snapshot). Before a run
//! starts, its `messages` are checked against the stored thread
//! ([`toolgate_agui::thread`]): a tool call, a changed input or a tool result
//! the server never produced is `RUN_ERROR {code: "history_mismatch"}` naming
//! the message and call, and nothing runs. A resume from a client that does
//! not send toolgate's state back (`@tanstack/ai-client` always sends
//! `state: {}`) is matched against the stored interrupts; a state the client
//! does send is used as it came, and the ledger checks every answer either
//! way. The run goes on when the client disconnects, and the thread is stored
//! when it ends, before its last event is sent. A resume whose edit the rules
//! route to other approvers supersedes its approval and runs nothing
//! (`run/agui/edits.rs`). A grant an approving resume entry carries is
//! checked and kept before the run (`run/agui/grants.rs`); one that does not
//! check is `RUN_ERROR` (`invalid_grant`, `grant_not_allowed`), and nothing runs.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use futures::StreamExt;
use toolgate::approval::lifecycle::grant::GrantRefusal;
use toolgate_agui::{EncoderOptions, Event, EventEncoder, RunAgentInput, run_events};

use crate::app::AppState;
use crate::caller::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::http::{JsonBody, detached_sse, sse_response};
use crate::run::agui::{
    CatchUp, StoredThread, ThreadRun, carries_grant, caught_up_events, keep_resumed_grants, stored_frames,
    supersede_resumed_edits, thread_key,
};

/// The headers of an AG-UI event stream.
const AGUI_STREAM_HEADERS: &[(&str, &str)] =
    &[("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("x-accel-buffering", "no")];

/// Runs the agent for one `RunAgentInput` and streams the AG-UI events.
///
/// A body that is not a decodable `RunAgentInput` gets a 4xx JSON error;
/// everything after that (resume problems, a refused history, forged
/// approvals) is a `RUN_ERROR` event in the stream, with one of the codes in
/// the 200 response's `x-run-error-codes`. The `CUSTOM` events the server
/// sends are described by `agui-custom-events.schema.json` in the documentation.
#[utoipa::path(
    post,
    path = "/ag-ui",
    operation_id = "runAgUi",
    tag = "ag-ui",
    request_body = crate::api::openapi::schemas::RunAgentInputDoc,
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The run's AG-UI events as server-sent events (`data: <event JSON>`).",
            content_type = "text/event-stream", body = String,
            extensions(("x-run-error-codes" = json!(["history_mismatch", "invalid_state", "no_pending_interrupts",
                "unknown_interrupt", "duplicate_resume_entry", "missing_resume_entry", "duplicate_pending_interrupt",
                "interrupt_tool_call_not_found", "interrupt_tool_mismatch", "unknown_tool_call",
                "invalid_tool_arguments", "unsupported_content", "model_error", "invalid_messages",
                "invalid_approval", "toolkit_required", "tool_not_found", "unknown_approval",
                "approval_tool_call_not_found", "conflicting_approval_responses", "unanswered_approvals",
                "invalid_tool_input", "edit_not_supported", "invalid_approval_signature", "missing_tool_results",
                "duplicate_tool_call_id", "duplicate_approval_id", "duplicate_approval_request", "edit_not_allowed",
                "edit_denied", "approval_not_issued", "approval_mismatch", "approval_already_decided",
                "approval_in_progress", "approvals_pending", "forged_tool_result", "not_an_approver",
                "self_approval_forbidden", "already_voted", "approval_expired", "edit_needs_single_approver",
                "not_the_requester", "store_unavailable", "invalid_grant", "grant_not_allowed"])))),
        (status = 400, description = "The body is not a usable `RunAgentInput`.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["invalid_input", "invalid_message", "unknown_role",
                "invalid_resume_entry", "invalid_chat_id", "missing_conversation_id"])))),
        (status = 500, description = "The stored thread cannot be read.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["corrupt_conversation"])))),
        (status = 503, description = "The store failed; nothing ran.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn run(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let voter = caller.voter(&state);
    let Caller { principal, groups } = caller;
    let mut input = RunAgentInput::from_json(&body)?;
    // The requester's own thread of that id.
    let thread_key = state.conversation_key(principal.as_deref(), &thread_key(&input.thread_id))?;
    let ledger = state.ledger(&thread_key, principal.clone())?;
    tracing::info!(thread = %input.thread_id, run = %input.run_id, resumes = input.resume.as_ref().map_or(0, Vec::len), "ag-ui run");
    let request_state = state.clone();
    let Some(ledger) = ledger else {
        if carries_grant(&input) {
            let refusal =
                GrantRefusal::Invalid("a grant is kept in the server's store, and it runs without one".into());
            return Ok(refused(&input, &crate::run::vote::grant_refused(refusal)));
        }
        let events = run_events(state.model(), input, EncoderOptions::default(), move |messages| {
            request_state.text_request(messages, &thread_key, principal.as_deref()).groups(groups.clone())
        })
        .map(|event| Ok::<_, Infallible>(Bytes::from(event.to_sse())));
        return Ok(sse_response(events, AGUI_STREAM_HEADERS));
    };
    let store = ledger.config.store.clone();
    let mut thread = StoredThread::load(store.as_ref(), &thread_key).await?;
    let caught_up = thread.catch_up(&mut input);
    if caught_up != CatchUp::Current {
        tracing::info!(thread = %input.thread_id, ?caught_up, "ag-ui client caught up with its continued thread");
    }
    if let Err(mismatch) = thread.check(&input, &state.toolkit()) {
        tracing::warn!(thread = %input.thread_id, %mismatch, "ag-ui history refused");
        let events = EventEncoder::new(&input, EncoderOptions::default()).agui_error(&mismatch.into());
        return Ok(event_response(events));
    }
    // A grant the resume carries is checked and kept first: one that does not check runs nothing.
    if let Err(refusal) = keep_resumed_grants(&ledger, &voter, &input, &thread.pending()).await {
        tracing::info!(thread = %input.thread_id, code = refusal.code, "ag-ui resume's grant refused");
        return Ok(refused(&input, &refusal));
    }
    // An edit that needs other approvers waits for them (see `run/agui/edits.rs`): report the interrupts, run nothing.
    if caught_up == CatchUp::NothingToRun
        || supersede_resumed_edits(state.run_context(), &ledger, &voter, &input).await?
    {
        let events = caught_up_events(&thread, &input);
        StoredThread::save(
            store.as_ref(),
            (&thread_key, ledger.owner.as_deref()),
            &input.messages,
            thread.interrupts.clone(),
            None,
            state.now(),
        )
        .await;
        let frames = futures::stream::iter(events).map(|event| Ok::<_, Infallible>(Bytes::from(event.to_sse())));
        return Ok(sse_response(frames, AGUI_STREAM_HEADERS));
    }
    thread.restore_interrupts(&mut input);
    // Caught up or not, the client's view is the thread's from now on.
    thread.continued_at = None;
    let snapshot =
        (caught_up == CatchUp::Rebased).then(|| Event::MessagesSnapshot { messages: input.messages.clone() });
    let run = ThreadRun { key: thread_key, principal, groups, ledger, thread };
    let frames = stored_frames(state.run_context().clone(), run, input, snapshot);
    Ok(detached_sse(frames, AGUI_STREAM_HEADERS))
}

/// A run that ends before it starts with `RUN_ERROR` carrying `refusal`'s code and message.
fn refused(input: &RunAgentInput, refusal: &ApiError) -> Response {
    let error = Event::run_error(refusal.message.clone(), refusal.code);
    event_response(EventEncoder::new(input, EncoderOptions::default()).error_event(error))
}

/// `events` as the run's stream.
fn event_response(events: Vec<Event>) -> Response {
    let frames = futures::stream::iter(events).map(|event| Ok::<_, Infallible>(Bytes::from(event.to_sse())));
    sse_response(frames, AGUI_STREAM_HEADERS)
}
