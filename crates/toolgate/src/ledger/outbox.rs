//! The notification outbox and the one-time links, as the store keeps them.
//!
//! Notifications about approvals are written to the store before anything is
//! sent ([`Outbound`]), by whichever process moves the store's notification
//! cursor over the audit events they come from (a conditional update: two
//! processes never enqueue the same events). A delivery is then claimed by
//! one process at a time, like an approval ([`crate::ledger::OutboxStore::claim_deliveries`]),
//! attempted, and finished: delivered, retried at a later time, or failed
//! for good. A process that dies holding a claim leaves it to lapse, and
//! another process attempts it again: delivery is at least once, with the
//! same delivery id every time.
//!
//! A one-time link is used once: its id is recorded when it is used
//! ([`crate::ledger::LinkStore::consume_link`]), and a second use finds
//! it recorded.

use serde_json::Value;

use super::{AuditEvent, Millis, StoreFuture};

/// A delivery to enqueue: one event, for one channel (and one recipient, for e-mail).
#[derive(Debug, Clone, PartialEq)]
pub struct Outbound {
    /// Unique per event, channel and recipient; the same on every attempt.
    pub delivery_id: String,
    /// Unique per event (the receivers' deduplication key).
    pub event_id: String,
    /// The event's type (`approval.requested`, ...).
    pub kind: String,
    /// The channel's name.
    pub channel: String,
    /// The e-mail address, for an e-mail channel.
    pub recipient: Option<String>,
    /// The approval it is about.
    pub approval_id: String,
    /// Its conversation key (owner and id, see [`super::conversation_key`]).
    pub conversation_id: String,
    /// The conversation's owner, as the approval records it.
    pub owner: Option<String>,
    /// Its tool call.
    pub tool_call_id: String,
    /// The event as channels render it.
    pub body: Value,
    /// When it was enqueued.
    pub created_at: Millis,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeliveryState {
    /// Not delivered yet; attempted again at its `next_at`.
    Pending,
    /// Delivered.
    Delivered,
    /// Given up: refused by the receiver, or not delivered within the retry window.
    Failed,
}

impl DeliveryState {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    /// The state with this name.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Pending, Self::Delivered, Self::Failed].into_iter().find(|state| state.as_str() == name)
    }
}

/// A delivery as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// What was enqueued.
    pub outbound: Outbound,
    /// Where it stands.
    pub state: DeliveryState,
    /// Attempts finished so far.
    pub attempts: u32,
    /// When it is next due (pending), or when it ended.
    pub next_at: Millis,
    /// When it was first attempted.
    pub first_attempt_at: Option<Millis>,
    /// The last attempt's error, if it failed.
    pub last_error: Option<String>,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptResult {
    /// Delivered.
    Delivered,
    /// Not delivered; try again at `at`.
    Retry {
        /// When.
        at: Millis,
        /// Why it was not delivered.
        error: String,
    },
    /// Not delivered, and never will be.
    Failed {
        /// Why.
        error: String,
    },
}

/// The end of one claimed attempt: applied only if `executor` still holds
/// the claim, with `events` appended when it is.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptEnd {
    /// The delivery.
    pub delivery_id: String,
    /// Who attempted it.
    pub executor: String,
    /// How it ended.
    pub result: AttemptResult,
    /// When.
    pub at: Millis,
    /// Its audit events (`notified`, `notification_failed`).
    pub events: Vec<AuditEvent>,
}

/// Which deliveries to list (newest first).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutboxQuery {
    /// Of this approval only.
    pub approval_id: Option<String>,
    /// In this state only.
    pub state: Option<DeliveryState>,
    /// At most this many (0: none).
    pub limit: usize,
}

/// The notification outbox: deliveries enqueued after the audit log, claimed and finished.
pub trait OutboxStore: Send + Sync + std::fmt::Debug {
    /// The sequence number of the last audit event notifications were
    /// enqueued for (0 before any).
    fn notify_cursor(&self) -> StoreFuture<'_, i64>;

    /// Moves the notification cursor from `from` to `to` and enqueues
    /// `deliveries` (each pending, due now), in one transaction; `false`
    /// (and nothing enqueued) when the cursor is no longer at `from`.
    fn enqueue<'a>(&'a self, deliveries: &'a [Outbound], from: i64, to: i64) -> StoreFuture<'a, bool>;

    /// Claims up to `limit` pending deliveries due at `now` that nobody holds
    /// (or whose holder's claim lapsed), for `executor` until `until`,
    /// earliest first.
    fn claim_deliveries<'a>(
        &'a self,
        executor: &'a str,
        now: Millis,
        until: Millis,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Delivery>>;

    /// Ends a claimed attempt (see [`AttemptEnd`]); `false` when the
    /// executor no longer holds the claim (nothing changes).
    fn finish_attempt<'a>(&'a self, end: &'a AttemptEnd) -> StoreFuture<'a, bool>;

    /// Deliveries the query selects, newest first.
    fn deliveries<'a>(&'a self, query: &'a OutboxQuery) -> StoreFuture<'a, Vec<Delivery>>;

    /// How many deliveries are still `pending` (waiting for an attempt or a retry).
    fn count_pending_deliveries(&self) -> StoreFuture<'_, u64>;
}

/// One-time links (and revoked sign-in sessions): each use recorded once, until it expires.
pub trait LinkStore: Send + Sync + std::fmt::Debug {
    /// Records the use of a one-time link; `false` when it was used before.
    /// The record is kept until `expires_at` (then pruned).
    fn consume_link<'a>(&'a self, link_id: &'a str, at: Millis, expires_at: Millis) -> StoreFuture<'a, bool>;

    /// Forgets the use of a link whose decision was then refused (it may be used again).
    fn release_link<'a>(&'a self, link_id: &'a str) -> StoreFuture<'a, ()>;

    /// Whether a link's use is on record ([`Self::consume_link`]), until it is pruned.
    /// A sign-in session revoked at logout is recorded the same way, so every
    /// replica refuses it.
    fn link_used<'a>(&'a self, link_id: &'a str) -> StoreFuture<'a, bool>;
}
