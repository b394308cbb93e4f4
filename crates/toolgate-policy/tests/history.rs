//! History terms: each term (count, sum, first_time, distinct), each scope,
//! windows at their edges (a fixed clock), `tools`, `include = "pending"`,
//! failing closed, load errors naming the rule, and a limit enforced
//! through the engine with calls it recorded itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate::approval::lifecycle::direct::{self, DirectCall};
use toolgate::ledger::{ApprovalStore, AuditEvent, AuditKind, LedgerConfig, ManualClock, MemoryStore};
use toolgate::tool::{GateAction, GateCall, Verdict};
use toolgate_policy::{Policy, StoredGate};

const NOW: i64 = 1_700_000_000_000;
const HOUR: i64 = 3_600_000;

struct World {
    store: Arc<MemoryStore>,
    config: LedgerConfig,
    groups: BTreeMap<String, Vec<String>>,
}

impl World {
    fn new() -> Self {
        let store = Arc::new(MemoryStore::new());
        let config = LedgerConfig::new(store.clone());
        let groups = BTreeMap::from([("finance".to_owned(), vec!["fay".to_owned(), "fred".to_owned()])]);
        Self { store, config, groups }
    }

    /// Records that `who` ran `tool` with `input` in conversation `chat`, `ago` ms before NOW.
    async fn ran(&self, who: &str, chat: &str, tool: &str, input: Value, ago: i64) {
        let event = self.event(who, chat, tool, &input, ago);
        self.store.append(&[event]).await.unwrap();
    }

    fn event(&self, who: &str, chat: &str, tool: &str, input: &Value, ago: i64) -> AuditEvent {
        let ledger = self.config.owned(Some(who), chat).principal(who);
        let call = DirectCall { tool_call_id: "earlier", tool_name: tool, input };
        direct::ran(&ledger, call, Ok(&json!("ok")), NOW - ago)
    }

    async fn decide(&self, rules: &str, who: &str, chat: &str, tool: &str, input: Value) -> Option<Verdict> {
        let policy = Arc::new(Policy::from_toml_str(rules).unwrap());
        let key = toolgate::ledger::conversation_key(Some(who), chat);
        let gate = StoredGate::new(policy, self.store.clone(), Some(key.clone()), Some(who.to_owned()), NOW)
            .with_history(self.store.clone(), Arc::new(self.groups.clone()));
        let groups = toolgate::ledger::groups_listing(&self.groups, who);
        let call = GateCall {
            tool_name: tool,
            input: &input,
            tool_call_id: "now",
            conversation_id: Some(&key),
            principal: Some(who),
            groups: &groups,
        };
        gate.decide(&call).await
    }
}

fn action(verdict: &Option<Verdict>) -> Option<GateAction> {
    verdict.as_ref().map(|verdict| verdict.action)
}

fn reason(verdict: &Option<Verdict>) -> String {
    verdict.as_ref().and_then(|verdict| verdict.reason.clone()).unwrap_or_default()
}

const THIRD_TRANSFER: &str = r#"
    [[rule]]
    name = "third-transfer"
    action = "deny"
    tool = "transfer_money"
    history = { window = "24h", count = { gte = 2 } }
"#;

#[tokio::test]
async fn count_counts_the_earlier_calls_not_this_one() {
    let world = World::new();
    world.ran("alice", "c1", "transfer_money", json!({"amount": 1}), HOUR).await;
    let second = world.decide(THIRD_TRANSFER, "alice", "c1", "transfer_money", json!({"amount": 2})).await;
    assert_eq!(second, None, "one earlier call: the second passes");
    world.ran("alice", "c1", "transfer_money", json!({"amount": 2}), HOUR / 2).await;
    let third = world.decide(THIRD_TRANSFER, "alice", "c1", "transfer_money", json!({"amount": 3})).await;
    assert_eq!(action(&third), Some(GateAction::Deny));
    assert_eq!(
        reason(&third),
        "rule `third-transfer` matched tool `transfer_money`, history: 2 earlier calls vs >= 2 in the last 24h \
         (principal `alice`)"
    );
}

#[tokio::test]
async fn sum_adds_this_call_only_when_asked_and_names_the_figures() {
    let rules = r#"
        [[rule]]
        name = "daily-transfer-limit"
        action = "ask"
        tool = "transfer_money"
        approvers = ["group:finance"]
        [rule.history]
        window = "24h"
        sum = { path = "/amount", plus_this_call = true, gt = 10000 }
    "#;
    let world = World::new();
    world.ran("alice", "c1", "transfer_money", json!({"amount": 9000}), 3 * HOUR).await;
    world.ran("alice", "c2", "transfer_money", json!({"amount": 500}), HOUR).await;
    world.ran("alice", "c2", "get_weather", json!({"amount": 99999}), HOUR).await;
    let small = world.decide(rules, "alice", "c3", "transfer_money", json!({"amount": 400})).await;
    assert_eq!(small, None, "9,500 + 400 stays under");
    let big = world.decide(rules, "alice", "c3", "transfer_money", json!({"amount": 1000})).await;
    assert_eq!(action(&big), Some(GateAction::Ask));
    assert_eq!(big.as_ref().unwrap().route.as_ref().unwrap().approvers, ["group:finance"]);
    assert_eq!(
        reason(&big),
        "rule `daily-transfer-limit` matched tool `transfer_money`, history: /amount summed 9,500 + 1,000 = \
         10,500 vs > 10,000 in the last 24h (principal `alice`)"
    );

    let without = rules.replace("plus_this_call = true, ", "");
    let verdict = world.decide(&without, "alice", "c3", "transfer_money", json!({"amount": 1000})).await;
    assert_eq!(verdict, None, "without plus_this_call only the 9,500 counts");
}

#[tokio::test]
async fn first_time_holds_for_a_value_never_seen_in_the_window() {
    let rules = r#"
        [[rule]]
        name = "new-payee"
        action = "ask"
        tool = "transfer_money"
        history = { window = "30d", first_time = "/to" }
    "#;
    let world = World::new();
    world.ran("alice", "c1", "transfer_money", json!({"amount": 5, "to": "bob"}), 24 * HOUR).await;
    world.ran("bob", "c9", "transfer_money", json!({"amount": 5, "to": "carol"}), HOUR).await;
    let known = world.decide(rules, "alice", "c2", "transfer_money", json!({"amount": 7, "to": "bob"})).await;
    assert_eq!(known, None);
    let new = world.decide(rules, "alice", "c2", "transfer_money", json!({"amount": 7, "to": "carol"})).await;
    assert_eq!(action(&new), Some(GateAction::Ask), "bob paid carol, alice never did");
    assert!(reason(&new).contains(r#"/to = "carol" never seen before in the last 30d"#), "{}", reason(&new));
    let missing = world.decide(rules, "alice", "c2", "transfer_money", json!({"amount": 7})).await;
    assert_eq!(missing, None, "a call without the value is no first time");
}

#[tokio::test]
async fn distinct_counts_different_values() {
    let rules = r#"
        [[rule]]
        name = "many-payees"
        action = "deny"
        tool = "transfer_money"
        history = { window = "1h", distinct = { path = "/to", plus_this_call = true, gt = 2 } }
    "#;
    let world = World::new();
    for to in ["bob", "bob", "carol"] {
        world.ran("alice", "c1", "transfer_money", json!({"to": to}), 60_000).await;
    }
    let again = world.decide(rules, "alice", "c1", "transfer_money", json!({"to": "carol"})).await;
    assert_eq!(again, None, "bob and carol: 2 distinct");
    let third = world.decide(rules, "alice", "c1", "transfer_money", json!({"to": "dave"})).await;
    assert_eq!(action(&third), Some(GateAction::Deny));
    assert!(reason(&third).contains("3 distinct /to vs > 2"), "{}", reason(&third));
}

#[tokio::test]
async fn each_scope_counts_its_own_calls() {
    let rule = |scope: &str| {
        format!(
            "[[rule]]\nname = \"limit\"\naction = \"deny\"\ntool = \"delete_file\"\n\
             history = {{ window = \"1h\", scope = \"{scope}\", count = {{ gte = 2 }} }}\n"
        )
    };
    let world = World::new();
    world.ran("fay", "c1", "delete_file", json!({}), 1000).await;
    world.ran("fred", "c2", "delete_file", json!({}), 1000).await;
    world.ran("zoe", "c3", "delete_file", json!({}), 1000).await;
    let fay = |scope: &'static str, chat: &'static str| {
        let world = &world;
        let rules = rule(scope);
        async move { action(&world.decide(&rules, "fay", chat, "delete_file", json!({})).await) }
    };
    assert_eq!(fay("principal", "c1").await, None, "fay ran one");
    assert_eq!(fay("conversation", "c1").await, None, "c1 saw one");
    assert_eq!(fay("everyone", "c1").await, Some(GateAction::Deny), "three in all");
    assert_eq!(fay("group:finance", "c1").await, Some(GateAction::Deny), "fay and fred are finance");
    assert_eq!(fay("group:legal", "c1").await, None, "an unknown group has no members");
    world.ran("fay", "c1", "delete_file", json!({}), 500).await;
    assert_eq!(fay("principal", "c4").await, Some(GateAction::Deny), "fay ran two, across conversations");
    assert_eq!(fay("conversation", "c4").await, None, "c4 saw none");
    assert_eq!(fay("conversation", "c1").await, Some(GateAction::Deny), "c1 saw two");
}

#[tokio::test]
async fn a_window_ends_exactly_at_its_length() {
    let rules = r#"
        [[rule]]
        name = "hourly"
        action = "deny"
        tool = "t"
        history = { window = "1h", count = { gte = 1 } }
    "#;
    let world = World::new();
    world.ran("alice", "c", "t", json!({}), HOUR).await;
    assert_eq!(world.decide(rules, "alice", "c", "t", json!({})).await, None, "exactly an hour ago: out");
    world.ran("alice", "c", "t", json!({}), HOUR - 1).await;
    assert_eq!(action(&world.decide(rules, "alice", "c", "t", json!({})).await), Some(GateAction::Deny));
}

#[tokio::test]
async fn today_starts_at_midnight_in_its_time_zone() {
    // NOW is 2023-11-14T22:13:20Z: 00:13:20 on the 15th at +02:00.
    let utc = r#"
        [[rule]]
        name = "daily"
        action = "deny"
        tool = "t"
        history = { window = "today", tz = "UTC", count = { gte = 1 } }
    "#;
    let plus_two = utc.replace("tz = \"UTC\"", "tz = \"+02:00\"");
    let world = World::new();
    let since_midnight_utc = 22 * HOUR + 13 * 60_000 + 20_000;
    world.ran("alice", "c", "t", json!({}), since_midnight_utc + 1).await;
    assert_eq!(world.decide(utc, "alice", "c", "t", json!({})).await, None, "yesterday in UTC");
    world.ran("alice", "c", "t", json!({}), since_midnight_utc).await;
    assert_eq!(action(&world.decide(utc, "alice", "c", "t", json!({})).await), Some(GateAction::Deny));
    // At +02:00 the day began 13 min 20 s ago: both calls were yesterday.
    assert_eq!(world.decide(&plus_two, "alice", "c", "t", json!({})).await, None);
    world.ran("alice", "c", "t", json!({}), 13 * 60_000 + 20_000).await;
    assert_eq!(action(&world.decide(&plus_two, "alice", "c", "t", json!({})).await), Some(GateAction::Deny));
}

#[tokio::test]
async fn today_follows_a_named_time_zone() {
    // NOW is 2023-11-14T22:13:20Z: 23:13:20 in Oslo (CET, +01:00 in November), whose day began 23 h 13 min 20 s ago.
    let oslo = r#"
        [[rule]]
        name = "daily"
        action = "deny"
        tool = "t"
        history = { window = "today", tz = "Europe/Oslo", count = { gte = 1 } }
    "#;
    let world = World::new();
    let since_midnight = 23 * HOUR + 13 * 60_000 + 20_000;
    world.ran("alice", "c", "t", json!({}), since_midnight + 1).await;
    assert_eq!(world.decide(oslo, "alice", "c", "t", json!({})).await, None, "yesterday in Oslo");
    world.ran("alice", "c", "t", json!({}), since_midnight).await;
    assert_eq!(action(&world.decide(oslo, "alice", "c", "t", json!({})).await), Some(GateAction::Deny));
}

#[tokio::test]
async fn tools_names_the_calls_counted() {
    let rules = r#"
        [[rule]]
        name = "after-deletes"
        action = "ask"
        tool = "empty_trash"
        history = { window = "1h", tools = "delete_*", count = { gte = 2 } }
    "#;
    let world = World::new();
    world.ran("alice", "c", "delete_file", json!({}), 1000).await;
    world.ran("alice", "c", "delete_dir", json!({}), 1000).await;
    world.ran("alice", "c", "empty_trash", json!({}), 1000).await;
    let verdict = world.decide(rules, "alice", "c", "empty_trash", json!({})).await;
    assert_eq!(action(&verdict), Some(GateAction::Ask));
    let default_tools = rules.replace("tools = \"delete_*\", ", "");
    assert_eq!(world.decide(&default_tools, "alice", "c", "empty_trash", json!({})).await, None, "one empty_trash");
}

#[tokio::test]
async fn include_pending_counts_approved_calls_not_yet_run() {
    let rules = r#"
        [[rule]]
        name = "limit"
        action = "deny"
        tool = "t"
        history = { window = "1h", count = { gte = 1 }, include = "pending" }
    "#;
    let world = World::new();
    let ledger = world.config.owned(Some("alice"), "c").principal("alice");
    let approved =
        ledger.event(AuditKind::Approved, "apr_1", "call-1", NOW - 1000, json!({"toolName": "t", "input": {}}));
    world.store.append(&[approved]).await.unwrap();
    assert_eq!(action(&world.decide(rules, "alice", "c", "t", json!({})).await), Some(GateAction::Deny));
    let executed = rules.replace(", include = \"pending\"", "");
    assert_eq!(world.decide(&executed, "alice", "c", "t", json!({})).await, None, "not run yet: not counted");
    // Once it ran, it counts once either way.
    let ran = ledger.event(AuditKind::Executed, "apr_1", "call-1", NOW - 500, json!({"toolName": "t", "input": {}}));
    world.store.append(&[ran]).await.unwrap();
    let twice = rules.replace("gte = 1", "gte = 2");
    assert_eq!(world.decide(&twice, "alice", "c", "t", json!({})).await, None, "counted once");
    assert_eq!(action(&world.decide(&executed, "alice", "c", "t", json!({})).await), Some(GateAction::Deny));
}

#[tokio::test]
async fn without_history_a_limit_asks_and_an_allow_does_not_match() {
    let rules = r#"
        [[rule]]
        name = "limit"
        action = "deny"
        tool = "t"
        history = { window = "1h", count = { gte = 5 } }

        [[rule]]
        name = "regulars"
        action = "allow"
        tool = "u"
        history = { window = "30d", count = { gte = 1 } }
    "#;
    let policy = Arc::new(Policy::from_toml_str(rules).unwrap());
    let store = Arc::new(MemoryStore::new());
    let gate = StoredGate::new(policy, store, Some("c".into()), Some("alice".into()), NOW);
    let input = json!({});
    let call = |tool| GateCall {
        tool_name: tool,
        input: &input,
        tool_call_id: "x",
        conversation_id: Some("c"),
        principal: Some("alice"),
        groups: &[],
    };
    let limit = gate.decide(&call("t")).await.unwrap();
    assert_eq!(limit.action, GateAction::Ask);
    assert!(limit.reason.unwrap().contains("unknown (no store keeps the calls that ran); approval required"));
    assert_eq!(gate.decide(&call("u")).await, None);
}

#[test]
fn bad_history_tables_name_the_rule_and_line() {
    let cases: &[(&str, &str)] = &[
        (
            "history = { window = \"1h\", count = { gte = 1 }, colour = \"red\" }",
            "rule `r` (line 2): invalid `history.colour`: unknown key (expected one of window, tz, scope, tools, \
             count, sum, first_time, distinct, include)",
        ),
        (
            "history = { window = \"soon\", count = { gte = 1 } }",
            "rule `r` (line 2): invalid `history.window`: `soon` is neither a duration (24h, 30m, 7d) nor \"today\"",
        ),
        (
            "history = { window = \"1h\", sum = { path = \"amount\", gt = 1 } }",
            "rule `r` (line 2): invalid `history.sum`: `amount`: a pointer is empty (the whole input) or starts with `/`",
        ),
        (
            "history = { window = \"1h\", count = { gte = 1 }, first_time = \"/to\" }",
            "rule `r` (line 2): invalid `history.history`: give exactly one of count, sum, first_time or distinct",
        ),
        (
            "history = { window = \"1h\", scope = \"team\", count = { gte = 1 } }",
            "rule `r` (line 2): invalid `history.scope`: `team`: expected principal, conversation, everyone or group:NAME",
        ),
        (
            "history = { window = \"today\", tz = \"Mars/Olympus_Mons\", count = { gte = 1 } }",
            "rule `r` (line 2): invalid `history.tz`: `Mars/Olympus_Mons`: expected UTC, an offset such as +02:00, or a time zone",
        ),
        (
            "history = { window = \"1h\", count = { } }",
            "rule `r` (line 2): invalid `history.count`: give at least one comparison",
        ),
        (
            "history = { window = \"1h\", include = \"denied\", count = { gte = 1 } }",
            "rule `r` (line 2): invalid `history.include`: `denied`: the only value is \"pending\"",
        ),
    ];
    for (history, expected) in cases {
        let text = format!("\n[[rule]]\nname = \"r\"\naction = \"deny\"\n{history}\n");
        let error = Policy::from_toml_str(&text).unwrap_err().to_string();
        assert!(error.starts_with(expected), "{history}\n  got: {error}\n want: {expected}");
    }
}

#[tokio::test]
async fn a_limit_holds_through_the_engine_on_the_calls_it_recorded() {
    use toolgate::{ScriptedModel, TextRequest, Tool, ToolError, Toolkit, generate_text};
    let rules = r#"
        [[rule]]
        name = "three-a-day"
        action = "deny"
        tool = "transfer_money"
        history = { window = "24h", count = { gte = 3 } }
    "#;
    let store = Arc::new(MemoryStore::new());
    let config = LedgerConfig::new(store.clone()).clock(Arc::new(ManualClock::new(NOW)));
    let policy = Arc::new(Policy::from_toml_str(rules).unwrap());
    let transfer = Tool::function::<Value>("transfer_money")
        .handler(|input: Value, _| async move { Ok::<_, ToolError>(json!({"sent": input["amount"]})) });
    let toolkit = Toolkit::new(vec![transfer]).unwrap();
    let script = json!({"turns": [
        [{"type": "tool-call", "toolCallId": "t", "toolName": "transfer_money", "input": {"amount": 10}}],
        [{"type": "text", "text": "ok"}]
    ]});
    let model = ScriptedModel::from_json(&script.to_string()).unwrap();
    let mut denied = Vec::new();
    for turn in 0..5 {
        let chat = format!("chat-{turn}");
        let gate = StoredGate::new(policy.clone(), store.clone(), Some(chat.clone()), Some("alice".into()), NOW)
            .with_history(store.clone(), Arc::default());
        let request = TextRequest::new(vec![toolgate::protocol::ModelMessage::user("pay")])
            .toolkit(toolkit.clone())
            .gate(Arc::new(gate))
            .conversation_id(&chat)
            .principal("alice")
            .ledger(config.conversation(&chat).principal("alice"));
        let result = generate_text(&model, request).await.unwrap();
        let output = &result.steps[0].tool_results[0].output;
        denied.push(matches!(output, toolgate::protocol::ToolResultOutput::ExecutionDenied { .. }));
    }
    assert_eq!(denied, [false, false, false, true, true], "the fourth transfer of the day is refused");
}
