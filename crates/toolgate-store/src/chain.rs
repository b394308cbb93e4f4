//! Two transitions of one approval, the second moving it on from where the
//! first leaves it (an answer's claim, `pending → approved`, then
//! `approved → executing` under a lease), run as one conditional update
//! from the first's state to the second's.
//!
//! Applied in order in one transaction, the pair's intermediate state is
//! never seen by anyone else, so one update is the same change with one
//! statement less (and, on Postgres, one statement with its events instead
//! of a transaction). The outcomes stay those of the pair, one per
//! transition:
//! - the update moved: the record between the two (rebuilt from the final
//!   one, which is exact for the chains fused here), then the final one;
//! - it did not move, and the record is where the second transition starts
//!   (the first found it already there): the first is unmoved and the second
//!   still runs on its own, as it would have in order;
//! - otherwise both are unmoved (or both missing).
//!
//! Fused only when the rebuild is exact: the second has no guard and writes
//! no decision, output or votes, and neither keeps a lease it does not set.
//! A pair where either transition marks its conversation due to continue
//! (`Update::continuation`) is not fused: those run in a transaction, one by
//! one, so the mark follows the move it depends on.

use toolgate::ledger::{ApprovalRecord, Guard, Transition, TransitionOutcome, Update};

use crate::sql::{self, LeaseWrite};

/// A fusable pair and the single transition that does both.
#[derive(Debug, Clone)]
pub(crate) struct Chain {
    /// From the first's state, under its guard, to the second's state with both updates and events.
    pub(crate) fused: Transition,
    first: Transition,
    second: Transition,
}

/// The pair's outcomes, or what is left to run.
pub(crate) enum Split {
    /// One outcome per transition of the pair.
    Done(Vec<TransitionOutcome>),
    /// The first did not move; the second applies to the record as it is and runs on its own.
    SecondToRun(Box<TransitionOutcome>),
}

impl Chain {
    /// The chain `transitions` form, when they are a fusable pair.
    pub(crate) fn of(transitions: &[Transition]) -> Option<Self> {
        let [first, second] = transitions else { return None };
        let fusable = first.approval_id == second.approval_id
            && first.to == second.from
            && second.guard == Guard::None
            && second.update.decision.is_none()
            && second.update.output.is_none()
            && second.update.votes.is_none()
            && second.update.superseded_by.is_none()
            && !first.update.continuation
            && !second.update.continuation
            && LeaseWrite::of(first) != LeaseWrite::Keep
            && LeaseWrite::of(second) != LeaseWrite::Keep
            && first.events.len() + second.events.len() <= sql::EVENTS_PER_INSERT;
        if !fusable {
            return None;
        }
        let fused = Transition {
            approval_id: first.approval_id.clone(),
            from: first.from,
            to: second.to,
            guard: first.guard,
            update: Update {
                decision: first.update.decision.clone(),
                output: first.update.output.clone(),
                lease: second.update.lease.clone(),
                votes: first.update.votes.clone(),
                continuation: false,
                superseded_by: first.update.superseded_by.clone(),
            },
            at: second.at,
            events: first.events.iter().chain(&second.events).cloned().collect(),
        };
        Some(Self { fused, first: first.clone(), second: second.clone() })
    }

    /// The second transition, to run on its own after [`Split::SecondToRun`].
    pub(crate) fn second(&self) -> &Transition {
        &self.second
    }

    /// The pair's outcomes from the fused update's.
    pub(crate) fn split(&self, outcome: TransitionOutcome) -> Split {
        match outcome {
            TransitionOutcome::Moved(after) => {
                let between = self.between(&after);
                Split::Done(vec![TransitionOutcome::Moved(between), TransitionOutcome::Moved(after)])
            }
            TransitionOutcome::Unmoved(record) if self.second.applies_to(&record) => {
                Split::SecondToRun(Box::new(TransitionOutcome::Unmoved(record)))
            }
            TransitionOutcome::Unmoved(record) => {
                Split::Done(vec![TransitionOutcome::Unmoved(record.clone()), TransitionOutcome::Unmoved(record)])
            }
            TransitionOutcome::Missing => Split::Done(vec![TransitionOutcome::Missing, TransitionOutcome::Missing]),
        }
    }

    /// The record as the first transition left it: the final one without the
    /// second's state, time and lease (it wrote nothing else: no votes either).
    fn between(&self, after: &ApprovalRecord) -> ApprovalRecord {
        let mut between = after.clone();
        between.state = self.first.to;
        between.updated_at = self.first.at;
        // `Keep` is never fused (see `of`).
        between.lease = match LeaseWrite::of(&self.first) {
            LeaseWrite::Set => self.first.update.lease.clone(),
            LeaseWrite::Clear | LeaseWrite::Keep => None,
        };
        between
    }
}
