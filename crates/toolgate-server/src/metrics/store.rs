//! The ledger store as the server uses it, metered: every operation timed
//! (`toolgate_store_operation_seconds{op}`), and every transition that moved
//! read for what it means: a decision (`toolgate_approvals_decided_total`,
//! `toolgate_approval_decision_seconds`) or the end of a gated call
//! (`toolgate_tool_calls_total`). Every path that decides or runs a call
//! writes through the store, so nothing is counted twice and nothing is
//! missed; a transition that did not move (a lost race) counts nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use toolgate::approval::lifecycle::TimerAdvance;
use toolgate::ledger::{
    ApprovalQuery, ApprovalRecord, ApprovalState, ApprovalStore, AttemptEnd, AuditEvent, AuditQuery, AuditStore,
    ContinuationClaim, ContinuationStore, ConversationRead, ConversationStore, DecisionQuery, Delivery, HistoryGuard,
    HistoryQuery, HistoryRead, HistoryStore, InboxStore, LedgerStore, LinkStore, Millis, Outbound, OutboxQuery,
    OutboxStore, Pruned, StoreFuture, StoredConversation, StoredDecision, Transition, TransitionOutcome,
};

use super::Metrics;

/// A [`LedgerStore`] that meters `inner` (see the module docs).
#[derive(Debug)]
pub(crate) struct MeteredStore {
    inner: Arc<dyn LedgerStore>,
    metrics: Arc<Metrics>,
}

impl MeteredStore {
    /// Meters `inner` into `metrics`.
    pub(crate) fn new(inner: Arc<dyn LedgerStore>, metrics: Arc<Metrics>) -> Self {
        Self { inner, metrics }
    }

    /// Counts what the transitions that moved mean.
    fn moved(&self, transitions: &[Transition], outcomes: &[TransitionOutcome]) {
        for (transition, outcome) in transitions.iter().zip(outcomes) {
            let TransitionOutcome::Moved(record) = outcome else { continue };
            if transition.from == ApprovalState::Pending
                && let Some(outcome) = decided(transition.to)
            {
                let waited = Duration::from_millis(u64::try_from(transition.at - record.issued_at).unwrap_or(0));
                self.metrics.decided(outcome, waited);
                crate::telemetry::approval::decided(record, outcome);
            }
            if let Some(outcome) = call_ended(transition.from, transition.to) {
                self.metrics.tool_call(&record.tool_name, outcome);
            }
        }
    }
}

/// The decision a move out of `pending` is, if it is one (`executing`: a
/// chat's answer approves and claims at once).
fn decided(to: ApprovalState) -> Option<&'static str> {
    match to {
        ApprovalState::Approved | ApprovalState::Executing => Some("approved"),
        ApprovalState::Denied => Some("denied"),
        ApprovalState::Expired => Some("expired"),
        ApprovalState::Withdrawn => Some("withdrawn"),
        _ => None,
    }
}

/// How a gated call ended with this move, if it did.
fn call_ended(from: ApprovalState, to: ApprovalState) -> Option<&'static str> {
    match (from, to) {
        (ApprovalState::Executing, ApprovalState::Executed) => Some("executed"),
        (ApprovalState::Executing, ApprovalState::Failed) => Some("failed"),
        (ApprovalState::Executing, ApprovalState::Interrupted) => Some("interrupted"),
        (ApprovalState::Pending, ApprovalState::Denied | ApprovalState::Withdrawn | ApprovalState::Expired) => {
            Some("denied")
        }
        _ => None,
    }
}

/// Runs a store call, timing it as `op`.
macro_rules! timed {
    ($self:ident, $op:literal, $call:expr) => {{
        let started = Instant::now();
        let answer = $call.await;
        $self.metrics.store_operation($op, started.elapsed());
        answer
    }};
}

impl ApprovalStore for MeteredStore {
    fn issue<'a>(&'a self, records: &'a [ApprovalRecord], events: &'a [AuditEvent]) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let events = crate::telemetry::approval::issued(records, events);
            timed!(self, "issue", self.inner.issue(records, &events))
        })
    }

    fn approvals<'a>(&'a self, approval_ids: &'a [String]) -> StoreFuture<'a, Vec<ApprovalRecord>> {
        Box::pin(async move { timed!(self, "approvals", self.inner.approvals(approval_ids)) })
    }

    fn approvals_for_calls<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_ids: &'a [String],
    ) -> StoreFuture<'a, Vec<ApprovalRecord>> {
        Box::pin(async move {
            timed!(self, "approvals_for_calls", self.inner.approvals_for_calls(conversation_id, tool_call_ids))
        })
    }

    fn apply<'a>(
        &'a self,
        transitions: &'a [Transition],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, Vec<TransitionOutcome>> {
        Box::pin(async move {
            let outcomes = timed!(self, "apply", self.inner.apply(transitions, events))?;
            self.moved(transitions, &outcomes);
            Ok(outcomes)
        })
    }

    fn append<'a>(&'a self, events: &'a [AuditEvent]) -> StoreFuture<'a, ()> {
        Box::pin(async move { timed!(self, "append", self.inner.append(events)) })
    }

    fn renew_leases<'a>(&'a self, executor: &'a str, until: Millis) -> StoreFuture<'a, u64> {
        Box::pin(async move { timed!(self, "renew_leases", self.inner.renew_leases(executor, until)) })
    }

    fn due_timers(&self, now: Millis, limit: usize) -> StoreFuture<'_, Vec<ApprovalRecord>> {
        Box::pin(async move { timed!(self, "due_timers", self.inner.due_timers(now, limit)) })
    }

    fn advance_timer<'a>(&'a self, advance: &'a TimerAdvance) -> StoreFuture<'a, bool> {
        Box::pin(async move { timed!(self, "advance_timer", self.inner.advance_timer(advance)) })
    }
}

impl AuditStore for MeteredStore {
    fn audit<'a>(&'a self, query: &'a AuditQuery) -> StoreFuture<'a, Vec<AuditEvent>> {
        Box::pin(async move { timed!(self, "audit", self.inner.audit(query)) })
    }

    fn prune(&self, before: Millis) -> StoreFuture<'_, Pruned> {
        Box::pin(async move { timed!(self, "prune", self.inner.prune(before)) })
    }

    fn ready(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move { timed!(self, "ready", self.inner.ready()) })
    }
}

impl HistoryStore for MeteredStore {
    fn history<'a>(&'a self, query: &'a HistoryQuery) -> StoreFuture<'a, HistoryRead> {
        Box::pin(async move { timed!(self, "history", self.inner.history(query)) })
    }

    fn append_if<'a>(&'a self, guards: &'a [HistoryGuard], events: &'a [AuditEvent]) -> StoreFuture<'a, bool> {
        Box::pin(async move { timed!(self, "append_if", self.inner.append_if(guards, events)) })
    }

    fn issue_if<'a>(
        &'a self,
        guards: &'a [HistoryGuard],
        records: &'a [ApprovalRecord],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move { timed!(self, "issue_if", self.inner.issue_if(guards, records, events)) })
    }

    fn apply_if<'a>(
        &'a self,
        guards: &'a [HistoryGuard],
        transitions: &'a [Transition],
    ) -> StoreFuture<'a, Option<Vec<TransitionOutcome>>> {
        Box::pin(async move { timed!(self, "apply_if", self.inner.apply_if(guards, transitions)) })
    }
}

impl ConversationStore for MeteredStore {
    fn conversation<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Option<StoredConversation>> {
        Box::pin(async move { timed!(self, "conversation", self.inner.conversation(conversation_id)) })
    }

    fn save_conversation<'a>(
        &'a self,
        conversation_id: &'a str,
        owner: Option<&'a str>,
        messages: &'a serde_json::Value,
        expected_version: Option<i64>,
        at: Millis,
    ) -> StoreFuture<'a, Option<i64>> {
        Box::pin(async move {
            let save = self.inner.save_conversation(conversation_id, owner, messages, expected_version, at);
            timed!(self, "save_conversation", save)
        })
    }

    fn save_decision<'a>(&'a self, decision: &'a StoredDecision) -> StoreFuture<'a, ()> {
        Box::pin(async move { timed!(self, "save_decision", self.inner.save_decision(decision)) })
    }

    fn decisions<'a>(&'a self, query: &'a DecisionQuery) -> StoreFuture<'a, Vec<StoredDecision>> {
        Box::pin(async move { timed!(self, "decisions", self.inner.decisions(query)) })
    }

    fn revoke_decision<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredDecision>> {
        Box::pin(async move { timed!(self, "revoke_decision", self.inner.revoke_decision(id)) })
    }

    fn decisions_by<'a>(&'a self, author: Option<&'a str>, now: Millis) -> StoreFuture<'a, Vec<StoredDecision>> {
        Box::pin(async move { timed!(self, "decisions_by", self.inner.decisions_by(author, now)) })
    }

    fn use_decision<'a>(
        &'a self,
        id: &'a str,
        now: Millis,
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, Option<StoredDecision>> {
        Box::pin(async move { timed!(self, "use_decision", self.inner.use_decision(id, now, events)) })
    }

    fn use_decision_issuing<'a>(
        &'a self,
        id: &'a str,
        now: Millis,
        records: &'a [ApprovalRecord],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, Option<StoredDecision>> {
        Box::pin(async move {
            let events = crate::telemetry::approval::issued(records, events);
            timed!(self, "use_decision_issuing", self.inner.use_decision_issuing(id, now, records, &events))
        })
    }

    fn conversation_with_decisions<'a>(
        &'a self,
        conversation_id: &'a str,
        query: &'a DecisionQuery,
    ) -> StoreFuture<'a, ConversationRead> {
        Box::pin(async move {
            let read = self.inner.conversation_with_decisions(conversation_id, query);
            timed!(self, "conversation_with_decisions", read)
        })
    }
}

impl InboxStore for MeteredStore {
    fn list_approvals<'a>(&'a self, query: &'a ApprovalQuery) -> StoreFuture<'a, Vec<ApprovalRecord>> {
        Box::pin(async move { timed!(self, "list_approvals", self.inner.list_approvals(query)) })
    }

    fn count_pending(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move { timed!(self, "count_pending", self.inner.count_pending()) })
    }
}

impl ContinuationStore for MeteredStore {
    fn claim_continuation<'a>(
        &'a self,
        conversation_id: &'a str,
        executor: &'a str,
        until: Millis,
        now: Millis,
        create: bool,
    ) -> StoreFuture<'a, Option<ContinuationClaim>> {
        Box::pin(async move {
            let claim = self.inner.claim_continuation(conversation_id, executor, until, now, create);
            timed!(self, "claim_continuation", claim)
        })
    }

    fn finish_continuation<'a>(&'a self, claim: &'a ContinuationClaim, executor: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { timed!(self, "finish_continuation", self.inner.finish_continuation(claim, executor)) })
    }

    fn due_continuations(&self, now: Millis, limit: usize) -> StoreFuture<'_, Vec<String>> {
        Box::pin(async move { timed!(self, "due_continuations", self.inner.due_continuations(now, limit)) })
    }
}

impl OutboxStore for MeteredStore {
    fn notify_cursor(&self) -> StoreFuture<'_, i64> {
        Box::pin(async move { timed!(self, "notify_cursor", self.inner.notify_cursor()) })
    }

    fn enqueue<'a>(&'a self, deliveries: &'a [Outbound], from: i64, to: i64) -> StoreFuture<'a, bool> {
        Box::pin(async move { timed!(self, "enqueue", self.inner.enqueue(deliveries, from, to)) })
    }

    fn claim_deliveries<'a>(
        &'a self,
        executor: &'a str,
        now: Millis,
        until: Millis,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Delivery>> {
        Box::pin(
            async move { timed!(self, "claim_deliveries", self.inner.claim_deliveries(executor, now, until, limit)) },
        )
    }

    fn finish_attempt<'a>(&'a self, end: &'a AttemptEnd) -> StoreFuture<'a, bool> {
        Box::pin(async move { timed!(self, "finish_attempt", self.inner.finish_attempt(end)) })
    }

    fn deliveries<'a>(&'a self, query: &'a OutboxQuery) -> StoreFuture<'a, Vec<Delivery>> {
        Box::pin(async move { timed!(self, "deliveries", self.inner.deliveries(query)) })
    }

    fn count_pending_deliveries(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move { timed!(self, "count_pending_deliveries", self.inner.count_pending_deliveries()) })
    }
}

impl LinkStore for MeteredStore {
    fn consume_link<'a>(&'a self, link_id: &'a str, at: Millis, expires_at: Millis) -> StoreFuture<'a, bool> {
        Box::pin(async move { timed!(self, "consume_link", self.inner.consume_link(link_id, at, expires_at)) })
    }

    fn release_link<'a>(&'a self, link_id: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move { timed!(self, "release_link", self.inner.release_link(link_id)) })
    }

    fn link_used<'a>(&'a self, link_id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { timed!(self, "link_used", self.inner.link_used(link_id)) })
    }
}
