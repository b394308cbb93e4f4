//! Settling a request's approval answers against the ledger, before anything runs.
//!
//! Runs after the stateless checks (`approval::resolve`), in three moves:
//! 1. **Read** every approval the request acts on, in one query. An id the
//!    ledger never issued, one issued for another conversation, call, tool or
//!    input, an answer contradicting a recorded decision, and an approval
//!    whose call is running right now each fail the request (every refusal is
//!    audited as `rejected`); nothing has changed yet.
//! 2. **Claim**, in one transaction: each pending, unexpired approval moves to
//!    `approved` and on to `executing` under this process's lease, or to
//!    `denied`; its audit events commit with it. Only the first answer can move it.
//! 3. **Settle** what did not move from its record: an expired request moves to
//!    `expired`, an execution whose lease lapsed to `interrupted` (or is claimed
//!    again when the tool is idempotent), and a decided one gives back its
//!    stored outcome. A race lost to a contradicting answer after step 1 is not
//!    an error (claims of this request already happened): the recorded
//!    decision stands, with a warning.
//!
//! Held calls and provider-executed answers are not in the ledger.

use std::collections::HashMap;

use serde_json::{Value, json};
use toolgate_protocol::{StreamPart, ToolCallPart, ToolResultOutput};

use crate::EngineError;
use crate::approval::{ApprovalOutcome, NO_ANSWER_REASON, Plan, Resolved, ResolvedApproval, input_digest};
use crate::error::ApprovalAnswer;
use crate::ledger::{
    ApprovalRecord, ApprovalState, AuditEvent, AuditKind, Decision, EXPIRED_TEXT, Guard, INTERRUPTED_TEXT, Lease,
    Ledger, Millis, Transition, TransitionOutcome, Update, WARNING_ALREADY_DECIDED, WARNING_EXPIRED,
    WARNING_INTERRUPTED,
};
use crate::tool::Toolkit;

/// What the history says about one approval.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Approve(Option<Value>),
    Deny(Option<String>),
    /// No answer before the conversation moved on.
    Unanswered,
    /// Approved, but the policy now refuses it.
    Refused(String),
}

impl Answer {
    /// The person's explicit decision, if the history carries one.
    fn given(&self) -> Option<ApprovalAnswer> {
        match self {
            Self::Approve(None) => Some(ApprovalAnswer::Approve),
            Self::Approve(Some(edit)) => Some(ApprovalAnswer::ApproveWithEdit(Box::new(edit.clone()))),
            Self::Deny(_) => Some(ApprovalAnswer::Deny),
            Self::Unanswered | Self::Refused(_) => None,
        }
    }
}

/// One approval of the plan with its answer.
struct Entry {
    index: usize,
    approval_id: String,
    call: ToolCallPart,
    answer: Answer,
    idempotent: bool,
}

/// How an approval ends up for this request.
enum Settlement {
    /// Claimed by this request: run it.
    Run,
    /// Denied (now or on record), with the reason.
    Deny(Option<String>),
    /// Outcome on record; nothing runs.
    Stored(ToolResultOutput, ApprovalOutcome),
}

/// What the record says an answer should get, when it is not pending.
enum Verdict {
    Settled(Settlement),
    Conflict(ApprovalAnswer, ApprovalAnswer),
    InProgress,
    /// A transition to try.
    Move(Transition),
}

/// Settles the plan's approvals against the ledger (see the module docs);
/// returns the plan to carry out and the warnings to stream first.
pub(crate) async fn settle(
    mut plan: Plan,
    ledger: &Ledger,
    toolkit: Option<&Toolkit>,
) -> Result<(Plan, Vec<StreamPart>), EngineError> {
    let entries = entries(&plan.approvals, toolkit);
    if entries.is_empty() {
        return Ok((plan, Vec::new()));
    }
    let store = &ledger.config.store;
    let now = ledger.config.clock.now();
    let ids: Vec<String> = entries.iter().map(|entry| entry.approval_id.clone()).collect();
    let mut records: HashMap<String, ApprovalRecord> =
        store.approvals(&ids).await?.into_iter().map(|record| (record.approval_id.clone(), record)).collect();

    // 1. Read and check.
    let mut rejected = Vec::new();
    let mut failure = None;
    let mut claims = Vec::new();
    let mut claimants = Vec::new();
    for (position, entry) in entries.iter().enumerate() {
        let refusal = match records.get(&entry.approval_id) {
            None => Err(EngineError::ApprovalNotIssued { approval_id: entry.approval_id.clone() }),
            Some(record) => check_binding(record, entry, &ledger.conversation_id).map(|()| record),
        };
        let record = match refusal {
            Ok(record) => record,
            Err(error) => {
                rejected.push(rejection(ledger, entry, now, error.to_string()));
                failure.get_or_insert(error);
                continue;
            }
        };
        if record.state == ApprovalState::Pending && record.expires_at > now {
            let transitions = claim(record, entry, ledger, now);
            claimants.extend(std::iter::repeat_n(position, transitions.len()));
            claims.extend(transitions);
            continue;
        }
        let error = match verdict(record, entry, ledger, now) {
            Verdict::Conflict(recorded, received) => {
                EngineError::ApprovalAlreadyDecided { approval_id: entry.approval_id.clone(), recorded, received }
            }
            Verdict::InProgress => EngineError::ApprovalInProgress { approval_id: entry.approval_id.clone() },
            Verdict::Settled(_) | Verdict::Move(_) => continue,
        };
        rejected.push(rejection(ledger, entry, now, error.to_string()));
        failure.get_or_insert(error);
    }
    if let Some(error) = failure {
        store.append(&rejected).await?;
        return Err(error);
    }

    // 2. Claim. An entry is this request's when its first transition moved
    //    (the rest of its transitions run in the same transaction, on a row it holds).
    let mut settled: Vec<Option<Settlement>> = entries.iter().map(|_| None).collect();
    let mut won = vec![false; entries.len()];
    let outcomes = store.apply(&claims, &[]).await?;
    let mut previous = None;
    for (position, outcome) in claimants.into_iter().zip(outcomes) {
        let first = previous != Some(position);
        previous = Some(position);
        match outcome {
            TransitionOutcome::Moved(record) if first || won[position] => {
                won[position] = true;
                settled[position] = Some(moved_settlement(&record));
                records.insert(record.approval_id.clone(), record);
            }
            TransitionOutcome::Moved(_) | TransitionOutcome::Missing => {}
            TransitionOutcome::Unmoved(record) if first => {
                records.insert(record.approval_id.clone(), record);
            }
            TransitionOutcome::Unmoved(record) => {
                // Approved but not executing: cannot happen on a row this transaction holds.
                // Never run a claim that did not fully move.
                won[position] = false;
                settled[position] = Some(busy(&entries[position], record.state));
            }
        }
    }

    // 3. Settle what this request did not claim: at most one round of transitions.
    let mut warnings = Vec::new();
    let mut moves = Vec::new();
    let mut moving = Vec::new();
    for (position, entry) in entries.iter().enumerate() {
        if settled[position].is_some() {
            continue;
        }
        let record = &records[&entry.approval_id];
        match verdict(record, entry, ledger, now) {
            Verdict::Settled(settlement) => settled[position] = Some(settlement),
            Verdict::Move(transition) => {
                moving.push(position);
                moves.push(transition);
            }
            Verdict::Conflict(recorded, received) => {
                let message = format!(
                    "approval `{}` was already decided ({recorded}); this answer ({received}) was not applied",
                    entry.approval_id
                );
                rejected.push(rejection(ledger, entry, now, message.clone()));
                warnings.push(StreamPart::Warning { code: WARNING_ALREADY_DECIDED.to_owned(), message });
                settled[position] = Some(recorded_settlement(record));
            }
            Verdict::InProgress => settled[position] = Some(busy(entry, record.state)),
        }
    }
    if !moves.is_empty() {
        for (position, outcome) in moving.into_iter().zip(store.apply(&moves, &[]).await?) {
            let entry = &entries[position];
            settled[position] = Some(match &outcome {
                TransitionOutcome::Moved(record) => {
                    won[position] = record.state == ApprovalState::Executing;
                    moved_settlement(record)
                }
                TransitionOutcome::Unmoved(record) => match verdict(record, entry, ledger, now) {
                    Verdict::Settled(settlement) => settlement,
                    Verdict::Conflict(..) => recorded_settlement(record),
                    Verdict::Move(_) | Verdict::InProgress => busy(entry, record.state),
                },
                TransitionOutcome::Missing => busy(entry, ApprovalState::Pending),
            });
            if let TransitionOutcome::Moved(record) | TransitionOutcome::Unmoved(record) = outcome {
                records.insert(record.approval_id.clone(), record);
            }
        }
    }
    for (position, entry) in entries.iter().enumerate() {
        if entry.answer.given().is_some() && !won[position] {
            let why = match records[&entry.approval_id].state {
                ApprovalState::Expired => "answered after the request expired".to_owned(),
                state => format!("replayed: the approval was already {}", state.as_str()),
            };
            rejected.push(rejection(ledger, entry, now, why));
        }
    }
    if !rejected.is_empty() {
        store.append(&rejected).await?;
    }

    for ((entry, settlement), won) in entries.iter().zip(settled).zip(won) {
        let settlement = match settlement {
            Some(Settlement::Run) if !won => busy(entry, ApprovalState::Executing),
            Some(settlement) => settlement,
            None => busy(entry, ApprovalState::Pending),
        };
        if let Settlement::Stored(_, outcome @ (ApprovalOutcome::Expired | ApprovalOutcome::Interrupted)) = &settlement
        {
            let (code, text) = match outcome {
                ApprovalOutcome::Expired => (WARNING_EXPIRED, "expired before it was answered"),
                _ => (WARNING_INTERRUPTED, "was interrupted; its outcome is unknown"),
            };
            let message = format!("approval `{}` for tool `{}` {text}", entry.approval_id, entry.call.tool_name);
            warnings.push(StreamPart::Warning { code: code.to_owned(), message });
        }
        apply_settlement(&mut plan, entry, settlement, won);
    }
    Ok((plan, warnings))
}

/// The ledger-relevant approvals of a plan (provider-executed ones are not recorded here).
fn entries(approvals: &[ResolvedApproval], toolkit: Option<&Toolkit>) -> Vec<Entry> {
    approvals
        .iter()
        .enumerate()
        .filter_map(|(index, approval)| {
            let answer = match &approval.outcome {
                ApprovalOutcome::Approved { edited_input } => Answer::Approve(edited_input.clone()),
                ApprovalOutcome::Denied { reason } => Answer::Deny(reason.clone()),
                ApprovalOutcome::Unanswered => Answer::Unanswered,
                ApprovalOutcome::Refused { reason } => Answer::Refused(reason.clone()),
                ApprovalOutcome::Forwarded { .. }
                | ApprovalOutcome::Replayed { .. }
                | ApprovalOutcome::Expired
                | ApprovalOutcome::Interrupted => return None,
            };
            let idempotent = toolkit
                .and_then(|toolkit| toolkit.get(&approval.tool_call.tool_name))
                .is_some_and(|tool| tool.is_idempotent());
            Some(Entry {
                index,
                approval_id: approval.approval_id.clone(),
                call: approval.tool_call.clone(),
                answer,
                idempotent,
            })
        })
        .collect()
}

/// Fails when the record was issued for another conversation, call, tool or input.
fn check_binding(record: &ApprovalRecord, entry: &Entry, conversation_id: &str) -> Result<(), EngineError> {
    let digest = input_digest(&entry.call.input).unwrap_or_default();
    let detail = if record.conversation_id != conversation_id {
        Some(format!("it was issued in another conversation, not `{conversation_id}`"))
    } else if record.tool_call_id != entry.call.tool_call_id {
        Some(format!("it was issued for tool call `{}`, not `{}`", record.tool_call_id, entry.call.tool_call_id))
    } else if record.tool_name != entry.call.tool_name {
        Some(format!("it was issued for tool `{}`, not `{}`", record.tool_name, entry.call.tool_name))
    } else if record.input_digest != digest {
        Some("the call's input differs from the input it was issued for".to_owned())
    } else {
        None
    };
    match detail {
        Some(detail) => Err(EngineError::ApprovalMismatch { approval_id: entry.approval_id.clone(), detail }),
        None => Ok(()),
    }
}

/// The transitions that claim a pending approval for this request's answer.
fn claim(record: &ApprovalRecord, entry: &Entry, ledger: &Ledger, now: Millis) -> Vec<Transition> {
    let principal = ledger.principal.clone();
    let (decision, mut events) = match &entry.answer {
        Answer::Approve(edit) => {
            let decision =
                Decision { approved: true, edited_input: edit.clone(), reason: None, principal, decided_at: now };
            let mut events = vec![noted(ledger, record, AuditKind::Approved, now, json!({"input": record.input}))];
            if let Some(edit) = edit {
                let data = json!({"originalInput": record.input, "editedInput": edit});
                events.push(noted(ledger, record, AuditKind::Edited, now, data));
            }
            (decision, events)
        }
        Answer::Deny(reason) => (deny(reason.clone(), principal, now), Vec::new()),
        Answer::Unanswered => (deny(Some(NO_ANSWER_REASON.to_owned()), principal, now), Vec::new()),
        Answer::Refused(reason) => (deny(Some(reason.clone()), principal, now), Vec::new()),
    };
    if !decision.approved {
        let data = json!({"reason": decision.reason, "unanswered": entry.answer == Answer::Unanswered});
        events.push(noted(ledger, record, AuditKind::Denied, now, data));
    }
    let approved = decision.approved;
    let mut claims = vec![Transition {
        approval_id: record.approval_id.clone(),
        from: ApprovalState::Pending,
        to: if approved { ApprovalState::Approved } else { ApprovalState::Denied },
        guard: Guard::NotExpiredAt(now),
        update: Update { decision: Some(decision), ..Update::default() },
        at: now,
        events,
    }];
    if approved {
        claims.push(start_execution(record, ledger, now, ApprovalState::Approved, Guard::None, Vec::new()));
    }
    claims
}

fn deny(reason: Option<String>, principal: Option<String>, now: Millis) -> Decision {
    Decision { approved: false, edited_input: None, reason, principal, decided_at: now }
}

/// `from → executing` under this process's lease.
fn start_execution(
    record: &ApprovalRecord,
    ledger: &Ledger,
    now: Millis,
    from: ApprovalState,
    guard: Guard,
    events: Vec<AuditEvent>,
) -> Transition {
    let until = now.saturating_add(crate::ledger::millis(ledger.config.lease));
    Transition {
        approval_id: record.approval_id.clone(),
        from,
        to: ApprovalState::Executing,
        guard,
        update: Update { lease: Some(Lease { executor: ledger.config.executor.clone(), until }), ..Update::default() },
        at: now,
        events,
    }
}

/// What a record that is not pending (or did not move) means for this answer.
fn verdict(record: &ApprovalRecord, entry: &Entry, ledger: &Ledger, now: Millis) -> Verdict {
    let recorded = record.decision.as_ref().map(|decision| match (&decision.approved, &decision.edited_input) {
        (false, _) => ApprovalAnswer::Deny,
        (true, None) => ApprovalAnswer::Approve,
        (true, Some(edit)) => ApprovalAnswer::ApproveWithEdit(Box::new(edit.clone())),
    });
    if let (Some(recorded), Some(received)) = (&recorded, entry.answer.given())
        && *recorded != received
    {
        return Verdict::Conflict(recorded.clone(), received);
    }
    match record.state {
        ApprovalState::Pending if record.expires_at <= now => {
            let events = vec![noted(ledger, record, AuditKind::Expired, now, json!({"expiresAt": record.expires_at}))];
            Verdict::Move(Transition {
                approval_id: record.approval_id.clone(),
                from: ApprovalState::Pending,
                to: ApprovalState::Expired,
                guard: Guard::ExpiredAt(now),
                update: Update { output: Some(ToolResultOutput::error_text(EXPIRED_TEXT)), ..Update::default() },
                at: now,
                events,
            })
        }
        ApprovalState::Pending | ApprovalState::Approved => Verdict::InProgress,
        ApprovalState::Executing if record.lease.as_ref().is_some_and(|lease| lease.until > now) => Verdict::InProgress,
        ApprovalState::Executing if entry.idempotent && matches!(entry.answer, Answer::Approve(_)) => {
            let events = vec![noted(ledger, record, AuditKind::Interrupted, now, json!({"rerun": true}))];
            Verdict::Move(start_execution(
                record,
                ledger,
                now,
                ApprovalState::Executing,
                Guard::LeaseLapsedAt(now),
                events,
            ))
        }
        ApprovalState::Executing => Verdict::Move(Transition {
            approval_id: record.approval_id.clone(),
            from: ApprovalState::Executing,
            to: ApprovalState::Interrupted,
            guard: Guard::LeaseLapsedAt(now),
            update: Update { output: Some(ToolResultOutput::error_text(INTERRUPTED_TEXT)), ..Update::default() },
            at: now,
            events: vec![noted(ledger, record, AuditKind::Interrupted, now, json!({"rerun": false}))],
        }),
        ApprovalState::Denied
        | ApprovalState::Expired
        | ApprovalState::Executed
        | ApprovalState::Failed
        | ApprovalState::Interrupted => Verdict::Settled(recorded_settlement(record)),
    }
}

/// What a transition this request made means: run under its lease, or the stored outcome.
fn moved_settlement(record: &ApprovalRecord) -> Settlement {
    match record.state {
        ApprovalState::Executing => Settlement::Run,
        _ => recorded_settlement(record),
    }
}

/// The result of an approval another request is settling right now: nothing runs here.
fn busy(entry: &Entry, state: ApprovalState) -> Settlement {
    Settlement::Stored(
        ToolResultOutput::error_text(format!(
            "approval `{}` is being settled by another request at the same time; this request did not run it",
            entry.approval_id
        )),
        ApprovalOutcome::Replayed { state },
    )
}

/// The outcome on record, as this request returns it.
fn recorded_settlement(record: &ApprovalRecord) -> Settlement {
    let stored = |fallback: &str| record.output.clone().unwrap_or_else(|| ToolResultOutput::error_text(fallback));
    match record.state {
        ApprovalState::Denied => Settlement::Deny(record.decision.as_ref().and_then(|d| d.reason.clone())),
        ApprovalState::Expired => Settlement::Stored(stored(EXPIRED_TEXT), ApprovalOutcome::Expired),
        ApprovalState::Interrupted => Settlement::Stored(stored(INTERRUPTED_TEXT), ApprovalOutcome::Interrupted),
        state => Settlement::Stored(stored(INTERRUPTED_TEXT), ApprovalOutcome::Replayed { state }),
    }
}

/// Rewrites the plan's action and record for an entry.
fn apply_settlement(plan: &mut Plan, entry: &Entry, settlement: Settlement, won: bool) {
    let action = plan.actions.iter_mut().find(|action| action.call().tool_call_id == entry.call.tool_call_id);
    let record = &mut plan.approvals[entry.index];
    match settlement {
        Settlement::Run => {}
        Settlement::Deny(reason) => {
            if !won {
                record.outcome = ApprovalOutcome::Replayed { state: ApprovalState::Denied };
            }
            if let Some(action) = action {
                *action = Resolved::Deny { call: entry.call.clone(), reason };
            }
        }
        Settlement::Stored(output, outcome) => {
            record.outcome = outcome;
            if let Some(action) = action {
                *action = Resolved::Stored { call: entry.call.clone(), output };
            }
        }
    }
}

/// An event about a record, caused by this request.
fn noted(ledger: &Ledger, record: &ApprovalRecord, kind: AuditKind, at: Millis, data: Value) -> AuditEvent {
    ledger.event(kind, &record.approval_id, &record.tool_call_id, at, data)
}

/// A `rejected` event for an answer this request carried.
fn rejection(ledger: &Ledger, entry: &Entry, at: Millis, why: String) -> AuditEvent {
    let data = json!({"why": why, "answer": entry.answer.given().map(|answer| answer.to_string())});
    ledger.event(AuditKind::Rejected, &entry.approval_id, &entry.call.tool_call_id, at, data)
}
