//! From the outbox to the receivers.
//!
//! Every process runs [`deliver`]: it claims due deliveries (each held by one
//! process for [`CLAIM`], so two replicas never send the same delivery at
//! once, and one whose process died is sent again once its claim lapses),
//! sends each in its own task, at most [`IN_FLIGHT`] at a time, and records
//! the outcome with a `notified` or `notification_failed` audit event. A
//! failed attempt is retried with exponential backoff and jitter (a
//! receiver's `Retry-After` honoured) until [`toolgate_notify::GIVE_UP_AFTER`]
//! after the first attempt; a refusal (a 4xx other than 429, a permanent
//! SMTP error) is final. Nothing here holds up a chat or a decision.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolgate::ledger::{
    AttemptEnd, AttemptResult, AuditEvent, AuditKind, Clock, Delivery as StoredDelivery, LedgerStore, Millis,
    conversation_name,
};
use toolgate_notify::{Delivery, Event, GIVE_UP_AFTER, Outcome, backoff};

use crate::metrics::Metrics;
use crate::notify::Notifications;

/// How long a claimed delivery is held (longer than any attempt takes).
pub const CLAIM: Duration = Duration::from_secs(120);
/// Deliveries sent at once by one process.
pub const IN_FLIGHT: usize = 32;
/// How often the outbox is looked at when nothing woke the worker.
const POLL: Duration = Duration::from_millis(500);

/// Delivers from the outbox until the task is dropped.
pub(crate) async fn deliver(
    store: Arc<dyn LedgerStore>,
    clock: Arc<dyn Clock>,
    notifications: Arc<Notifications>,
    metrics: Arc<Metrics>,
) {
    let executor = format!("notify-{}", uuid::Uuid::now_v7().simple());
    let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    loop {
        let free = slots.available_permits();
        let now = clock.now();
        let claimed = match free {
            0 => Vec::new(),
            _ => match store.claim_deliveries(&executor, now, now + millis(CLAIM), free).await {
                Ok(claimed) => claimed,
                Err(error) => {
                    tracing::warn!(%error, "cannot read the notification outbox; trying again");
                    Vec::new()
                }
            },
        };
        let idle = claimed.is_empty();
        for delivery in claimed {
            let Ok(permit) = Arc::clone(&slots).acquire_owned().await else { return };
            let (store, clock, notifications, executor) =
                (Arc::clone(&store), Arc::clone(&clock), Arc::clone(&notifications), executor.clone());
            let metrics = Arc::clone(&metrics);
            tokio::spawn(async move {
                let channel = delivery.outbound.channel.clone();
                if let Some(delivered) =
                    attempt(store.as_ref(), clock.as_ref(), &notifications, &executor, delivery).await
                {
                    metrics.notification(&channel, delivered);
                }
                drop(permit);
            });
        }
        if idle {
            tokio::select! {
                () = notifications.delivery_woken() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }
}

/// Sends one claimed delivery and records how it went; whether it was
/// delivered, once recorded (`None`: the record failed, or the claim lapsed).
async fn attempt(
    store: &dyn LedgerStore,
    clock: &dyn Clock,
    notifications: &Notifications,
    executor: &str,
    stored: StoredDelivery,
) -> Option<bool> {
    let outbound = &stored.outbound;
    let outcome =
        match (notifications.channels().get(&outbound.channel), serde_json::from_value::<Event>(outbound.body.clone()))
        {
            (None, _) => Outcome::Failed { error: format!("channel `{}` is no longer configured", outbound.channel) },
            (_, Err(error)) => Outcome::Failed { error: format!("the stored event cannot be read: {error}") },
            (Some(channel), Ok(event)) => {
                let delivery = Delivery {
                    delivery_id: outbound.delivery_id.clone(),
                    recipient: outbound.recipient.clone(),
                    event,
                };
                // Receivers check the signature against their own clock: the wall clock, whatever the ledger runs on.
                notifications.notifier().deliver(channel, &delivery, toolgate_notify::unix_now()).await
            }
        };
    let now = clock.now();
    let result = result_of(&stored, outcome, now);
    let end = AttemptEnd {
        delivery_id: outbound.delivery_id.clone(),
        executor: executor.to_owned(),
        events: vec![audit_event(&stored, &result, now)],
        result,
        at: now,
    };
    let delivered = end.result == AttemptResult::Delivered;
    match store.finish_attempt(&end).await {
        Ok(true) => Some(delivered),
        Ok(false) => {
            tracing::warn!(delivery = %outbound.delivery_id, "a notification's claim lapsed during its attempt");
            None
        }
        Err(error) => {
            tracing::warn!(%error, delivery = %outbound.delivery_id, "cannot record a notification attempt");
            None
        }
    }
}

/// What the store records of an attempt's outcome: a retry past the window is a failure.
fn result_of(stored: &StoredDelivery, outcome: Outcome, now: Millis) -> AttemptResult {
    match outcome {
        Outcome::Delivered { .. } => AttemptResult::Delivered,
        Outcome::Failed { error } => AttemptResult::Failed { error },
        Outcome::Retry { error, after } => {
            let first = stored.first_attempt_at.unwrap_or(now);
            let wait = backoff(stored.attempts + 1, after);
            let at = now + millis(wait);
            if at > first + millis(GIVE_UP_AFTER) {
                AttemptResult::Failed {
                    error: format!("not delivered within {}: {error}", humantime::format_duration(GIVE_UP_AFTER)),
                }
            } else {
                AttemptResult::Retry { at, error }
            }
        }
    }
}

/// The `notified` or `notification_failed` event of an attempt.
fn audit_event(stored: &StoredDelivery, result: &AttemptResult, now: Millis) -> AuditEvent {
    let outbound = &stored.outbound;
    let mut data = json!({
        "channel": outbound.channel,
        "deliveryId": outbound.delivery_id,
        "eventId": outbound.event_id,
        "event": outbound.kind,
        "attempt": stored.attempts + 1,
    });
    if let Some(recipient) = &outbound.recipient {
        data["recipient"] = json!(recipient);
    }
    let kind = match result {
        AttemptResult::Delivered => AuditKind::Notified,
        AttemptResult::Retry { at, error } => {
            data["error"] = json!(error);
            data["retryAt"] = json!(at);
            AuditKind::NotificationFailed
        }
        AttemptResult::Failed { error } => {
            data["error"] = json!(error);
            data["final"] = json!(true);
            AuditKind::NotificationFailed
        }
    };
    AuditEvent {
        seq: 0,
        at: now,
        kind,
        approval_id: outbound.approval_id.clone(),
        tool_call_id: outbound.tool_call_id.clone(),
        conversation_id: conversation_name(&outbound.conversation_id, outbound.owner.as_deref()).to_owned(),
        owner: outbound.owner.clone(),
        principal: None,
        data,
    }
}

fn millis(duration: Duration) -> Millis {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
