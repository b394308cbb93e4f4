//! The storage contract of the ledger, by role; implemented in memory here and
//! on SQLite and Postgres in `toolgate-store`.
//!
//! The engine calls [`ApprovalStore`] alone. The other roles sit beside the
//! rows they keep: conversations and sticky decisions
//! ([`super::ConversationStore`], in `decision.rs`), the inbox and
//! continuations ([`super::InboxStore`], [`super::ContinuationStore`], in
//! `inbox.rs`), the notification outbox and one-time links
//! ([`super::OutboxStore`], [`super::LinkStore`], in `outbox.rs`), and the
//! audit log with retention ([`AuditStore`], here). [`LedgerStore`] is all of
//! them, what a server opens.
//!
//! Every method is one transaction. A transition applies only when its
//! record is in its `from` state and its guard holds, and never as a read
//! followed by a write in application code: a conditional
//! `UPDATE … WHERE state = … RETURNING` (or a lock held across the check, in
//! memory), so two answers racing for one approval cannot both win, even
//! from two processes.

use std::future::Future;
use std::pin::Pin;

use super::{ApprovalRecord, AuditEvent, AuditQuery, Millis, Pruned, Transition, TransitionOutcome};
use crate::approval::lifecycle::TimerAdvance;

/// A boxed store future (the traits are used as trait objects, e.g. `dyn LedgerStore`).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or refused the operation.
    #[error("approval store unavailable: {0}")]
    Unavailable(String),
    /// A stored value could not be read back.
    #[error("approval store holds a corrupt value: {0}")]
    Corrupt(String),
    /// An approval id was issued twice.
    #[error("approval `{0}` is already recorded")]
    DuplicateApproval(String),
    /// A sticky decision id was saved twice.
    #[error("sticky decision `{0}` is already recorded")]
    DuplicateDecision(String),
}

/// The approvals the engine keeps: issue, read, apply, append, leases and
/// timers. This is all the engine calls; the other roles of a ledger
/// ([`LedgerStore`]) are for the server, the CLI and the gateway.
pub trait ApprovalStore: Send + Sync + std::fmt::Debug {
    /// Records newly issued approvals (each `pending`) and their events. An
    /// approval id already stored, or given twice, fails the whole call with
    /// [`StoreError::DuplicateApproval`] and records nothing.
    fn issue<'a>(&'a self, records: &'a [ApprovalRecord], events: &'a [AuditEvent]) -> StoreFuture<'a, ()>;

    /// The records with these approval ids, in the order asked; unknown ids are left out.
    fn approvals<'a>(&'a self, approval_ids: &'a [String]) -> StoreFuture<'a, Vec<ApprovalRecord>>;

    /// The records issued for these tool calls of one conversation, in no
    /// particular order; calls without a record are left out.
    fn approvals_for_calls<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_ids: &'a [String],
    ) -> StoreFuture<'a, Vec<ApprovalRecord>>;

    /// Applies the transitions in order, in one transaction: each one's own
    /// events are appended only when it moves; `events` are appended
    /// whatever happens. One outcome per transition.
    fn apply<'a>(
        &'a self,
        transitions: &'a [Transition],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, Vec<TransitionOutcome>>;

    /// Appends audit events.
    fn append<'a>(&'a self, events: &'a [AuditEvent]) -> StoreFuture<'a, ()>;

    /// Extends every `executing` lease held by `executor` to `until`.
    fn renew_leases<'a>(&'a self, executor: &'a str, until: Millis) -> StoreFuture<'a, u64>;

    /// Pending approvals whose timer is due at `now` (see
    /// [`crate::approval::lifecycle::next_due`], which the store keeps as
    /// each approval's due time), earliest first.
    fn due_timers(&self, now: Millis, limit: usize) -> StoreFuture<'_, Vec<ApprovalRecord>>;

    /// Applies a timer's move of a pending approval (see [`TimerAdvance`])
    /// if it is still pending with its due time at `advance.expected`;
    /// returns whether it moved.
    fn advance_timer<'a>(&'a self, advance: &'a TimerAdvance) -> StoreFuture<'a, bool>;
}

/// What operators ask of the store: the audit log as people read it,
/// retention (what is kept and for how long), and readiness.
pub trait AuditStore: Send + Sync + std::fmt::Debug {
    /// Audit events matching the query, oldest first.
    fn audit<'a>(&'a self, query: &'a AuditQuery) -> StoreFuture<'a, Vec<AuditEvent>>;

    /// Removes what finished before `before` (the
    /// retention setting, `toolgate serve --retain`): approval records in a
    /// final state (denied, expired, executed, failed, interrupted, withdrawn,
    /// and superseded once its successor is not open) last changed before it;
    /// audit events recorded before it, except those of an approval still open
    /// (pending, approved, executing); conversations last
    /// saved before it that hold no open approval; deliveries delivered or
    /// failed before it, and link uses whose link expired before it. Nothing open is ever
    /// removed, and sticky decisions are not touched. A store may remove in
    /// several transactions (the SQL stores do, a few thousand rows each, so
    /// writers never wait for a whole prune); what is removed stays removed.
    fn prune(&self, before: Millis) -> StoreFuture<'_, Pruned>;

    /// `Ok` when the store answers and its schema is the one this build
    /// writes (every migration applied, none newer); else why not
    /// ([`StoreError::Unavailable`]). `GET /readyz` asks it.
    fn ready(&self) -> StoreFuture<'_, ()>;
}

/// Everything a ledger keeps, every role at once: what a server, the CLI or the
/// gateway opens (`toolgate-store`'s `SqlStore`, the [`super::MemoryStore`]).
/// Implemented for every type that implements each role; a `dyn LedgerStore`
/// gives a `dyn` of any one role where a caller needs only that.
pub trait LedgerStore:
    ApprovalStore
    + AuditStore
    + super::HistoryStore
    + super::ConversationStore
    + super::InboxStore
    + super::ContinuationStore
    + super::OutboxStore
    + super::LinkStore
{
}

impl<T> LedgerStore for T where
    T: ApprovalStore
        + AuditStore
        + super::HistoryStore
        + super::ConversationStore
        + super::InboxStore
        + super::ContinuationStore
        + super::OutboxStore
        + super::LinkStore
{
}
