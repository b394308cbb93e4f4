//! Stored AG-UI threads: a run of a thread the server keeps (its messages
//! and open interrupts, [`thread`]), stored when it ends whatever its client
//! does, and the server's own continuation of a thread whose interrupts were
//! decided out of band ([`continuation`]). The `POST /ag-ui` handler and the
//! continuation worker call this; it imports neither.

mod continuation;
mod edits;
mod grants;
mod thread;

use axum::body::Bytes;
use futures::StreamExt;
use serde_json::json;
use toolgate::ledger::Ledger;
use toolgate_agui::events::RunOutcome;
use toolgate_agui::{EncoderOptions, Event, PENDING_FIELD, RunAgentInput, STATE_KEY, ThreadRecorder, run_events};

use super::context::RunContext;
pub(crate) use continuation::continue_thread;
pub(crate) use edits::supersede_resumed_edits;
pub(crate) use grants::{carries_grant, keep_resumed_grants};
pub(crate) use thread::{CatchUp, StoredThread};

/// The prefix of AG-UI thread ids in the store and the ledger (chat ids may not use it).
pub(crate) const AGUI_PREFIX: &str = "ag-ui:";

/// A run of a stored thread: whose, under which ledger, from which stored thread.
pub(crate) struct ThreadRun {
    /// The thread's key in the store.
    pub(crate) key: String,
    /// The thread's owner (the run is theirs).
    pub(crate) principal: Option<String>,
    /// Their groups.
    pub(crate) groups: Vec<String>,
    /// The thread's ledger.
    pub(crate) ledger: Ledger,
    /// The thread as loaded.
    pub(crate) thread: StoredThread,
}

/// Runs `input` on a stored thread and yields its frames; the thread is
/// stored when the run ends, before its last event is sent (a client that
/// sends its AG-UI resume as soon as the run finishes must find it). `snapshot` goes out
/// right after `RUN_STARTED` (a caught-up client's view of the thread).
pub(crate) fn stored_frames(
    context: RunContext,
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
    let request_context = context.clone();
    let mut events = Box::pin(run_events(context.model(), input, EncoderOptions::default(), move |messages| {
        request_context.text_request(messages, &gate_thread, principal.as_deref()).ledger(ledger).groups(groups.clone())
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
pub(crate) fn caught_up_events(thread: &StoredThread, input: &RunAgentInput) -> Vec<Event> {
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
/// with its owner by [`crate::AppState::conversation_key`]).
pub(crate) fn thread_key(thread_id: &str) -> String {
    if thread_id.is_empty() { String::new() } else { format!("{AGUI_PREFIX}{thread_id}") }
}
