//! The claim of a call a person approved, on the history as it starts.
//!
//! A call asked about was judged on the history when it was asked; by the
//! time it is approved and claimed (`approved → executing`, or `pending →
//! executing` for an approval that claims it as it is given: the answer of
//! a held call's client, `held::decide`), other calls may have run. So the
//! claim judges it again, with the same gate, on the history as it is now,
//! and acts on the verdict:
//!
//! | verdict now | what happens |
//! |---|---|
//! | allow, or ask | it is claimed: a person already approved it, so an `ask` is not asked again (the approval stands) |
//! | deny (a limit reached meanwhile) | it does not run (fail closed): `approved → denied` (`pending → denied` after the person's `approved` event, for an answer), decided by the rules (`held::RULES_PRINCIPAL`), with a `denied` event holding the rule's explained reason (`reason`, `atClaim`: true); the client sees a denial |
//!
//! When the verdict read the history (a rule's history term, with a ledger:
//! [`crate::tool::CallGate::guards`]), the claim carries an `allowed` event
//! naming the approval, so the history counts the call from its claim (its
//! `executed` event does not count again), and the claim and that event are
//! written only while the history it was judged on stands, in one
//! conditional write with that check
//! ([`crate::ledger::HistoryStore::apply_if`]). When it moved, nothing is
//! written and the call is judged again, at most
//! [`super::direct::MAX_ADMITS`] times; then the claim fails
//! ([`crate::ledger::StoreError::Unavailable`], try again) and nothing runs.
//! So approvals claimed at once cannot all pass a limit they would not pass
//! one by one.
//!
//! A call a rule decided as it was issued (`held::HeldCall::decided`)
//! was judged and counted on the history then: its claim is not judged again.

use serde_json::{Value, json};
use toolgate_protocol::ToolResultOutput;

use super::{ApprovalState, Decision, transition};
use crate::ledger::{
    ApprovalRecord, AuditEvent, AuditKind, HistoryGuard, Ledger, Millis, RecordedDecision, StoreError, Transition,
    TransitionOutcome, Update,
};
use crate::tool::{ApprovalContext, Caller, GateAction, Tool, decide_call};

/// Who decides for the rules: the held calls' `RULES_PRINCIPAL`, the same
/// principal as the timer's.
pub(crate) const RULES: &str = super::TIMER_PRINCIPAL;

/// What judges an approved call again at its claim: the gate (in `caller`),
/// the tool, and the call's context (its tool call id: the record's).
#[derive(Clone)]
pub struct Rejudge<'a> {
    /// The gate and the identity it decides for.
    pub caller: Caller<'a>,
    /// The tool (a stand-in without a policy of its own for a call the server does not run).
    pub tool: &'a Tool,
    /// The call's context.
    pub context: ApprovalContext,
}

/// The `approved` held record's claim for this process under the ledger's
/// lease, judged again by `judge` (see the module docs). Returns the outcome
/// of the move it made: `executing` (claimed), `denied` (a rule refuses it
/// now), or the record as it is when it did not move.
pub(crate) async fn start(
    ledger: &Ledger,
    record: &ApprovalRecord,
    judge: &Rejudge<'_>,
) -> Result<TransitionOutcome, StoreError> {
    claim(ledger, record, judge, None).await
}

/// The `pending` held record's claim for this process on the approval of
/// the ledger's principal (the answer the gateway's client gave in its form,
/// with their edit, if any), judged again by `judge` as [`start`] judges an
/// approval decided out of band: `pending → executing` with the person's
/// `approved` event, or, when a rule refuses it now, `pending → denied`
/// with that `approved` event and the rules' `denied` one (`atClaim`).
/// Returns the outcome of the move it made, or the record as it is when it
/// did not move (decided meanwhile, or expired).
pub(crate) async fn answer(
    ledger: &Ledger,
    record: &ApprovalRecord,
    edited_input: Option<Value>,
    judge: &Rejudge<'_>,
) -> Result<TransitionOutcome, StoreError> {
    claim(ledger, record, judge, Some(&Decision::Approve { edited_input })).await
}

/// The claim of an approved call, judged again: of an `approved` record
/// (`answer` `None`), or of a `pending` one on the principal's `answer`.
async fn claim(
    ledger: &Ledger,
    record: &ApprovalRecord,
    judge: &Rejudge<'_>,
    answer: Option<&Decision>,
) -> Result<TransitionOutcome, StoreError> {
    let store = &ledger.config.store;
    // The input that runs: the person's edit, if they made one.
    let edit = match answer {
        Some(Decision::Approve { edited_input }) => edited_input.as_ref(),
        Some(Decision::Deny { .. }) => None,
        None => record.decision.as_ref().and_then(|decision| decision.edited_input.as_ref()),
    };
    let input = edit.unwrap_or(&record.input);
    for _ in 0..super::direct::MAX_ADMITS {
        let (verdict, guards) = judged(record, input, judge).await;
        let now = ledger.config.clock.now();
        // The person's answer, on record whatever the rules say now.
        let mut events = answer
            .map(|decision| transition::decision_events(ledger, record, decision, false, now))
            .unwrap_or_default();
        if verdict.action == GateAction::Deny {
            let from = if answer.is_some() { ApprovalState::Pending } else { ApprovalState::Approved };
            let refused = deny(ledger, (record, from), verdict.reason.unwrap_or_default(), now, events);
            return Ok(one(store.apply(&[refused], &[]).await?));
        }
        if !guards.is_empty() {
            events.push(claimed(ledger, record, input, now));
        }
        let claim = match answer {
            Some(decision) => transition::decide(record, decision.clone(), ledger, now, events),
            None => transition::start_execution(record, ledger, now, ApprovalState::Approved, events),
        };
        if guards.is_empty() {
            return Ok(one(store.apply(&[claim], &[]).await?));
        }
        if let Some(outcomes) = store.apply_if(&guards, &[claim]).await? {
            return Ok(one(outcomes));
        }
    }
    let id = &record.approval_id;
    Err(StoreError::Unavailable(format!("the history kept changing while call `{id}` was claimed; try again")))
}

/// The gate's verdict on the approved call now, and the history it read.
async fn judged(
    record: &ApprovalRecord,
    input: &Value,
    judge: &Rejudge<'_>,
) -> (crate::tool::Verdict, Vec<HistoryGuard>) {
    let verdict = decide_call(judge.caller, judge.tool, input, judge.context.clone()).await;
    let guards = judge.caller.gate.map(|gate| gate.guards(&record.tool_call_id)).unwrap_or_default();
    (verdict, guards)
}

/// The one outcome of a one-transition write.
fn one(mut outcomes: Vec<TransitionOutcome>) -> TransitionOutcome {
    outcomes.pop().unwrap_or(TransitionOutcome::Missing)
}

/// The `allowed` event of a claim judged on the history, with the `input`
/// that runs: it counts the call from now on.
pub(crate) fn claimed(ledger: &Ledger, record: &ApprovalRecord, input: &Value, now: Millis) -> AuditEvent {
    let data = json!({"toolName": record.tool_name, "input": input, "decidedBy": "approval"});
    ledger.event(AuditKind::Allowed, &record.approval_id, &record.tool_call_id, now, data)
}

/// `approved → denied`, or `pending → denied` after `events` (the person's
/// answer, claiming it): a rule refuses the approved call at its claim.
fn deny(
    ledger: &Ledger,
    (record, from): (&ApprovalRecord, ApprovalState),
    reason: String,
    now: Millis,
    events: Vec<AuditEvent>,
) -> Transition {
    let data = json!({
        "toolName": record.tool_name,
        "input": record.input,
        "reason": reason,
        "decidedBy": super::direct::DECIDED_BY_POLICY,
        "atClaim": true,
    });
    let mut events = events;
    events.push(ledger.event(AuditKind::Denied, &record.approval_id, &record.tool_call_id, now, data));
    let decision = Decision::Deny { reason: Some(reason.clone()) };
    let recorded = RecordedDecision::new(decision, Some(RULES.to_owned()), now);
    let update =
        Update { decision: Some(recorded), output: Some(ToolResultOutput::error_text(reason)), ..Update::default() };
    transition::refuse(record, from, now, update, events)
}

/// Whether a rule decided the record as it was issued (judged and counted
/// then): decided in the rules' name with no vote. A person's approval out
/// of band is always a vote ([`super::cast`]), so a person who happens to
/// bear the rules' name is still judged again.
pub(crate) fn decided_by_rules(record: &ApprovalRecord) -> bool {
    record.votes.is_empty()
        && record.decision.as_ref().is_some_and(|decision| decision.principal.as_deref() == Some(RULES))
}
