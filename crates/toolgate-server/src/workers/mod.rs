//! The background workers: what every process runs beside the handlers, from
//! the launcher's start to its shutdown. None takes the state: each gets the
//! parts it needs from the launcher (`launch.rs`).
//!
//! - [`continuation`]: continues the conversations whose approvals were
//!   decided out of band, on the ledger and a run context (it runs the
//!   stored runs of `run/`).
//! - [`timers`]: fires the approvals' escalations, reminders and expiries, on
//!   the ledger, the configured groups and the process's signals.
//! - [`retention`]: prunes what finished before the retention period, on the
//!   store and its clock.
//! - [`receipts`]: seals the audit chain and signs its checkpoints, on the
//!   receipt store and the clock (a last checkpoint at shutdown).
//! - [`notifications`]: follows the audit log into the outbox and delivers
//!   it, on the store, its clock, the groups and the link signer.
//! - [`call_waiters`]: the requests waiting on single calls of the call-gating API, woken by the hub's changes;
//! - [`inbox_hub`]: one follower of the store's changes for all the inbox
//!   streams, on the store and the "approvals changed here" signal; the
//!   state holds it and the first stream starts it.

pub(crate) mod call_waiters;
pub mod continuation;
pub(crate) mod inbox_hub;
pub(crate) mod notifications;
pub mod receipts;
pub mod retention;
pub mod timers;
