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
//! ([`edits`]).

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use futures::StreamExt;
use serde_json::json;
use toolgate_agui::events::RunOutcome;
use toolgate_agui::{
    EncoderOptions, Event, EventEncoder, PENDING_FIELD, RunAgentInput, STATE_KEY, ThreadRecorder, run_events,
};

mod continuation;
mod edits;
mod thread;

pub(crate) use continuation::continue_thread;
use thread::{CatchUp, StoredThread};
use toolgate::ledger::Ledger;

use crate::app::AppState;
use crate::caller::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::http::{JsonBody, detached_sse, sse_response};

/// The prefix of AG-UI thread ids in the store and the ledger (chat ids may not use it).
pub(crate) const AGUI_PREFIX: &str = "ag-ui:";

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
    request_body = crate::openapi::schemas::RunAgentInputDoc,
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
                "not_the_requester", "store_unavailable"])))),
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
        let frames = futures::stream::iter(events).map(|event| Ok::<_, Infallible>(Bytes::from(event.to_sse())));
        return Ok(sse_response(frames, AGUI_STREAM_HEADERS));
    }
    // An edit that needs other approvers waits for them (see `edits`): report the interrupts, run nothing.
    if caught_up == CatchUp::NothingToRun || edits::supersede_resumed_edits(&state, &ledger, &voter, &input).await? {
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
    let frames = stored_frames(state, run, input, snapshot);
    Ok(detached_sse(frames, AGUI_STREAM_HEADERS))
}

/// A run of a stored thread: whose, under which ledger, from which stored thread.
struct ThreadRun {
    /// The thread's key in the store.
    key: String,
    /// The thread's owner (the run is theirs).
    principal: Option<String>,
    /// Their groups.
    groups: Vec<String>,
    /// The thread's ledger.
    ledger: Ledger,
    /// The thread as loaded.
    thread: StoredThread,
}

/// Runs `input` on a stored thread and yields its frames; the thread is
/// stored when the run ends, before its last event is sent (a client that
/// resumes as soon as the run finishes must find it). `snapshot` goes out
/// right after `RUN_STARTED` (a caught-up client's view of the thread).
fn stored_frames(
    state: AppState,
    run: ThreadRun,
    input: RunAgentInput,
    snapshot: Option<Event>,
) -> impl futures::Stream<Item = Bytes> + Send + 'static {
    let ThreadRun { key, principal, groups, ledger, thread } = run;
    let store = ledger.config.store.clone();
    let clock = ledger.config.clock.clone();
    let owner = ledger.owner.clone();
    let mut recorder = ThreadRecorder::new(input.messages.clone());
    let gate_thread = key.clone();
    let request_state = state.clone();
    let mut events = Box::pin(run_events(state.model(), input, EncoderOptions::default(), move |messages| {
        request_state.text_request(messages, &gate_thread, principal.as_deref()).ledger(ledger).groups(groups.clone())
    }));
    async_stream::stream! {
        let mut interrupts = thread.interrupts.clone();
        let mut snapshot = snapshot;
        let mut held = Vec::new();
        while let Some(event) = events.next().await {
            recorder.apply(&event);
            if let Event::StateSnapshot { snapshot } = &event {
                // A snapshot without toolgate's part means nothing is pending any more.
                interrupts = Some(snapshot.get(STATE_KEY).cloned().unwrap_or_else(|| json!({PENDING_FIELD: []})));
            }
            let started = matches!(event, Event::RunStarted { .. });
            let frame = Bytes::from(event.to_sse());
            if matches!(event, Event::RunFinished { .. } | Event::RunError { .. }) || !held.is_empty() {
                held.push(frame);
            } else {
                yield frame;
            }
            if let Some(snapshot) = snapshot.take_if(|_| started) {
                yield Bytes::from(snapshot.to_sse());
            }
        }
        StoredThread::save(store.as_ref(), (&key, owner.as_deref()), &recorder.messages(), interrupts, thread.continued_at, clock.now()).await;
        for frame in held {
            yield frame;
        }
    }
}

/// The run of a client that was behind and brought nothing new: the thread
/// as the server continued it, and its open interrupts; no model call.
fn caught_up_events(thread: &StoredThread, input: &RunAgentInput) -> Vec<Event> {
    vec![
        Event::RunStarted { thread_id: input.thread_id.clone(), run_id: input.run_id.clone(), parent_run_id: None },
        Event::MessagesSnapshot { messages: input.messages.clone() },
        Event::StateSnapshot { snapshot: thread.state_for(input) },
        Event::RunFinished {
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            result: None,
            outcome: Some(RunOutcome::Success { pending_tool_call_ids: Vec::new() }),
        },
    ]
}

/// The conversation id of an AG-UI thread in the store and the ledger (keyed
/// with its owner by [`AppState::conversation_key`]).
fn thread_key(thread_id: &str) -> String {
    if thread_id.is_empty() { String::new() } else { format!("{AGUI_PREFIX}{thread_id}") }
}
