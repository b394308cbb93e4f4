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
    WARNING_INTERRUPTED, split_conversation_key,
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

/// How often a request waiting for another request's claim looks again.
const SETTLE_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// Re-reads after losing every race at most this often (one is always enough: a
/// lost claim means the record left `pending`).
const MAX_LOST_ROUNDS: usize = 3;

/// What the read-and-check move found.
enum Checked {
    /// Nothing stands in the way: these claims (by entry position) are to be tried.
    Ready { claims: Vec<Transition>, claimants: Vec<usize> },
    /// Another request is executing this approval right now.
    Busy(String),
    /// The request is refused; the rejections are audited.
    Refused(EngineError),
}

/// Settles the plan's approvals against the ledger (see the module docs);
/// returns the plan to carry out and the warnings to stream first.
///
/// A request that finds an approval being executed by another request waits
/// for that outcome (up to [`crate::ledger::LedgerConfig::settle_wait`], then
/// `approval_in_progress`), and one that loses every race it ran reads the
/// winners' records again: a duplicate answer always gets the real outcome,
/// never a placeholder.
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
    let ids: Vec<String> = entries.iter().map(|entry| entry.approval_id.clone()).collect();
    let deadline = tokio::time::Instant::now() + ledger.config.settle_wait;
    let mut lost_rounds = 0;
    // A single answer to an approval this process issued is checked against
    // the record it kept (see `IssuedApprovals`) when that record leads to a
    // claim (pending as issued, unexpired): if its state is stale, the claim
    // does not move and the next round reads the store. Anything else reads
    // the store first, as if nothing were kept.
    let mut kept = match ids.as_slice() {
        [id] => ledger.config.issued.take(id),
        _ => None,
    };
    loop {
        let now = ledger.config.clock.now();
        let claimable = kept.take().filter(|record| record.state == ApprovalState::Pending && record.expires_at > now);
        let mut records: HashMap<String, ApprovalRecord> = match claimable {
            Some(record) => HashMap::from([(record.approval_id.clone(), record)]),
            None => {
                store.approvals(&ids).await?.into_iter().map(|record| (record.approval_id.clone(), record)).collect()
            }
        };
        let mut rejected = Vec::new();
        let (claims, claimants) = match check(&entries, &records, ledger, now, &mut rejected) {
            Checked::Ready { claims, claimants } => (claims, claimants),
            Checked::Refused(error) => {
                store.append(&rejected).await?;
                return Err(error);
            }
            Checked::Busy(approval_id) => {
                if tokio::time::Instant::now() >= deadline {
                    return Err(EngineError::ApprovalInProgress { approval_id });
                }
                tokio::time::sleep(SETTLE_POLL).await;
                continue;
            }
        };

        // 2. Claim. An entry is this request's when its first transition moved
        //    (the rest of its transitions run in the same transaction, on a row it holds).
        let mut settled: Vec<Option<Settlement>> = entries.iter().map(|_| None).collect();
        let mut won = vec![false; entries.len()];
        let outcomes = store.apply(&claims, &[]).await?;
        let mut previous = None;
        for (position, outcome) in claimants.iter().copied().zip(outcomes) {
            let first = previous != Some(position);
            previous = Some(position);
            match outcome {
                TransitionOutcome::Moved(record) if first || won[position] => {
                    won[position] = true;
                    settled[position] = Some(moved_settlement(&record, &entries[position]));
                    records.insert(record.approval_id.clone(), record);
                }
                TransitionOutcome::Unmoved(record) if first => {
                    records.insert(record.approval_id.clone(), record);
                }
                TransitionOutcome::Unmoved(record) if won[position] => {
                    // Approved but not executing: cannot happen on a row this transaction holds.
                    // Never run a claim that did not fully move.
                    won[position] = false;
                    settled[position] = Some(busy(&entries[position], record.state));
                }
                TransitionOutcome::Moved(_) | TransitionOutcome::Unmoved(_) | TransitionOutcome::Missing => {}
            }
        }
        if !claims.is_empty() && !won.contains(&true) && lost_rounds < MAX_LOST_ROUNDS {
            // Every race lost and nothing of this request changed: settle from the winners'
            // records. They are no longer pending, so the next read has nothing left to lose.
            lost_rounds += 1;
            continue;
        }
        let (warnings, settled) =
            settle_unclaimed(&entries, settled, &mut won, &mut records, ledger, now, &mut rejected).await?;
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
        let mut warnings = warnings;
        for ((entry, settlement), won) in entries.iter().zip(settled).zip(won) {
            if let Settlement::Stored(_, outcome @ (ApprovalOutcome::Expired | ApprovalOutcome::Interrupted)) =
                &settlement
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
        return Ok((plan, warnings));
    }
}

/// 1. Checks every entry against its record before anything changes.
fn check(
    entries: &[Entry],
    records: &HashMap<String, ApprovalRecord>,
    ledger: &Ledger,
    now: Millis,
    rejected: &mut Vec<AuditEvent>,
) -> Checked {
    let mut failure = None;
    let mut busy = None;
    let mut claims = Vec::new();
    let mut claimants = Vec::new();
    for (position, entry) in entries.iter().enumerate() {
        let record = match records.get(&entry.approval_id) {
            None => Err(EngineError::ApprovalNotIssued { approval_id: entry.approval_id.clone() }),
            Some(record) => check_binding(record, entry, &ledger.conversation_id).map(|()| record),
        };
        let record = match record {
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
        match verdict(record, entry, ledger, now) {
            Verdict::Conflict(recorded, received) => {
                let error =
                    EngineError::ApprovalAlreadyDecided { approval_id: entry.approval_id.clone(), recorded, received };
                rejected.push(rejection(ledger, entry, now, error.to_string()));
                failure.get_or_insert(error);
            }
            Verdict::InProgress => {
                busy.get_or_insert_with(|| entry.approval_id.clone());
            }
            Verdict::Settled(_) | Verdict::Move(_) => {}
        }
    }
    match (failure, busy) {
        (Some(error), _) => Checked::Refused(error),
        (None, Some(approval_id)) => Checked::Busy(approval_id),
        (None, None) => Checked::Ready { claims, claimants },
    }
}

/// 3. Settles what this request did not claim, with at most one round of
///    transitions (expire, interrupt, claim again for an idempotent tool).
async fn settle_unclaimed(
    entries: &[Entry],
    mut settled: Vec<Option<Settlement>>,
    won: &mut [bool],
    records: &mut HashMap<String, ApprovalRecord>,
    ledger: &Ledger,
    now: Millis,
    rejected: &mut Vec<AuditEvent>,
) -> Result<(Vec<StreamPart>, Vec<Settlement>), EngineError> {
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
                // Another answer won the race after this request's own claims moved.
                let message = format!(
                    "approval `{}` was already decided ({recorded}); this answer ({received}) was not applied",
                    entry.approval_id
                );
                rejected.push(rejection(ledger, entry, now, message.clone()));
                warnings.push(StreamPart::Warning { code: WARNING_ALREADY_DECIDED.to_owned(), message });
                settled[position] = Some(recorded_settlement(record, entry));
            }
            Verdict::InProgress => settled[position] = Some(busy(entry, record.state)),
        }
    }
    if !moves.is_empty() {
        let outcomes = ledger.config.store.apply(&moves, &[]).await?;
        for (position, outcome) in moving.into_iter().zip(outcomes) {
            let entry = &entries[position];
            settled[position] = Some(match &outcome {
                TransitionOutcome::Moved(record) => {
                    won[position] = record.state == ApprovalState::Executing;
                    moved_settlement(record, entry)
                }
                TransitionOutcome::Unmoved(record) => match verdict(record, entry, ledger, now) {
                    Verdict::Settled(settlement) => settlement,
                    Verdict::Conflict(..) => recorded_settlement(record, entry),
                    Verdict::Move(_) | Verdict::InProgress => busy(entry, record.state),
                },
                TransitionOutcome::Missing => busy(entry, ApprovalState::Pending),
            });
            if let TransitionOutcome::Moved(record) | TransitionOutcome::Unmoved(record) = outcome {
                records.insert(record.approval_id.clone(), record);
            }
        }
    }
    let settled = entries
        .iter()
        .zip(settled)
        .zip(won.iter())
        .map(|((entry, settlement), won)| match settlement {
            Some(Settlement::Run) if !won => busy(entry, ApprovalState::Executing),
            Some(settlement) => settlement,
            None => busy(entry, ApprovalState::Pending),
        })
        .collect();
    Ok((warnings, settled))
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
        // Named as the client named it: the key's owner half is the ledger's, not the client's.
        Some(format!("it was issued in another conversation, not `{}`", split_conversation_key(conversation_id).1))
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
        | ApprovalState::Interrupted => Verdict::Settled(recorded_settlement(record, entry)),
    }
}

/// What a transition this request made means: run under its lease, or the stored outcome.
fn moved_settlement(record: &ApprovalRecord, entry: &Entry) -> Settlement {
    match record.state {
        ApprovalState::Executing => Settlement::Run,
        _ => recorded_settlement(record, entry),
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
fn recorded_settlement(record: &ApprovalRecord, entry: &Entry) -> Settlement {
    let stored = |fallback: &str| record.output.clone().unwrap_or_else(|| ToolResultOutput::error_text(fallback));
    match record.state {
        ApprovalState::Denied => Settlement::Deny(record.decision.as_ref().and_then(|d| d.reason.clone())),
        ApprovalState::Expired => Settlement::Stored(stored(EXPIRED_TEXT), ApprovalOutcome::Expired),
        ApprovalState::Interrupted => Settlement::Stored(stored(INTERRUPTED_TEXT), ApprovalOutcome::Interrupted),
        ApprovalState::Executed | ApprovalState::Failed => {
            Settlement::Stored(stored(INTERRUPTED_TEXT), ApprovalOutcome::Replayed { state: record.state })
        }
        // No outcome yet: another request holds it.
        ApprovalState::Pending | ApprovalState::Approved | ApprovalState::Executing => busy(entry, record.state),
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
