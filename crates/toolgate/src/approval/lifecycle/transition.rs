//! Every transition the engine asks a store to apply, built in one place so
//! that each follows the table of [`ApprovalState::can_move_to`].

use toolgate_protocol::ToolResultOutput;

use super::{ApprovalState, Decision};
use crate::ledger::{
    ApprovalRecord, AuditEvent, EXPIRED_TEXT, Guard, INTERRUPTED_TEXT, Lease, Ledger, Millis, RecordedDecision,
    Transition, Update, millis,
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
