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
//! A call that a rule lets run after judging its history is also an
//! `allowed` event, written just before it runs together with the check that
//! the history it was judged on still stands ([`HistoryStore::append_if`]);
//! it counts from then on, and its later `executed` event does not count
//! again. So does a held call (the call-gating API's) that a rule approved
//! on its history: its `allowed` event comes just before its record is
//! issued approved, and its approval's `executed` event does not count again.
//!
//! A call that a rule asks about after judging its history (its verdict
//! rested on the history: a lower limit not yet reached, a higher one not
//! yet crossed) is issued the same way: its record and `issued` event are
//! written only if that history still stands ([`HistoryStore::issue_if`]).
//!
//! [`HistoryStore`] is the store's contract: the in-memory store reads the
//! audit log from the window's start ([`history_from_audit`]); the SQL stores
//! read the calls through an index.

use std::collections::{HashMap, HashSet};

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

/// What one history read found: the calls, and how far into the log it read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryRead {
    /// The calls, oldest first ([`entries_in`] of the events read).
    pub entries: Vec<HistoryEntry>,
    /// The highest `seq` among the events read (0 when it read none). A store
    /// appends events in `seq` order and makes them visible in that order, so
    /// an event of the window and scope recorded after the read has a higher one.
    pub through: i64,
}

impl HistoryRead {
    /// The guard of this read of `query`: nothing added to what it found.
    pub fn guard(&self, query: HistoryQuery) -> HistoryGuard {
        HistoryGuard { query, count: self.entries.len(), through: Some(self.through) }
    }
}

/// A condition on the history: the calls `query` reads are exactly `count`
/// (what a gate read when it judged a call: nothing was added since).
///
/// With `through` (the read's [`HistoryRead::through`]) a store may first
/// check the cheap sufficient condition, that no event of the query's
/// window and scope came after it, and count again only when one did. An
/// event removed from the window meanwhile (a prune that reaches into it)
/// is not seen by that check: the call stays judged on the history as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryGuard {
    /// The calls read.
    pub query: HistoryQuery,
    /// How many there were.
    pub count: usize,
    /// The highest `seq` the read saw, when known ([`HistoryRead::through`]).
    pub through: Option<i64>,
}

/// Reads the calls of a window and scope, and appends a call's own entry
/// only while the history it was judged on still stands: the read and the
/// write are one transaction, so parallel calls cannot all slip under a limit.
pub trait HistoryStore: Send + Sync {
    /// The calls the query asks for, oldest first ([`entries_in`] of the
    /// events in its window), and the last event read ([`HistoryRead::through`]).
    fn history<'a>(&'a self, query: &'a HistoryQuery) -> StoreFuture<'a, HistoryRead>;

    /// Appends `events` if every guard still holds (the calls its query reads
    /// number its `count`), atomically with that check: on SQL stores in one
    /// transaction that holds the audit log's write lock. Returns whether it appended.
    fn append_if<'a>(&'a self, guards: &'a [HistoryGuard], events: &'a [AuditEvent]) -> StoreFuture<'a, bool>;

    /// Issues `records` with `events` as [`super::ApprovalStore::issue`] does
    /// if every guard still holds, atomically with that check (as
    /// [`Self::append_if`]): a call asked about on the history it was judged
    /// on. Returns whether it issued; a taken id is
    /// [`super::StoreError::DuplicateApproval`], nothing written.
    fn issue_if<'a>(
        &'a self,
        guards: &'a [HistoryGuard],
        records: &'a [super::ApprovalRecord],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, bool>;

    /// Applies `transitions` as [`super::ApprovalStore::apply`] does if every
    /// guard still holds, atomically with that check (as [`Self::append_if`]):
    /// a call claimed on the history it was judged on again. Returns the
    /// outcomes, or `None` (nothing written) when a guard no longer holds.
    fn apply_if<'a>(
        &'a self,
        guards: &'a [HistoryGuard],
        transitions: &'a [super::Transition],
    ) -> StoreFuture<'a, Option<Vec<super::TransitionOutcome>>>;
}

/// The calls of `query` among every event at or after its start, read
/// through [`AuditStore::audit`] (how the in-memory store reads them).
pub async fn history_from_audit<S: AuditStore + ?Sized>(
    store: &S,
    query: &HistoryQuery,
) -> Result<HistoryRead, super::StoreError> {
    let audit = AuditQuery { since: Some(query.since), view: AuditView::All, ..AuditQuery::default() };
    Ok(read_of(&store.audit(&audit).await?, query))
}

/// The read of `query` over `events` (those of its window, oldest first):
/// its calls, and the highest `seq` among `events`.
pub fn read_of(events: &[AuditEvent], query: &HistoryQuery) -> HistoryRead {
    let through = events.iter().map(|event| event.seq).max().unwrap_or(0);
    HistoryRead { entries: entries_in(events, query), through }
}

/// Whether every guard holds over `events` (each guard's window of them).
pub fn guards_hold(guards: &[HistoryGuard], events: &[AuditEvent]) -> bool {
    guards.iter().all(|guard| entries_in(events, &guard.query).len() == guard.count)
}

/// The field (`true`) of the `approved` event of a held call that a rule
/// decided as it was issued (see `approval::lifecycle::held::BY_RULE`).
pub const BY_RULE: &str = "byRule";

/// The calls among `events` (oldest first) that the query asks for: each
/// `allowed` event; each `executed` event that no `allowed` event before it
/// announced (a call decided without an approval: in its conversation, same
/// call id; a held call a rule approved as it was issued ([`BY_RULE`]): its
/// approval, which takes over the announcement of its call id); and with
/// `include_pending` each `approved` event whose approval has no outcome
/// event yet and no `allowed` event counted already.
///
/// An `allowed` event that names an approval is the claim of a call a
/// person approved, judged again on the history as it started
/// ([`crate::approval::lifecycle::counted`]): it counts the call from then
/// on, and neither that approval's `approved` event (pending) nor its
/// outcome counts again.
pub fn entries_in(events: &[AuditEvent], query: &HistoryQuery) -> Vec<HistoryEntry> {
    let claimed: HashSet<&str> = events
        .iter()
        .filter(|event| event.kind == AuditKind::Allowed && !event.approval_id.is_empty())
        .map(|event| event.approval_id.as_str())
        .collect();
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
    let mut announced: HashMap<(String, &str), usize> = HashMap::new();
    // Approvals whose call an `allowed` event counted already.
    let mut counted: HashSet<&str> = HashSet::new();
    let mut entries = Vec::new();
    for event in events.iter().filter(|event| event.at >= query.since) {
        let direct = event.approval_id.is_empty();
        let pending = match event.kind {
            AuditKind::Allowed if !direct => false,
            _ if !direct && claimed.contains(event.approval_id.as_str()) => continue,
            AuditKind::Allowed => {
                *announced.entry((call_key(event), &event.tool_call_id)).or_default() += 1;
                false
            }
            AuditKind::Approved if !direct && event.data.get(BY_RULE) == Some(&Value::Bool(true)) => {
                match announced.get_mut(&(call_key(event), event.tool_call_id.as_str())) {
                    Some(open) if *open > 0 => {
                        *open -= 1;
                        counted.insert(&event.approval_id);
                        continue;
                    }
                    _ if query.include_pending && !finished.contains(event.approval_id.as_str()) => true,
                    _ => continue,
                }
            }
            AuditKind::Executed if !direct && counted.contains(event.approval_id.as_str()) => continue,
            AuditKind::Executed if direct => {
                let open = announced.get_mut(&(call_key(event), event.tool_call_id.as_str()));
                match open {
                    Some(open) if *open > 0 => {
                        *open -= 1;
                        continue;
                    }
                    _ => false,
                }
            }
            AuditKind::Failed if direct => {
                if let Some(open) = announced.get_mut(&(call_key(event), event.tool_call_id.as_str())) {
                    *open = open.saturating_sub(1);
                }
                continue;
            }
            AuditKind::Executed => false,
            AuditKind::Approved if query.include_pending && !finished.contains(event.approval_id.as_str()) => true,
            _ => continue,
        };
        if let Some(entry) = entry(event, pending)
            && query.scope.covers(&entry)
        {
            entries.push(entry);
        }
    }
    entries
}

fn call_key(event: &AuditEvent) -> String {
    conversation_key(event.owner.as_deref(), &event.conversation_id)
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(kind: AuditKind, approval_id: &str, call: &str, data: Value) -> AuditEvent {
        let mut data = data;
        data["toolName"] = json!("send");
        data["input"] = json!({"n": call});
        AuditEvent {
            seq: 0,
            at: 10,
            kind,
            approval_id: approval_id.to_owned(),
            tool_call_id: call.to_owned(),
            conversation_id: "api:default".to_owned(),
            owner: Some("alice".to_owned()),
            principal: Some("alice".to_owned()),
            data,
        }
    }

    fn counted(events: &[AuditEvent], include_pending: bool) -> usize {
        let query = HistoryQuery { since: 0, scope: HistoryScope::Everyone, include_pending };
        entries_in(events, &query).len()
    }

    #[test]
    fn a_held_call_a_rule_let_through_on_its_history_counts_once() {
        let by_rule = json!({BY_RULE: true});
        let allowed = event(AuditKind::Allowed, "", "held_a", json!({}));
        let approved = event(AuditKind::Approved, "held_a_1", "held_a", by_rule.clone());
        let executed = event(AuditKind::Executed, "held_a_1", "held_a", json!({"result": 1}));
        for include_pending in [false, true] {
            assert_eq!(counted(&[allowed.clone(), approved.clone()], include_pending), 1, "{include_pending}");
            let all = [allowed.clone(), approved.clone(), executed.clone()];
            assert_eq!(counted(&all, include_pending), 1, "{include_pending}");
        }
        // A later call of the same id, approved by a person, counts once it ran.
        let asked = event(AuditKind::Approved, "held_a_2", "held_a", json!({}));
        let ran = event(AuditKind::Executed, "held_a_2", "held_a", json!({"result": 2}));
        let all = [allowed, approved, executed, asked, ran];
        assert_eq!(counted(&all, false), 2);
        assert_eq!(counted(&all[..4], true), 2, "approved, not run: pending");
        assert_eq!(counted(&all[..4], false), 1);
    }

    #[test]
    fn a_claimed_call_counts_once_from_its_claim() {
        let approved = event(AuditKind::Approved, "ap_1", "c1", json!({}));
        let claimed = event(AuditKind::Allowed, "ap_1", "c1", json!({}));
        let executed = event(AuditKind::Executed, "ap_1", "c1", json!({"result": 1}));
        for include_pending in [false, true] {
            assert_eq!(counted(std::slice::from_ref(&approved), include_pending), usize::from(include_pending));
            assert_eq!(counted(&[approved.clone(), claimed.clone()], include_pending), 1, "{include_pending}");
            let all = [approved.clone(), claimed.clone(), executed.clone()];
            assert_eq!(counted(&all, include_pending), 1, "{include_pending}");
        }
        // A direct call of the same id in the same conversation is its own call.
        let direct = event(AuditKind::Executed, "", "c1", json!({"result": 2}));
        assert_eq!(counted(&[approved, claimed, executed, direct], false), 2);
    }

    #[test]
    fn a_rule_approved_call_judged_on_no_history_counts_when_it_runs() {
        let approved = event(AuditKind::Approved, "held_b_1", "held_b", json!({BY_RULE: true}));
        let executed = event(AuditKind::Executed, "held_b_1", "held_b", json!({"result": 1}));
        assert_eq!(counted(std::slice::from_ref(&approved), false), 0);
        assert_eq!(counted(std::slice::from_ref(&approved), true), 1);
        assert_eq!(counted(&[approved.clone(), executed.clone()], false), 1);
        assert_eq!(counted(&[approved, executed], true), 1);
    }
}
