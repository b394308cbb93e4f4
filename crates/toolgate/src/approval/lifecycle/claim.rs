//! The claim: settling a request's decisions against the ledger, before anything runs.
//!
//! Runs after the stateless checks (`approval::resolve`), in three moves:
//! 1. **Read** every approval the request acts on, in one query. An id the
//!    ledger never issued, one issued for another conversation, call, tool or
//!    input, an answer contradicting a recorded decision, and an approval
//!    whose call is running right now each fail the request (every refusal is
//!    audited as `rejected`); nothing has changed yet.
//! 2. **Claim**, in one transaction: each pending, unexpired approval moves
//!    straight to `executing` under this process's lease (approved and
//!    claimed in one conditional update), or to `denied`; its audit events
//!    commit with it. Only the first answer can move it. An approval routed
//!    to named approvers is never claimed here: votes decide it. When a
//!    verdict the answers were resolved on read the history (a rule's history
//!    term), the transaction is written only while that history stands, with
//!    an `allowed` event for each such claim ([`super::counted`]); when it
//!    moved, nothing is written and the answers are resolved again.
//! 3. **Settle** what did not move from its record: an expired request moves to
//!    `expired`, an execution whose lease lapsed to `interrupted` (or is claimed
//!    again when the tool is idempotent), one approved out of band moves to
//!    `executing` for this request (judged again on the history as it is
//!    claimed, [`super::counted`]), and a decided one gives back its stored
//!    outcome. A race lost to a contradicting answer after step 1 is not
//!    an error (claims of this request already happened): the recorded
//!    decision stands, with a warning.
//!
//! An approval superseded by an edit ([`super::supersede`]) is read as its
//! successor: the answer must carry the successor's input (the edit) or
//! deny, and what runs is claimed, and recorded, on the successor. An edit
//! the rules route to other approvers (the plan names it) runs only on such
//! a successor, decided by them; on the original it is refused
//! (`edit_not_allowed`).
//!
//! Held calls and provider-executed answers are not in the ledger.

use std::collections::HashMap;

use serde_json::{Value, json};
use toolgate_protocol::{StreamPart, ToolCallPart, ToolResultOutput};

use super::{ApprovalState, Decision, EditRefusal, transition};
use crate::EngineError;
use crate::approval::{ApprovalOutcome, NO_ANSWER_REASON, Plan, Resolved, input_digest};
use crate::ledger::{
    ApprovalRecord, AuditEvent, AuditKind, EXPIRED_TEXT, HistoryGuard, INTERRUPTED_TEXT, Ledger, Millis,
    RecordedDecision, Transition, TransitionOutcome, WARNING_ALREADY_DECIDED, WARNING_EXPIRED, WARNING_INTERRUPTED,
};
use crate::tool::{ApprovalContext, Caller, SharedMessages, Toolkit};

/// Who made an entry's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The person, in the history.
    Person,
    /// Nobody: the conversation moved on without an answer (denied on their behalf).
    Unanswered,
    /// The person approved, but the tool's policy now refuses the call (denied).
    Policy,
}

/// One approval of the plan with its decision.
struct Entry {
    index: usize,
    approval_id: String,
    call: ToolCallPart,
    decision: Decision,
    source: Source,
    idempotent: bool,
    /// The edit needs approvers the original approval does not have: it may
    /// run only on a successor they decided.
    needs_route: Option<EditRefusal>,
    /// Its verdict rested on the history: its claim is counted there (an
    /// `allowed` event naming the approval, see [`super::counted`]).
    counted: bool,
}

impl Entry {
    /// The person's own decision, if the history carries one.
    fn given(&self) -> Option<&Decision> {
        (self.source == Source::Person).then_some(&self.decision)
    }
}

/// What an approval means for this request.
enum Effect {
    /// Claimed by this request (the approval with this id: the entry's, or
    /// its successor's): run it.
    Run(String),
    /// Denied (now or on record), with the reason.
    Deny(Option<String>),
    /// Outcome on record; nothing runs.
    Stored(ToolResultOutput, ApprovalOutcome),
}

/// What a record that is not claimable says about an entry.
enum Reading {
    /// Its effect is on record.
    Settled(Effect),
    /// The recorded decision contradicts the entry's (recorded, received).
    Conflict(Decision, Decision),
    /// Another request is deciding or running it right now.
    InProgress,
    /// A transition to try (expire, interrupt, claim again).
    Move(Box<Transition>),
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
///
/// A claim whose verdict rested on the history (`Plan::history_guards`) is
/// written only while that history stands, in one conditional write with
/// the check ([`crate::ledger::HistoryStore::apply_if`]), with an `allowed`
/// event that counts it from then on; when it moved, nothing is written and
/// `None` comes back: the answers are to be resolved (judged) again. A call
/// approved out of band is judged again as it is claimed ([`super::counted`]).
pub(crate) async fn settle(
    mut plan: Plan,
    ledger: &Ledger,
    toolkit: Option<&Toolkit>,
    judge: ClaimJudge<'_>,
) -> Result<Option<(Plan, Vec<StreamPart>)>, EngineError> {
    let entries = entries(&plan, toolkit);
    if entries.is_empty() {
        return Ok(Some((plan, Vec::new())));
    }
    let guards: Vec<HistoryGuard> = plan.history_guards.values().flatten().cloned().collect();
    let store = &ledger.config.store;
    let ids: Vec<String> = entries.iter().map(|entry| entry.approval_id.clone()).collect();
    let deadline = tokio::time::Instant::now() + ledger.config.settle_wait;
    let mut lost_rounds = 0;
    // A single answer to an approval this process issued is checked against
    // the record it kept (see `IssuedApprovals`) when that record leads to a
    // claim (pending as issued, unexpired): if its state is stale, the claim
    // does not move and the next round reads the store. Anything else reads
    // the store first, as if nothing were kept.
    // An edit that needs other approvers is settled on the store's record: its successor, if any.
    let mut kept = match ids.as_slice() {
        [id] if plan.routed_edits.is_empty() => ledger.config.issued.take(id),
        _ => None,
    };
    loop {
        let now = ledger.config.clock.now();
        // A routed approval is decided by votes, which the kept record never sees: read the store.
        let claimable = kept.take().filter(|record| {
            record.state == ApprovalState::Pending && record.expires_at > now && record.routing.is_none()
        });
        let mut records: HashMap<String, ApprovalRecord> = match claimable {
            Some(record) => HashMap::from([(record.approval_id.clone(), record)]),
            None => super::current(store.as_ref(), &ids).await?,
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
        let mut settled: Vec<Option<Effect>> = entries.iter().map(|_| None).collect();
        let mut won = vec![false; entries.len()];
        let outcomes = match guards.is_empty() || claims.is_empty() {
            true => store.apply(&claims, &[]).await?,
            false => match store.apply_if(&guards, &claims).await? {
                Some(outcomes) => outcomes,
                // The history moved since the calls were judged: nothing was written.
                None => return Ok(None),
            },
        };
        let mut previous = None;
        for (position, outcome) in claimants.iter().copied().zip(outcomes) {
            let first = previous != Some(position);
            previous = Some(position);
            match outcome {
                TransitionOutcome::Moved(record) if first || won[position] => {
                    won[position] = true;
                    settled[position] = Some(moved_effect(&record, &entries[position]));
                    records.insert(entries[position].approval_id.clone(), record);
                }
                TransitionOutcome::Unmoved(record) if first => {
                    records.insert(entries[position].approval_id.clone(), record);
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
        let unclaimed = Unclaimed { ledger, now, toolkit, judge };
        let (warnings, settled) =
            settle_unclaimed(&entries, settled, &mut won, &mut records, unclaimed, &mut rejected).await?;
        let round = Round { effects: settled, won, records, rejected, warnings };
        let warnings = apply_round(&mut plan, &entries, round, ledger, now).await?;
        return Ok(Some((plan, warnings)));
    }
}

/// What judges a call approved out of band again as it is claimed: the
/// request's gate and identity, and the conversation so far.
#[derive(Clone, Copy)]
pub(crate) struct ClaimJudge<'a> {
    pub caller: Caller<'a>,
    pub messages: &'a SharedMessages,
}

/// What settling the unclaimed entries needs besides them.
struct Unclaimed<'a> {
    ledger: &'a Ledger,
    now: Millis,
    toolkit: Option<&'a Toolkit>,
    judge: ClaimJudge<'a>,
}

/// What a claim round ended with, entry by entry.
struct Round {
    effects: Vec<Effect>,
    won: Vec<bool>,
    records: HashMap<String, ApprovalRecord>,
    rejected: Vec<AuditEvent>,
    warnings: Vec<StreamPart>,
}

/// Audits the decisions that did not win their claim, warns about expired
/// and interrupted approvals, and rewrites the plan with every effect.
async fn apply_round(
    plan: &mut Plan,
    entries: &[Entry],
    round: Round,
    ledger: &Ledger,
    now: Millis,
) -> Result<Vec<StreamPart>, EngineError> {
    let Round { effects, won, records, mut rejected, mut warnings } = round;
    for (position, entry) in entries.iter().enumerate() {
        if entry.given().is_some() && !won[position] {
            let why = match records[&entry.approval_id].state {
                ApprovalState::Expired => "answered after the request expired".to_owned(),
                state => format!("replayed: the approval was already {}", state.as_str()),
            };
            rejected.push(rejection(ledger, entry, now, why));
        }
    }
    if !rejected.is_empty() {
        ledger.config.store.append(&rejected).await?;
    }
    for ((entry, effect), won) in entries.iter().zip(effects).zip(won) {
        if let Effect::Stored(_, outcome @ (ApprovalOutcome::Expired | ApprovalOutcome::Interrupted)) = &effect {
            let (code, text) = match outcome {
                ApprovalOutcome::Expired => (WARNING_EXPIRED, "expired before it was answered"),
                _ => (WARNING_INTERRUPTED, "was interrupted; its outcome is unknown"),
            };
            let message = format!("approval `{}` for tool `{}` {text}", entry.approval_id, entry.call.tool_name);
            warnings.push(StreamPart::Warning { code: code.to_owned(), message });
        }
        apply_effect(plan, entry, effect, won);
    }
    Ok(warnings)
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
            Some(record) => check_binding(record, entry, ledger).map(|()| record),
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
            if record.routing.is_some() {
                // Only its approvers decide it, through votes (`lifecycle::cast`), never a claim.
                let error = routed_refusal(record, entry, ledger, now);
                rejected.push(rejection(ledger, entry, now, error.to_string()));
                failure.get_or_insert(error);
                continue;
            }
            let transitions = claim(record, entry, ledger, now);
            claimants.extend(std::iter::repeat_n(position, transitions.len()));
            claims.extend(transitions);
            continue;
        }
        match reading(record, entry, ledger, now) {
            Reading::Conflict(recorded, received) => {
                let error = EngineError::ApprovalAlreadyDecided {
                    approval_id: entry.approval_id.clone(),
                    recorded: Box::new(recorded),
                    received: Box::new(received),
                };
                rejected.push(rejection(ledger, entry, now, error.to_string()));
                failure.get_or_insert(error);
            }
            Reading::InProgress => {
                busy.get_or_insert_with(|| entry.approval_id.clone());
            }
            Reading::Settled(_) | Reading::Move(_) => {}
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
    mut settled: Vec<Option<Effect>>,
    won: &mut [bool],
    records: &mut HashMap<String, ApprovalRecord>,
    unclaimed: Unclaimed<'_>,
    rejected: &mut Vec<AuditEvent>,
) -> Result<(Vec<StreamPart>, Vec<Effect>), EngineError> {
    let Unclaimed { ledger, now, toolkit, judge } = unclaimed;
    let mut warnings = Vec::new();
    let mut moves = Vec::new();
    let mut moving = Vec::new();
    let mut rejudged = Vec::new();
    for (position, entry) in entries.iter().enumerate() {
        if settled[position].is_some() {
            continue;
        }
        let record = &records[&entry.approval_id];
        let tool = toolkit.and_then(|toolkit| toolkit.get(&record.tool_name));
        match reading(record, entry, ledger, now) {
            Reading::Settled(effect) => settled[position] = Some(effect),
            // Approved out of band: judged again on the history as it is claimed.
            Reading::Move(transition)
                if transition.from == ApprovalState::Approved
                    && judge.caller.gate.is_some()
                    && !super::counted::decided_by_rules(record)
                    && let Some(tool) = tool =>
            {
                let context = ApprovalContext::new(record.tool_call_id.clone(), judge.messages.clone());
                let rejudge = super::counted::Rejudge { caller: judge.caller, tool, context };
                rejudged.push((position, super::counted::start(ledger, record, &rejudge).await?));
            }
            Reading::Move(transition) => {
                moving.push(position);
                moves.push(*transition);
            }
            Reading::Conflict(recorded, received) => {
                // Another answer won the race after this request's own claims moved.
                let message = format!(
                    "approval `{}` was already decided ({recorded}); this answer ({received}) was not applied",
                    entry.approval_id
                );
                rejected.push(rejection(ledger, entry, now, message.clone()));
                warnings.push(StreamPart::Warning { code: WARNING_ALREADY_DECIDED.to_owned(), message });
                settled[position] = Some(recorded_effect(record, entry));
            }
            Reading::InProgress => settled[position] = Some(busy(entry, record.state)),
        }
    }
    if !moves.is_empty() || !rejudged.is_empty() {
        let outcomes = match moves.is_empty() {
            true => Vec::new(),
            false => ledger.config.store.apply(&moves, &[]).await?,
        };
        let (judged, outcomes_judged): (Vec<usize>, Vec<TransitionOutcome>) = rejudged.into_iter().unzip();
        let moving = moving.into_iter().chain(judged);
        for (position, outcome) in moving.zip(outcomes.into_iter().chain(outcomes_judged)) {
            let entry = &entries[position];
            settled[position] = Some(match &outcome {
                TransitionOutcome::Moved(record) => {
                    won[position] = record.state == ApprovalState::Executing;
                    moved_effect(record, entry)
                }
                TransitionOutcome::Unmoved(record) => match reading(record, entry, ledger, now) {
                    Reading::Settled(effect) => effect,
                    Reading::Conflict(..) => recorded_effect(record, entry),
                    Reading::Move(_) | Reading::InProgress => busy(entry, record.state),
                },
                TransitionOutcome::Missing => busy(entry, ApprovalState::Pending),
            });
            if let TransitionOutcome::Moved(record) | TransitionOutcome::Unmoved(record) = outcome {
                records.insert(entry.approval_id.clone(), record);
            }
        }
    }
    let settled = entries
        .iter()
        .zip(settled)
        .zip(won.iter())
        .map(|((entry, effect), won)| match effect {
            Some(Effect::Run(_)) if !won => busy(entry, ApprovalState::Executing),
            Some(effect) => effect,
            None => busy(entry, ApprovalState::Pending),
        })
        .collect();
    Ok((warnings, settled))
}

/// The ledger-relevant approvals of a plan (provider-executed ones are not recorded here).
fn entries(plan: &Plan, toolkit: Option<&Toolkit>) -> Vec<Entry> {
    plan.approvals
        .iter()
        .enumerate()
        .filter_map(|(index, approval)| {
            let (decision, source) = match &approval.outcome {
                ApprovalOutcome::Approved { edited_input } => {
                    (Decision::Approve { edited_input: edited_input.clone() }, Source::Person)
                }
                ApprovalOutcome::Denied { reason } => (Decision::Deny { reason: reason.clone() }, Source::Person),
                ApprovalOutcome::Unanswered => {
                    (Decision::Deny { reason: Some(NO_ANSWER_REASON.to_owned()) }, Source::Unanswered)
                }
                ApprovalOutcome::Refused { reason } => {
                    (Decision::Deny { reason: Some(reason.clone()) }, Source::Policy)
                }
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
                decision,
                source,
                idempotent,
                needs_route: plan.routed_edits.get(&approval.approval_id).cloned(),
                counted: plan.history_guards.contains_key(&approval.approval_id),
            })
        })
        .collect()
}

/// Fails when the record was issued for another conversation, call, tool or
/// input (for a successor: when the answer does not carry its input), or
/// when an edit that needs other approvers would run without them.
fn check_binding(record: &ApprovalRecord, entry: &Entry, ledger: &Ledger) -> Result<(), EngineError> {
    if let Some(refusal) = &entry.needs_route
        && record.supersedes.is_none()
    {
        return Err(EngineError::EditNeedsApprovers {
            approval_id: entry.approval_id.clone(),
            tool_name: entry.call.tool_name.clone(),
            refusal: refusal.clone(),
        });
    }
    let detail = if record.conversation_id != ledger.conversation_id {
        // Named as the client named it: the key's owner half is the ledger's, not the client's.
        Some(format!("it was issued in another conversation, not `{}`", ledger.name()))
    } else if record.tool_call_id != entry.call.tool_call_id {
        Some(format!("it was issued for tool call `{}`, not `{}`", record.tool_call_id, entry.call.tool_call_id))
    } else if record.tool_name != entry.call.tool_name {
        Some(format!("it was issued for tool `{}`, not `{}`", record.tool_name, entry.call.tool_name))
    } else if record.supersedes.is_none() && record.input_digest != input_digest(&entry.call.input).unwrap_or_default()
    {
        Some("the call's input differs from the input it was issued for".to_owned())
    } else if answer_on(record, entry).is_none() {
        // A successor's input is the edit, which the answer must carry.
        Some(format!(
            "it was superseded by an edit (approval `{}`): the call runs only with the edited input",
            record.approval_id
        ))
    } else {
        None
    };
    match detail {
        Some(detail) => Err(EngineError::ApprovalMismatch { approval_id: entry.approval_id.clone(), detail }),
        None => Ok(()),
    }
}

/// Why an answer in the history cannot decide a pending approval routed to
/// named approvers: the requester's own vote refused, or, for a new message
/// that leaves it unanswered, the approvals still pending.
fn routed_refusal(record: &ApprovalRecord, entry: &Entry, ledger: &Ledger, now: Millis) -> EngineError {
    let voter = super::Voter::new(ledger.principal.clone());
    match entry.source {
        Source::Unanswered => EngineError::ApprovalsPending {
            pending: vec![format!("`{}` waits for {}", record.approval_id, super::waiting_for(record))],
        },
        Source::Person | Source::Policy => match super::check_vote(record, &voter, &entry.decision, now) {
            Err(refusal) => refusal.into(),
            // An approver's answer counts as a vote only through `lifecycle::cast`.
            Ok(()) => super::VoteRefusal::NotAnApprover {
                approval_id: record.approval_id.clone(),
                waiting_for: super::waiting_for(record),
            }
            .into(),
        },
    }
}

/// The transitions that claim a pending approval for this request's decision:
/// `pending → executing` (approved and claimed at once), or `pending → denied`.
fn claim(record: &ApprovalRecord, entry: &Entry, ledger: &Ledger, now: Millis) -> Vec<Transition> {
    let events = match &entry.decision {
        Decision::Approve { edited_input } => {
            let data = json!({"toolName": record.tool_name, "input": record.input});
            let mut events = vec![noted(ledger, record, AuditKind::Approved, now, data)];
            if let Some(edit) = edited_input {
                let data = json!({"originalInput": record.input, "editedInput": edit});
                events.push(noted(ledger, record, AuditKind::Edited, now, data));
            }
            if entry.counted {
                let input = edited_input.as_ref().unwrap_or(&record.input);
                events.push(super::counted::claimed(ledger, record, input, now));
            }
            events
        }
        Decision::Deny { reason } => {
            let data = json!({"reason": reason, "unanswered": entry.source == Source::Unanswered});
            vec![noted(ledger, record, AuditKind::Denied, now, data)]
        }
    };
    vec![transition::decide(record, entry.decision.clone(), ledger, now, events)]
}

/// The entry's answer as a decision on `record`: itself, or for a successor
/// its answer rebased onto the successor's input (`None`: it does not carry
/// that input; see [`super::on_successor`]).
fn answer_on(record: &ApprovalRecord, entry: &Entry) -> Option<Decision> {
    match record.supersedes {
        None => Some(entry.decision.clone()),
        Some(_) => super::on_successor(record, &entry.decision),
    }
}

/// What a record that is not pending (or did not move) means for this answer.
fn reading(record: &ApprovalRecord, entry: &Entry, ledger: &Ledger, now: Millis) -> Reading {
    let received = entry.given().and(answer_on(record, entry));
    if let (Some(recorded), Some(received)) = (record.decision.as_ref().map(RecordedDecision::decision), received)
        && recorded.contradicts(&received)
    {
        return Reading::Conflict(recorded, received);
    }
    match record.state {
        ApprovalState::Pending if record.expires_at <= now => {
            let events = vec![noted(ledger, record, AuditKind::Expired, now, json!({"expiresAt": record.expires_at}))];
            Reading::Move(Box::new(transition::expire(record, now, events)))
        }
        ApprovalState::Pending => Reading::InProgress,
        // Approved out of band (votes), waiting for its step to continue: whoever continues it runs it.
        ApprovalState::Approved => Reading::Move(Box::new(transition::start_execution(
            record,
            ledger,
            now,
            ApprovalState::Approved,
            Vec::new(),
        ))),
        ApprovalState::Executing if record.lease.as_ref().is_some_and(|lease| lease.until > now) => Reading::InProgress,
        ApprovalState::Executing if entry.idempotent && entry.decision.is_approve() => {
            let events = vec![noted(ledger, record, AuditKind::Interrupted, now, json!({"rerun": true}))];
            Reading::Move(Box::new(transition::start_execution(record, ledger, now, ApprovalState::Executing, events)))
        }
        ApprovalState::Executing => {
            let events = vec![noted(ledger, record, AuditKind::Interrupted, now, json!({"rerun": false}))];
            Reading::Move(Box::new(transition::interrupt(record, now, events)))
        }
        ApprovalState::Denied
        | ApprovalState::Expired
        | ApprovalState::Executed
        | ApprovalState::Failed
        | ApprovalState::Interrupted
        | ApprovalState::Withdrawn
        | ApprovalState::Superseded => Reading::Settled(recorded_effect(record, entry)),
    }
}

/// What a transition this request made means: run under its lease, or the stored outcome.
fn moved_effect(record: &ApprovalRecord, entry: &Entry) -> Effect {
    match record.state {
        ApprovalState::Executing => Effect::Run(record.approval_id.clone()),
        _ => recorded_effect(record, entry),
    }
}

/// The result of an approval another request is settling right now: nothing runs here.
fn busy(entry: &Entry, state: ApprovalState) -> Effect {
    Effect::Stored(
        ToolResultOutput::error_text(format!(
            "approval `{}` is being settled by another request at the same time; this request did not run it",
            entry.approval_id
        )),
        ApprovalOutcome::Replayed { state },
    )
}

/// The outcome on record, as this request returns it.
fn recorded_effect(record: &ApprovalRecord, entry: &Entry) -> Effect {
    let stored = |fallback: &str| record.output.clone().unwrap_or_else(|| ToolResultOutput::error_text(fallback));
    match record.state {
        ApprovalState::Denied | ApprovalState::Withdrawn => {
            Effect::Deny(record.decision.as_ref().and_then(|d| d.reason.clone()))
        }
        // A chain of edits longer than `MAX_SUPERSEDED`, read to its limit: it settles nothing.
        ApprovalState::Superseded => Effect::Deny(Some(format!(
            "approval `{}` was superseded more than {} times; ask for the call again",
            entry.approval_id,
            super::MAX_SUPERSEDED
        ))),
        ApprovalState::Expired => Effect::Stored(stored(EXPIRED_TEXT), ApprovalOutcome::Expired),
        ApprovalState::Interrupted => Effect::Stored(stored(INTERRUPTED_TEXT), ApprovalOutcome::Interrupted),
        ApprovalState::Executed | ApprovalState::Failed => {
            Effect::Stored(stored(INTERRUPTED_TEXT), ApprovalOutcome::Replayed { state: record.state })
        }
        // No outcome yet: another request holds it.
        ApprovalState::Pending | ApprovalState::Approved | ApprovalState::Executing => busy(entry, record.state),
    }
}

/// Rewrites the plan's action and record for an entry.
fn apply_effect(plan: &mut Plan, entry: &Entry, effect: Effect, won: bool) {
    let action = plan.actions.iter_mut().find(|action| action.call().tool_call_id == entry.call.tool_call_id);
    let record = &mut plan.approvals[entry.index];
    match effect {
        Effect::Run(claimed) => {
            if let Some(Resolved::Run { approval_id, .. }) = action {
                *approval_id = Some(claimed);
            }
        }
        Effect::Deny(reason) => {
            if !won {
                record.outcome = ApprovalOutcome::Replayed { state: ApprovalState::Denied };
            }
            if let Some(action) = action {
                *action = Resolved::Deny { call: entry.call.clone(), reason };
            }
        }
        Effect::Stored(output, outcome) => {
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
    let data = json!({"why": why, "answer": entry.given().map(Decision::to_string)});
    ledger.event(AuditKind::Rejected, &entry.approval_id, &entry.call.tool_call_id, at, data)
}
