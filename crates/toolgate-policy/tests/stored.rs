//! Sticky decisions read from a ledger store.

use std::sync::Arc;

use serde_json::json;
use toolgate::ledger::{ConversationStore, DecisionQuery, MemoryStore, StoreError, StoreFuture, StoredDecision};
use toolgate::tool::{CallGate, GateAction, GateCall};
use toolgate_policy::{
    DecisionScope, DecisionSource, Policy, StickyAction, StickyDecision, StoredGate, decode_stored, to_stored,
    visible_to,
};

const NOW: i64 = 1_700_000_000_000;

fn conversation(id: &str) -> DecisionScope {
    DecisionScope::Conversation { conversation_id: id.into() }
}

fn call<'a>(tool: &'a str, input: &'a serde_json::Value) -> GateCall<'a> {
    GateCall { tool_name: tool, input, tool_call_id: "call-1", conversation_id: None, principal: None, groups: &[] }
}

async fn store_with(decisions: &[StickyDecision]) -> Arc<MemoryStore> {
    let store = Arc::new(MemoryStore::new());
    for decision in decisions {
        store.save_decision(&to_stored(decision)).await.unwrap();
    }
    store
}

fn policy(text: &str) -> Arc<Policy> {
    Arc::new(Policy::from_toml_str(text).unwrap())
}

#[tokio::test]
async fn rows_round_trip() {
    let decision = StickyDecision::new("d1", StickyAction::Deny, "t", conversation("c1"), NOW)
        .with_input(json!({"a": 1}))
        .expires_at(NOW + 10)
        .created_by("alice")
        .note("no");
    let row = to_stored(&decision);
    assert_eq!((row.id.as_str(), row.tool_name.as_str(), row.expires_at), ("d1", "t", Some(NOW + 10)));
    assert_eq!(decode_stored(vec![row]).unwrap(), vec![decision]);
}

#[tokio::test]
async fn corrupt_rows_are_errors() {
    let good = to_stored(&StickyDecision::new("d1", StickyAction::Allow, "t", DecisionScope::Global, NOW));
    let mut bad_body = good.clone();
    bad_body.body = json!({"id": "d1"});
    let mut other_tool = good.clone();
    other_tool.tool_name = "u".into();
    for row in [bad_body, other_tool] {
        let error = decode_stored(vec![good.clone(), row]).unwrap_err();
        assert!(
            matches!(&error, StoreError::Corrupt(message) if message.starts_with("sticky decision `d1`")),
            "{error}"
        );
    }
}

#[test]
fn principals_see_their_own_and_unowned_decisions() {
    let unowned = StickyDecision::new("d1", StickyAction::Allow, "t", DecisionScope::Global, NOW);
    let alices = unowned.clone().created_by("alice");
    assert!(visible_to(&unowned, Some("bob")));
    assert!(visible_to(&alices, Some("alice")));
    assert!(!visible_to(&alices, Some("bob")));
    assert!(visible_to(&alices, None), "without principals everyone is the same person");
}

#[tokio::test]
async fn the_gate_reads_the_decisions_of_its_conversation_and_principal() {
    let store = store_with(&[
        StickyDecision::new("here", StickyAction::Allow, "write", conversation("c1"), NOW).created_by("alice"),
        StickyDecision::new("elsewhere", StickyAction::Allow, "read", conversation("c2"), NOW),
        StickyDecision::new(
            "never",
            StickyAction::Deny,
            "rm",
            DecisionScope::Principal { principal: "alice".into() },
            NOW,
        ),
        StickyDecision::new("old", StickyAction::Deny, "write", DecisionScope::Global, NOW - 10).expires_at(NOW),
    ])
    .await;
    let gate = StoredGate::new(policy(""), store, Some("c1".into()), Some("alice".into()), NOW);
    let input = json!({});
    assert_eq!(gate.decide(&call("write", &input)).await, None, "a grant is no rule");
    let [offer] = &gate.grants("call-1")[..] else { panic!("one grant covers the call") };
    assert_eq!(offer.description, "grant `here` (always allow `write` in this conversation, by alice)");
    assert_eq!(offer.granted_by.as_deref(), Some("alice"));
    assert_eq!(gate.decide(&call("rm", &input)).await.unwrap().action, GateAction::Deny);
    assert!(gate.decide(&call("read", &input)).await.is_none(), "another conversation's decision");
    assert!(gate.grants("call-1").is_empty(), "another conversation's grant");
}

#[tokio::test]
async fn a_sticky_allow_ranks_as_no_rule() {
    let store =
        store_with(&[StickyDecision::new("always", StickyAction::Allow, "write", DecisionScope::Global, NOW)]).await;
    let gate = StoredGate::new(policy("[[rule]]\nname = \"look\"\naction = \"ask\"\n"), store, None, None, NOW);
    let verdict = gate.decide(&call("write", &json!({}))).await.unwrap();
    assert_eq!(
        (verdict.action, verdict.reason.as_deref().unwrap_or_default()),
        (GateAction::Ask, "rule `look` matched tool `write`"),
        "the file's question stands; the grant is offered to lift it"
    );
    assert_eq!(gate.grants("call-1").len(), 1);
}

#[tokio::test]
async fn a_corrupt_row_asks_about_the_calls_it_could_decide() {
    let store = Arc::new(MemoryStore::new());
    let mut row = to_stored(&StickyDecision::new("bad", StickyAction::Deny, "rm", DecisionScope::Global, NOW));
    row.body = json!("garbage");
    store.save_decision(&row).await.unwrap();
    let allow_all = policy("[[rule]]\naction = \"allow\"\n");
    let gate = StoredGate::new(allow_all, store, None, None, NOW);
    let input = json!({});
    let verdict = gate.decide(&call("rm", &input)).await.unwrap();
    assert_eq!(verdict.action, GateAction::Ask);
    assert!(
        verdict
            .reason
            .as_deref()
            .unwrap_or_default()
            .starts_with("sticky decisions could not be read (approval store holds a corrupt value"),
        "{:?}",
        verdict.reason
    );
    assert_eq!(gate.decide(&call("ls", &input)).await.unwrap().action, GateAction::Allow, "other tools are unaffected");
}

/// A store whose decisions cannot be read.
struct Down;

impl DecisionSource for Down {
    fn decisions<'a>(&'a self, _: &'a DecisionQuery) -> StoreFuture<'a, Vec<StoredDecision>> {
        Box::pin(async { Err(StoreError::Unavailable("connection refused".into())) })
    }
}

#[tokio::test]
async fn an_unreadable_store_fails_closed() {
    let rules =
        "[[rule]]\naction = \"allow\"\ntool = \"ls\"\n[[rule]]\nname = \"no-rm\"\naction = \"deny\"\ntool = \"rm\"\n";
    let gate = StoredGate::new(policy(rules), Arc::new(Down), Some("c1".into()), None, NOW);
    let input = json!({});
    let verdict = gate.decide(&call("ls", &input)).await.unwrap();
    assert_eq!(verdict.action, GateAction::Ask, "a file allow cannot vouch for unknown sticky denies");
    assert!(verdict.reason.as_deref().unwrap_or_default().contains("connection refused"), "{:?}", verdict.reason);
    assert_eq!(gate.decide(&call("rm", &input)).await.unwrap().action, GateAction::Deny, "a file deny still denies");
    assert!(gate.explain(&call("ls", &input)).await.is_err());
}

#[tokio::test]
async fn decisions_given_with_the_gate_are_not_read_again() {
    let allow = StickyDecision::new("d1", StickyAction::Allow, "rm", conversation("c1"), NOW);
    let gate = StoredGate::new(policy(""), Arc::new(Down), Some("c1".into()), Some("alice".into()), NOW);
    assert_eq!(
        gate.query(),
        DecisionQuery { conversation_id: Some("c1".into()), principal: Some("alice".into()), now: NOW }
    );
    let gate = gate.with_decisions(Ok(vec![to_stored(&allow)]));
    let input = json!({});
    assert_eq!(gate.decide(&call("rm", &input)).await, None, "the given decisions are read; the store is not");
    assert_eq!(gate.grants("call-1").len(), 1, "the given grant is offered");
    // A call for another conversation is not covered by what was given: read, and the store is down.
    let elsewhere = GateCall { conversation_id: Some("c2"), ..call("rm", &input) };
    assert_eq!(gate.decide(&elsewhere).await.unwrap().action, GateAction::Ask);

    let failed = StoredGate::new(policy(""), store_with(&[allow]).await, Some("c1".into()), None, NOW)
        .with_decisions(Err(StoreError::Corrupt("sticky decision `d9`: bad body".into())));
    let verdict = failed.decide(&call("rm", &input)).await.unwrap();
    assert_eq!(verdict.action, GateAction::Ask, "a failed read fails closed, as if the gate had read it");
    assert!(verdict.reason.as_deref().unwrap_or_default().contains("d9"), "{:?}", verdict.reason);
}
