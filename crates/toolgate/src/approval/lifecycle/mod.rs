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
//! | (none) | `pending` | the model called a gated tool (issued only while the history its verdict was judged on stands) | the engine, before running the step's calls and streaming the request | `engine::ledger::record_issued` |
//! | (none) | `pending` | a rule asked about a call of the call-gating API or the MCP gateway on the history it read (issued only while that history stands) | the server; the gateway | [`held::admit`]; [`held::admit_asked`] |
//! | (none) | `approved` / `denied` | a rule decided a call of the call-gating API before anyone was asked (recorded so its claim and outcome take the moves below; nobody is notified) | the server, as [`held::RULES_PRINCIPAL`] | [`held::attach`] with [`held::HeldCall::decided`] |
//! | (none) | `approved` | a grant with a use limit lifted the question of a held call (the call-gating API's, the gateway's): one use spent in the same write ([`crate::ledger::ConversationStore::use_decision_issuing`]) | the server; the gateway, as [`held::RULES_PRINCIPAL`] | [`held::admit`], [`held::admit_asked`] |
//! | `pending` | `executing` / `denied` | a [`Decision`] arrives in the chat before `expires_at` (an approval claims the call at once, under the process's lease) | the request's principal (unrouted approvals only); the engine denies on their behalf what nobody answered before the conversation moved on, and what a policy refuses | `claim` via `transition::decide` |
//! | `pending` | `pending` | a vote that does not reach the quorum | an approver ([`check_vote`]) | [`cast`] |
//! | `pending` | `approved` / `denied` | the vote that reaches the quorum, or the first denial | an approver; the owner for an unrouted approval decided out of band | [`cast`] |
//! | `pending` | `pending` | an escalation step adds approvers, or a reminder is due | the server's timer | [`timer::fire`] |
//! | `pending` | `denied` | an escalation step with `action = "deny"` is due (a vote by [`TIMER_PRINCIPAL`]) | the server's timer | [`timer::fire`] |
//! | `pending` | `expired` | a routed approval reaches `expires_at` | the server's timer | [`timer::fire`] |
//! | `pending` | `withdrawn` | the requester takes the request back | the requester | [`withdraw`] |
//! | `pending` | `superseded` | an approver's edit needs other approvers: a new `pending` approval of the edited input, routed as the rules say, takes its place (same call, linked both ways) | whoever approved with the edit | [`supersede`] |
//! | `pending` | `expired` | an answer arrives after `expires_at` | whoever answers late | `claim` via `transition::expire` |
//! | `approved` | `executing` | the step of an approval decided out of band continues, or the call-gating API's start (judged again on the history, claimed only while it stands) | whoever continues the step (the server, or the requester's next request), or starts the call, under its process's lease | `claim` via `transition::start_execution`, [`counted`] |
//! | `approved` | `denied` | a rule denies the approved call as it is claimed (a history term's limit reached meanwhile): it does not run | the claimer, as [`held::RULES_PRINCIPAL`] | [`counted`] |
//! | `pending` | `executing` / `denied` | the gateway's client approves a held call (judged again on the history as it claims it, in one conditional write; a rule that now denies it refuses it after the person's `approved` event), or denies it | the ledger's principal; [`held::RULES_PRINCIPAL`] for a refusal at the claim | [`held::decide`] via [`counted`] |
//! | `executing` | `executed` / `failed` | the call finished | the executor | `engine::ledger::record_outcomes` via `transition::finish` |
//! | `executing` | `interrupted` | the executor's lease lapsed with no outcome | the next request that reads it | `claim` via `transition::interrupt` |
//! | `executing` | `executing` | the lease lapsed and the tool is idempotent | the next approving request | `claim` via `transition::start_execution` |
//!
//! A call that a rule or the tool's own policy allows or denies has no
//! approval and takes no move; with a ledger it is still on record, as one
//! `executed`, `failed` or `denied` event ([`direct`]). So has a call that
//! would ask but that a live grant covers (an approver's bounded "yes, and
//! the next N like this", [`grant`]): it runs without asking, one use spent
//! with its `granted` event.
//!
//! A call a rule judged on the history (a rule's history term read it) is
//! issued on that history: an allowed one's `allowed` event, and a held
//! call's `pending` record with its `issued` event, are written only while
//! the history it was judged on stands, in one conditional write with that
//! check ([`crate::ledger::HistoryStore::append_if`], `issue_if`); on a miss
//! nothing is written and the call is judged again ([`direct::judge`],
//! [`held::admit`], and the chat engine's step, which records a step's
//! questions in one such write and judges again each question whose history
//! moved: it may now run, be refused or be asked differently; after
//! [`direct::MAX_ADMITS`] misses it is asked without a guard). The claim of
//! a call a person approved holds its history too: in the chat, the answer's
//! verdict (`approval::resolve`) and the claim (`pending`/`approved` →
//! `executing`) are one conditional write with an `allowed` event naming the
//! approval ([`crate::ledger::HistoryStore::apply_if`]), resolved again when
//! the history moved; out of band, for the call-gating API and for the
//! answer of a held call's client (the MCP gateway's form, [`held::decide`]),
//! [`counted`] judges it again as it is claimed. A rule that now denies it refuses it
//! (`denied`, the rule's reason); one that asks does not ask again.
//!
//! **A call made by a sub-agent** (an agent used as a tool, see
//! [`crate::agent`]) takes the same moves, at the depth where it was made.
//! It is recorded `pending` by the sub-agent's engine call, in the sub-run's
//! own ledger conversation (the root conversation's key, then each agent
//! call id of its lineage after `U+001E`), with the root's owner and
//! principal; the root's step carries the request as a marked call, and the
//! root's answer is handed down, level by level, to that engine call, whose
//! `claim` finds the record by its approval id and binds it to that
//! conversation, call, tool and input. Votes, out-of-band decisions, edits
//! (`check_edit`, `supersede`), timers and expiry act on that record as on
//! any other.
//!
//! A call held outside a chat (a gateway in front of tools the engine does
//! not run) takes the same moves through [`held`]: issued or attached to by
//! what it asks (or the caller's idempotency key), decided by the client's
//! answer or out of band, claimed once, finished; the call-gating API
//! (`POST /api/calls`) holds its calls the same way.
//!
//! Nothing moves back, and `denied`, `expired`, `executed`, `failed`,
//! `interrupted`, `withdrawn` and `superseded` are final ([`ApprovalState::can_move_to`],
//! [`ApprovalState::is_final`]). A decision, once recorded, stands: a later
//! answer that contradicts it is refused (`approval_already_decided`), one
//! that repeats it gets the recorded outcome and runs nothing.
//!
//! # Who decides
//!
//! An approval is decided by its conversation's owner, in one answer (in
//! the chat, or out of band through [`cast`]), unless the rule that asked
//! named approvers: then it carries a [`Routing`] and only its approvers
//! decide, by votes ([`cast`]), never by an answer in the history (the
//! claim refuses one with [`VoteRefusal`]). A deciding vote leaves the
//! approval `approved` (nothing runs yet) and marks the conversation due to
//! continue; the server continues the step once its last approval is
//! decided (see [`route`] and the `toolgate-server` crate's continuation).
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
pub mod counted;
pub mod direct;
mod edit;
pub mod grant;
pub mod held;
pub mod route;
mod schedule;
mod state;
mod supersede;
pub mod timer;
mod transition;
pub(crate) mod verify;
mod vote;

pub use edit::{EditCheck, EditRefusal, check_edit};
pub use route::{
    GROUP_PREFIX, MAX_REASON_BYTES, Route, Routing, Tally, Vote, VoteRefusal, Voter, check_vote, is_approver, may_see,
    requester, tally, viewers, waiting_for,
};
pub use state::{ApprovalState, Decision};
pub(crate) use supersede::on_successor;
pub use supersede::{EditRoute, MAX_SUPERSEDED, Superseded, current, supersede};
pub use timer::{Escalation, Fired, Schedule, TIMER_PRINCIPAL, TimerAdvance, fire, next_due};
pub(crate) use transition::finish;
pub use vote::{VoteError, VoteOptions, WITHDRAWN_REASON, cast, withdraw};
