//! Grants on every store: a grant of 5 uses and 20 concurrent calls it
//! covers, half on each of two handles (two replicas on Postgres): exactly 5
//! run without asking, each with one `granted` event naming the grant, and
//! the spent grant is no longer listed.

mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use support::Stores;
use toolgate::approval::lifecycle::direct;
use toolgate::ledger::{AuditKind, AuditQuery, DecisionQuery, DecisionScope, LedgerConfig, LedgerStore, ManualClock};
use toolgate::tool::{ApprovalContext, Caller, GateAction};
use toolgate::{Tool, ToolError};
use toolgate_policy::{Policy, StickyAction, StickyDecision, StoredGate, to_stored};

const NOW: i64 = 1_700_000_000_000;

/// 20 calls at once, alternating between the two handles, on a grant of 5 uses.
async fn twenty_calls_on_five_uses(stores: Stores) {
    let policy = Arc::new(
        Policy::from_toml_str(
            r#"
            [[rule]]
            name = "ask-transfers"
            action = "ask"
            tool = "transfer_money"
            "#,
        )
        .unwrap(),
    );
    let mut grant = StickyDecision::new(
        "grant_race",
        StickyAction::Allow,
        "transfer_money",
        DecisionScope::Principal { principal: "alice".into() },
        NOW,
    )
    .created_by("alice");
    grant.uses = Some(5);
    grant.input_match.insert("/amount".into(), serde_json::from_value(json!({"le": 1000})).unwrap());
    stores.a.save_decision(&to_stored(&grant)).await.unwrap();
    let tool = Tool::function::<Value>("transfer_money").handler(|_: Value, _| async { Ok::<_, ToolError>(json!(1)) });
    let tasks: Vec<_> = (0..20)
        .map(|index| {
            let store: Arc<dyn LedgerStore> = if index % 2 == 0 { stores.a.clone() } else { stores.b.clone() };
            let (policy, tool) = (policy.clone(), tool.clone());
            tokio::spawn(async move {
                let chat = format!("chat-{index}");
                let config = LedgerConfig::new(store.clone()).clock(Arc::new(ManualClock::new(NOW + 1)));
                let ledger = config.owned(Some("alice"), &chat).principal("alice");
                let gate =
                    StoredGate::new(policy, store, Some(ledger.conversation_id.clone()), Some("alice".into()), NOW + 1);
                let caller = Caller {
                    gate: Some(&gate),
                    conversation_id: Some(&ledger.conversation_id),
                    principal: Some("alice"),
                    groups: &[],
                };
                let input = json!({"amount": 100, "to": "bob"});
                let context = ApprovalContext::new(format!("call-{index}"), Vec::new());
                direct::admit(Some(&ledger), caller, &tool, &input, context).await.action
            })
        })
        .collect();
    let (mut allowed, mut asked) = (0, 0);
    for task in tasks {
        match task.await.unwrap() {
            GateAction::Allow => allowed += 1,
            GateAction::Ask => asked += 1,
            GateAction::Deny => panic!("nothing denies"),
        }
    }
    assert_eq!((allowed, asked), (5, 15), "exactly five calls run on the grant");
    let events = stores.a.audit(&AuditQuery::default()).await.unwrap();
    let granted: Vec<_> = events.iter().filter(|event| event.kind == AuditKind::Granted).collect();
    assert_eq!(granted.len(), 5);
    assert!(granted.iter().all(|event| event.data["grant"] == "grant_race" && event.data["grantedBy"] == "alice"));
    let query = DecisionQuery { conversation_id: None, principal: Some("alice".into()), now: NOW + 1 };
    assert!(stores.b.decisions(&query).await.unwrap().is_empty(), "a spent grant is not listed");
    stores.finish().await;
}

/// A grant without a use limit (what an "always allow" sticky decision is)
/// is spent by no call: each use is recorded, the row stays.
async fn an_unlimited_grant_stays(stores: Stores) {
    let grant = StickyDecision::new(
        "grant_always",
        StickyAction::Allow,
        "t",
        DecisionScope::Conversation { conversation_id: "c".into() },
        NOW,
    );
    stores.a.save_decision(&to_stored(&grant)).await.unwrap();
    let config = LedgerConfig::new(stores.a.clone());
    let ledger = config.conversation("c");
    let event = ledger.event(AuditKind::Granted, "", "call", NOW, json!({"grant": "grant_always"}));
    for _ in 0..3 {
        let used = stores.b.use_decision("grant_always", NOW, std::slice::from_ref(&event)).await.unwrap();
        assert_eq!(used.expect("live").uses_left, None);
    }
    assert_eq!(stores.a.use_decision("grant_unknown", NOW, std::slice::from_ref(&event)).await.unwrap(), None);
    let events = stores.a.audit(&AuditQuery::default()).await.unwrap();
    assert_eq!(events.iter().filter(|event| event.kind == AuditKind::Granted).count(), 3);
    stores.finish().await;
}

/// An expired grant is not spent and records nothing.
async fn an_expired_grant_is_not_spent(stores: Stores) {
    let mut grant =
        StickyDecision::new("grant_old", StickyAction::Allow, "t", DecisionScope::Global, NOW).expires_at(NOW + 10);
    grant.uses = Some(3);
    stores.a.save_decision(&to_stored(&grant)).await.unwrap();
    let ledger = LedgerConfig::new(stores.a.clone()).conversation("c");
    let event = ledger.event(AuditKind::Granted, "", "call", NOW, json!({"grant": "grant_old"}));
    let used = stores.b.use_decision("grant_old", NOW + 9, std::slice::from_ref(&event)).await.unwrap();
    assert_eq!(used.expect("live").uses_left, Some(2));
    assert_eq!(stores.b.use_decision("grant_old", NOW + 10, std::slice::from_ref(&event)).await.unwrap(), None);
    let events = stores.a.audit(&AuditQuery::default()).await.unwrap();
    assert_eq!(events.iter().filter(|event| event.kind == AuditKind::Granted).count(), 1);
    stores.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_runs_exactly_five_of_twenty_on_a_grant() {
    twenty_calls_on_five_uses(Stores::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_runs_exactly_five_of_twenty_on_a_grant() {
    twenty_calls_on_five_uses(Stores::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_replicas_run_exactly_five_of_twenty_on_a_grant() {
    if let Some(stores) = Stores::postgres("grants_race").await {
        twenty_calls_on_five_uses(stores).await;
    }
}

#[tokio::test]
async fn memory_keeps_an_unlimited_grant() {
    an_unlimited_grant_stays(Stores::memory()).await;
}

#[tokio::test]
async fn sqlite_keeps_an_unlimited_grant() {
    an_unlimited_grant_stays(Stores::sqlite().await).await;
}

#[tokio::test]
async fn postgres_keeps_an_unlimited_grant() {
    if let Some(stores) = Stores::postgres("grants_unlimited").await {
        an_unlimited_grant_stays(stores).await;
    }
}

#[tokio::test]
async fn memory_does_not_spend_an_expired_grant() {
    an_expired_grant_is_not_spent(Stores::memory()).await;
}

#[tokio::test]
async fn sqlite_does_not_spend_an_expired_grant() {
    an_expired_grant_is_not_spent(Stores::sqlite().await).await;
}

#[tokio::test]
async fn postgres_does_not_spend_an_expired_grant() {
    if let Some(stores) = Stores::postgres("grants_expired").await {
        an_expired_grant_is_not_spent(stores).await;
    }
}
