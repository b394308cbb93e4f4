//! Timers, the notification outbox and one-time links on every
//! `ApprovalStore`: a routed approval with a schedule is due exactly when
//! its next timer is, fires once when two handles race (or when fired from
//! a stale read), lists its escalated approvers' members after, and a
//! decided approval is never due; the notification cursor moves once per
//! `from` and enqueues with it; deliveries are claimed by one executor at a
//! time, lapse, retry and end, and `finish_attempt` (and its audit events)
//! applies only for the holder; `deliveries` lists newest first with its
//! filters; `prune` removes ended deliveries and expired link uses; a link
//! is used once until released. Run against the in-memory reference store,
//! SQLite, and Postgres when `TOOLGATE_TEST_POSTGRES_URL` is set
//! (`scripts/with-postgres.sh cargo test -p toolgate-store`). Also: a store
//! at migration 0005 holding a pending routed approval opens at 0006 with
//! its expiry as its due time and accepts the new audit kinds.

#[macro_use]
mod support;

use std::sync::Arc;

use serde_json::json;
use sqlx::Connection;
use sqlx::migrate::Migrator;
use support::{Stores, event, record};
use tokio::sync::Barrier;
use toolgate::Decision;
use toolgate::approval::lifecycle::{Escalation, Fired, Routing, Schedule, VoteOptions, Voter, cast, fire};
use toolgate::ledger::ApprovalState::{Denied, Pending};
use toolgate::ledger::{
    ApprovalQuery, ApprovalRecord, ApprovalStore, AttemptEnd, AttemptResult, AuditEvent, AuditKind, AuditQuery,
    AuditStore, Delivery, DeliveryState, LedgerStore, ManualClock, Millis, Outbound, OutboxQuery, OutboxStore,
    StateFilter, conversation_key,
};
use toolgate_store::{SqlStore, StoreSpec};

static SQLITE: Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES: Migrator = sqlx::migrate!("migrations/postgres");

/// The last migration before notifications.
const BEFORE_NOTIFICATIONS: i64 = 5;

/// When the scheduled approvals here are issued.
const T: Millis = 1_000_000;
const MINUTE: Millis = 60_000;
const HOUR: Millis = 60 * MINUTE;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

/// The members of the configured groups.
fn groups(group: &str) -> Option<Vec<String>> {
    (group == "leads").then(|| strings(&["erin", "frank"]))
}

/// Alice's conversation.
fn alices() -> String {
    conversation_key(Some("alice"), "chat")
}

/// A pending approval in alice's conversation issued at `issued_at`,
/// routed to `bob`, escalating to `group:leads` after 15 minutes, denied
/// after 30, reminded every `remind`, expiring 10 hours after issue.
fn scheduled(id: &str, issued_at: Millis, remind: Option<Millis>) -> ApprovalRecord {
    let escalate = vec![
        Escalation { after: 15 * MINUTE, to: strings(&["group:leads"]), deny: false },
        Escalation { after: 30 * MINUTE, to: Vec::new(), deny: true },
    ];
    let schedule = Schedule { escalate, remind, ..Schedule::default() };
    ApprovalRecord {
        issued_at,
        updated_at: issued_at,
        expires_at: issued_at + 10 * HOUR,
        routing: Some(Routing {
            approvers: strings(&["bob"]),
            members: strings(&["bob"]),
            quorum: 1,
            self_approval: false,
            schedule,
        }),
        owner: Some("alice".to_owned()),
        ..record(id, &alices())
    }
}

/// The ids of the approvals whose timer is due at `now`, earliest first.
async fn due(store: &dyn LedgerStore, now: Millis, limit: usize) -> Vec<String> {
    store.due_timers(now, limit).await.unwrap().into_iter().map(|record| record.approval_id).collect()
}

/// Reads the approval through `store` and fires its timer at `now`.
async fn fire_at(store: &dyn LedgerStore, id: &str, now: Millis) -> Option<Fired> {
    let read = store.approvals(&[id.to_owned()]).await.unwrap().remove(0);
    fire(store, &ManualClock::new(now), &groups, &read).await.unwrap()
}

/// The pending approvals `keys` may see.
async fn visible(store: &dyn LedgerStore, keys: &[&str]) -> Vec<String> {
    let query = ApprovalQuery {
        viewer_keys: Some(strings(keys)),
        states: StateFilter::Pending,
        conversation_id: None,
        conversation_name: None,
        limit: 50,
    };
    store.list_approvals(&query).await.unwrap().into_iter().map(|record| record.approval_id).collect()
}

async fn a_scheduled_approval_is_due_at_each_timer(stores: &Stores) {
    let mut decided = scheduled("decided", T, None);
    decided.state = Denied;
    let plain = record("plain", &alices());
    let records = [scheduled("first", T - MINUTE, None), scheduled("t", T, None), decided, plain];
    stores.a.issue(&records, &[]).await.unwrap();
    let store = &*stores.b;
    assert!(due(store, T + 14 * MINUTE - 1, 10).await.is_empty(), "nothing due before the first step");
    assert_eq!(due(store, T + 15 * MINUTE - 1, 10).await, ["first"]);
    assert_eq!(due(store, T + 15 * MINUTE, 10).await, ["first", "t"], "earliest first");
    assert_eq!(due(store, T + 15 * MINUTE, 1).await, ["first"], "up to the limit");
    assert!(due(store, T + 15 * MINUTE, 0).await.is_empty());
    assert_eq!(store.due_timers(T + 15 * MINUTE, 10).await.unwrap()[1], records[1], "read back whole");
    assert!(visible(store, &["erin"]).await.is_empty(), "not an approver yet");

    assert_eq!(
        fire_at(&*stores.a, "t", T + 15 * MINUTE).await,
        Some(Fired::Escalated { added: strings(&["group:leads"]) })
    );
    let after = store.approvals(&["t".to_owned()]).await.unwrap().remove(0);
    let routing = after.routing.clone().unwrap();
    assert_eq!(
        (routing.approvers, routing.members),
        (strings(&["bob", "group:leads"]), strings(&["bob", "erin", "frank"]))
    );
    assert_eq!((routing.schedule.fired, after.updated_at), (1, T + 15 * MINUTE));
    assert_eq!(visible(store, &["erin"]).await, ["t"], "an added member");
    assert_eq!(visible(store, &["zed", "group:leads"]).await, ["t"], "the added group");
    assert_eq!(due(store, T + 15 * MINUTE, 10).await, ["first"], "its due time moved on");
    assert_eq!(due(store, T + 30 * MINUTE - 1, 10).await, ["first"]);
    assert_eq!(due(store, T + 30 * MINUTE, 10).await, ["first", "t"], "at the deny step");

    assert_eq!(fire_at(store, "t", T + 30 * MINUTE).await, Some(Fired::Denied("not answered within 30m".to_owned())));
    assert_eq!(store.approvals(&["t".to_owned()]).await.unwrap()[0].state, Denied);
    assert_eq!(stores.a.due_continuations(T + 30 * MINUTE, 10).await.unwrap(), [alices()]);
    // Settled (by a timer or a vote), unrouted: never due.
    let voter = Voter::new(Some("bob".to_owned()));
    let clock = ManualClock::new(T);
    cast(store, &clock, "first", &voter, Decision::APPROVE, VoteOptions::default()).await.unwrap();
    assert!(due(store, T + 100 * HOUR, 10).await.is_empty());
    let kinds: Vec<AuditKind> = store.audit(&AuditQuery::default()).await.unwrap().iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [AuditKind::Escalated, AuditKind::Voted, AuditKind::Denied, AuditKind::Voted, AuditKind::Approved]
    );
}

async fn racing_handles_fire_each_timer_once(stores: &Stores) {
    const APPROVALS: usize = 8;
    let ids: Vec<String> = (0..APPROVALS).map(|n| format!("race{n}")).collect();
    let records: Vec<ApprovalRecord> = ids.iter().map(|id| scheduled(id, T, None)).collect();
    stores.a.issue(&records, &[]).await.unwrap();
    let start = Arc::new(Barrier::new(APPROVALS * 2));
    let tasks: Vec<_> = ids
        .iter()
        .flat_map(|id| [(id.clone(), stores.a.clone()), (id.clone(), stores.b.clone())])
        .map(|(id, store)| {
            let start = start.clone();
            tokio::spawn(async move {
                start.wait().await;
                (id.clone(), fire_at(store.as_ref(), &id, T + 15 * MINUTE).await)
            })
        })
        .collect();
    let fired: Vec<(String, Option<Fired>)> =
        futures::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    for id in &ids {
        let times = fired.iter().filter(|(which, fired)| which == id && fired.is_some()).count();
        assert_eq!(times, 1, "{id}: {fired:?}");
    }
    let events = stores.b.audit(&AuditQuery::default()).await.unwrap();
    assert_eq!(events.len(), APPROVALS, "one `escalated` each: {events:?}");
    assert!(events.iter().all(|event| event.kind == AuditKind::Escalated));
    for record in stores.b.approvals(&ids).await.unwrap() {
        assert_eq!(record.routing.unwrap().schedule.fired, 1);
    }
}

/// A timer fired again from a record read before it fired finds it moved,
/// also while a reminder is overdue (the due time does not move on then).
async fn a_stale_read_fires_nothing(stores: &Stores) {
    stores.a.issue(&[scheduled("stale", T, Some(10 * MINUTE))], &[]).await.unwrap();
    let now = T + 15 * MINUTE;
    let read = stores.a.approvals(&["stale".to_owned()]).await.unwrap().remove(0);
    let clock = ManualClock::new(now);
    let first = fire(&*stores.a, &clock, &groups, &read).await.unwrap();
    assert_eq!(first, Some(Fired::Escalated { added: strings(&["group:leads"]) }));
    let again = fire(&*stores.b, &clock, &groups, &read).await.unwrap();
    assert_eq!(again, None, "the step fired already");
    assert_eq!(fire_at(&*stores.b, "stale", now).await, Some(Fired::Reminded), "the overdue reminder");
    assert_eq!(fire_at(&*stores.b, "stale", now).await, None);
    let kinds: Vec<AuditKind> = stores.a.audit(&AuditQuery::default()).await.unwrap().iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [AuditKind::Escalated, AuditKind::Reminded]);
}

/// Delivery `d{n}` of an event about `approval`, enqueued at `created_at`.
fn outbound(n: u32, approval: &str, created_at: Millis) -> Outbound {
    Outbound {
        delivery_id: format!("d{n:02}"),
        event_id: format!("e{n:02}"),
        kind: "approval.requested".to_owned(),
        channel: if n.is_multiple_of(2) { "ops-hook" } else { "mail" }.to_owned(),
        recipient: (!n.is_multiple_of(2)).then(|| format!("user{n}@example.com")),
        approval_id: approval.to_owned(),
        conversation_id: alices(),
        owner: Some("alice".to_owned()),
        tool_call_id: format!("call_{approval}"),
        body: json!({"type": "approval.requested", "n": n, "text": "ü ✓ \"q\""}),
        created_at,
    }
}

/// `count` deliveries about `approval`, enqueued at 100, 101, ...
fn outbounds(count: u32, approval: &str) -> Vec<Outbound> {
    (1..=count).map(|n| outbound(n, approval, 99 + Millis::from(n))).collect()
}

/// The end of `executor`'s attempt on `delivery` at `at`, with one audit event of `kind`.
fn end(delivery: &str, executor: &str, result: AttemptResult, at: Millis, kind: AuditKind) -> AttemptEnd {
    let data = json!({"delivery": delivery, "executor": executor});
    AttemptEnd {
        delivery_id: delivery.to_owned(),
        executor: executor.to_owned(),
        result,
        at,
        events: vec![event(kind, "ap", "chat", at, data)],
    }
}

fn ids(deliveries: &[Delivery]) -> Vec<String> {
    deliveries.iter().map(|delivery| delivery.outbound.delivery_id.clone()).collect()
}

/// The deliveries a query lists, by id.
async fn listed(
    store: &dyn LedgerStore,
    approval: Option<&str>,
    state: Option<DeliveryState>,
    limit: usize,
) -> Vec<String> {
    let query = OutboxQuery { approval_id: approval.map(str::to_owned), state, limit };
    ids(&store.deliveries(&query).await.unwrap())
}

/// The one delivery with this id.
async fn delivery(store: &dyn LedgerStore, id: &str) -> Delivery {
    let all = store.deliveries(&OutboxQuery { limit: 1000, ..OutboxQuery::default() }).await.unwrap();
    all.into_iter().find(|delivery| delivery.outbound.delivery_id == id).unwrap_or_else(|| panic!("no {id}"))
}

/// Enqueues `deliveries` from a cursor at 0.
async fn enqueued(store: &dyn LedgerStore, deliveries: &[Outbound]) {
    assert!(store.enqueue(deliveries, 0, 1).await.unwrap());
}

async fn the_cursor_moves_once_and_enqueues_with_it(stores: &Stores) {
    assert_eq!((stores.a.notify_cursor().await.unwrap(), stores.b.notify_cursor().await.unwrap()), (0, 0));
    let first = outbounds(2, "ap");
    assert!(stores.a.enqueue(&first, 0, 5).await.unwrap());
    assert_eq!(stores.b.notify_cursor().await.unwrap(), 5);
    assert!(!stores.b.enqueue(&[outbound(3, "ap", 300)], 0, 7).await.unwrap(), "a stale `from`");
    assert_eq!(stores.a.notify_cursor().await.unwrap(), 5, "not moved");
    assert_eq!(listed(&*stores.a, None, None, 10).await, ["d02", "d01"], "nothing enqueued");
    let stored = delivery(&*stores.b, "d01").await;
    let expected = Delivery {
        outbound: first[0].clone(),
        state: DeliveryState::Pending,
        attempts: 0,
        next_at: 100,
        first_attempt_at: None,
        last_error: None,
    };
    assert_eq!(stored, expected, "read back whole, due when enqueued");

    // The same delivery enqueued again is kept as it was.
    let again = Outbound { body: json!({"changed": true}), ..first[0].clone() };
    assert!(stores.b.enqueue(&[outbound(3, "ap", 300), again], 5, 9).await.unwrap());
    assert_eq!(delivery(&*stores.a, "d01").await, expected);
    assert_eq!(listed(&*stores.a, None, None, 10).await, ["d03", "d02", "d01"]);

    // Two handles moving it from the same place: one wins.
    let (a, b) = (stores.a.clone(), stores.b.clone());
    let (left, right) = tokio::join!(
        tokio::spawn(async move { a.enqueue(&[outbound(4, "ap", 400)], 9, 10).await.unwrap() }),
        tokio::spawn(async move { b.enqueue(&[outbound(5, "ap", 500)], 9, 11).await.unwrap() }),
    );
    let (left, right) = (left.unwrap(), right.unwrap());
    assert!(left != right, "exactly one moves it: {left} {right}");
    let (cursor, winner) = if left { (10, "d04") } else { (11, "d05") };
    assert_eq!(stores.a.notify_cursor().await.unwrap(), cursor);
    assert_eq!(listed(&*stores.b, None, None, 10).await, [winner, "d03", "d02", "d01"]);
}

async fn racing_claims_never_share_a_delivery(stores: &Stores) {
    enqueued(&*stores.a, &outbounds(30, "ap")).await;
    let start = Arc::new(Barrier::new(2));
    let tasks: Vec<_> = [("exe-a", stores.a.clone()), ("exe-b", stores.b.clone())]
        .into_iter()
        .map(|(executor, store)| {
            let start = start.clone();
            tokio::spawn(async move {
                start.wait().await;
                let mut claimed = Vec::new();
                loop {
                    let batch = store.claim_deliveries(executor, 1000, 5000, 4).await.unwrap();
                    if batch.is_empty() {
                        return claimed;
                    }
                    claimed.extend(ids(&batch));
                }
            })
        })
        .collect();
    let claimed: Vec<Vec<String>> = futures::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    let mut all: Vec<String> = claimed.concat();
    all.sort();
    let expected: Vec<String> = (1..=30).map(|n| format!("d{n:02}")).collect();
    assert_eq!(all, expected, "each claimed once: {claimed:?}");
    assert!(stores.a.claim_deliveries("exe-c", 4999, 6000, 50).await.unwrap().is_empty(), "all held");
    assert_eq!(stores.a.claim_deliveries("exe-c", 5000, 6000, 50).await.unwrap().len(), 30, "all lapsed");
}

async fn a_claim_lapses_and_only_its_holder_finishes_it(stores: &Stores) {
    stores.a.issue(&[record("ap", "chat")], &[]).await.unwrap();
    enqueued(&*stores.a, &outbounds(1, "ap")).await;
    assert!(stores.a.claim_deliveries("x", 99, 200, 10).await.unwrap().is_empty(), "not due before it was enqueued");
    assert!(stores.a.claim_deliveries("x", 100, 200, 0).await.unwrap().is_empty(), "limit 0");
    assert_eq!(ids(&stores.a.claim_deliveries("x", 100, 200, 10).await.unwrap()), ["d01"]);
    assert!(stores.b.claim_deliveries("y", 199, 300, 10).await.unwrap().is_empty(), "held by x");
    let by_y = end("d01", "y", AttemptResult::Delivered, 150, AuditKind::Notified);
    assert!(!stores.b.finish_attempt(&by_y).await.unwrap(), "y does not hold it");
    assert_eq!(ids(&stores.b.claim_deliveries("y", 200, 300, 10).await.unwrap()), ["d01"], "x's claim lapsed");
    let by_x = end("d01", "x", AttemptResult::Delivered, 210, AuditKind::Notified);
    assert!(!stores.a.finish_attempt(&by_x).await.unwrap(), "x no longer holds it");
    let unknown = end("nope", "y", AttemptResult::Delivered, 210, AuditKind::Notified);
    assert!(!stores.a.finish_attempt(&unknown).await.unwrap());
    assert_eq!(delivery(&*stores.a, "d01").await.attempts, 0, "nothing changed");
    assert!(stores.a.audit(&AuditQuery::default()).await.unwrap().is_empty(), "no event appended");

    let by_y = end("d01", "y", AttemptResult::Delivered, 220, AuditKind::Notified);
    assert!(stores.b.finish_attempt(&by_y).await.unwrap());
    let logged = stores.a.audit(&AuditQuery::default()).await.unwrap();
    assert_eq!(support::unsequenced(&logged), by_y.events, "appended with the finish");
    let done = delivery(&*stores.a, "d01").await;
    assert_eq!(
        (done.state, done.attempts, done.next_at, done.first_attempt_at),
        (DeliveryState::Delivered, 1, 220, Some(220))
    );
}

async fn retries_wait_and_ends_are_final(stores: &Stores) {
    enqueued(&*stores.a, &outbounds(3, "ap")).await;
    assert_eq!(stores.a.claim_deliveries("x", 110, 1000, 10).await.unwrap().len(), 3);
    let retry = AttemptResult::Retry { at: 500, error: "503 busy".to_owned() };
    assert!(stores.a.finish_attempt(&end("d01", "x", retry, 120, AuditKind::NotificationFailed)).await.unwrap());
    let waiting = delivery(&*stores.b, "d01").await;
    assert_eq!((waiting.state, waiting.attempts, waiting.next_at), (DeliveryState::Pending, 1, 500));
    assert_eq!((waiting.first_attempt_at, waiting.last_error.as_deref()), (Some(120), Some("503 busy")));
    assert!(stores.b.claim_deliveries("y", 499, 2000, 10).await.unwrap().is_empty(), "not before its next time");
    assert_eq!(ids(&stores.b.claim_deliveries("y", 500, 2000, 10).await.unwrap()), ["d01"]);
    assert!(
        stores.b.finish_attempt(&end("d01", "y", AttemptResult::Delivered, 520, AuditKind::Notified)).await.unwrap()
    );
    let delivered = delivery(&*stores.a, "d01").await;
    assert_eq!((delivered.state, delivered.attempts, delivered.next_at), (DeliveryState::Delivered, 2, 520));
    assert_eq!((delivered.first_attempt_at, delivered.last_error), (Some(120), None), "the first attempt is kept");
    let late = end("d01", "y", AttemptResult::Failed { error: "late".to_owned() }, 530, AuditKind::NotificationFailed);
    assert!(!stores.b.finish_attempt(&late).await.unwrap(), "delivered is final");

    let failed = AttemptResult::Failed { error: "410 gone".to_owned() };
    assert!(stores.a.finish_attempt(&end("d02", "x", failed, 130, AuditKind::NotificationFailed)).await.unwrap());
    let gone = delivery(&*stores.b, "d02").await;
    assert_eq!((gone.state, gone.attempts, gone.next_at), (DeliveryState::Failed, 1, 130));
    assert_eq!(gone.last_error.as_deref(), Some("410 gone"));
    let retried = AttemptResult::Retry { at: 600, error: "again".to_owned() };
    assert!(!stores.a.finish_attempt(&end("d02", "x", retried, 140, AuditKind::NotificationFailed)).await.unwrap());
    assert_eq!(delivery(&*stores.b, "d02").await, gone, "failed is final");

    assert_eq!(ids(&stores.b.claim_deliveries("z", 5000, 6000, 10).await.unwrap()), ["d03"], "only the pending one");
    let kinds: Vec<AuditKind> = stores.a.audit(&AuditQuery::default()).await.unwrap().iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [AuditKind::NotificationFailed, AuditKind::Notified, AuditKind::NotificationFailed]);
}

async fn deliveries_filter_by_approval_and_state_newest_first(stores: &Stores) {
    let queued = [outbound(1, "A", 100), outbound(2, "B", 110), outbound(3, "A", 120), outbound(4, "A", 130)];
    enqueued(&*stores.a, &queued).await;
    assert_eq!(stores.a.claim_deliveries("x", 200, 1000, 10).await.unwrap().len(), 4);
    assert!(
        stores.a.finish_attempt(&end("d03", "x", AttemptResult::Delivered, 210, AuditKind::Notified)).await.unwrap()
    );
    let store = &*stores.b;
    assert_eq!(listed(store, None, None, 10).await, ["d04", "d03", "d02", "d01"]);
    assert_eq!(listed(store, Some("A"), None, 10).await, ["d04", "d03", "d01"]);
    assert_eq!(listed(store, None, Some(DeliveryState::Pending), 10).await, ["d04", "d02", "d01"]);
    assert_eq!(listed(store, Some("A"), Some(DeliveryState::Delivered), 10).await, ["d03"]);
    assert!(listed(store, Some("B"), Some(DeliveryState::Delivered), 10).await.is_empty());
    assert!(listed(store, None, Some(DeliveryState::Failed), 10).await.is_empty());
    assert_eq!(listed(store, Some("A"), None, 2).await, ["d04", "d03"], "the newest, up to the limit");
    assert!(listed(store, None, None, 0).await.is_empty());
    assert!(listed(store, Some("nobody"), None, 10).await.is_empty());
}

async fn prune_removes_ended_deliveries_and_expired_link_uses(stores: &Stores) {
    let queued = [outbound(1, "ap", 100), outbound(2, "ap", 100), outbound(3, "ap", 100), outbound(4, "ap", 100)];
    enqueued(&*stores.a, &queued).await;
    assert_eq!(stores.a.claim_deliveries("x", 100, 10_000, 10).await.unwrap().len(), 4);
    let ends = [
        end("d01", "x", AttemptResult::Delivered, 200, AuditKind::Notified),
        end("d02", "x", AttemptResult::Failed { error: "no".to_owned() }, 300, AuditKind::NotificationFailed),
        end("d04", "x", AttemptResult::Delivered, 900, AuditKind::Notified),
    ];
    for end in &ends {
        assert!(stores.a.finish_attempt(end).await.unwrap());
    }
    assert!(stores.a.consume_link("old", 100, 400).await.unwrap());
    assert!(stores.a.consume_link("new", 100, 800).await.unwrap());
    stores.b.prune(500).await.unwrap();
    assert_eq!(listed(&*stores.a, None, None, 10).await, ["d04", "d03"], "ended before the cut: removed");
    assert_eq!(delivery(&*stores.a, "d03").await.state, DeliveryState::Pending, "pending, however old: kept");
    assert!(stores.a.consume_link("old", 600, 1400).await.unwrap(), "its use was pruned");
    assert!(!stores.a.consume_link("new", 600, 800).await.unwrap(), "still recorded");
    stores.b.prune(10_000).await.unwrap();
    assert_eq!(listed(&*stores.a, None, None, 10).await, ["d03"]);
}

async fn a_link_is_used_once_until_released(stores: &Stores) {
    assert!(!stores.b.link_used("link-1").await.unwrap(), "not used yet");
    assert!(stores.a.consume_link("link-1", 100, 1000).await.unwrap());
    assert!(stores.b.link_used("link-1").await.unwrap(), "its use is read back, by another connection too");
    assert!(!stores.b.consume_link("link-1", 110, 1000).await.unwrap(), "used");
    assert!(stores.b.consume_link("link-2", 110, 1000).await.unwrap(), "another link");
    stores.b.release_link("link-1").await.unwrap();
    stores.b.release_link("never-used").await.unwrap();
    assert!(!stores.a.link_used("link-1").await.unwrap(), "released");
    assert!(stores.a.consume_link("link-1", 120, 1000).await.unwrap(), "released: usable again");
    assert!(!stores.a.consume_link("link-1", 130, 1000).await.unwrap());
    assert!(!stores.a.consume_link("link-2", 130, 1000).await.unwrap(), "the other one stays used");
    let (a, b) = (stores.a.clone(), stores.b.clone());
    let (left, right) = tokio::join!(
        tokio::spawn(async move { a.consume_link("link-3", 140, 1000).await.unwrap() }),
        tokio::spawn(async move { b.consume_link("link-3", 140, 1000).await.unwrap() }),
    );
    assert!(left.unwrap() != right.unwrap(), "one of two racing uses wins");
}

suite!(
    a_scheduled_approval_is_due_at_each_timer,
    racing_handles_fire_each_timer_once,
    a_stale_read_fires_nothing,
    the_cursor_moves_once_and_enqueues_with_it,
    racing_claims_never_share_a_delivery,
    a_claim_lapses_and_only_its_holder_finishes_it,
    retries_wait_and_ends_are_final,
    deliveries_filter_by_approval_and_state_newest_first,
    prune_removes_ended_deliveries_and_expired_link_uses,
    a_link_is_used_once_until_released,
);

/// The approvals written at 0005: a pending routed one (due at its expiry
/// after 0006), a pending unrouted one and a decided routed one (never
/// due), and one `issued` event.
macro_rules! fill_at_0005 {
    ($conn:expr) => {{
        let conn = $conn;
        let routing = serde_json::to_string(&scheduled("x", 0, None).routing.unwrap()).unwrap();
        for (id, state, routed) in [("routed", "pending", true), ("plain", "pending", false), ("done", "denied", true)] {
            sqlx::query(
                "INSERT INTO approvals (approval_id, conversation_id, tool_call_id, tool_name, input, input_digest, \
                 issued_at, expires_at, state, updated_at, routing) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            )
            .bind(id)
            .bind("chat")
            .bind(format!("call_{id}"))
            .bind("send_email")
            .bind("{}")
            .bind(format!("digest_{id}"))
            .bind(10_i64)
            .bind(1000_i64)
            .bind(state)
            .bind(10_i64)
            .bind(routed.then(|| routing.clone()))
            .execute(&mut *conn)
            .await
            .unwrap();
        }
        sqlx::query(
            "INSERT INTO audit_events (at, kind, approval_id, tool_call_id, conversation_id, principal, data) \
             VALUES (10, 'issued', 'routed', 'call_routed', 'chat', 'alice', '{}')",
        )
        .execute(&mut *conn)
        .await
        .unwrap();
    }};
}

/// Each approval's `timer_at`, by id.
macro_rules! timers {
    ($conn:expr) => {{
        let rows: Vec<(String, Option<i64>)> =
            sqlx::query_as("SELECT approval_id, timer_at FROM approvals ORDER BY approval_id")
                .fetch_all($conn)
                .await
                .unwrap();
        rows
    }};
}

/// What 0006 adds, through the store: the expiry as the due time of a
/// pending routed approval, the cursor after the existing log, the new kinds.
async fn check_at_0006(store: &SqlStore) {
    assert!(store.due_timers(999, 10).await.unwrap().is_empty());
    let routed = store.due_timers(1000, 10).await.unwrap();
    assert_eq!(routed.iter().map(|record| record.approval_id.as_str()).collect::<Vec<_>>(), ["routed"]);
    assert_eq!((routed[0].state, routed[0].routing.clone()), (Pending, scheduled("x", 0, None).routing));
    assert_eq!(store.notify_cursor().await.unwrap(), 1, "the existing log is not notified again");
    let kinds = [AuditKind::Escalated, AuditKind::Reminded, AuditKind::Notified, AuditKind::NotificationFailed];
    let events: Vec<AuditEvent> =
        kinds.iter().map(|kind| event(*kind, "routed", "chat", 20, json!({"kind": kind.as_str()}))).collect();
    store.append(&events).await.unwrap();
    let logged = store.audit(&AuditQuery { after_seq: Some(1), ..AuditQuery::default() }).await.unwrap();
    assert_eq!(support::unsequenced(&logged), events);
    assert_eq!(AuditKind::NotificationFailed.as_str(), "notification_failed");
    assert!(logged.iter().all(|event| event.seq > 1));
}

fn expected_timers() -> Vec<(String, Option<i64>)> {
    vec![("done".to_owned(), None), ("plain".to_owned(), None), ("routed".to_owned(), Some(1000))]
}

#[tokio::test]
async fn a_sqlite_store_at_0005_opens_at_0006_with_its_timers() {
    let (_dir, path) = support::sqlite_path();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    SQLITE.run_to(BEFORE_NOTIFICATIONS, &mut conn).await.unwrap();
    fill_at_0005!(&mut conn);
    conn.close().await.unwrap();

    let store = SqlStore::open(&StoreSpec::Sqlite(path.clone())).await.unwrap();
    check_at_0006(&store).await;
    store.close().await;
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    assert_eq!(timers!(&mut conn), expected_timers());
    let check: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&mut conn).await.unwrap();
    assert_eq!(check, "ok");
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_postgres_store_at_0005_opens_at_0006_with_its_timers() {
    let Some((url, name, database)) = support::fresh_postgres_database("outbox_migrate").await else { return };
    let mut conn = sqlx::PgConnection::connect(&database).await.unwrap();
    POSTGRES.run_to(BEFORE_NOTIFICATIONS, &mut conn).await.unwrap();
    fill_at_0005!(&mut conn);
    conn.close().await.unwrap();

    let store = SqlStore::open(&StoreSpec::Postgres(database.clone())).await.unwrap();
    check_at_0006(&store).await;
    store.close().await;
    let mut conn = sqlx::PgConnection::connect(&database).await.unwrap();
    assert_eq!(timers!(&mut conn), expected_timers());
    conn.close().await.unwrap();
    support::drop_postgres_database(&url, &name).await;
}
