//! The answer a held call's client gives (`held::decide` with the rules, as
//! the MCP gateway's elicitation form answers): an approval claims the call
//! judged again on the history as it is then, through the same lifecycle
//! code as every other claim (`approval::lifecycle::counted`). Under the
//! limit it runs and is counted from its claim; past it (other calls ran
//! while the person read the question) it is denied by the rules at the
//! claim, the person's approval still on record; an edit is what is judged;
//! a denial is the person's; an answer after the question expired moves
//! nothing.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::Tool;
use toolgate::approval::lifecycle::Decision;
use toolgate::approval::lifecycle::counted::Rejudge;
use toolgate::approval::lifecycle::direct::{self, DirectCall};
use toolgate::approval::lifecycle::held::{self, HeldCall, RULES_PRINCIPAL};
use toolgate::ledger::{
    ApprovalRecord, ApprovalState, ApprovalStore, AuditKind, AuditQuery, AuditStore, Ledger, LedgerConfig, ManualClock,
    MemoryStore, TransitionOutcome,
};
use toolgate::tool::{ApprovalContext, Caller};
use toolgate_policy::{Policy, StoredGate};

const NOW: i64 = 1_700_000_000_000;

const RULES: &str = r#"
    [[rule]]
    name = "two-a-day"
    action = "deny"
    tool = "transfer_money"
    history = { window = "24h", scope = "principal", count = { gte = 2 } }

    [[rule]]
    name = "no-mallory"
    action = "deny"
    tool = "transfer_money"
    input = { "/to" = { glob = "mallory" } }

    [[rule]]
    name = "asked"
    action = "ask"
    tool = "transfer_money"
"#;

struct World {
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
    ledger: Ledger,
    policy: Arc<Policy>,
}

impl World {
    fn new() -> Self {
        let store = Arc::new(MemoryStore::new());
        let clock = Arc::new(ManualClock::new(NOW));
        let config = LedgerConfig::new(store.clone()).clock(clock.clone());
        let ledger = config.owned(Some("alice"), "mcp:alice:client").principal("alice");
        let policy = Arc::new(Policy::from_toml_str(RULES).unwrap());
        Self { store, clock, ledger, policy }
    }

    /// `runs` earlier transfers of alice's, in another conversation.
    async fn ran(&self, runs: usize) {
        let config = LedgerConfig::new(self.store.clone());
        let ledger = config.owned(Some("alice"), "other").principal("alice");
        for run in 0..runs {
            let input = json!({"to": "bob", "amount": run});
            let call = DirectCall { tool_call_id: "earlier", tool_name: "transfer_money", input: &input };
            let event = direct::ran(&ledger, call, Ok(&json!("sent")), NOW - 1_000);
            self.store.append(&[event]).await.unwrap();
        }
    }

    /// A pending question about a transfer to bob, answerable for `ttl`.
    async fn asked(&self, ttl: Option<Duration>) -> ApprovalRecord {
        let input = json!({"to": "bob", "amount": 5});
        let call = HeldCall { reason: Some("asked"), ttl, ..HeldCall::new("transfer_money", &input) };
        match held::attach(&self.ledger, call, Duration::ZERO).await.unwrap() {
            held::Attached::Issued(record) => record,
            held::Attached::Existing(record) => panic!("attached to {}", record.approval_id),
        }
    }

    /// Alice answers `decision` in the client, judged by the rules on the history now.
    async fn answer(&self, record: &ApprovalRecord, decision: Decision) -> TransitionOutcome {
        let now = self.clock_now();
        let key = self.ledger.conversation_id.clone();
        let gate = StoredGate::new(self.policy.clone(), self.store.clone(), Some(key.clone()), None, now)
            .with_history(self.store.clone(), Arc::default());
        let caller = Caller { gate: Some(&gate), conversation_id: Some(&key), principal: Some("alice"), groups: &[] };
        let tool = Tool::dynamic("transfer_money", json!({}));
        let context = ApprovalContext::new(record.tool_call_id.clone(), Vec::new());
        let judge = Rejudge { caller, tool: &tool, context };
        held::decide(&self.ledger, record, decision, Some(&judge)).await.unwrap()
    }

    fn clock_now(&self) -> i64 {
        toolgate::ledger::Clock::now(&*self.clock)
    }

    /// The kinds of the events of `record`'s approval, and their data.
    async fn events(&self, record: &ApprovalRecord) -> Vec<(AuditKind, Option<String>, Value)> {
        let events = self.store.audit(&AuditQuery::default()).await.unwrap();
        events
            .into_iter()
            .filter(|event| event.approval_id == record.approval_id)
            .map(|event| (event.kind, event.principal, event.data))
            .collect()
    }
}

fn moved(outcome: TransitionOutcome) -> ApprovalRecord {
    match outcome {
        TransitionOutcome::Moved(record) => record,
        other => panic!("did not move: {other:?}"),
    }
}

fn kinds(events: &[(AuditKind, Option<String>, Value)]) -> Vec<AuditKind> {
    events.iter().map(|(kind, ..)| *kind).collect()
}

#[tokio::test]
async fn an_approval_under_the_limit_claims_the_call_and_counts_it() {
    let world = World::new();
    world.ran(1).await;
    let record = world.asked(None).await;
    let claimed = moved(world.answer(&record, Decision::APPROVE).await);
    assert_eq!(claimed.state, ApprovalState::Executing);
    assert_eq!(claimed.decision.unwrap().principal.as_deref(), Some("alice"));
    let events = world.events(&record).await;
    assert_eq!(kinds(&events), [AuditKind::Issued, AuditKind::Approved, AuditKind::Allowed]);
    assert_eq!(events[2].2["decidedBy"], json!("approval"), "the claim counts the call from now on");
}

#[tokio::test]
async fn an_approval_past_the_limit_is_denied_by_the_rules_at_its_claim() {
    let world = World::new();
    let record = world.asked(None).await;
    // While the person read the question, two other transfers ran.
    world.ran(2).await;
    let refused = moved(world.answer(&record, Decision::APPROVE).await);
    assert_eq!(refused.state, ApprovalState::Denied);
    let decision = refused.decision.unwrap();
    assert_eq!(decision.principal.as_deref(), Some(RULES_PRINCIPAL));
    assert!(decision.reason.as_deref().unwrap().starts_with("rule `two-a-day`"), "{decision:?}");
    let events = world.events(&record).await;
    assert_eq!(kinds(&events), [AuditKind::Issued, AuditKind::Approved, AuditKind::Denied]);
    assert_eq!(events[1].1.as_deref(), Some("alice"), "the person's approval is on record");
    assert_eq!(events[2].2["atClaim"], json!(true));
    assert!(events[2].2["reason"].as_str().unwrap().starts_with("rule `two-a-day`"), "{}", events[2].2);
}

#[tokio::test]
async fn the_edit_is_what_the_claim_judges() {
    let world = World::new();
    let record = world.asked(None).await;
    let edit = Decision::Approve { edited_input: Some(json!({"to": "mallory", "amount": 5})) };
    let refused = moved(world.answer(&record, edit).await);
    assert_eq!(refused.state, ApprovalState::Denied);
    assert!(refused.decision.unwrap().reason.unwrap().starts_with("rule `no-mallory`"));
    let events = world.events(&record).await;
    let expected = [AuditKind::Issued, AuditKind::Approved, AuditKind::Edited, AuditKind::Denied];
    assert_eq!(kinds(&events), expected);
}

#[tokio::test]
async fn a_denial_is_the_persons_and_is_not_judged() {
    let world = World::new();
    let record = world.asked(None).await;
    world.ran(2).await;
    let denial = Decision::Deny { reason: Some("not now".to_owned()) };
    let denied = moved(world.answer(&record, denial).await);
    assert_eq!(denied.state, ApprovalState::Denied);
    let decision = denied.decision.unwrap();
    assert_eq!((decision.principal.as_deref(), decision.reason.as_deref()), (Some("alice"), Some("not now")));
    let events = world.events(&record).await;
    assert_eq!(kinds(&events), [AuditKind::Issued, AuditKind::Denied]);
    assert_eq!(events[1].2.get("atClaim"), None);
}

#[tokio::test]
async fn an_answer_after_the_question_expired_moves_nothing() {
    let world = World::new();
    let record = world.asked(Some(Duration::from_secs(1))).await;
    world.ran(2).await;
    world.clock.advance(Duration::from_secs(2));
    for decision in [Decision::APPROVE, Decision::Deny { reason: None }] {
        match world.answer(&record, decision).await {
            TransitionOutcome::Unmoved(current) => assert_eq!(current.state, ApprovalState::Pending),
            other => panic!("moved: {other:?}"),
        }
    }
    assert_eq!(kinds(&world.events(&record).await), [AuditKind::Issued]);
}
