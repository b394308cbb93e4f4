//! An AG-UI thread as the store holds it: the messages the last run left,
//! its open interrupts, and, after the server continued it without its
//! client, where the client's view of it ends.
//!
//! A client that was away while the server continued its thread comes back
//! with the messages it had when the run paused (its view ends at the
//! `continued` mark). [`StoredThread::catch_up`] then puts the thread as the
//! server holds it under the client's new messages: the run's
//! `MESSAGES_SNAPSHOT` carries what the continuation added, and a resume of
//! the interrupts the continuation already decided has nothing left to do.
//! Only exactly that view is caught up (the client's messages are the
//! recorded ones up to the mark, by id, followed by user messages or its
//! placeholders for the decided calls); any other history is checked as
//! always.

use std::collections::HashSet;

use axum::http::StatusCode;
use serde_json::{Value, json};
use toolgate::Toolkit;
use toolgate::ledger::{LedgerStore, Millis, StoredConversation};
use toolgate_agui::resume::pending_approvals;
use toolgate_agui::{
    HistoryMismatch, Message, PENDING_FIELD, PendingApproval, RunAgentInput, STATE_KEY, check_history,
};

use crate::error::ApiError;

/// The field of a stored thread holding its messages (toolgate's interrupts are under [`STATE_KEY`]).
const MESSAGES_FIELD: &str = "messages";
/// The field holding how many messages the thread had when the server first
/// continued it without its client (absent once the client caught up).
const CONTINUED_FIELD: &str = "continuedAt";

/// A thread as the store holds it.
pub(crate) struct StoredThread {
    /// The messages the last run left (`None`: a new thread, or one stored
    /// before threads kept their messages).
    pub(crate) messages: Option<Vec<Message>>,
    /// toolgate's part of the last state snapshot.
    pub(crate) interrupts: Option<Value>,
    /// Where the client's view ends, after a continuation on the server.
    pub(crate) continued_at: Option<usize>,
}

/// What catching a client up did to its run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CatchUp {
    /// The client's view is the thread's (or checked as always).
    Current,
    /// The client was behind: the run goes on from the stored thread with
    /// its new messages; its snapshot tells the client what it missed.
    Rebased,
    /// The client was behind and brought nothing new: nothing to run.
    NothingToRun,
}

impl StoredThread {
    /// The thread stored under `key` (an empty one when there is none).
    pub(crate) async fn load(store: &dyn LedgerStore, key: &str) -> Result<Self, ApiError> {
        match store.conversation(key).await? {
            Some(stored) => Self::read(&stored),
            None => Ok(Self { messages: Some(Vec::new()), interrupts: None, continued_at: None }),
        }
    }

    /// The thread a stored conversation holds.
    pub(crate) fn read(stored: &StoredConversation) -> Result<Self, ApiError> {
        let messages = match stored.messages.get(MESSAGES_FIELD) {
            Some(messages) => Some(serde_json::from_value(messages.clone()).map_err(|error| {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "corrupt_conversation", format!("thread: {error}"))
            })?),
            None => None,
        };
        let continued_at =
            stored.messages.get(CONTINUED_FIELD).and_then(Value::as_u64).and_then(|at| usize::try_from(at).ok());
        Ok(Self { messages, interrupts: stored.messages.get(STATE_KEY).cloned(), continued_at })
    }

    /// Saves a run's outcome over the latest version (another run may have
    /// saved meanwhile: this run's thread is the newest); `owner` is recorded
    /// when the thread is created.
    pub(crate) async fn save(
        store: &dyn LedgerStore,
        (key, owner): (&str, Option<&str>),
        messages: &[Message],
        interrupts: Option<Value>,
        continued_at: Option<usize>,
        now: Millis,
    ) {
        let mut record = json!({ MESSAGES_FIELD: messages, STATE_KEY: interrupts });
        if let Some(at) = continued_at {
            record[CONTINUED_FIELD] = json!(at);
        }
        let version = store.conversation(key).await.ok().flatten().map(|stored| stored.version);
        if let Err(error) = store.save_conversation(key, owner, &record, version, now).await {
            tracing::error!(thread = %key, %error, "cannot store the thread");
        }
    }

    /// The open interrupts.
    pub(crate) fn pending(&self) -> Vec<PendingApproval> {
        let state = self.interrupts.as_ref().map(|interrupts| json!({ STATE_KEY: interrupts }));
        pending_approvals(state.as_ref()).unwrap_or_default()
    }

    /// Checks the run's messages against the recorded ones ([`check_history`]).
    /// A thread stored before threads kept their messages has nothing to check against.
    pub(crate) fn check(&self, input: &RunAgentInput, toolkit: &Toolkit) -> Result<(), HistoryMismatch> {
        let Some(recorded) = &self.messages else { return Ok(()) };
        check_history(recorded, input, &self.pending(), |name| toolkit.get(name).is_some())
    }

    /// Gives a resume without toolgate's state the thread's stored interrupts.
    pub(crate) fn restore_interrupts(&self, input: &mut RunAgentInput) {
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

    /// Catches up a client whose view ends where the server continued the
    /// thread without it (see the module docs).
    pub(crate) fn catch_up(&self, input: &mut RunAgentInput) -> CatchUp {
        let (Some(recorded), Some(at)) = (&self.messages, self.continued_at) else { return CatchUp::Current };
        if at == 0 || at > recorded.len() || input.messages.len() < at {
            return CatchUp::Current;
        }
        let same_view = recorded[..at].iter().zip(&input.messages[..at]).all(|(kept, sent)| kept.id() == sent.id());
        if !same_view {
            return CatchUp::Current;
        }
        // The calls the continuation decided: a client may hold placeholders for them.
        let decided: HashSet<&str> = recorded[at..]
            .iter()
            .filter_map(|message| match message {
                Message::Tool(tool) => Some(tool.tool_call_id.as_str()),
                _ => None,
            })
            .collect();
        let mut new = Vec::new();
        for message in &input.messages[at..] {
            match message {
                Message::User(_) => new.push(message.clone()),
                Message::Tool(tool) if decided.contains(tool.tool_call_id.as_str()) => {}
                _ => return CatchUp::Current,
            }
        }
        input.messages = recorded.iter().cloned().chain(new.iter().cloned()).collect();
        // Every interrupt the client could answer was decided by the continuation.
        input.resume = None;
        if let Some(Value::Object(state)) = input.state.as_mut() {
            state.remove(STATE_KEY);
        }
        if new.is_empty() { CatchUp::NothingToRun } else { CatchUp::Rebased }
    }

    /// The state a caught-up client gets: its own, with toolgate's part as stored.
    pub(crate) fn state_for(&self, input: &RunAgentInput) -> Value {
        let mut state = input.state.clone().unwrap_or_else(|| json!({}));
        if let Value::Object(fields) = &mut state {
            let interrupts = self.interrupts.clone().unwrap_or_else(|| json!({ PENDING_FIELD: [] }));
            fields.insert(STATE_KEY.to_owned(), interrupts);
        }
        state
    }
}
