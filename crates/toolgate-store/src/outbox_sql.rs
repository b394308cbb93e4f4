//! The SQL of timers, the notification outbox and one-time links, shared by
//! both backends (see `sql.rs` for the placeholder convention).

use toolgate::ledger::{AttemptResult, Delivery, DeliveryState, Millis, Outbound, OutboxQuery, StoreError};

use crate::sql::record_columns;

/// Pending approvals whose timer is due at `$1`, earliest first, at most `$2`.
pub(crate) const DUE_TIMERS: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM approvals WHERE state = 'pending' AND timer_at IS NOT NULL AND timer_at <= $1 \
     ORDER BY timer_at, approval_id LIMIT $2"
);

/// Moves approval `$1`'s timer from `$2` to `$3` (NULL: none) with routing
/// `$4` at `$5`, if it is still pending there with the routing `$6` it was
/// read with (written by this code, the same value is the same text);
/// returns its issue time.
pub(crate) const ADVANCE_TIMER: &str = "UPDATE approvals SET timer_at = $3, routing = $4, updated_at = $5 \
     WHERE approval_id = $1 AND state = 'pending' AND timer_at = $2 AND routing = $6 RETURNING issued_at";

/// The notification cursor.
pub(crate) const NOTIFY_CURSOR: &str = "SELECT seq FROM notify_cursor WHERE id = 1";

/// Moves the notification cursor from `$1` to `$2`.
pub(crate) const MOVE_CURSOR: &str = "UPDATE notify_cursor SET seq = $2 WHERE id = 1 AND seq = $1 RETURNING seq";

/// The columns of `notifications` a [`DeliveryRow`] reads, in its order.
macro_rules! delivery_columns {
    () => {
        "delivery_id, event_id, kind, channel, recipient, approval_id, conversation_id, tool_call_id, body, \
         created_at, state, attempts, next_at, first_attempt_at, last_error, owner"
    };
}

/// Enqueues one delivery (parameters `$1`–`$10`: [`Outbound`]'s fields in
/// [`delivery_columns!`] order, `$11` its owner), pending and due at its creation.
pub(crate) const ENQUEUE: &str = "INSERT INTO notifications (delivery_id, event_id, kind, channel, recipient, \
     approval_id, conversation_id, tool_call_id, body, created_at, state, attempts, next_at, owner) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending', 0, $10, $11) ON CONFLICT (delivery_id) DO NOTHING";

/// Claims up to `$4` deliveries due at `$3` that nobody holds, for `$1` until `$2`.
pub(crate) const CLAIM_DELIVERIES: &str = concat!(
    "UPDATE notifications SET holder = $1, held_until = $2 WHERE delivery_id IN (SELECT delivery_id \
     FROM notifications WHERE state = 'pending' AND next_at <= $3 AND (holder IS NULL OR held_until <= $3) \
     ORDER BY next_at LIMIT $4) AND state = 'pending' AND (holder IS NULL OR held_until <= $3) RETURNING ",
    delivery_columns!()
);

/// Ends the attempt on delivery `$1` held by `$2` at `$3`: state `$4`, next
/// time `$5`, error `$6`.
pub(crate) const FINISH_ATTEMPT: &str = "UPDATE notifications SET state = $4, next_at = $5, last_error = $6, \
     attempts = attempts + 1, first_attempt_at = COALESCE(first_attempt_at, $3), holder = NULL, held_until = NULL \
     WHERE delivery_id = $1 AND holder = $2 AND state = 'pending' RETURNING attempts";

/// Records a link's use unless it was used.
pub(crate) const CONSUME_LINK: &str = "INSERT INTO link_uses (link_id, used_at, expires_at) VALUES ($1, $2, $3) \
     ON CONFLICT (link_id) DO NOTHING RETURNING used_at";

/// Forgets a link's use.
pub(crate) const RELEASE_LINK: &str = "DELETE FROM link_uses WHERE link_id = $1";

/// A link's use, when on record.
pub(crate) const LINK_USED: &str = "SELECT used_at FROM link_uses WHERE link_id = $1";

/// Prunes up to `$2` deliveries that ended before `$1`.
pub(crate) const PRUNE_DELIVERIES: &str = "DELETE FROM notifications WHERE delivery_id IN (SELECT delivery_id \
     FROM notifications WHERE state <> 'pending' AND next_at < $1 LIMIT $2)";

/// Prunes up to `$2` link uses of links that expired before `$1`.
pub(crate) const PRUNE_LINKS: &str =
    "DELETE FROM link_uses WHERE link_id IN (SELECT link_id FROM link_uses WHERE expires_at < $1 LIMIT $2)";

/// The deliveries a query selects: `$1`… the approval id and state when
/// asked for, then the limit.
pub(crate) fn deliveries_sql(query: &OutboxQuery) -> String {
    let mut conditions = Vec::new();
    let mut next = 1;
    if query.approval_id.is_some() {
        conditions.push(format!("approval_id = ${next}"));
        next += 1;
    }
    if query.state.is_some() {
        conditions.push(format!("state = ${next}"));
        next += 1;
    }
    let filter = if conditions.is_empty() { String::new() } else { format!(" WHERE {}", conditions.join(" AND ")) };
    format!(
        concat!(
            "SELECT ",
            delivery_columns!(),
            " FROM notifications{} ORDER BY created_at DESC, delivery_id DESC LIMIT ${}"
        ),
        filter, next
    )
}

/// How a finished attempt is written: state, next time, error.
pub(crate) fn attempt_columns(result: &AttemptResult, at: Millis) -> (&'static str, Millis, Option<String>) {
    match result {
        AttemptResult::Delivered => (DeliveryState::Delivered.as_str(), at, None),
        AttemptResult::Retry { at: next, error } => (DeliveryState::Pending.as_str(), *next, Some(error.clone())),
        AttemptResult::Failed { error } => (DeliveryState::Failed.as_str(), at, Some(error.clone())),
    }
}

/// A row of `notifications`, in [`delivery_columns!`] order.
#[derive(sqlx::FromRow)]
pub(crate) struct DeliveryRow {
    delivery_id: String,
    event_id: String,
    kind: String,
    channel: String,
    recipient: Option<String>,
    approval_id: String,
    conversation_id: String,
    tool_call_id: String,
    body: String,
    created_at: i64,
    state: String,
    attempts: i32,
    next_at: i64,
    first_attempt_at: Option<i64>,
    last_error: Option<String>,
    owner: Option<String>,
}

crate::lite::from_lite_row!(DeliveryRow {
    delivery_id,
    event_id,
    kind,
    channel,
    recipient,
    approval_id,
    conversation_id,
    tool_call_id,
    body,
    created_at,
    state,
    attempts,
    next_at,
    first_attempt_at,
    last_error,
    owner
});

impl DeliveryRow {
    /// When it is next due.
    pub(crate) fn next_at(&self) -> i64 {
        self.next_at
    }

    /// When it was enqueued.
    pub(crate) fn created_at(&self) -> i64 {
        self.created_at
    }

    pub(crate) fn into_delivery(self) -> Result<Delivery, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("delivery `{}`: {what}", self.delivery_id));
        let state = DeliveryState::parse(&self.state).ok_or_else(|| corrupt("unknown state"))?;
        let body = serde_json::from_str(&self.body).map_err(|error| corrupt(&format!("body: {error}")))?;
        Ok(Delivery {
            outbound: Outbound {
                delivery_id: self.delivery_id,
                event_id: self.event_id,
                kind: self.kind,
                channel: self.channel,
                recipient: self.recipient,
                approval_id: self.approval_id,
                conversation_id: self.conversation_id,
                owner: self.owner,
                tool_call_id: self.tool_call_id,
                body,
                created_at: self.created_at,
            },
            state,
            attempts: u32::try_from(self.attempts).unwrap_or(0),
            next_at: self.next_at,
            first_attempt_at: self.first_attempt_at,
            last_error: self.last_error,
        })
    }
}

/// How many deliveries wait for an attempt or a retry.
pub(crate) const COUNT_PENDING_DELIVERIES: &str = "SELECT COUNT(*) FROM notifications WHERE state = 'pending'";
