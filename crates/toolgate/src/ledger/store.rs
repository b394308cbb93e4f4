//! The storage contract the ledger needs; implemented in memory here and on
//! SQLite and Postgres in `toolgate-store`.
//!
//! Every method is one transaction. A transition applies only when its
//! record is in its `from` state and its guard holds, and never as a read
//! followed by a write in application code: a conditional
//! `UPDATE … WHERE state = … RETURNING` (or a lock held across the check, in
//! memory), so two answers racing for one approval cannot both win, even
//! from two processes.

use std::future::Future;
use std::pin::Pin;

use super::{
    ApprovalQuery, ApprovalRecord, AttemptEnd, AuditEvent, AuditQuery, ContinuationClaim, DecisionQuery, Delivery,
    Millis, Outbound, OutboxQuery, Pruned, StoredConversation, StoredDecision, Transition, TransitionOutcome,
};
use crate::approval::lifecycle::TimerAdvance;

/// What a request reads before it runs: its stored conversation and the
/// sticky decisions that apply to it (see
/// [`ApprovalStore::conversation_with_decisions`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationRead {
    /// The stored conversation, if there is one.
    pub conversation: Option<StoredConversation>,
    /// The decisions, or why they could not be read back (a corrupt row):
    /// kept apart, so a reader can fail closed on them alone.
    pub decisions: Result<Vec<StoredDecision>, StoreError>,
}

/// A boxed store future (the trait is used as `dyn ApprovalStore`).
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

/// Durable approval storage (see the module docs for the rules).
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

    /// Audit events matching the query, oldest first.
    fn audit<'a>(&'a self, query: &'a AuditQuery) -> StoreFuture<'a, Vec<AuditEvent>>;

    /// A stored conversation.
    fn conversation<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Option<StoredConversation>>;

    /// Saves a conversation (by its key) if its stored version is still
    /// `expected_version` (`None`: it must not exist yet). `owner` is
    /// recorded when the conversation is created and never changed. Returns
    /// the new version, or `None` when another writer saved first.
    fn save_conversation<'a>(
        &'a self,
        conversation_id: &'a str,
        owner: Option<&'a str>,
        messages: &'a serde_json::Value,
        expected_version: Option<i64>,
        at: Millis,
    ) -> StoreFuture<'a, Option<i64>>;

    /// Saves a sticky decision. An id already stored fails with
    /// [`StoreError::DuplicateDecision`].
    fn save_decision<'a>(&'a self, decision: &'a StoredDecision) -> StoreFuture<'a, ()>;

    /// The sticky decisions the query selects (see [`DecisionQuery`]), oldest first.
    fn decisions<'a>(&'a self, query: &'a DecisionQuery) -> StoreFuture<'a, Vec<StoredDecision>>;

    /// Removes a sticky decision; returns it, or `None` when no decision has this id.
    fn revoke_decision<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredDecision>>;

    /// Approvals as an inbox lists them (see [`ApprovalQuery`]), newest first.
    fn list_approvals<'a>(&'a self, query: &'a ApprovalQuery) -> StoreFuture<'a, Vec<ApprovalRecord>>;

    /// Claims a conversation marked due to continue, until `until`, for
    /// `executor`, if nobody holds it at `now` (an unexpired claim of
    /// another executor blocks it). With `create`, marks it due first (a
    /// request that continues the conversation itself). `None`: not due, or
    /// held by another.
    fn claim_continuation<'a>(
        &'a self,
        conversation_id: &'a str,
        executor: &'a str,
        until: Millis,
        now: Millis,
        create: bool,
    ) -> StoreFuture<'a, Option<ContinuationClaim>>;

    /// Ends a claim: clears the mark when no decision bumped it since the
    /// claim (returns `true`), else releases it so it is claimed again.
    fn finish_continuation<'a>(&'a self, claim: &'a ContinuationClaim, executor: &'a str) -> StoreFuture<'a, bool>;

    /// Conversations due to continue that nobody holds at `now`, oldest mark first.
    fn due_continuations(&self, now: Millis, limit: usize) -> StoreFuture<'_, Vec<String>>;

    /// Pending approvals whose timer is due at `now` (see
    /// [`crate::approval::lifecycle::next_due`], which the store keeps as
    /// each approval's due time), earliest first.
    fn due_timers(&self, now: Millis, limit: usize) -> StoreFuture<'_, Vec<ApprovalRecord>>;

    /// Applies a timer's move of a pending approval (see [`TimerAdvance`])
    /// if it is still pending with its due time at `advance.expected`;
    /// returns whether it moved.
    fn advance_timer<'a>(&'a self, advance: &'a TimerAdvance) -> StoreFuture<'a, bool>;

    /// The sequence number of the last audit event notifications were
    /// enqueued for (0 before any).
    fn notify_cursor(&self) -> StoreFuture<'_, i64>;

    /// Moves the notification cursor from `from` to `to` and enqueues
    /// `deliveries` (each pending, due now), in one transaction; `false`
    /// (and nothing enqueued) when the cursor is no longer at `from`.
    fn enqueue<'a>(&'a self, deliveries: &'a [Outbound], from: i64, to: i64) -> StoreFuture<'a, bool>;

    /// Claims up to `limit` pending deliveries due at `now` that nobody holds
    /// (or whose holder's claim lapsed), for `executor` until `until`,
    /// earliest first.
    fn claim_deliveries<'a>(
        &'a self,
        executor: &'a str,
        now: Millis,
        until: Millis,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Delivery>>;

    /// Ends a claimed attempt (see [`AttemptEnd`]); `false` when the
    /// executor no longer holds the claim (nothing changes).
    fn finish_attempt<'a>(&'a self, end: &'a AttemptEnd) -> StoreFuture<'a, bool>;

    /// Deliveries the query selects, newest first.
    fn deliveries<'a>(&'a self, query: &'a OutboxQuery) -> StoreFuture<'a, Vec<Delivery>>;

    /// Records the use of a one-time link; `false` when it was used before.
    /// The record is kept until `expires_at` (then pruned).
    fn consume_link<'a>(&'a self, link_id: &'a str, at: Millis, expires_at: Millis) -> StoreFuture<'a, bool>;

    /// Forgets the use of a link whose decision was then refused (it may be used again).
    fn release_link<'a>(&'a self, link_id: &'a str) -> StoreFuture<'a, ()>;

    /// Whether a link's use is on record ([`Self::consume_link`]), until it is pruned.
    /// A sign-in session revoked at logout is recorded the same way, so every
    /// replica refuses it.
    fn link_used<'a>(&'a self, link_id: &'a str) -> StoreFuture<'a, bool>;

    /// Removes what finished before `before` (the
    /// retention setting, `toolgate serve --retain`): approval records in a
    /// final state (denied, expired, executed, failed, interrupted, withdrawn) last
    /// changed before it; audit events recorded before it, except those of an
    /// approval still open (pending, approved, executing); conversations last
    /// saved before it that hold no open approval; deliveries delivered or
    /// failed before it, and link uses whose link expired before it. Nothing open is ever
    /// removed, and sticky decisions are not touched. A store may remove in
    /// several transactions (the SQL stores do, a few thousand rows each, so
    /// writers never wait for a whole prune); what is removed stays removed.
    fn prune(&self, before: Millis) -> StoreFuture<'_, Pruned>;

    /// [`Self::conversation`] and [`Self::decisions`] together, as a request
    /// needs them before it runs: one round trip where the backend can. An
    /// unreachable store fails the call; a decision that cannot be read back
    /// fails only [`ConversationRead::decisions`]. This default reads one
    /// after the other.
    fn conversation_with_decisions<'a>(
        &'a self,
        conversation_id: &'a str,
        query: &'a DecisionQuery,
    ) -> StoreFuture<'a, ConversationRead> {
        Box::pin(async move {
            let conversation = self.conversation(conversation_id).await?;
            let decisions = match self.decisions(query).await {
                Err(StoreError::Corrupt(detail)) => Err(StoreError::Corrupt(detail)),
                other => Ok(other?),
            };
            Ok(ConversationRead { conversation, decisions })
        })
    }
}
