//! The timers of a routed approval: escalation steps, reminders and expiry.
//!
//! A rule with approvers may say what happens while nobody decides
//! ([`Schedule`]): after a delay, more approvers join (`escalate … to`), or
//! the approval is denied (`escalate … action = "deny"`); every `remind`, the
//! approvers are reminded. Each delay counts from the approval's issue time.
//! A routed approval also expires on time: at `expires_at` it moves to
//! `expired` and its conversation is marked due, so the run goes on without
//! anyone touching it.
//!
//! The store keeps one due time per pending routed approval ([`next_due`],
//! computed from the record, so every process computes the same), and
//! [`fire`] moves it on with a conditional update on that due time
//! ([`TimerAdvance`]), or with the state change itself: two processes
//! firing the same timer move it once, and a restart between two timers
//! loses neither (the due time is in the store).

use serde_json::{Value, json};

use super::route::{GROUP_PREFIX, Routing, Voter, waiting_for};
use super::vote::{VoteOptions, event, vote_transition};
use super::{ApprovalState, Decision};
use crate::ledger::{
    ApprovalRecord, ApprovalStore, AuditEvent, AuditKind, Clock, Guard, Millis, StoreError, Transition,
    TransitionOutcome, Update,
};

/// The principal that timers act as (the deny of an unanswered approval is its vote).
pub const TIMER_PRINCIPAL: &str = "toolgate";

pub use super::schedule::{Escalation, Schedule};

/// A timer's move of a pending approval that keeps it pending: the store
/// applies it only if the approval is still pending with its due time at
/// `expected` and its routing as `read` (the due time alone can stay the
/// same across a move, e.g. while an overdue reminder is next), replacing
/// its routing, adding `viewers` to the keys it is listed under, setting the
/// next due time and appending `events`.
#[derive(Debug, Clone, PartialEq)]
pub struct TimerAdvance {
    /// The approval.
    pub approval_id: String,
    /// The due time read (the conditional part).
    pub expected: Millis,
    /// The routing read (the conditional part too).
    pub read: Routing,
    /// The routing after the move.
    pub routing: Routing,
    /// Viewer keys to add (see [`super::viewers`]).
    pub viewers: Vec<String>,
    /// The next due time, if any.
    pub next: Option<Millis>,
    /// When it moved.
    pub at: Millis,
    /// Its audit events.
    pub events: Vec<AuditEvent>,
}

/// What a timer did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Fired {
    /// These approvers joined (as configured, and the principals they name).
    Escalated {
        /// The step's `to`.
        added: Vec<String>,
    },
    /// The approvers were reminded.
    Reminded,
    /// The approval was denied for want of an answer (the reason given).
    Denied(String),
    /// The approval expired.
    Expired,
}

/// When the approval's next timer is due: its next escalation step, its
/// next reminder or its expiry, for a pending routed approval; `None`
/// otherwise.
pub fn next_due(record: &ApprovalRecord) -> Option<Millis> {
    let routing = record.routing.as_ref()?;
    if record.state != ApprovalState::Pending {
        return None;
    }
    let schedule = &routing.schedule;
    let step = schedule.escalate.get(schedule.fired as usize).map(|step| record.issued_at.saturating_add(step.after));
    let remind = schedule.remind.map(|every| schedule.reminded_at.unwrap_or(record.issued_at).saturating_add(every));
    [step, remind, Some(record.expires_at)].into_iter().flatten().min()
}

/// Fires the approval's due timer, if it is due at the clock's time: the
/// expiry, else the escalation step, else the reminder. `groups` gives the
/// members of configured groups (as at issue). `None` when nothing was
/// due, or another process fired it first.
pub async fn fire(
    store: &dyn ApprovalStore,
    clock: &dyn Clock,
    groups: &(dyn Fn(&str) -> Option<Vec<String>> + Send + Sync),
    record: &ApprovalRecord,
) -> Result<Option<Fired>, StoreError> {
    let now = clock.now();
    let (Some(due), Some(routing)) = (next_due(record), record.routing.as_ref()) else {
        return Ok(None);
    };
    if due > now {
        return Ok(None);
    }
    if record.expires_at <= now {
        return expire(store, record, now).await;
    }
    let schedule = &routing.schedule;
    match schedule.escalate.get(schedule.fired as usize) {
        Some(step) if record.issued_at.saturating_add(step.after) <= now => {
            if step.deny {
                deny(store, record, step, now).await
            } else {
                escalate(store, record, due, step, groups, now).await
            }
        }
        _ => remind(store, record, due, now).await,
    }
}

/// `pending → expired` on time, marking the conversation due.
async fn expire(store: &dyn ApprovalStore, record: &ApprovalRecord, now: Millis) -> Result<Option<Fired>, StoreError> {
    let events = vec![event(record, AuditKind::Expired, &timer(), now, json!({"expiresAt": record.expires_at}))];
    let transition = Transition {
        approval_id: record.approval_id.clone(),
        from: ApprovalState::Pending,
        to: ApprovalState::Expired,
        guard: Guard::ExpiredAt(now),
        update: Update { continuation: true, ..Update::default() },
        at: now,
        events,
    };
    Ok(moved(store, transition).await?.then_some(Fired::Expired))
}

/// The deny step: a vote by [`TIMER_PRINCIPAL`] with "not answered within …".
async fn deny(
    store: &dyn ApprovalStore,
    record: &ApprovalRecord,
    step: &Escalation,
    now: Millis,
) -> Result<Option<Fired>, StoreError> {
    let reason = format!("not answered within {}", duration_text(step.after));
    let decision = Decision::Deny { reason: Some(reason.clone()) };
    let options = VoteOptions { continuation: true, note: None };
    let transition = vote_transition(record, &timer(), &decision, now, &options);
    Ok(moved(store, transition).await?.then_some(Fired::Denied(reason)))
}

/// An escalation step: its approvers join, and can see and decide it from now on.
async fn escalate(
    store: &dyn ApprovalStore,
    record: &ApprovalRecord,
    due: Millis,
    step: &Escalation,
    groups: &(dyn Fn(&str) -> Option<Vec<String>> + Send + Sync),
    now: Millis,
) -> Result<Option<Fired>, StoreError> {
    let Some(mut routing) = record.routing.clone() else {
        return Ok(None);
    };
    let mut added_members = Vec::new();
    for approver in &step.to {
        match approver.strip_prefix(GROUP_PREFIX) {
            Some(group) => added_members.extend(groups(group).unwrap_or_default()),
            None => added_members.push(approver.clone()),
        }
    }
    added_members.retain(|member| !routing.members.contains(member));
    added_members.sort();
    added_members.dedup();
    for approver in &step.to {
        if !routing.approvers.contains(approver) {
            routing.approvers.push(approver.clone());
        }
    }
    routing.members.extend(added_members.iter().cloned());
    routing.members.sort();
    routing.schedule.fired += 1;
    let mut viewers = step.to.clone();
    viewers.extend(added_members.iter().cloned());
    let data = json!({"step": routing.schedule.fired, "after": step.after, "added": step.to, "members": added_members});
    let advance = advance(record, due, routing, viewers, now, AuditKind::Escalated, data);
    Ok(store.advance_timer(&advance).await?.then(|| Fired::Escalated { added: step.to.clone() }))
}

/// A reminder: the approvers are told again.
async fn remind(
    store: &dyn ApprovalStore,
    record: &ApprovalRecord,
    due: Millis,
    now: Millis,
) -> Result<Option<Fired>, StoreError> {
    let Some(mut routing) = record.routing.clone() else {
        return Ok(None);
    };
    routing.schedule.reminded_at = Some(now);
    let data = json!({"waitingFor": waiting_for(record)});
    let advance = advance(record, due, routing, Vec::new(), now, AuditKind::Reminded, data);
    Ok(store.advance_timer(&advance).await?.then_some(Fired::Reminded))
}

/// The [`TimerAdvance`] of a step that keeps the approval pending.
fn advance(
    record: &ApprovalRecord,
    expected: Millis,
    routing: Routing,
    viewers: Vec<String>,
    now: Millis,
    kind: AuditKind,
    data: Value,
) -> TimerAdvance {
    let events = vec![event(record, kind, &timer(), now, data)];
    let after = ApprovalRecord { routing: Some(routing.clone()), ..record.clone() };
    TimerAdvance {
        approval_id: record.approval_id.clone(),
        expected,
        read: record.routing.clone().unwrap_or_default(),
        routing,
        viewers,
        next: next_due(&after),
        at: now,
        events,
    }
}

/// Applies one transition; true when it moved.
async fn moved(store: &dyn ApprovalStore, transition: Transition) -> Result<bool, StoreError> {
    let outcome = store.apply(std::slice::from_ref(&transition), &[]).await?.pop();
    Ok(matches!(outcome, Some(TransitionOutcome::Moved(_))))
}

/// The voter timers act as.
fn timer() -> Voter {
    Voter::new(Some(TIMER_PRINCIPAL.to_owned()))
}

/// A delay as rules write it: `1h`, `15m`, `1h30m`, `90s`, `250ms`.
pub fn duration_text(millis: Millis) -> String {
    const UNITS: [(Millis, &str); 4] = [(86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1_000, "s")];
    let mut left = millis.max(0);
    let mut text = String::new();
    for (size, unit) in UNITS {
        if left >= size {
            text.push_str(&format!("{}{unit}", left / size));
            left %= size;
        }
    }
    if left > 0 || text.is_empty() {
        text.push_str(&format!("{left}ms"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_read_as_rules_write_them() {
        assert_eq!(duration_text(3_600_000), "1h");
        assert_eq!(duration_text(900_000), "15m");
        assert_eq!(duration_text(5_400_000), "1h30m");
        assert_eq!(duration_text(2_000), "2s");
        assert_eq!(duration_text(1_250), "1s250ms");
        assert_eq!(duration_text(0), "0ms");
    }
}
