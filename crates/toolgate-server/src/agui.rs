//! `POST /ag-ui`: AG-UI 1.0 runs; approvals pause a run with an interrupt outcome.
//!
//! A body that is not a decodable `RunAgentInput` gets a 4xx JSON error like
//! every other endpoint. Everything after that, including resume problems
//! and forged approvals, is reported in the stream as `RUN_ERROR`, as the
//! AG-UI contract asks; nothing runs in either case.
//!
//! With a store, approvals are bound to the conversation `ag-ui:<threadId>`
//! and the server keeps each thread's open interrupts (toolgate's part of the
//! last state snapshot): a resume from a client that does not send that state
//! back (`@tanstack/ai-client` always sends `state: {}`) is matched against the
//! stored interrupts. A state the client does send is used as it came; the
//! ledger checks every answer either way. The run goes on when the client
//! disconnects, and the thread's interrupts are stored when it ends.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};
use toolgate::ledger::{ApprovalStore, Ledger, StoredConversation};
use toolgate_agui::{EncoderOptions, Event, PENDING_FIELD, RunAgentInput, STATE_KEY, run_events};

use crate::app::AppState;
use crate::chat::{detached_sse, json_request, sse_response};
use crate::error::ApiError;
use crate::principal::Caller;

/// The prefix of AG-UI thread ids in the store and the ledger (chat ids may not use it).
pub(crate) const AGUI_PREFIX: &str = "ag-ui:";

/// The headers of an AG-UI event stream.
const AGUI_STREAM_HEADERS: &[(&str, &str)] =
    &[("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("x-accel-buffering", "no")];

/// Runs the agent for one `RunAgentInput` and streams the events.
pub(crate) async fn run(
    State(state): State<AppState>,
    Caller { principal, groups }: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = json_request(&headers, body)?;
    let mut input = RunAgentInput::from_json(&body)?;
    // The requester's own thread of that id.
    let thread_key = state.conversation_key(principal.as_deref(), &thread_key(&input.thread_id))?;
    let ledger = state.ledger(&thread_key, principal.clone())?;
    if let Some(ledger) = &ledger {
        restore_interrupts(ledger, &thread_key, &mut input).await?;
    }
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
    let clock = ledger.config.clock.clone();
    let gate_thread = thread_key.clone();
    let mut events = Box::pin(run_events(state.model(), input, EncoderOptions::default(), move |messages| {
        request_state.text_request(messages, &gate_thread, principal.as_deref()).ledger(ledger).groups(groups.clone())
    }));
    let frames = async_stream::stream! {
        let mut interrupts = None;
        // The run's last event waits until its interrupts are stored: a client that
        // resumes as soon as the run finishes must find them.
        let mut held = Vec::new();
        while let Some(event) = events.next().await {
            if let Event::StateSnapshot { snapshot } = &event {
                // A snapshot without toolgate's part means nothing is pending any more.
                interrupts = Some(snapshot.get(STATE_KEY).cloned().unwrap_or_else(|| json!({PENDING_FIELD: []})));
            }
            let frame = Bytes::from(event.to_sse());
            if matches!(event, Event::RunFinished { .. } | Event::RunError { .. }) || !held.is_empty() {
                held.push(frame);
            } else {
                yield frame;
            }
        }
        if let Some(interrupts) = interrupts {
            let stored = stored_thread(store.as_ref(), &thread_key).await.ok().flatten();
            let record = json!({ STATE_KEY: interrupts });
            let version = stored.map(|stored| stored.version);
            if let Err(error) = store.save_conversation(&thread_key, &record, version, clock.now()).await {
                tracing::error!(thread = %thread_key, %error, "cannot store the thread's interrupts");
            }
        }
        for frame in held {
            yield frame;
        }
    };
    Ok(detached_sse(frames, AGUI_STREAM_HEADERS))
}

/// The conversation id of an AG-UI thread in the store and the ledger (keyed
/// with its owner by [`AppState::conversation_key`]).
fn thread_key(thread_id: &str) -> String {
    if thread_id.is_empty() { String::new() } else { format!("{AGUI_PREFIX}{thread_id}") }
}

async fn stored_thread(store: &dyn ApprovalStore, key: &str) -> Result<Option<StoredConversation>, ApiError> {
    Ok(store.conversation(key).await?)
}

/// Gives a resume without toolgate's state the thread's stored interrupts.
async fn restore_interrupts(ledger: &Ledger, key: &str, input: &mut RunAgentInput) -> Result<(), ApiError> {
    let resuming = input.resume.as_ref().is_some_and(|entries| !entries.is_empty());
    let has_state = input.state.as_ref().is_some_and(|state| state.get(STATE_KEY).is_some());
    if !resuming || has_state {
        return Ok(());
    }
    let Some(stored) = stored_thread(ledger.config.store.as_ref(), key).await? else { return Ok(()) };
    if let (Some(interrupts), Value::Object(state)) =
        (stored.messages.get(STATE_KEY), input.state.get_or_insert_with(|| json!({})))
    {
        state.insert(STATE_KEY.to_owned(), interrupts.clone());
    }
    Ok(())
}
