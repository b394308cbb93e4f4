//! Every transition the engine asks a store to apply, built in one place so
//! that each follows the table of [`ApprovalState::can_move_to`] (and the
//! events of a principal's decision, which [`decide`] carries).

use serde_json::json;
use toolgate_protocol::ToolResultOutput;

use super::{ApprovalState, Decision};
use crate::ledger::{
    ApprovalRecord, AuditEvent, AuditKind, EXPIRED_TEXT, Guard, INTERRUPTED_TEXT, Lease, Ledger, Millis,
    RecordedDecision, Transition, Update, millis,
};

/// A transition of `approval_id` (checked against the table in debug builds).
fn transition(
    approval_id: &str,
    (from, to): (ApprovalState, ApprovalState),
    guard: Guard,
    update: Update,
    at: Millis,
    events: Vec<AuditEvent>,
) -> Transition {
    debug_assert!(from.can_move_to(to), "the lifecycle has no move {from:?} -> {to:?}");
    Transition { approval_id: approval_id.to_owned(), from, to, guard, update, at, events }
}

/// `pending → executing | denied`, if the request has not expired: the
/// decision of the request's principal, first come first served. An
/// approval claims the call at once, under this process's lease, in the
/// same conditional update: nobody ever sees it `approved` in between, so an
/// approval decided out of band meanwhile can never be started by a claim
/// that did not win.
pub(crate) fn decide(
    record: &ApprovalRecord,
    decision: Decision,
    ledger: &Ledger,
    now: Millis,
    events: Vec<AuditEvent>,
) -> Transition {
    let (to, lease) = if decision.is_approve() {
        let until = now.saturating_add(millis(ledger.config.lease));
        (ApprovalState::Executing, Some(Lease { executor: ledger.config.executor.clone(), until }))
    } else {
        (ApprovalState::Denied, None)
    };
    let recorded = RecordedDecision::new(decision, ledger.principal.clone(), now);
    let update = Update { decision: Some(recorded), lease, ..Update::default() };
    transition(&record.approval_id, (ApprovalState::Pending, to), Guard::NotExpiredAt(now), update, now, events)
}

/// The events of a decision by the ledger's principal (`approved` and
/// `edited`, or `denied`), as an answer in a chat writes them.
pub(crate) fn decision_events(
    ledger: &Ledger,
    record: &ApprovalRecord,
    decision: &Decision,
    unanswered: bool,
    now: Millis,
) -> Vec<AuditEvent> {
    let event = |kind, data| ledger.event(kind, &record.approval_id, &record.tool_call_id, now, data);
    match decision {
        Decision::Approve { edited_input } => {
            let mut events =
                vec![event(AuditKind::Approved, json!({"toolName": record.tool_name, "input": record.input}))];
            if let Some(edit) = edited_input {
                events.push(event(AuditKind::Edited, json!({"originalInput": record.input, "editedInput": edit})));
            }
            events
        }
        Decision::Deny { reason } => {
            vec![event(AuditKind::Denied, json!({"reason": reason, "unanswered": unanswered}))]
        }
    }
}

/// `approved → executing` (an approval decided by votes, when its step
/// continues), or `executing → executing`
/// (an idempotent call whose lease lapsed), under this process's lease.
pub(crate) fn start_execution(
    record: &ApprovalRecord,
    ledger: &Ledger,
    now: Millis,
    from: ApprovalState,
    events: Vec<AuditEvent>,
) -> Transition {
    let until = now.saturating_add(millis(ledger.config.lease));
    let guard = if from == ApprovalState::Executing { Guard::LeaseLapsedAt(now) } else { Guard::None };
    let update = Update { lease: Some(Lease { executor: ledger.config.executor.clone(), until }), ..Update::default() };
    transition(&record.approval_id, (from, ApprovalState::Executing), guard, update, now, events)
}

/// `approved → denied`, or `pending → denied` if the request has not
/// expired: the rules refuse an approved call as it is claimed
/// ([`super::counted`]), with `update` (their decision and the call's output).
pub(crate) fn refuse(
    record: &ApprovalRecord,
    from: ApprovalState,
    now: Millis,
    update: Update,
    events: Vec<AuditEvent>,
) -> Transition {
    let guard = match from {
        ApprovalState::Pending => Guard::NotExpiredAt(now),
        _ => Guard::None,
    };
    transition(&record.approval_id, (from, ApprovalState::Denied), guard, update, now, events)
}

/// `pending → expired`, once the request's time is up.
pub(crate) fn expire(record: &ApprovalRecord, now: Millis, events: Vec<AuditEvent>) -> Transition {
    let update = Update { output: Some(ToolResultOutput::error_text(EXPIRED_TEXT)), ..Update::default() };
    transition(
        &record.approval_id,
        (ApprovalState::Pending, ApprovalState::Expired),
        Guard::ExpiredAt(now),
        update,
        now,
        events,
    )
}

/// `executing → interrupted`, once the executor's lease lapsed without an outcome.
pub(crate) fn interrupt(record: &ApprovalRecord, now: Millis, events: Vec<AuditEvent>) -> Transition {
    let update = Update { output: Some(ToolResultOutput::error_text(INTERRUPTED_TEXT)), ..Update::default() };
    let states = (ApprovalState::Executing, ApprovalState::Interrupted);
    transition(&record.approval_id, states, Guard::LeaseLapsedAt(now), update, now, events)
}

/// `executing → executed | failed`: the outcome of a call run under this process's claim.
pub(crate) fn finish(
    approval_id: &str,
    output: ToolResultOutput,
    failed: bool,
    now: Millis,
    events: Vec<AuditEvent>,
) -> Transition {
    let to = if failed { ApprovalState::Failed } else { ApprovalState::Executed };
    let update = Update { output: Some(output), ..Update::default() };
    transition(approval_id, (ApprovalState::Executing, to), Guard::None, update, now, events)
}
