//! Deciding an approval outside the chat: votes and withdrawals.
//!
//! Every out-of-band decision goes through here (the inbox's
//! `POST /api/approvals/{id}`, the CLI on the store, and the requester's own
//! in-chat answers to a step that waits for others), so they share one set
//! of checks ([`check_vote`]) and one claim: a vote is a conditional update
//! of the pending record on the votes it read ([`Guard::Votes`]), so two
//! votes racing are both counted or one is read again, and exactly one vote
//! decides. A deciding vote moves the approval to `approved` (where it waits
//! for its step to continue; nothing runs here) or `denied`, and with
//! [`VoteOptions::continuation`] marks the conversation due to continue on
//! the server, in the same transaction.

use serde_json::{Value, json};

use super::route::{MAX_REASON_BYTES, Tally, Vote, VoteRefusal, Voter, check_vote, may_see, requester, tally};
use super::{ApprovalState, Decision};
use crate::ledger::{
    ApprovalRecord, ApprovalStore, AuditEvent, AuditKind, Clock, Guard, Millis, RecordedDecision, StoreError,
    Transition, TransitionOutcome, Update,
};

/// The reason a withdrawn call is denied with.
pub const WITHDRAWN_REASON: &str = "withdrawn by the requester";

/// How many times a vote reads the record again after losing a race to another vote.
const MAX_ATTEMPTS: usize = 16;

/// Why a vote or a withdrawal did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VoteError {
    /// Refused (see [`VoteRefusal::code`]).
    #[error(transparent)]
    Refused(#[from] VoteRefusal),
    /// The store failed; nothing was recorded.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a vote also does, and says.
#[derive(Debug, Clone, Default)]
pub struct VoteOptions {
    /// Mark the conversation due to continue on the server if the vote decides.
    pub continuation: bool,
    /// A note with an approving vote (a denial's reason is the decision's).
    pub note: Option<String>,
}

/// Casts `voter`'s vote on an approval; returns the record as it is after
/// (still `pending` with the vote counted, or decided).
pub async fn cast(
    store: &dyn ApprovalStore,
    clock: &dyn Clock,
    approval_id: &str,
    voter: &Voter,
    decision: Decision,
    options: VoteOptions,
) -> Result<ApprovalRecord, VoteError> {
    let reason = match &decision {
        Decision::Deny { reason } => reason.as_deref(),
        Decision::Approve { .. } => options.note.as_deref(),
    };
    if let Some(len) = reason.map(str::len).filter(|len| *len > MAX_REASON_BYTES) {
        return Err(VoteRefusal::ReasonTooLong { len, max: MAX_REASON_BYTES }.into());
    }
    for _ in 0..MAX_ATTEMPTS {
        let record = read(store, approval_id, voter).await?;
        let now = clock.now();
        check_vote(&record, voter, &decision, now)?;
        let transition = vote_transition(&record, voter, &decision, now, &options);
        match store.apply(std::slice::from_ref(&transition), &[]).await?.pop() {
            Some(TransitionOutcome::Moved(record)) => return Ok(record),
            Some(TransitionOutcome::Unmoved(_)) => continue,
            Some(TransitionOutcome::Missing) | None => return Err(VoteRefusal::Unknown(approval_id.to_owned()).into()),
        }
    }
    Err(StoreError::Unavailable(format!("approval `{approval_id}`: too many votes at once; try again")).into())
}

/// Withdraws the requester's own pending approval: it resolves like a
/// denial with [`WITHDRAWN_REASON`], and the conversation is marked due.
pub async fn withdraw(
    store: &dyn ApprovalStore,
    clock: &dyn Clock,
    approval_id: &str,
    voter: &Voter,
) -> Result<ApprovalRecord, VoteError> {
    let record = read(store, approval_id, voter).await?;
    let now = clock.now();
    let owner = requester(&record);
    if voter.anonymous || (owner.is_some() && voter.principal.as_deref() != owner) {
        return Err(VoteRefusal::NotTheRequester(approval_id.to_owned()).into());
    }
    match record.state {
        ApprovalState::Pending if record.expires_at > now => {}
        ApprovalState::Pending | ApprovalState::Expired => {
            return Err(VoteRefusal::Expired(approval_id.to_owned()).into());
        }
        state => return Err(VoteRefusal::AlreadyDecided { approval_id: approval_id.to_owned(), state }.into()),
    }
    let decision = Decision::Deny { reason: Some(WITHDRAWN_REASON.to_owned()) };
    let events = vec![event(&record, AuditKind::Withdrawn, voter, now, json!({"reason": WITHDRAWN_REASON}))];
    let transition = Transition {
        approval_id: record.approval_id.clone(),
        from: ApprovalState::Pending,
        to: ApprovalState::Withdrawn,
        guard: Guard::NotExpiredAt(now),
        update: Update {
            decision: Some(RecordedDecision::new(decision, voter.principal.clone(), now)),
            continuation: true,
            ..Update::default()
        },
        at: now,
        events,
    };
    match store.apply(std::slice::from_ref(&transition), &[]).await?.pop() {
        Some(TransitionOutcome::Moved(record)) => Ok(record),
        Some(TransitionOutcome::Unmoved(record)) => {
            Err(VoteRefusal::AlreadyDecided { approval_id: approval_id.to_owned(), state: record.state }.into())
        }
        Some(TransitionOutcome::Missing) | None => Err(VoteRefusal::Unknown(approval_id.to_owned()).into()),
    }
}

/// The record, if the voter may see it (an outsider never learns it exists).
async fn read(store: &dyn ApprovalStore, approval_id: &str, voter: &Voter) -> Result<ApprovalRecord, VoteError> {
    let record = store.approvals(&[approval_id.to_owned()]).await?.pop();
    match record {
        Some(record) if may_see(&record, voter) => Ok(record),
        _ => Err(VoteRefusal::Unknown(approval_id.to_owned()).into()),
    }
}

/// The transition of one vote: `pending → pending` with the vote counted,
/// or on to `approved`/`denied` when it decides, on the votes read.
pub(super) fn vote_transition(
    record: &ApprovalRecord,
    voter: &Voter,
    decision: &Decision,
    now: Millis,
    options: &VoteOptions,
) -> Transition {
    let reason = match decision {
        Decision::Deny { reason } => reason.clone(),
        Decision::Approve { .. } => options.note.clone(),
    };
    let vote = Vote { principal: voter.principal.clone(), decision: decision.clone(), reason: reason.clone(), at: now };
    let mut votes = record.votes.clone();
    votes.push(vote);
    let quorum = record.routing.as_ref().map_or(1, |routing| routing.quorum);
    let edit = match decision {
        Decision::Approve { edited_input } => edited_input.as_ref(),
        Decision::Deny { .. } => None,
    };
    let mut data = json!({"decision": if decision.is_approve() { "approve" } else { "deny" }});
    if let Some(reason) = &reason {
        data["reason"] = json!(reason);
    }
    let mut events = vec![event(record, AuditKind::Voted, voter, now, data)];
    let (to, recorded) = match tally(&votes, quorum, edit) {
        Tally::Open { .. } => (ApprovalState::Pending, None),
        Tally::Decided(decided) => {
            events.extend(decided_events(record, voter, &decided, now));
            let to = if decided.is_approve() { ApprovalState::Approved } else { ApprovalState::Denied };
            (to, Some(RecordedDecision::new(decided, voter.principal.clone(), now)))
        }
    };
    let count = u32::try_from(record.votes.len()).unwrap_or(u32::MAX);
    let continuation = options.continuation && to != ApprovalState::Pending;
    Transition {
        approval_id: record.approval_id.clone(),
        from: ApprovalState::Pending,
        to,
        guard: Guard::Votes { count, at: now },
        update: Update { decision: recorded, votes: Some(votes), continuation, ..Update::default() },
        at: now,
        events,
    }
}

/// The `approved` (and `edited`) or `denied` events of a deciding vote.
fn decided_events(record: &ApprovalRecord, voter: &Voter, decided: &Decision, now: Millis) -> Vec<AuditEvent> {
    match decided {
        Decision::Approve { edited_input } => {
            let mut events = vec![event(
                record,
                AuditKind::Approved,
                voter,
                now,
                json!({"toolName": record.tool_name, "input": record.input}),
            )];
            if let Some(edit) = edited_input {
                let data = json!({"originalInput": record.input, "editedInput": edit});
                events.push(event(record, AuditKind::Edited, voter, now, data));
            }
            events
        }
        Decision::Deny { reason } => {
            vec![event(record, AuditKind::Denied, voter, now, json!({"reason": reason, "unanswered": false}))]
        }
    }
}

/// An audit event about `record` caused by `voter`.
pub(super) fn event(record: &ApprovalRecord, kind: AuditKind, voter: &Voter, at: Millis, data: Value) -> AuditEvent {
    AuditEvent {
        seq: 0,
        at,
        kind,
        approval_id: record.approval_id.clone(),
        tool_call_id: record.tool_call_id.clone(),
        conversation_id: record.conversation_name().to_owned(),
        owner: record.owner.clone(),
        principal: voter.principal.clone(),
        data,
    }
}
