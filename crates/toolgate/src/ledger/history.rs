//! What history terms in rules count: the calls the ledger recorded as run
//! (and, when asked, those approved and not yet run), read for a window and
//! a scope.
//!
//! A [`HistoryEntry`] is one call: its time, tool, input, who asked and in
//! which conversation. The calls that ran are the `executed` audit events
//! (every call that runs is one, see [`crate::approval::lifecycle::direct`]);
//! with [`HistoryQuery::include_pending`], also the `approved` events whose
//! approval has no outcome event yet. Events written before they named their
//! tool (`toolName` in the data) are not calls here.
//!
//! [`HistoryStore`] is the store's contract for reading them. Every
//! [`AuditStore`] is one: it reads the audit log from the window's start and
//! keeps the entries in scope ([`entries_in`]), oldest first.

use std::collections::HashSet;

use serde_json::Value;

use super::{AuditEvent, AuditKind, AuditQuery, AuditStore, AuditView, Millis, StoreFuture, conversation_key};

/// Whose calls a history term counts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HistoryScope {
    /// The calls this principal asked for (`None`: calls without one).
    Principal(Option<String>),
    /// The calls of one conversation, by its key ([`conversation_key`]).
    Conversation(String),
    /// Everyone's calls.
    Everyone,
    /// The calls of any of these principals (a group's members).
    Principals(Vec<String>),
}

/// Which calls to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryQuery {
    /// Calls at or after this time.
    pub since: Millis,
    /// Whose calls.
    pub scope: HistoryScope,
    /// Also approved calls that have not run yet.
    pub include_pending: bool,
}

/// One call in the history.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    /// When it ran (or, pending, when it was approved).
    pub at: Millis,
    /// The tool.
    pub tool_name: String,
    /// The input it ran with.
    pub input: Value,
    /// Who asked for it: the conversation's owner, else the event's principal.
    pub requester: Option<String>,
    /// The conversation's key ([`conversation_key`] of its owner and id).
    pub conversation_key: String,
    /// Approved, not yet run.
    pub pending: bool,
}

impl HistoryScope {
    /// Whether the entry is in this scope.
    pub fn covers(&self, entry: &HistoryEntry) -> bool {
        match self {
            Self::Principal(principal) => entry.requester == *principal,
            Self::Conversation(key) => entry.conversation_key == *key,
            Self::Everyone => true,
            Self::Principals(members) => {
                entry.requester.as_ref().is_some_and(|requester| members.iter().any(|member| member == requester))
            }
        }
    }
}

/// Reads the calls of a window and scope.
pub trait HistoryStore: Send + Sync {
    /// The calls the query asks for, oldest first.
    fn history<'a>(&'a self, query: &'a HistoryQuery) -> StoreFuture<'a, Vec<HistoryEntry>>;
}

impl<S: AuditStore + ?Sized> HistoryStore for S {
    fn history<'a>(&'a self, query: &'a HistoryQuery) -> StoreFuture<'a, Vec<HistoryEntry>> {
        Box::pin(async move {
            let audit = AuditQuery { since: Some(query.since), view: AuditView::All, ..AuditQuery::default() };
            let events = self.audit(&audit).await?;
            Ok(entries_in(&events, query))
        })
    }
}

/// The calls among `events` (oldest first) that the query asks for.
pub fn entries_in(events: &[AuditEvent], query: &HistoryQuery) -> Vec<HistoryEntry> {
    let finished: HashSet<&str> = if query.include_pending {
        events
            .iter()
            .filter(|event| {
                matches!(event.kind, AuditKind::Executed | AuditKind::Failed | AuditKind::Interrupted)
                    && !event.approval_id.is_empty()
            })
            .map(|event| event.approval_id.as_str())
            .collect()
    } else {
        HashSet::new()
    };
    events
        .iter()
        .filter(|event| event.at >= query.since)
        .filter_map(|event| {
            let pending = match event.kind {
                AuditKind::Executed => false,
                AuditKind::Approved if query.include_pending && !finished.contains(event.approval_id.as_str()) => true,
                _ => return None,
            };
            entry(event, pending)
        })
        .filter(|entry| query.scope.covers(entry))
        .collect()
}

/// The call an event records, when it names its tool.
fn entry(event: &AuditEvent, pending: bool) -> Option<HistoryEntry> {
    let tool_name = event.data.get("toolName")?.as_str()?.to_owned();
    Some(HistoryEntry {
        at: event.at,
        tool_name,
        input: event.data.get("input").cloned().unwrap_or(Value::Null),
        requester: event.owner.clone().or_else(|| event.principal.clone()),
        conversation_key: conversation_key(event.owner.as_deref(), &event.conversation_id),
        pending,
    })
}
