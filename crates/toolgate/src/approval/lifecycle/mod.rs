//! The life of an approval, in one place: its states, who moves it from one
//! to the next, and how a request's answers claim it.
//!
//! # States
//!
//! An approval is issued for one gated call, in one conversation, for one
//! input. With a ledger it is recorded before the client sees it, and every
//! change after that is a [`crate::ledger::Transition`]: a conditional,
//! atomic move that a store applies only if the record is still in the state
//! it expects (and the guard holds), together with its audit events.
//!
//! | from | to | when | who | built by |
//! |---|---|---|---|---|
//! | (none) | `pending` | the model called a gated tool | the engine, before streaming the request | `engine::ledger::record_issued` |
//! | `pending` | `approved` / `denied` | a [`Decision`] arrives before `expires_at` | the request's principal; the engine denies on their behalf what nobody answered before the conversation moved on, and what a policy refuses | `claim` via `transition::decide` |
//! | `pending` | `expired` | an answer arrives after `expires_at` | whoever answers late | `claim` via `transition::expire` |
//! | `approved` | `executing` | right after the approval, in the same transaction | the deciding request, under its process's lease | `claim` via `transition::start_execution` |
//! | `executing` | `executed` / `failed` | the call finished | the executor | `engine::ledger::record_outcomes` via `transition::finish` |
//! | `executing` | `interrupted` | the executor's lease lapsed with no outcome | the next request that reads it | `claim` via `transition::interrupt` |
//! | `executing` | `executing` | the lease lapsed and the tool is idempotent | the next approving request | `claim` via `transition::start_execution` |
//!
//! Nothing moves back, and `denied`, `expired`, `executed`, `failed` and
//! `interrupted` are final ([`ApprovalState::can_move_to`],
//! [`ApprovalState::is_final`]). A decision, once recorded, stands: a later
//! answer that contradicts it is refused (`approval_already_decided`), one
//! that repeats it gets the recorded outcome and runs nothing.
//!
//! # Decisions
//!
//! [`Decision`] is the one name for what was decided about a call: approve
//! (with the person's edit of the input, if any) or deny (with a reason).
//! The ledger keeps it as a [`crate::ledger::RecordedDecision`] (who, when).
//! Where a decision comes from is the history: `crate::approval::collect`
//! finds the answers in it and `crate::approval::resolve` checks them
//! without state (structure, signatures, schemas, policies) and plans what
//! runs. With a ledger, `verify` then checks the results the history
//! carries against the records, and `claim` settles the plan's decisions
//! as single-use claims, before anything runs.

pub(crate) mod claim;
mod state;
mod transition;
pub(crate) mod verify;

pub use state::{ApprovalState, Decision};
pub(crate) use transition::finish;
