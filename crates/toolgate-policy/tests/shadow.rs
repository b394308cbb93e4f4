//! Shadow mode: a rule with `mode = "shadow"` decides nothing; what it would
//! have decided is a `shadowed` audit event, with its history term's figures.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate::approval::lifecycle::direct;
use toolgate::ledger::{AuditKind, AuditQuery, AuditStore, LedgerConfig, ManualClock, MemoryStore};
use toolgate::tool::{ApprovalContext, Caller, GateAction};
use toolgate::{Tool, ToolError};
use toolgate_policy::{Policy, StoredGate};

const NOW: i64 = 1_700_000_000_000;

const RULES: &str = r#"
    [[rule]]
    name = "big-transfers"
    action = "deny"
    tool = "transfer_money"
    mode = "shadow"
    input = { "/amount" = { gt = 100 } }

    [[rule]]
    name = "second-transfer"
    action = "ask"
    tool = "transfer_money"
    mode = "shadow"
    history = { window = "1h", count = { gte = 1 } }
"#;

async fn decide(store: &Arc<MemoryStore>, call_id: &str, amount: u32) -> GateAction {
    let policy = Arc::new(Policy::from_toml_str(RULES).unwrap());
    let config = LedgerConfig::new(store.clone()).clock(Arc::new(ManualClock::new(NOW)));
    let ledger = config.conversation("c").principal("alice");
    let gate = StoredGate::new(policy, store.clone(), Some("c".into()), Some("alice".into()), NOW)
        .with_history(store.clone(), Arc::default());
    let tool = Tool::function::<Value>("transfer_money").handler(|_: Value, _| async { Ok::<_, ToolError>(json!(1)) });
    let caller = Caller { gate: Some(&gate), conversation_id: Some("c"), principal: Some("alice"), groups: &[] };
    let input = json!({"amount": amount});
    let context = ApprovalContext::new(call_id, Vec::new());
    let verdict = direct::admit(Some(&ledger), caller, &tool, &input, context).await;
    if verdict.action == GateAction::Allow {
        let call = direct::DirectCall { tool_call_id: call_id, tool_name: "transfer_money", input: &input };
        direct::record(&ledger, &[direct::ran(&ledger, call, Ok(&json!(1)), NOW)]).await.unwrap();
    }
    verdict.action
}

async fn shadowed(store: &MemoryStore) -> Vec<Value> {
    let events = store.audit(&AuditQuery::default()).await.unwrap();
    events.into_iter().filter(|event| event.kind == AuditKind::Shadowed).map(|event| event.data).collect()
}

#[tokio::test]
async fn a_shadow_rule_decides_nothing_and_records_what_it_would_have_decided() {
    let store = Arc::new(MemoryStore::new());
    assert_eq!(decide(&store, "t1", 500).await, GateAction::Allow, "the shadow deny is not enforced");
    let first = shadowed(&store).await;
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["rule"], "big-transfers");
    assert_eq!(first[0]["action"], "deny");
    assert_eq!(first[0]["decided"], "allow");
    assert_eq!(first[0]["input"], json!({"amount": 500}));
    assert!(first[0]["reason"].as_str().unwrap().contains("/amount = 500"));

    assert_eq!(decide(&store, "t2", 5).await, GateAction::Allow, "the shadow ask is not enforced either");
    let second = shadowed(&store).await;
    assert_eq!(second.len(), 2, "{second:?}");
    assert_eq!(second[1]["rule"], "second-transfer");
    assert_eq!(second[1]["action"], "ask");
    let reason = second[1]["reason"].as_str().unwrap();
    assert!(reason.contains("history: 1 earlier call vs >= 1 in the last 1h"), "{reason}");
}

#[test]
fn a_bad_mode_names_the_rule() {
    let error = Policy::from_toml_str("[[rule]]\nname = \"r\"\naction = \"deny\"\nmode = \"dry-run\"\n").unwrap_err();
    assert_eq!(error.to_string(), "rule `r` (line 1): invalid `mode`: `dry-run`: expected \"enforce\" or \"shadow\"");
}
