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
//! when it ends, before its last event is sent.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};
use toolgate::Toolkit;
use toolgate::ledger::ApprovalStore;
use toolgate_agui::resume::pending_approvals;
use toolgate_agui::{
    EncoderOptions, Event, EventEncoder, HistoryMismatch, Message, PENDING_FIELD, RunAgentInput, STATE_KEY,
    ThreadRecorder, check_history, run_events,
};

use crate::app::AppState;
use crate::error::ApiError;
use crate::http::{JsonBody, detached_sse, sse_response};
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
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
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
    let clock = ledger.config.clock.clone();
    let thread = StoredThread::load(store.as_ref(), &thread_key).await?;
    if let Err(mismatch) = thread.check(&input, &state.toolkit()) {
        tracing::warn!(thread = %input.thread_id, %mismatch, "ag-ui history refused");
        let events = EventEncoder::new(&input, EncoderOptions::default()).agui_error(&mismatch.into());
        let frames = futures::stream::iter(events).map(|event| Ok::<_, Infallible>(Bytes::from(event.to_sse())));
        return Ok(sse_response(frames, AGUI_STREAM_HEADERS));
    }
    thread.restore_interrupts(&mut input);
    let mut recorder = ThreadRecorder::new(input.messages.clone());
    let gate_thread = thread_key.clone();
    let mut events = Box::pin(run_events(state.model(), input, EncoderOptions::default(), move |messages| {
        request_state.text_request(messages, &gate_thread, principal.as_deref()).ledger(ledger).groups(groups.clone())
    }));
    let frames = async_stream::stream! {
        let mut interrupts = thread.interrupts.clone();
        // The run's last event waits until the thread is stored: a client that
        // resumes as soon as the run finishes must find it.
        let mut held = Vec::new();
        while let Some(event) = events.next().await {
            recorder.apply(&event);
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
        let record = json!({ MESSAGES_FIELD: recorder.messages(), STATE_KEY: interrupts });
        // The latest version (another run may have saved meanwhile): this run's thread is the newest.
        let version = store.conversation(&thread_key).await.ok().flatten().map(|stored| stored.version);
        if let Err(error) = store.save_conversation(&thread_key, &record, version, clock.now()).await {
            tracing::error!(thread = %thread_key, %error, "cannot store the thread");
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

/// The field of a stored thread holding its messages (toolgate's interrupts are under [`STATE_KEY`]).
const MESSAGES_FIELD: &str = "messages";

/// A thread as the store holds it: its messages and open interrupts.
struct StoredThread {
    /// The messages the last run left (`None`: a new thread, or one stored
    /// before threads kept their messages).
    messages: Option<Vec<Message>>,
    /// toolgate's part of the last state snapshot.
    interrupts: Option<Value>,
}

impl StoredThread {
    async fn load(store: &dyn ApprovalStore, key: &str) -> Result<Self, ApiError> {
        let Some(stored) = store.conversation(key).await? else {
            return Ok(Self { messages: Some(Vec::new()), interrupts: None });
        };
        let messages = match stored.messages.get(MESSAGES_FIELD) {
            Some(messages) => Some(serde_json::from_value(messages.clone()).map_err(|error| {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "corrupt_conversation", format!("thread: {error}"))
            })?),
            None => None,
        };
        Ok(Self { messages, interrupts: stored.messages.get(STATE_KEY).cloned() })
    }

    /// Checks the run's messages against the recorded ones ([`check_history`]).
    /// A thread stored before threads kept their messages has nothing to check against.
    fn check(&self, input: &RunAgentInput, toolkit: &Toolkit) -> Result<(), HistoryMismatch> {
        let Some(recorded) = &self.messages else { return Ok(()) };
        let state = self.interrupts.as_ref().map(|interrupts| json!({ STATE_KEY: interrupts }));
        let pending = pending_approvals(state.as_ref()).unwrap_or_default();
        check_history(recorded, input, &pending, |name| toolkit.get(name).is_some())
    }

    /// Gives a resume without toolgate's state the thread's stored interrupts.
    fn restore_interrupts(&self, input: &mut RunAgentInput) {
        let resuming = input.resume.as_ref().is_some_and(|entries| !entries.is_empty());
        let has_state = input.state.as_ref().is_some_and(|state| state.get(STATE_KEY).is_some());
        if !resuming || has_state {
            return;
        }
        if let (Some(interrupts), Value::Object(state)) =
            (&self.interrupts, input.state.get_or_insert_with(|| json!({})))
        {
            state.insert(STATE_KEY.to_owned(), interrupts.clone());
        }
    }
}
