//! An edit that needs other approvers becomes a new approval.
//!
//! A person who approves with an edit asks for a call nobody has judged yet
//! ([`super::check_edit`]). When the rules route the edited input to
//! approvers the vote does not satisfy ([`super::EditRefusal::NeedsApprovers`]),
//! the edit does not run and is not thrown away: [`supersede`] issues a new
//! approval of the same call, in the same conversation, with the edited
//! input, routed as the rules say, and ends the original as `superseded`,
//! naming the new one (`superseded_by`, and a `superseded` audit event).
//!
//! The successor is written first and the original moves second, on the
//! votes it was read with: a link is only ever written to a record that
//! exists, and a vote that raced the edit leaves the original as that vote
//! decided it (the successor is then withdrawn, unreachable from the call).
//!
//! Everything that reads an approval to settle its call follows the link
//! ([`current`]): the chat's step, the continuation, the claim (which binds
//! the successor to the edited input, not the model's), and the gateway.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::route::{Route, VoteRefusal, Voter, approvers_in_words};
use super::vote::{VoteError, event};
use super::{ApprovalState, Decision};
use crate::approval::input_digest;
use crate::ledger::{
    ApprovalRecord, ApprovalStore, AuditKind, Guard, LedgerConfig, Millis, RecordedDecision, StoreError, Transition,
    TransitionOutcome, Update,
};

/// How many superseding edits one call may go through: a chain longer than
/// this is read as far as here (and its end settles nothing).
pub const MAX_SUPERSEDED: usize = 8;

/// The reason a successor is withdrawn with when a vote decided the
/// original before the edit could supersede it.
const RACED_REASON: &str = "the approval it would have superseded was decided first";

/// What [`supersede`] did: the original as it ended, and its successor.
#[derive(Debug, Clone, PartialEq)]
pub struct Superseded {
    /// The original, `superseded`, naming the successor.
    pub original: ApprovalRecord,
    /// The new approval of the edited input, `pending`, routed.
    pub successor: ApprovalRecord,
}

/// Why an edit needs a new approval: the rule's reason and its route.
#[derive(Debug, Clone, Copy)]
pub struct EditRoute<'a> {
    /// The route the rules give the edited input.
    pub route: &'a Route,
    /// Why they ask (names the rule).
    pub reason: &'a str,
}

/// Replaces `record`'s pending approval with a new one of `edit`, routed as
/// `edit_route` says, on `voter`'s edit (see the module docs). Fails with
/// [`VoteRefusal::AlreadyDecided`] when the original left `pending` (or got
/// a vote) meanwhile; nothing is superseded then.
pub async fn supersede(
    config: &LedgerConfig,
    record: &ApprovalRecord,
    voter: &Voter,
    edit: &Value,
    edit_route: EditRoute<'_>,
) -> Result<Superseded, VoteError> {
    let now = config.clock.now();
    if record.state != ApprovalState::Pending {
        let refusal = VoteRefusal::AlreadyDecided { approval_id: record.approval_id.clone(), state: record.state };
        return Err(refusal.into());
    }
    let successor = successor(config, record, edit, edit_route, now)?;
    let mut issued = json!({
        "toolName": successor.tool_name, "input": successor.input, "expiresAt": successor.expires_at,
        "reason": successor.reason, "supersedes": record.approval_id,
    });
    if let Some(routing) = &successor.routing {
        issued["approvers"] = json!(routing.approvers);
        issued["quorum"] = json!(routing.quorum);
    }
    let issued = event(&successor, AuditKind::Issued, voter, now, issued);
    config.store.issue(std::slice::from_ref(&successor), std::slice::from_ref(&issued)).await?;
    let transition = supersede_transition(record, &successor, voter, edit_route, now);
    match config.store.apply(std::slice::from_ref(&transition), &[]).await?.pop() {
        Some(TransitionOutcome::Moved(original)) => Ok(Superseded { original, successor }),
        Some(TransitionOutcome::Unmoved(original)) => {
            withdraw_successor(config.store.as_ref(), &successor, voter, now).await?;
            let state = original.state;
            Err(VoteRefusal::AlreadyDecided { approval_id: original.approval_id, state }.into())
        }
        Some(TransitionOutcome::Missing) | None => {
            withdraw_successor(config.store.as_ref(), &successor, voter, now).await?;
            Err(VoteRefusal::Unknown(record.approval_id.clone()).into())
        }
    }
}

/// The new pending approval of `edit`: the original's call, conversation
/// and identities, routed as the rules say for the edit, expiring one TTL
/// from now.
fn successor(
    config: &LedgerConfig,
    record: &ApprovalRecord,
    edit: &Value,
    edit_route: EditRoute<'_>,
    now: Millis,
) -> Result<ApprovalRecord, StoreError> {
    let digest = input_digest(edit)
        .map_err(|error| StoreError::Corrupt(format!("the edited input cannot be made canonical: {error}")))?;
    let ttl = i64::try_from(config.ttl.as_millis()).unwrap_or(i64::MAX);
    Ok(ApprovalRecord {
        approval_id: uuid::Uuid::now_v7().simple().to_string(),
        input: edit.clone(),
        input_digest: digest,
        issued_at: now,
        expires_at: now.saturating_add(ttl),
        state: ApprovalState::Pending,
        decision: None,
        output: None,
        lease: None,
        updated_at: now,
        routing: Some(edit_route.route.resolve(|group| config.group_members(group))),
        votes: Vec::new(),
        reason: Some(edit_route.reason.to_owned()),
        supersedes: Some(record.approval_id.clone()),
        superseded_by: None,
        ..record.clone()
    })
}

/// `pending → superseded` on the votes read, naming the successor.
fn supersede_transition(
    record: &ApprovalRecord,
    successor: &ApprovalRecord,
    voter: &Voter,
    edit_route: EditRoute<'_>,
    now: Millis,
) -> Transition {
    let quorum = edit_route.route.quorum.max(1);
    let data = json!({
        "supersededBy": successor.approval_id,
        "originalInput": record.input,
        "editedInput": successor.input,
        "reason": edit_route.reason,
        "waitingFor": format!("{} ({quorum} of {})", approvers_in_words(&edit_route.route.approvers), quorum),
    });
    Transition {
        approval_id: record.approval_id.clone(),
        from: ApprovalState::Pending,
        to: ApprovalState::Superseded,
        guard: Guard::Votes { count: u32::try_from(record.votes.len()).unwrap_or(u32::MAX), at: now },
        update: Update { superseded_by: Some(successor.approval_id.clone()), ..Update::default() },
        at: now,
        events: vec![event(record, AuditKind::Superseded, voter, now, data)],
    }
}

/// Withdraws a successor whose original was decided first.
async fn withdraw_successor(
    store: &dyn ApprovalStore,
    successor: &ApprovalRecord,
    voter: &Voter,
    now: Millis,
) -> Result<(), StoreError> {
    let decision = Decision::Deny { reason: Some(RACED_REASON.to_owned()) };
    let transition = Transition {
        approval_id: successor.approval_id.clone(),
        from: ApprovalState::Pending,
        to: ApprovalState::Withdrawn,
        guard: Guard::None,
        update: Update {
            decision: Some(RecordedDecision::new(decision, voter.principal.clone(), now)),
            ..Update::default()
        },
        at: now,
        events: vec![event(successor, AuditKind::Withdrawn, voter, now, json!({"reason": RACED_REASON}))],
    };
    store.apply(std::slice::from_ref(&transition), &[]).await.map(drop)
}

/// The records that stand for these approvals now: each id's record, or,
/// when it was superseded, its successor's (followed up to
/// [`MAX_SUPERSEDED`] times), keyed by the id asked for. Unknown ids are
/// left out.
pub async fn current(
    store: &dyn ApprovalStore,
    approval_ids: &[String],
) -> Result<HashMap<String, ApprovalRecord>, StoreError> {
    let mut found: HashMap<String, ApprovalRecord> = HashMap::new();
    let mut asked: Vec<(String, String)> = approval_ids.iter().map(|id| (id.clone(), id.clone())).collect();
    for _ in 0..=MAX_SUPERSEDED {
        if asked.is_empty() {
            break;
        }
        let ids: Vec<String> = asked.iter().map(|(_, id)| id.clone()).collect();
        let records: HashMap<String, ApprovalRecord> =
            store.approvals(&ids).await?.into_iter().map(|record| (record.approval_id.clone(), record)).collect();
        let mut next = Vec::new();
        for (origin, id) in asked {
            let Some(record) = records.get(&id) else { continue };
            if let (ApprovalState::Superseded, Some(successor)) = (record.state, &record.superseded_by) {
                next.push((origin.clone(), successor.clone()));
            }
            found.insert(origin, record.clone());
        }
        asked = next;
    }
    Ok(found)
}

/// Whether a history's answer to a superseded call matches its successor
/// `record`: it approves with the successor's input (or with the edit its
/// approvers decided), or it denies. Returns the answer as a decision on the
/// successor (an edit equal to its input is no edit of it).
pub(crate) fn on_successor(record: &ApprovalRecord, answer: &Decision) -> Option<Decision> {
    match answer {
        Decision::Deny { .. } => Some(answer.clone()),
        Decision::Approve { edited_input: None } => None,
        Decision::Approve { edited_input: Some(edit) } => {
            if input_digest(edit).is_ok_and(|digest| digest == record.input_digest) {
                return Some(Decision::APPROVE);
            }
            let decided = record.decision.as_ref().and_then(|decided| decided.edited_input.as_ref());
            (decided == Some(edit)).then(|| answer.clone())
        }
    }
}
