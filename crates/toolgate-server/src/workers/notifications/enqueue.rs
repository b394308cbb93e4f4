//! From the audit log to the outbox: which events notify whom.
//!
//! Every process follows the audit log from the store's notification cursor
//! ([`follow`]). It reads the events after the cursor, builds the deliveries
//! they call for (one per channel that wants the event, one per recipient
//! for e-mail), and moves the cursor over them while it enqueues them, in
//! one conditional write: when two processes read the same events, one
//! enqueues them and the other reads again. An event is therefore enqueued
//! once, with one id, whichever process saw it.
//!
//! Sequence numbers can commit out of order on Postgres (a transaction that
//! drew a lower number commits later): the follower stops at a gap in the
//! numbers until it is [`GAP_GRACE`] old (a rolled-back insert's number
//! never appears), so no event is skipped.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use toolgate::approval::lifecycle::{GROUP_PREFIX, requester};
use toolgate::ledger::{
    ApprovalRecord, ApprovalState, AuditEvent, AuditKind, AuditQuery, AuditView, Clock, LedgerStore, Millis, Outbound,
    StoreError,
};
use toolgate_notify::{Channel, Event, EventKind, LinkMode, Links, Target};

use crate::approval_item::{approval_item, rfc3339};
use crate::metrics::Metrics;
use crate::notify::Notifications;
use crate::notify::token::{LinkChoice, LinkClaims, LinkSigner, nonce};

/// Events read per round.
const BATCH: usize = 256;
/// How often the follower looks for new events when it found none.
const POLL: Duration = Duration::from_millis(250);
/// How long a gap in the sequence numbers is waited for.
pub const GAP_GRACE: Duration = Duration::from_secs(5);

/// What the follower needs: the store and its clock, the configured groups
/// (whom an e-mail goes to) and the signer of the links it carries.
pub(crate) struct Follower {
    /// The store: its audit log, its notification cursor and outbox, its approvals.
    pub store: Arc<dyn LedgerStore>,
    /// The ledger's clock.
    pub clock: Arc<dyn Clock>,
    /// Groups and their members (`[groups]`).
    pub groups: BTreeMap<String, Vec<String>>,
    /// Signs the one-time links.
    pub links: LinkSigner,
    /// Where delivery attempts are counted (`toolgate_notifications_total`).
    pub metrics: Arc<Metrics>,
}

/// Follows the audit log into the outbox until the task is dropped.
pub(crate) async fn follow(follower: Follower, notifications: Arc<Notifications>) {
    loop {
        match enqueue_once(&follower, &notifications).await {
            Ok(true) => notifications.wake_delivery(),
            Ok(false) => tokio::time::sleep(POLL).await,
            Err(error) => {
                tracing::warn!(%error, "cannot enqueue notifications; trying again");
                tokio::time::sleep(POLL * 8).await;
            }
        }
    }
}

/// One round: `true` when the cursor moved (here or elsewhere).
async fn enqueue_once(follower: &Follower, notifications: &Notifications) -> Result<bool, StoreError> {
    let store: &dyn LedgerStore = follower.store.as_ref();
    let cursor = store.notify_cursor().await?;
    let query =
        AuditQuery { after_seq: Some(cursor), limit: Some(BATCH), view: AuditView::All, ..AuditQuery::default() };
    let events = store.audit(&query).await?;
    let ready = ready_prefix(&events, cursor, follower.clock.now());
    let Some(last) = ready.last().map(|event| event.seq) else { return Ok(false) };
    let mut ids: Vec<String> =
        ready.iter().filter(|event| event_kind(event.kind).is_some()).map(|e| e.approval_id.clone()).collect();
    ids.sort();
    ids.dedup();
    let records: HashMap<String, ApprovalRecord> =
        store.approvals(&ids).await?.into_iter().map(|record| (record.approval_id.clone(), record)).collect();
    let mut outbound = Vec::new();
    for event in ready {
        let (Some(kind), Some(record)) = (event_kind(event.kind), records.get(&event.approval_id)) else { continue };
        // A call a rule decided asked nobody: nobody is told about it.
        if toolgate::approval::lifecycle::held::decided_by_rule(event) {
            continue;
        }
        outbound.extend(deliveries(follower, notifications, event, kind, record));
    }
    store.enqueue(&outbound, cursor, last).await?;
    Ok(true)
}

/// The events after `cursor` that may be enqueued now: in order, up to the
/// first gap in the numbers that is younger than [`GAP_GRACE`].
fn ready_prefix(events: &[AuditEvent], cursor: i64, now: Millis) -> &[AuditEvent] {
    let grace = i64::try_from(GAP_GRACE.as_millis()).unwrap_or(i64::MAX);
    let mut previous = cursor;
    for (index, event) in events.iter().enumerate() {
        if event.seq != previous + 1 && now.saturating_sub(event.at) < grace {
            return &events[..index];
        }
        previous = event.seq;
    }
    events
}

/// The notification an audit event is, if any.
fn event_kind(kind: AuditKind) -> Option<EventKind> {
    match kind {
        AuditKind::Issued => Some(EventKind::Requested),
        AuditKind::Approved | AuditKind::Denied => Some(EventKind::Decided),
        AuditKind::Expired => Some(EventKind::Expired),
        AuditKind::Executed | AuditKind::Failed => Some(EventKind::Executed),
        AuditKind::Escalated => Some(EventKind::Escalated),
        AuditKind::Reminded => Some(EventKind::Reminded),
        AuditKind::Edited
        | AuditKind::Interrupted
        | AuditKind::Rejected
        | AuditKind::Voted
        | AuditKind::Withdrawn
        | AuditKind::Continued
        // The successor's own `issued` event asks its approvers.
        | AuditKind::Superseded
        | AuditKind::Notified
        | AuditKind::NotificationFailed
        | AuditKind::Allowed
        | AuditKind::Shadowed
        | AuditKind::Granted => None,
    }
}

/// The deliveries of one event: one per channel that wants it, one per
/// recipient of an e-mail channel.
fn deliveries(
    follower: &Follower,
    notifications: &Notifications,
    event: &AuditEvent,
    kind: EventKind,
    record: &ApprovalRecord,
) -> Vec<Outbound> {
    let event_id = format!("evt_{}", uuid::Uuid::now_v7().simple());
    let mut item = approval_item(record);
    // A decision's event reports the decision, whatever happened to the approval since.
    match event.kind {
        AuditKind::Approved => item["state"] = ApprovalState::Approved.as_str().into(),
        AuditKind::Denied => item["state"] = ApprovalState::Denied.as_str().into(),
        _ => {}
    }
    let created_at = rfc3339(event.at).as_str().unwrap_or_default().to_owned();
    let body = |links: Option<Links>| Event {
        id: event_id.clone(),
        kind,
        created_at: created_at.clone(),
        approval: item.clone(),
        links,
    };
    let outbound = |channel: &Channel, recipient: Option<String>, event: Event| Outbound {
        delivery_id: format!("dlv_{}", uuid::Uuid::now_v7().simple()),
        event_id: event_id.clone(),
        kind: kind.as_str().to_owned(),
        channel: channel.name.clone(),
        recipient,
        approval_id: record.approval_id.clone(),
        conversation_id: record.conversation_id.clone(),
        owner: record.owner.clone(),
        tool_call_id: record.tool_call_id.clone(),
        body: serde_json::to_value(&event).unwrap_or_default(),
        created_at: follower.clock.now(),
    };
    let mut out = Vec::new();
    for channel in notifications.channels().channels.iter().filter(|channel| channel.wants(kind)) {
        match &channel.target {
            Target::Email(email) => {
                let approvers = approver_principals(event, kind, record, &follower.groups);
                let recipients = email.recipients(&approvers, &follower.groups, &notifications.channels().emails);
                if !recipients.unmapped.is_empty() {
                    tracing::warn!(channel = %channel.name, unmapped = ?recipients.unmapped, "no e-mail address in [emails]");
                }
                for recipient in recipients.to {
                    let links = links(follower, notifications, channel, kind, record, recipient.principal.clone());
                    out.push(outbound(channel, Some(recipient.address), body(links)));
                }
            }
            Target::Webhook(_) => {
                let links = links(follower, notifications, channel, kind, record, None);
                out.push(outbound(channel, None, body(links)));
            }
            _ => tracing::warn!(channel = %channel.name, "a channel of a kind this server cannot deliver"),
        }
    }
    out
}

/// Who an event's "approvers" are: those an escalation added, those a
/// reminder reminds (who have not voted), else everyone who decides.
fn approver_principals(
    event: &AuditEvent,
    kind: EventKind,
    record: &ApprovalRecord,
    groups: &BTreeMap<String, Vec<String>>,
) -> Vec<String> {
    let strings = |value: &serde_json::Value| -> Vec<String> {
        value.as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
    };
    let named = |approvers: Vec<String>| -> Vec<String> {
        let mut principals = Vec::new();
        for approver in approvers {
            match approver.strip_prefix(GROUP_PREFIX) {
                Some(group) => principals.extend(groups.get(group).cloned().unwrap_or_default()),
                None => principals.push(approver),
            }
        }
        principals
    };
    let mut principals = match (&record.routing, kind) {
        (Some(_), EventKind::Escalated) => {
            let mut added = named(strings(&event.data["added"]));
            added.extend(strings(&event.data["members"]));
            added
        }
        (Some(routing), _) => {
            let mut all = named(routing.approvers.clone());
            all.extend(routing.members.iter().cloned());
            if kind == EventKind::Reminded {
                all.retain(|principal| !record.votes.iter().any(|vote| vote.principal.as_ref() == Some(principal)));
            }
            all
        }
        (None, _) => requester(record).map(str::to_owned).into_iter().collect(),
    };
    principals.sort();
    principals.dedup();
    principals
}

/// The links of a message, when the server has a public URL and the event
/// asks someone to decide a pending approval.
fn links(
    follower: &Follower,
    notifications: &Notifications,
    channel: &Channel,
    kind: EventKind,
    record: &ApprovalRecord,
    principal: Option<String>,
) -> Option<Links> {
    let public = notifications.public_url()?;
    if !kind.asks_for_decision() || record.state != ApprovalState::Pending {
        return None;
    }
    let bearer = channel.links == LinkMode::Bearer;
    let principal = if bearer { None } else { principal };
    let link = |choice: LinkChoice| {
        let claims = LinkClaims {
            approval_id: record.approval_id.clone(),
            input_digest: record.input_digest.clone(),
            choice,
            expires_at: record.expires_at,
            channel: channel.name.clone(),
            principal: principal.clone(),
            bearer,
            nonce: nonce(),
        };
        format!("{public}/a/{}", follower.links.sign(&claims))
    };
    Some(Links {
        approve: link(LinkChoice::Approve),
        deny: link(LinkChoice::Deny),
        view: format!("{public}/approvals/{}", record.approval_id),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(seq: i64, at: Millis) -> AuditEvent {
        AuditEvent {
            seq,
            at,
            kind: AuditKind::Issued,
            approval_id: format!("a{seq}"),
            tool_call_id: "c".into(),
            conversation_id: "x".into(),
            owner: None,
            principal: None,
            data: json!({}),
        }
    }

    #[test]
    fn a_young_gap_holds_the_follower_and_an_old_one_does_not() {
        let now = 100_000;
        let events = [event(4, now), event(5, now), event(7, now), event(8, now)];
        assert_eq!(ready_prefix(&events, 3, now).len(), 2, "stops before the missing 6");
        let old = [event(4, 0), event(6, 0)];
        assert_eq!(ready_prefix(&old, 3, now).len(), 2, "a gap older than the grace is passed");
        assert_eq!(ready_prefix(&events, 2, now).len(), 0, "the missing 3 holds everything");
    }
}
