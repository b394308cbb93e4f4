//! The timers of routed approvals through the public API, on the in-memory
//! store and a manual clock: escalation steps add approvers (who can see and
//! decide the approval only from then on, and count toward the quorum), a
//! deny step denies unanswered approvals as `toolgate` and marks the
//! conversation due, reminders fire every `remind` and no more often, a
//! routed approval expires on time, each timer fires once however often
//! `fire` is called, and `next_due` follows the schedule step by step. Also
//! a bearer-link holder votes once and counts once toward a quorum.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use futures::FutureExt;
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate::approval::ApprovalSigner;
use toolgate::approval::lifecycle::{
    self, Escalation, Fired, Route, Routing, Schedule, TIMER_PRINCIPAL, VoteError, VoteOptions, Voter, fire, next_due,
};
use toolgate::ledger::{
    ApprovalRecord, ApprovalState, ApprovalStore, AuditEvent, AuditKind, AuditQuery, AuditStore, Clock,
    ContinuationStore, LedgerConfig, ManualClock, MemoryStore, Millis, conversation_key,
};
use toolgate::tool::{CallGate, GateCall, Verdict};
use toolgate::{Decision, TextRequest, generate_text};

const T0: Millis = 1_700_000_000_000;
const SECOND: Millis = 1_000;
const MINUTE: Millis = 60 * SECOND;
const HOUR: Millis = 60 * MINUTE;
/// How long the approvals built here live.
const TTL: Millis = 24 * HOUR;

/// An escalation step to `to` after `after` milliseconds.
fn step(after: Millis, to: &[&str]) -> Escalation {
    Escalation { after, to: to.iter().map(|name| (*name).to_owned()).collect(), deny: false }
}

/// A deny step after `after` milliseconds.
fn deny_step(after: Millis) -> Escalation {
    Escalation { after, to: Vec::new(), deny: true }
}

/// A schedule with these steps and reminders.
fn schedule(escalate: Vec<Escalation>, remind: Option<Millis>) -> Schedule {
    Schedule { escalate, remind, ..Schedule::default() }
}

fn voter(principal: &str) -> Voter {
    Voter::new(Some(principal.to_owned()))
}

/// A holder of a bearer link of channel `ops`.
fn link_holder() -> Voter {
    Voter { bearer_link: true, principal: Some("link:ops".to_owned()), ..Voter::default() }
}

/// The members of the configured groups.
fn groups(group: &str) -> Option<Vec<String>> {
    (group == "leads").then(|| vec!["erin".to_owned(), "frank".to_owned()])
}

/// An approval store, a clock at [`T0`], and alice's conversation.
struct Fixture {
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
    key: String,
}

impl Fixture {
    fn new() -> Self {
        Self {
            store: Arc::new(MemoryStore::new()),
            clock: Arc::new(ManualClock::new(T0)),
            key: conversation_key(Some("alice"), "c1"),
        }
    }

    /// Issues a pending approval `id` in alice's conversation at [`T0`],
    /// routed to `bob` with `quorum` and `schedule`.
    async fn issue(&self, id: &str, quorum: u32, schedule: Schedule) -> ApprovalRecord {
        let route = Route { approvers: vec!["bob".to_owned()], quorum, self_approval: false, schedule };
        let record = ApprovalRecord { routing: Some(route.resolve(groups)), ..self.record(id) };
        self.store.issue(std::slice::from_ref(&record), &[]).await.unwrap();
        record
    }

    /// A pending unrouted approval in alice's conversation, issued at [`T0`].
    fn record(&self, id: &str) -> ApprovalRecord {
        ApprovalRecord {
            approval_id: id.to_owned(),
            conversation_id: self.key.clone(),
            owner: Some("alice".to_owned()),
            client: None,
            tool_call_id: format!("call_{id}"),
            tool_name: "delete_file".to_owned(),
            input: json!({"path": "a.txt"}),
            input_digest: format!("digest_{id}"),
            issued_at: T0,
            expires_at: T0 + TTL,
            state: ApprovalState::Pending,
            decision: None,
            output: None,
            lease: None,
            updated_at: T0,
            routing: None,
            votes: Vec::new(),
            reason: Some("ops decides".to_owned()),
            supersedes: None,
            superseded_by: None,
            origin: Default::default(),
            input_schema: None,
            lineage: Vec::new(),
        }
    }

    /// The approval as stored now.
    async fn stored(&self, id: &str) -> ApprovalRecord {
        self.store.approvals(&[id.to_owned()]).await.unwrap().remove(0)
    }

    /// Moves the clock to `offset` after [`T0`].
    fn at(&self, offset: Millis) {
        self.clock.set(T0 + offset);
    }

    /// Reads the approval and fires its timer at the clock's time.
    async fn fire(&self, id: &str) -> Option<Fired> {
        let record = self.stored(id).await;
        fire(self.store.as_ref(), self.clock.as_ref(), &groups, &record).await.unwrap()
    }

    /// `voter`'s vote: the state after it, or the refusal's code.
    async fn cast(&self, id: &str, voter: &Voter, decision: Decision) -> Result<ApprovalState, String> {
        let options = VoteOptions { continuation: true, note: None };
        match lifecycle::cast(self.store.as_ref(), self.clock.as_ref(), id, voter, decision, options).await {
            Ok(record) => Ok(record.state),
            Err(VoteError::Refused(refusal)) => Err(refusal.code().to_owned()),
            Err(other) => panic!("the store failed: {other}"),
        }
    }

    /// Every audit event, oldest first.
    async fn events(&self) -> Vec<AuditEvent> {
        self.store.audit(&AuditQuery::default()).await.unwrap()
    }

    /// The kinds of every audit event, oldest first.
    async fn kinds(&self) -> Vec<AuditKind> {
        self.events().await.into_iter().map(|event| event.kind).collect()
    }

    /// The conversations due to continue now.
    async fn due_conversations(&self) -> Vec<String> {
        self.store.due_continuations(self.clock.now(), 10).await.unwrap()
    }
}

#[tokio::test]
async fn an_escalated_approver_counts_only_once_the_step_fired() {
    let fixture = Fixture::new();
    fixture.issue("a", 2, schedule(vec![step(15 * MINUTE, &["group:leads", "gina"])], None)).await;
    fixture.at(MINUTE);
    assert_eq!(fixture.cast("a", &voter("bob"), Decision::APPROVE).await, Ok(ApprovalState::Pending));
    fixture.at(10 * MINUTE);
    assert_eq!(fixture.cast("a", &voter("erin"), Decision::APPROVE).await, Err("unknown_approval".to_owned()));
    let signed_in = Voter { groups: vec!["leads".to_owned()], ..voter("zed") };
    assert_eq!(fixture.cast("a", &signed_in, Decision::APPROVE).await, Err("unknown_approval".to_owned()));
    assert_eq!(fixture.fire("a").await, None, "not due yet");
    fixture.at(15 * MINUTE - 1);
    assert_eq!(fixture.fire("a").await, None, "not due a millisecond early");

    fixture.at(15 * MINUTE);
    let added = vec!["group:leads".to_owned(), "gina".to_owned()];
    assert_eq!(fixture.fire("a").await, Some(Fired::Escalated { added: added.clone() }));
    let routing = fixture.stored("a").await.routing.expect("routed");
    assert_eq!(routing.approvers, ["bob", "group:leads", "gina"]);
    assert_eq!(routing.members, ["bob", "erin", "frank", "gina"]);
    assert_eq!((routing.quorum, routing.schedule.fired), (2, 1));
    let escalated = fixture.events().await.into_iter().find(|event| event.kind == AuditKind::Escalated);
    let escalated = escalated.expect("an `escalated` event");
    assert_eq!(escalated.principal.as_deref(), Some(TIMER_PRINCIPAL));
    assert_eq!((escalated.at, escalated.approval_id.as_str()), (T0 + 15 * MINUTE, "a"));
    assert_eq!(escalated.data["added"], json!(added));
    assert_eq!(escalated.data["members"], json!(["erin", "frank", "gina"]));

    // An added member completes the quorum with bob's vote.
    fixture.at(16 * MINUTE);
    assert_eq!(fixture.cast("a", &voter("erin"), Decision::APPROVE).await, Ok(ApprovalState::Approved));
    let decided = fixture.stored("a").await;
    let voters: Vec<_> = decided.votes.iter().map(|vote| vote.principal.clone().unwrap()).collect();
    assert_eq!(voters, ["bob", "erin"]);
    assert_eq!(fixture.cast("a", &signed_in, Decision::APPROVE).await, Err("approval_already_decided".to_owned()));
    assert_eq!(next_due(&decided), None, "a decided approval has no timer");
    assert_eq!(fixture.due_conversations().await, std::slice::from_ref(&fixture.key));
}

#[tokio::test]
async fn an_added_group_member_may_see_the_approval_only_after_the_step() {
    let fixture = Fixture::new();
    fixture.issue("a", 1, schedule(vec![step(15 * MINUTE, &["group:leads"])], None)).await;
    let members = [voter("erin"), Voter { groups: vec!["leads".to_owned()], ..voter("zed") }];
    let before = fixture.stored("a").await;
    for member in &members {
        assert!(!lifecycle::may_see(&before, member), "{member:?} before the step");
        assert!(!lifecycle::is_approver(&before, member), "{member:?} before the step");
    }
    assert!(lifecycle::may_see(&before, &voter("bob")));
    fixture.at(15 * MINUTE);
    assert!(matches!(fixture.fire("a").await, Some(Fired::Escalated { .. })));
    let after = fixture.stored("a").await;
    for member in &members {
        assert!(lifecycle::may_see(&after, member), "{member:?} after the step");
        assert!(lifecycle::is_approver(&after, member), "{member:?} after the step");
    }
    assert!(!lifecycle::may_see(&after, &voter("mallory")));
    assert_eq!(fixture.cast("a", &members[1], Decision::APPROVE).await, Ok(ApprovalState::Approved));
}

#[tokio::test]
async fn a_timer_fires_once_however_often_it_is_fired() {
    let fixture = Fixture::new();
    fixture.issue("a", 1, schedule(vec![step(15 * MINUTE, &["gina"])], Some(10 * MINUTE))).await;
    fixture.at(15 * MINUTE);
    let read = fixture.stored("a").await;
    // The reminder (due at 10m) is due first, the step too: one at a time, each once.
    let first = fire(fixture.store.as_ref(), fixture.clock.as_ref(), &groups, &read).await.unwrap();
    assert_eq!(first, Some(Fired::Escalated { added: vec!["gina".to_owned()] }));
    let again = fire(fixture.store.as_ref(), fixture.clock.as_ref(), &groups, &read).await.unwrap();
    assert_eq!(again, None, "fired from the same read: another process fired it first");
    assert_eq!(fixture.fire("a").await, Some(Fired::Reminded), "the reminder still due");
    assert_eq!(fixture.fire("a").await, None, "nothing left due at 15m");
    let routing = fixture.stored("a").await.routing.unwrap();
    assert_eq!(routing.approvers, ["bob", "gina"], "gina added once");
    assert_eq!((routing.schedule.fired, routing.schedule.reminded_at), (1, Some(T0 + 15 * MINUTE)));
    assert_eq!(fixture.kinds().await, [AuditKind::Escalated, AuditKind::Reminded]);
}

/// Four tasks fire the approval's timers at once, at the step's time:
/// what fired, and the audit kinds after.
async fn race_fires(remind: Option<Millis>) -> (Vec<Option<Fired>>, Vec<AuditKind>) {
    let fixture = Arc::new(Fixture::new());
    fixture.issue("race", 1, schedule(vec![step(15 * MINUTE, &["gina"])], remind)).await;
    fixture.at(15 * MINUTE);
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let fixture = fixture.clone();
            tokio::spawn(async move { fixture.fire("race").await })
        })
        .collect();
    let fired = futures::future::join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(fixture.stored("race").await.routing.unwrap().approvers, ["bob", "gina"]);
    (fired, fixture.kinds().await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_fires_escalate_once() {
    for _ in 0..20 {
        let (fired, kinds) = race_fires(None).await;
        assert_eq!(fired.iter().filter(|fired| fired.is_some()).count(), 1, "{fired:?}");
        assert_eq!(kinds, [AuditKind::Escalated]);
        // A reminder due at the same time: each fires at most once.
        let (fired, kinds) = race_fires(Some(15 * MINUTE)).await;
        let escalated = fired.iter().filter(|fired| matches!(fired, Some(Fired::Escalated { .. }))).count();
        assert_eq!(escalated, 1, "{fired:?}");
        assert_eq!(kinds.iter().filter(|kind| **kind == AuditKind::Escalated).count(), 1, "{kinds:?}");
        assert!(kinds.iter().filter(|kind| **kind == AuditKind::Reminded).count() <= 1, "{kinds:?}");
    }
}

#[tokio::test]
async fn a_deny_step_denies_as_toolgate_and_marks_the_conversation_due() {
    let fixture = Fixture::new();
    fixture.issue("a", 2, schedule(vec![deny_step(HOUR)], None)).await;
    fixture.at(30 * MINUTE);
    assert_eq!(fixture.cast("a", &voter("bob"), Decision::APPROVE).await, Ok(ApprovalState::Pending));
    fixture.at(HOUR - 1);
    assert_eq!(fixture.fire("a").await, None);
    assert_eq!(fixture.stored("a").await.state, ApprovalState::Pending);
    assert!(fixture.due_conversations().await.is_empty());

    fixture.at(HOUR);
    let reason = "not answered within 1h".to_owned();
    assert_eq!(fixture.fire("a").await, Some(Fired::Denied(reason.clone())));
    let denied = fixture.stored("a").await;
    assert_eq!(denied.state, ApprovalState::Denied);
    let decision = denied.decision.clone().expect("a decision");
    assert_eq!((decision.approved, decision.reason.as_deref()), (false, Some(reason.as_str())));
    assert_eq!((decision.principal.as_deref(), decision.decided_at), (Some(TIMER_PRINCIPAL), T0 + HOUR));
    let last = denied.votes.last().expect("the timer's vote");
    assert_eq!((last.principal.as_deref(), last.reason.as_deref()), (Some(TIMER_PRINCIPAL), Some(reason.as_str())));
    assert!(!last.decision.is_approve());
    assert_eq!(denied.votes.len(), 2, "bob's vote is kept");
    assert_eq!(fixture.due_conversations().await, std::slice::from_ref(&fixture.key));
    assert_eq!(fixture.kinds().await, [AuditKind::Voted, AuditKind::Voted, AuditKind::Denied]);
    assert_eq!(next_due(&denied), None);
    assert_eq!(fixture.fire("a").await, None, "denied: nothing is due");
    assert_eq!(fixture.cast("a", &voter("bob"), Decision::APPROVE).await, Err("approval_already_decided".to_owned()));
}

#[tokio::test]
async fn reminders_fire_every_remind_and_not_more_often() {
    let fixture = Fixture::new();
    let record = fixture.issue("a", 1, schedule(Vec::new(), Some(10 * MINUTE))).await;
    assert_eq!(next_due(&record), Some(T0 + 10 * MINUTE));
    let fired_at = |offset: Millis| {
        let fixture = &fixture;
        async move {
            fixture.at(offset);
            fixture.fire("a").await
        }
    };
    assert_eq!(fired_at(5 * MINUTE).await, None);
    assert_eq!(fired_at(10 * MINUTE - 1).await, None);
    assert_eq!(fired_at(10 * MINUTE).await, Some(Fired::Reminded));
    assert_eq!(fired_at(10 * MINUTE).await, None, "once at 10m");
    assert_eq!(fired_at(19 * MINUTE).await, None);
    assert_eq!(next_due(&fixture.stored("a").await), Some(T0 + 20 * MINUTE));
    assert_eq!(fired_at(20 * MINUTE).await, Some(Fired::Reminded));
    // Fired late, the next one counts from when it fired.
    assert_eq!(fired_at(35 * MINUTE).await, Some(Fired::Reminded));
    assert_eq!(fired_at(44 * MINUTE).await, None);
    assert_eq!(next_due(&fixture.stored("a").await), Some(T0 + 45 * MINUTE));
    assert_eq!(fired_at(45 * MINUTE).await, Some(Fired::Reminded));
    let reminded: Vec<Millis> = fixture.events().await.iter().map(|event| event.at - T0).collect();
    assert_eq!(reminded, [10 * MINUTE, 20 * MINUTE, 35 * MINUTE, 45 * MINUTE]);
    assert_eq!(fixture.kinds().await, [AuditKind::Reminded; 4]);
    let stored = fixture.stored("a").await;
    assert_eq!(stored.state, ApprovalState::Pending, "a reminder decides nothing");
    assert_eq!(stored.routing.unwrap().approvers, ["bob"], "nor adds anyone");
}

#[tokio::test]
async fn a_routed_approval_expires_on_time_and_its_conversation_is_due() {
    let fixture = Fixture::new();
    let record = fixture.issue("a", 1, Schedule::default()).await;
    assert_eq!(next_due(&record), Some(T0 + TTL), "without a schedule: its expiry");
    fixture.at(TTL - 1);
    assert_eq!(fixture.fire("a").await, None);
    fixture.at(TTL);
    assert_eq!(fixture.fire("a").await, Some(Fired::Expired));
    let expired = fixture.stored("a").await;
    assert_eq!((expired.state, expired.decision.clone()), (ApprovalState::Expired, None));
    assert_eq!(next_due(&expired), None);
    assert_eq!(fixture.due_conversations().await, std::slice::from_ref(&fixture.key));
    let events = fixture.events().await;
    assert_eq!(events.iter().map(|event| event.kind).collect::<Vec<_>>(), [AuditKind::Expired]);
    assert_eq!(events[0].principal.as_deref(), Some(TIMER_PRINCIPAL));
    assert_eq!(events[0].data, json!({"expiresAt": T0 + TTL}));
    assert_eq!(fixture.fire("a").await, None, "expired once");

    // Past its expiry, an escalation step that was never fired does not run: it expires.
    fixture.issue("b", 1, schedule(vec![step(HOUR, &["gina"]), deny_step(2 * HOUR)], None)).await;
    fixture.at(TTL + HOUR);
    assert_eq!(fixture.fire("b").await, Some(Fired::Expired));
    let expired = fixture.stored("b").await;
    assert_eq!((expired.state, expired.routing.unwrap().approvers), (ApprovalState::Expired, vec!["bob".to_owned()]));
}

#[tokio::test]
async fn only_a_pending_routed_approval_has_a_due_time() {
    let fixture = Fixture::new();
    let plain = fixture.record("plain");
    assert_eq!(next_due(&plain), None, "unrouted");
    fixture.store.issue(std::slice::from_ref(&plain), &[]).await.unwrap();
    fixture.at(TTL + HOUR);
    assert_eq!(fixture.fire("plain").await, None, "an unrouted approval expires when answered, not on a timer");
    assert_eq!(fixture.stored("plain").await.state, ApprovalState::Pending);

    let routing = Route { approvers: vec!["bob".to_owned()], quorum: 1, ..Route::default() }.resolve(groups);
    let routing = Routing { schedule: schedule(vec![step(MINUTE, &["gina"])], Some(30 * SECOND)), ..routing };
    let pending = ApprovalRecord { routing: Some(routing), ..fixture.record("r") };
    assert_eq!(next_due(&pending), Some(T0 + 30 * SECOND), "the earliest of reminder, step and expiry");
    for state in [ApprovalState::Approved, ApprovalState::Denied, ApprovalState::Expired, ApprovalState::Withdrawn] {
        assert_eq!(next_due(&ApprovalRecord { state, ..pending.clone() }), None, "{state:?}");
    }
    let mut all_fired = pending.clone();
    all_fired.routing.as_mut().unwrap().schedule.fired = 1;
    assert_eq!(next_due(&all_fired), Some(T0 + 30 * SECOND), "every step fired: the reminder");
}

#[tokio::test]
async fn escalation_then_denial_each_fire_at_their_time() {
    let fixture = Fixture::new();
    let steps = vec![step(15 * MINUTE, &["gina"]), step(30 * MINUTE, &["group:leads"]), deny_step(HOUR)];
    fixture.issue("a", 2, schedule(steps, None)).await;
    let expect = [
        (15 * MINUTE - SECOND, None),
        (15 * MINUTE, Some(Fired::Escalated { added: vec!["gina".to_owned()] })),
        (15 * MINUTE + SECOND, None),
        (30 * MINUTE - 1, None),
        (30 * MINUTE, Some(Fired::Escalated { added: vec!["group:leads".to_owned()] })),
        (59 * MINUTE, None),
        (HOUR, Some(Fired::Denied("not answered within 1h".to_owned()))),
        (2 * HOUR, None),
    ];
    let mut due = Vec::new();
    for (offset, fired) in expect {
        fixture.at(offset);
        assert_eq!(fixture.fire("a").await, fired, "at {}ms", offset);
        due.push(next_due(&fixture.stored("a").await).map(|at| at - T0));
    }
    let after = [15 * MINUTE, 30 * MINUTE, 30 * MINUTE, 30 * MINUTE, HOUR, HOUR];
    let expected_due: Vec<Option<Millis>> = after.into_iter().map(Some).chain([None, None]).collect();
    assert_eq!(due, expected_due);
    let record = fixture.stored("a").await;
    let routing = record.routing.unwrap();
    assert_eq!(routing.approvers, ["bob", "gina", "group:leads"]);
    assert_eq!((routing.schedule.fired, record.state), (2, ApprovalState::Denied));
    let kinds = fixture.kinds().await;
    assert_eq!(kinds, [AuditKind::Escalated, AuditKind::Escalated, AuditKind::Voted, AuditKind::Denied]);
}

#[tokio::test]
async fn a_bearer_link_holder_votes_once_and_counts_once() {
    let fixture = Fixture::new();
    let record = fixture.issue("a", 2, Schedule::default()).await;
    let holder = link_holder();
    assert!(lifecycle::may_see(&record, &holder) && lifecycle::is_approver(&record, &holder));
    assert_eq!(fixture.cast("a", &holder, Decision::APPROVE).await, Ok(ApprovalState::Pending));
    assert_eq!(fixture.cast("a", &holder, Decision::APPROVE).await, Err("already_voted".to_owned()));
    let pending = fixture.stored("a").await;
    assert_eq!(pending.votes.len(), 1, "counted once");
    assert_eq!(pending.votes[0].principal.as_deref(), Some("link:ops"));
    assert_eq!(lifecycle::waiting_for(&pending), "`bob` (1 of 2)");
    assert_eq!(fixture.cast("a", &voter("bob"), Decision::APPROVE).await, Ok(ApprovalState::Approved));
    // Without the bearer flag, the same principal is nobody.
    let other = fixture.issue("b", 2, Schedule::default()).await;
    let plain = voter("link:ops");
    assert!(!lifecycle::may_see(&other, &plain));
    assert_eq!(fixture.cast("b", &plain, Decision::APPROVE).await, Err("unknown_approval".to_owned()));
}

/// Routes every `delete_file` to `bob`, escalating to `dave` after 15 minutes.
struct Escalating;

impl CallGate for Escalating {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<Verdict>> {
        let route = Route {
            approvers: vec!["bob".into()],
            quorum: 1,
            self_approval: false,
            schedule: schedule(vec![step(15 * MINUTE, &["dave"])], None),
        };
        let verdict = (call.tool_name == "delete_file").then(|| Verdict::ask().because("bob decides").routed(route));
        async move { verdict }.boxed()
    }
}

#[tokio::test]
async fn the_engine_records_the_schedule_and_the_store_finds_it_due() {
    let fixture = Fixture::new();
    let log = Executions::default();
    let config = LedgerConfig::new(fixture.store.clone()).clock(fixture.clock.clone()).groups(BTreeMap::new());
    let model = script(json!([
        [{"type": "tool-call", "toolCallId": "d", "toolName": "delete_file", "input": {"path": "a.txt"}}],
        [{"type": "text", "text": "done"}]
    ]));
    let request = TextRequest::new(messages(json!([{"role": "user", "content": "delete a.txt"}])))
        .toolkit(toolkit(&log))
        .approval_signer(ApprovalSigner::new("timers-secret").unwrap())
        .gate(Arc::new(Escalating))
        .ledger(config.owned(Some("alice"), "c1").principal("alice"));
    let result = generate_text(&model, request).await.unwrap();
    let id = result.approval_requests()[0].approval_id.clone();
    let record = fixture.stored(&id).await;
    assert_eq!(record.routing.as_ref().unwrap().schedule, schedule(vec![step(15 * MINUTE, &["dave"])], None));
    assert_eq!(next_due(&record), Some(record.issued_at + 15 * MINUTE));

    let now = record.issued_at + 15 * MINUTE;
    assert!(fixture.store.due_timers(now - 1, 10).await.unwrap().is_empty());
    let due = fixture.store.due_timers(now, 10).await.unwrap();
    assert_eq!(due, std::slice::from_ref(&record));
    fixture.clock.set(now);
    assert_eq!(fixture.cast(&id, &voter("dave"), Decision::APPROVE).await, Err("unknown_approval".to_owned()));
    assert_eq!(fixture.fire(&id).await, Some(Fired::Escalated { added: vec!["dave".to_owned()] }));
    assert!(fixture.store.due_timers(now, 10).await.unwrap().is_empty(), "the next timer is its expiry");
    assert_eq!(fixture.cast(&id, &voter("dave"), Decision::APPROVE).await, Ok(ApprovalState::Approved));
    assert!(log.all().is_empty(), "nothing runs before the step continues");
}
