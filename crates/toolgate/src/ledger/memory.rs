//! An in-memory ledger (every role: a [`super::LedgerStore`]) for library
//! users and tests, the reference the SQL stores are tested against: one lock
//! held across each operation makes every operation a transaction.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use super::{
    ApprovalQuery, ApprovalRecord, ApprovalState, ApprovalStore, AttemptEnd, AttemptResult, AuditEvent, AuditQuery,
    AuditStore, AuditView, ContinuationClaim, ContinuationStore, ConversationStore, DecisionQuery, Delivery,
    DeliveryState, InboxStore, LinkStore, Millis, Outbound, OutboxQuery, OutboxStore, Pruned, StoreError, StoreFuture,
    StoredConversation, StoredDecision, Transition, TransitionOutcome,
};
use crate::approval::lifecycle::{TimerAdvance, next_due};

/// Keeps everything in process memory; lost when the process ends.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    approvals: HashMap<String, ApprovalRecord>,
    /// (conversation id, tool call id) -> approval id.
    by_call: HashMap<(String, String), String>,
    audit: Vec<AuditEvent>,
    conversations: HashMap<String, StoredConversation>,
    /// Sticky decisions, oldest first.
    decisions: Vec<StoredDecision>,
    /// Conversations due to continue: key -> mark.
    continuations: HashMap<String, Mark>,
    /// Bumped by every mark, so marks are ordered and generations unique.
    marks: i64,
    /// The last audit sequence number drawn (never drawn twice, pruned or not).
    seq: i64,
    /// The notification outbox, in enqueue order, each with its holder.
    outbox: Vec<(Delivery, Option<(String, Millis)>)>,
    /// The last audit event notifications were enqueued for.
    notify_cursor: i64,
    /// Used one-time links: id -> when the link expires.
    links: HashMap<String, Millis>,
}

/// A conversation due to continue.
#[derive(Debug, Clone)]
struct Mark {
    generation: i64,
    holder: Option<(String, Millis)>,
}

impl Inner {
    fn mark_due(&mut self, conversation_id: &str) {
        self.marks += 1;
        let generation = self.marks;
        let mark = self.continuations.entry(conversation_id.to_owned()).or_insert(Mark { generation, holder: None });
        mark.generation = generation;
    }

    fn append(&mut self, events: &[AuditEvent]) {
        for event in events {
            self.seq += 1;
            self.audit.push(AuditEvent { seq: self.seq, ..event.clone() });
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-applied operation:
        // every operation checks before it writes. Keep serving.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ApprovalStore for MemoryStore {
    fn issue<'a>(&'a self, records: &'a [ApprovalRecord], events: &'a [AuditEvent]) -> StoreFuture<'a, ()> {
        Box::pin(async move { issue_in(&mut self.lock(), records, events) })
    }

    fn approvals<'a>(&'a self, approval_ids: &'a [String]) -> StoreFuture<'a, Vec<ApprovalRecord>> {
        Box::pin(async move {
            let inner = self.lock();
            Ok(approval_ids.iter().filter_map(|id| inner.approvals.get(id).cloned()).collect())
        })
    }

    fn approvals_for_calls<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_ids: &'a [String],
    ) -> StoreFuture<'a, Vec<ApprovalRecord>> {
        Box::pin(async move {
            let inner = self.lock();
            Ok(tool_call_ids
                .iter()
                .filter_map(|call| inner.by_call.get(&(conversation_id.to_owned(), call.clone())))
                .filter_map(|id| inner.approvals.get(id).cloned())
                .collect())
        })
    }

    fn apply<'a>(
        &'a self,
        transitions: &'a [Transition],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, Vec<TransitionOutcome>> {
        Box::pin(async move { Ok(apply_in(&mut self.lock(), transitions, events)) })
    }

    fn append<'a>(&'a self, events: &'a [AuditEvent]) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.lock().append(events);
            Ok(())
        })
    }

    fn renew_leases<'a>(&'a self, executor: &'a str, until: Millis) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let mut inner = self.lock();
            let mut renewed = 0;
            for record in inner.approvals.values_mut() {
                if let (ApprovalState::Executing, Some(lease)) = (record.state, record.lease.as_mut())
                    && lease.executor == executor
                {
                    lease.until = until;
                    renewed += 1;
                }
            }
            Ok(renewed)
        })
    }

    fn due_timers(&self, now: Millis, limit: usize) -> StoreFuture<'_, Vec<ApprovalRecord>> {
        Box::pin(async move {
            let inner = self.lock();
            let mut due: Vec<(Millis, &ApprovalRecord)> = inner
                .approvals
                .values()
                .filter_map(|record| next_due(record).filter(|at| *at <= now).map(|at| (at, record)))
                .collect();
            due.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.approval_id.cmp(&b.1.approval_id)));
            Ok(due.into_iter().take(limit).map(|(_, record)| record.clone()).collect())
        })
    }

    fn advance_timer<'a>(&'a self, advance: &'a TimerAdvance) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut inner = self.lock();
            let Some(record) = inner.approvals.get_mut(&advance.approval_id) else {
                return Ok(false);
            };
            if next_due(record) != Some(advance.expected) || record.routing.as_ref() != Some(&advance.read) {
                return Ok(false);
            }
            record.routing = Some(advance.routing.clone());
            record.updated_at = advance.at;
            inner.append(&advance.events);
            Ok(true)
        })
    }
}

impl AuditStore for MemoryStore {
    fn ready(&self) -> StoreFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }

    fn audit<'a>(&'a self, query: &'a AuditQuery) -> StoreFuture<'a, Vec<AuditEvent>> {
        Box::pin(async move {
            let inner = self.lock();
            let answered: std::collections::HashSet<&str> = match &query.view {
                AuditView::Principal(principal) => inner
                    .audit
                    .iter()
                    .filter(|event| event.is_answer_by(principal))
                    .map(|event| event.approval_id.as_str())
                    .collect(),
                _ => std::collections::HashSet::new(),
            };
            let matching = inner.audit.iter().filter(|event| {
                event.visible_in(&query.view, |approval| answered.contains(approval))
                    && query.conversation_id.as_ref().is_none_or(|id| &event.conversation_id == id)
                    && query.since.is_none_or(|since| event.at >= since)
                    && query.after_seq.is_none_or(|after| event.seq > after)
            });
            Ok(matching.take(query.limit.unwrap_or(usize::MAX)).cloned().collect())
        })
    }

    fn prune(&self, before: Millis) -> StoreFuture<'_, Pruned> {
        Box::pin(async move {
            let mut inner = self.lock();
            let inner = &mut *inner;
            let open: Vec<(String, String)> = inner
                .approvals
                .values()
                .filter(|record| !record.state.is_final())
                .map(|record| (record.approval_id.clone(), record.conversation_id.clone()))
                .collect();
            let open_ids: std::collections::HashSet<&str> = open.iter().map(|(id, _)| id.as_str()).collect();
            let open_conversations: std::collections::HashSet<&str> = open.iter().map(|(_, c)| c.as_str()).collect();
            let events = inner.audit.len();
            inner.audit.retain(|event| event.at >= before || open_ids.contains(event.approval_id.as_str()));
            let approvals = inner.approvals.len();
            // A superseded approval stays while its successor is open: the call is found through it.
            let open_successor =
                |record: &ApprovalRecord| record.superseded_by.as_deref().is_some_and(|id| open_ids.contains(id));
            inner.approvals.retain(|_, record| {
                !(record.state.is_final() && record.updated_at < before && !open_successor(record))
            });
            let approvals_left = &inner.approvals;
            inner.by_call.retain(|_, approval_id| approvals_left.contains_key(approval_id));
            let conversations = inner.conversations.len();
            inner
                .conversations
                .retain(|id, stored| stored.updated_at >= before || open_conversations.contains(id.as_str()));
            inner.outbox.retain(|(delivery, _)| delivery.state == DeliveryState::Pending || delivery.next_at >= before);
            inner.links.retain(|_, expires_at| *expires_at >= before);
            Ok(Pruned {
                approvals: (approvals - inner.approvals.len()) as u64,
                events: (events - inner.audit.len()) as u64,
                conversations: (conversations - inner.conversations.len()) as u64,
            })
        })
    }
}

/// Issues `records` with `events` under the lock `inner` is held by.
fn issue_in(inner: &mut Inner, records: &[ApprovalRecord], events: &[AuditEvent]) -> Result<(), StoreError> {
    let mut batch = std::collections::HashSet::with_capacity(records.len());
    if let Some(taken) = records
        .iter()
        .find(|record| inner.approvals.contains_key(&record.approval_id) || !batch.insert(&record.approval_id))
    {
        return Err(StoreError::DuplicateApproval(taken.approval_id.clone()));
    }
    for record in records {
        let call = (record.conversation_id.clone(), record.tool_call_id.clone());
        inner.by_call.insert(call, record.approval_id.clone());
        inner.approvals.insert(record.approval_id.clone(), record.clone());
    }
    inner.append(events);
    Ok(())
}

/// Applies the transitions, each with its events if it moved, then `events`.
fn apply_in(inner: &mut Inner, transitions: &[Transition], events: &[AuditEvent]) -> Vec<TransitionOutcome> {
    let mut outcomes = Vec::with_capacity(transitions.len());
    for transition in transitions {
        let outcome = match inner.approvals.get_mut(&transition.approval_id) {
            None => TransitionOutcome::Missing,
            Some(record) if transition.applies_to(record) => {
                transition.write_into(record);
                TransitionOutcome::Moved(record.clone())
            }
            Some(record) => TransitionOutcome::Unmoved(record.clone()),
        };
        if let TransitionOutcome::Moved(record) = &outcome {
            if transition.update.continuation {
                inner.mark_due(&record.conversation_id);
            }
            inner.append(&transition.events);
        }
        outcomes.push(outcome);
    }
    inner.append(events);
    outcomes
}

impl super::HistoryStore for MemoryStore {
    fn history<'a>(&'a self, query: &'a super::HistoryQuery) -> StoreFuture<'a, super::HistoryRead> {
        Box::pin(super::history_from_audit(self, query))
    }

    fn append_if<'a>(&'a self, guards: &'a [super::HistoryGuard], events: &'a [AuditEvent]) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut inner = self.lock();
            // The check and the append under one lock: nothing is appended between them.
            if !super::guards_hold(guards, &inner.audit) {
                return Ok(false);
            }
            inner.append(events);
            Ok(true)
        })
    }

    fn issue_if<'a>(
        &'a self,
        guards: &'a [super::HistoryGuard],
        records: &'a [ApprovalRecord],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut inner = self.lock();
            if !super::guards_hold(guards, &inner.audit) {
                return Ok(false);
            }
            issue_in(&mut inner, records, events).map(|()| true)
        })
    }

    fn apply_if<'a>(
        &'a self,
        guards: &'a [super::HistoryGuard],
        transitions: &'a [Transition],
    ) -> StoreFuture<'a, Option<Vec<TransitionOutcome>>> {
        Box::pin(async move {
            let mut inner = self.lock();
            if !super::guards_hold(guards, &inner.audit) {
                return Ok(None);
            }
            Ok(Some(apply_in(&mut inner, transitions, &[])))
        })
    }
}

impl ConversationStore for MemoryStore {
    fn conversation<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Option<StoredConversation>> {
        Box::pin(async move { Ok(self.lock().conversations.get(conversation_id).cloned()) })
    }

    fn save_conversation<'a>(
        &'a self,
        conversation_id: &'a str,
        owner: Option<&'a str>,
        messages: &'a Value,
        expected_version: Option<i64>,
        at: Millis,
    ) -> StoreFuture<'a, Option<i64>> {
        Box::pin(async move {
            let mut inner = self.lock();
            let current = inner.conversations.get(conversation_id).map(|stored| (stored.version, stored.owner.clone()));
            if current.as_ref().map(|(version, _)| *version) != expected_version {
                return Ok(None);
            }
            let (version, owner) = match current {
                Some((version, stored_owner)) => (version + 1, stored_owner),
                None => (1, owner.map(str::to_owned)),
            };
            let stored = StoredConversation {
                conversation_id: conversation_id.to_owned(),
                owner,
                messages: messages.clone(),
                version,
                updated_at: at,
            };
            inner.conversations.insert(conversation_id.to_owned(), stored);
            Ok(Some(version))
        })
    }

    fn save_decision<'a>(&'a self, decision: &'a StoredDecision) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut inner = self.lock();
            if inner.decisions.iter().any(|stored| stored.id == decision.id) {
                return Err(StoreError::DuplicateDecision(decision.id.clone()));
            }
            // Oldest first, ties in save order (as the SQL stores order them).
            let position = inner.decisions.partition_point(|stored| stored.created_at <= decision.created_at);
            inner.decisions.insert(position, decision.clone());
            Ok(())
        })
    }

    fn decisions<'a>(&'a self, query: &'a DecisionQuery) -> StoreFuture<'a, Vec<StoredDecision>> {
        Box::pin(async move {
            let (conversation, principal) = (query.conversation_id.as_deref(), query.principal.as_deref());
            Ok(self
                .lock()
                .decisions
                .iter()
                .filter(|decision| decision.is_live(query.now) && decision.applies_to(conversation, principal))
                .cloned()
                .collect())
        })
    }

    fn revoke_decision<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredDecision>> {
        Box::pin(async move {
            let mut inner = self.lock();
            let position = inner.decisions.iter().position(|decision| decision.id == id);
            Ok(position.map(|position| inner.decisions.remove(position)))
        })
    }

    fn decisions_by<'a>(&'a self, author: Option<&'a str>, now: Millis) -> StoreFuture<'a, Vec<StoredDecision>> {
        Box::pin(async move {
            let inner = self.lock();
            let by =
                |decision: &&StoredDecision| author.is_none_or(|author| decision.created_by.as_deref() == Some(author));
            Ok(inner.decisions.iter().filter(|decision| decision.is_live(now)).filter(by).cloned().collect())
        })
    }

    fn use_decision<'a>(
        &'a self,
        id: &'a str,
        now: Millis,
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, Option<StoredDecision>> {
        Box::pin(async move {
            let mut inner = self.lock();
            // The check, the use and the append under one lock.
            let Some(decision) = inner.decisions.iter_mut().find(|decision| decision.id == id) else {
                return Ok(None);
            };
            if !decision.is_live(now) {
                return Ok(None);
            }
            if let Some(left) = decision.uses_left.as_mut() {
                *left -= 1;
            }
            let used = decision.clone();
            inner.append(events);
            Ok(Some(used))
        })
    }

    fn use_decision_issuing<'a>(
        &'a self,
        id: &'a str,
        now: Millis,
        records: &'a [ApprovalRecord],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, Option<StoredDecision>> {
        Box::pin(async move { self.use_decision_issuing_in(id, now, records, events) })
    }
}

impl MemoryStore {
    /// [`super::ConversationStore::use_decision_issuing`] under the lock: the
    /// grant's check, the issue (which fails on a taken id before it writes)
    /// and then the use.
    fn use_decision_issuing_in(
        &self,
        id: &str,
        now: Millis,
        records: &[ApprovalRecord],
        events: &[AuditEvent],
    ) -> Result<Option<StoredDecision>, super::StoreError> {
        let mut inner = self.lock();
        let live = inner.decisions.iter().any(|decision| decision.id == id && decision.is_live(now));
        if !live {
            return Ok(None);
        }
        issue_in(&mut inner, records, events)?;
        let Some(decision) = inner.decisions.iter_mut().find(|decision| decision.id == id) else { return Ok(None) };
        if let Some(left) = decision.uses_left.as_mut() {
            *left -= 1;
        }
        Ok(Some(decision.clone()))
    }
}

impl InboxStore for MemoryStore {
    fn count_pending(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let inner = self.lock();
            let pending = inner.approvals.values().filter(|record| record.state == ApprovalState::Pending).count();
            Ok(u64::try_from(pending).unwrap_or(u64::MAX))
        })
    }

    fn list_approvals<'a>(&'a self, query: &'a ApprovalQuery) -> StoreFuture<'a, Vec<ApprovalRecord>> {
        Box::pin(async move {
            let inner = self.lock();
            let mut found: Vec<&ApprovalRecord> = inner
                .approvals
                .values()
                .filter(|record| {
                    query.states.admits(record.state)
                        && query.conversation_id.as_ref().is_none_or(|id| &record.conversation_id == id)
                        && query.conversation_name.as_ref().is_none_or(|name| record.root_conversation_name() == name)
                        && query.viewer_keys.as_ref().is_none_or(|keys| {
                            crate::approval::lifecycle::viewers(record).iter().any(|viewer| keys.contains(viewer))
                        })
                })
                .collect();
            found.sort_by(|a, b| (b.issued_at, &b.approval_id).cmp(&(a.issued_at, &a.approval_id)));
            Ok(found.into_iter().take(query.limit).cloned().collect())
        })
    }
}

impl ContinuationStore for MemoryStore {
    fn claim_continuation<'a>(
        &'a self,
        conversation_id: &'a str,
        executor: &'a str,
        until: Millis,
        now: Millis,
        create: bool,
    ) -> StoreFuture<'a, Option<ContinuationClaim>> {
        Box::pin(async move {
            let mut inner = self.lock();
            if create {
                inner.mark_due(conversation_id);
            }
            let Some(mark) = inner.continuations.get_mut(conversation_id) else { return Ok(None) };
            if mark.holder.as_ref().is_some_and(|(holder, held_until)| holder != executor && *held_until > now) {
                return Ok(None);
            }
            mark.holder = Some((executor.to_owned(), until));
            Ok(Some(ContinuationClaim { conversation_id: conversation_id.to_owned(), generation: mark.generation }))
        })
    }

    fn finish_continuation<'a>(&'a self, claim: &'a ContinuationClaim, executor: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut inner = self.lock();
            let Some(mark) = inner.continuations.get_mut(&claim.conversation_id) else { return Ok(true) };
            if mark.holder.as_ref().is_some_and(|(holder, _)| holder != executor) {
                return Ok(false);
            }
            if mark.generation == claim.generation {
                inner.continuations.remove(&claim.conversation_id);
                return Ok(true);
            }
            mark.holder = None;
            Ok(false)
        })
    }

    fn due_continuations(&self, now: Millis, limit: usize) -> StoreFuture<'_, Vec<String>> {
        Box::pin(async move {
            let inner = self.lock();
            let mut due: Vec<(&i64, &String)> = inner
                .continuations
                .iter()
                .filter(|(_, mark)| mark.holder.as_ref().is_none_or(|(_, until)| *until <= now))
                .map(|(id, mark)| (&mark.generation, id))
                .collect();
            due.sort();
            Ok(due.into_iter().take(limit).map(|(_, id)| id.clone()).collect())
        })
    }
}

impl OutboxStore for MemoryStore {
    fn notify_cursor(&self) -> StoreFuture<'_, i64> {
        Box::pin(async move { Ok(self.lock().notify_cursor) })
    }

    fn enqueue<'a>(&'a self, deliveries: &'a [Outbound], from: i64, to: i64) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut inner = self.lock();
            if inner.notify_cursor != from {
                return Ok(false);
            }
            inner.notify_cursor = to;
            for outbound in deliveries {
                if inner.outbox.iter().any(|(delivery, _)| delivery.outbound.delivery_id == outbound.delivery_id) {
                    continue;
                }
                let delivery = Delivery {
                    outbound: outbound.clone(),
                    state: DeliveryState::Pending,
                    attempts: 0,
                    next_at: outbound.created_at,
                    first_attempt_at: None,
                    last_error: None,
                };
                inner.outbox.push((delivery, None));
            }
            Ok(true)
        })
    }

    fn claim_deliveries<'a>(
        &'a self,
        executor: &'a str,
        now: Millis,
        until: Millis,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Delivery>> {
        Box::pin(async move {
            let mut inner = self.lock();
            let mut due: Vec<usize> = (0..inner.outbox.len())
                .filter(|index| {
                    let (delivery, holder) = &inner.outbox[*index];
                    delivery.state == DeliveryState::Pending
                        && delivery.next_at <= now
                        && holder.as_ref().is_none_or(|(_, held)| *held <= now)
                })
                .collect();
            due.sort_by_key(|index| inner.outbox[*index].0.next_at);
            due.truncate(limit);
            Ok(due
                .into_iter()
                .map(|index| {
                    let (delivery, holder) = &mut inner.outbox[index];
                    *holder = Some((executor.to_owned(), until));
                    delivery.clone()
                })
                .collect())
        })
    }

    fn finish_attempt<'a>(&'a self, end: &'a AttemptEnd) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut inner = self.lock();
            let Some((delivery, holder)) =
                inner.outbox.iter_mut().find(|(delivery, _)| delivery.outbound.delivery_id == end.delivery_id)
            else {
                return Ok(false);
            };
            if delivery.state != DeliveryState::Pending
                || holder.as_ref().is_none_or(|(executor, _)| *executor != end.executor)
            {
                return Ok(false);
            }
            *holder = None;
            delivery.attempts += 1;
            delivery.first_attempt_at.get_or_insert(end.at);
            match &end.result {
                AttemptResult::Delivered => {
                    delivery.state = DeliveryState::Delivered;
                    delivery.next_at = end.at;
                    delivery.last_error = None;
                }
                AttemptResult::Retry { at, error } => {
                    delivery.next_at = *at;
                    delivery.last_error = Some(error.clone());
                }
                AttemptResult::Failed { error } => {
                    delivery.state = DeliveryState::Failed;
                    delivery.next_at = end.at;
                    delivery.last_error = Some(error.clone());
                }
            }
            inner.append(&end.events);
            Ok(true)
        })
    }

    fn count_pending_deliveries(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let inner = self.lock();
            let pending = inner.outbox.iter().filter(|(delivery, _)| delivery.state == DeliveryState::Pending).count();
            Ok(u64::try_from(pending).unwrap_or(u64::MAX))
        })
    }

    fn deliveries<'a>(&'a self, query: &'a OutboxQuery) -> StoreFuture<'a, Vec<Delivery>> {
        Box::pin(async move {
            let inner = self.lock();
            Ok(inner
                .outbox
                .iter()
                .rev()
                .map(|(delivery, _)| delivery)
                .filter(|delivery| query.approval_id.as_ref().is_none_or(|id| *id == delivery.outbound.approval_id))
                .filter(|delivery| query.state.is_none_or(|state| state == delivery.state))
                .take(query.limit)
                .cloned()
                .collect())
        })
    }
}

impl LinkStore for MemoryStore {
    fn consume_link<'a>(&'a self, link_id: &'a str, _at: Millis, expires_at: Millis) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut inner = self.lock();
            if inner.links.contains_key(link_id) {
                return Ok(false);
            }
            inner.links.insert(link_id.to_owned(), expires_at);
            Ok(true)
        })
    }

    fn release_link<'a>(&'a self, link_id: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.lock().links.remove(link_id);
            Ok(())
        })
    }

    fn link_used<'a>(&'a self, link_id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { Ok(self.lock().links.contains_key(link_id)) })
    }
}
