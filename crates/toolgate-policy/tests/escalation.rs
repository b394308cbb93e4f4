//! `escalate` and `remind` on `ask` rules with approvers: a valid rule
//! compiles to the route's schedule (delays in milliseconds, from the
//! `--approval-ttl` syntax), round-trips through its config, and every
//! validation rule refuses a bad one with an error naming the rule, the key
//! and what is wrong: both need `approvers`; each step has exactly one of a
//! non-empty `to` or `action = "deny"`; delays are durations of at least a
//! second, strictly increasing; nothing follows a deny step; no other action.

use serde_json::json;
use toolgate::approval::lifecycle::{Escalation, Route, Schedule};
use toolgate::tool::{GateAction, GateCall};
use toolgate_policy::{EscalationConfig, Policy, RuleConfig};

/// An `ask` rule named `r` on tool `t` with these extra lines.
fn rule(lines: &str) -> String {
    format!("[[rule]]\nname = \"r\"\naction = \"ask\"\ntool = \"t\"\n{lines}\n")
}

/// A rule routed to `bob` with these `escalate` steps (TOML inline tables).
fn escalating(steps: &str) -> String {
    rule(&format!("approvers = [\"bob\"]\nescalate = [{steps}]"))
}

/// The route the one rule of `text` compiles to.
fn route(text: &str) -> Route {
    let policy = Policy::from_toml_str(text).unwrap_or_else(|error| panic!("{error}\n{text}"));
    policy.rule("r").expect("rule `r`").route().expect("routed").clone()
}

/// The error `text` is refused with.
fn refused(text: &str) -> String {
    match Policy::from_toml_str(text) {
        Ok(_) => panic!("the policy should not load:\n{text}"),
        Err(error) => error.to_string(),
    }
}

/// Checks that `text` is refused with an error naming rule `r`, `key` and each of `words`.
fn assert_refused(text: &str, key: &str, words: &[&str]) {
    let error = refused(text);
    assert!(error.contains("rule `r`"), "names the rule: {error}");
    assert!(error.contains(&format!("invalid `{key}`")), "names `{key}`: {error}");
    for word in words {
        assert!(error.contains(word), "says {word:?}: {error}\n{text}");
    }
}

fn step(after: i64, to: &[&str]) -> Escalation {
    Escalation { after, to: to.iter().map(|name| (*name).to_owned()).collect(), deny: false }
}

#[test]
fn a_valid_rule_compiles_to_its_schedule_in_milliseconds() {
    let text = rule(
        "approvers = [\"bob\"]\nremind = \"10m\"\nescalate = [\n  { after = \"15m\", to = [\"group:leads\", \"dave\"] },\n  \
         { after = \"1h30m\", to = [\"erin\"] },\n  { after = \"2h\", action = \"deny\" },\n]",
    );
    let route = route(&text);
    let expected = Schedule {
        escalate: vec![
            step(900_000, &["group:leads", "dave"]),
            step(5_400_000, &["erin"]),
            Escalation { after: 7_200_000, to: Vec::new(), deny: true },
        ],
        remind: Some(600_000),
        fired: 0,
        reminded_at: None,
    };
    assert_eq!(route.schedule, expected);
    assert_eq!((route.approvers.as_slice(), route.quorum), (&["bob".to_owned()][..], 1));

    // The verdict carries it, and the rule as written keeps it.
    let policy = Policy::from_toml_str(&text).unwrap();
    let input = json!({});
    let call = GateCall {
        tool_name: "t",
        input: &input,
        tool_call_id: "call-1",
        conversation_id: None,
        principal: None,
        groups: &[],
    };
    let verdict = policy.decide(&call).expect("the rule matches");
    assert_eq!(verdict.action, GateAction::Ask);
    assert_eq!(verdict.route.expect("routed").schedule, expected);
    let config = policy.rule("r").unwrap().config().clone();
    assert_eq!(config.remind.as_deref(), Some("10m"));
    assert_eq!(
        config.escalate[0],
        EscalationConfig {
            after: "15m".to_owned(),
            to: vec!["group:leads".to_owned(), "dave".to_owned()],
            action: None
        }
    );
    assert_eq!(config.escalate[2].action.as_deref(), Some("deny"));
    // Through JSON (as stored) and back, the same schedule.
    let stored = serde_json::to_value(policy.configs()).unwrap();
    let again: Vec<RuleConfig> = serde_json::from_value(stored).unwrap();
    let reloaded = Policy::from_rules(again).unwrap();
    assert_eq!(reloaded.rule("r").unwrap().route().unwrap().schedule, expected);
}

#[test]
fn delays_use_the_ttl_syntax_and_a_rule_without_them_has_an_empty_schedule() {
    for (text, millis) in
        [("10m", 600_000), ("1s", 1_000), ("90s", 90_000), ("1h 30m", 5_400_000), ("2days", 172_800_000)]
    {
        let remind = route(&rule(&format!("approvers = [\"bob\"]\nremind = \"{text}\""))).schedule.remind;
        assert_eq!(remind, Some(millis), "remind = {text:?}");
    }
    let plain = route(&rule("approvers = [\"bob\"]"));
    assert!(plain.schedule.is_empty() && plain.schedule.is_unset(), "{:?}", plain.schedule);
    let only_remind = route(&rule("approvers = [\"bob\"]\nremind = \"1h\""));
    assert_eq!(only_remind.schedule, Schedule { remind: Some(3_600_000), ..Schedule::default() });
    let only_deny = route(&escalating("{ after = \"1h\", action = \"deny\" }"));
    assert_eq!(only_deny.schedule.escalate, [Escalation { after: 3_600_000, to: Vec::new(), deny: true }]);
    assert_eq!(only_deny.schedule.remind, None);
}

#[test]
fn escalate_and_remind_need_approvers() {
    assert_refused(&rule("escalate = [{ after = \"15m\", to = [\"dave\"] }]"), "escalate", &["`approvers`"]);
    assert_refused(&rule("remind = \"10m\""), "remind", &["`remind` needs `approvers`"]);
    // On a rule that cannot have approvers either.
    let deny = "[[rule]]\nname = \"r\"\naction = \"deny\"\ntool = \"t\"\nremind = \"10m\"\n";
    assert_refused(deny, "remind", &["`approvers`"]);
    // An empty list is no escalation.
    let policy = Policy::from_toml_str(&rule("escalate = []")).unwrap();
    assert!(policy.rule("r").unwrap().route().is_none());
}

#[test]
fn each_step_has_exactly_one_of_to_or_deny() {
    assert_refused(
        &escalating("{ after = \"1h\", to = [\"dave\"], action = \"deny\" }"),
        "escalate",
        &["step 1", "either `to` or `action = \"deny\"`, not both"],
    );
    assert_refused(&escalating("{ after = \"1h\" }"), "escalate", &["step 1", "needs `to`"]);
    assert_refused(&escalating("{ after = \"1h\", to = [] }"), "escalate", &["step 1", "needs `to`"]);
    assert_refused(
        &escalating("{ after = \"15m\", to = [\"dave\"] }, { after = \"1h\", action = \"approve\" }"),
        "escalate",
        &["step 2", "`action = \"approve\"`", "the only action is \"deny\""],
    );
    assert_refused(&escalating("{ after = \"1h\", to = [\"group:\"] }"), "escalate", &["step 1", "is not a principal"]);
    assert_refused(&escalating("{ after = \"1h\", to = [\"  \"] }"), "escalate", &["is not a principal"]);
    // A step's unknown key, or a step that is not a table.
    let error = refused(&escalating("{ after = \"1h\", too = [\"dave\"] }"));
    assert!(error.contains("rule `r`") && error.contains("too"), "{error}");
    let error = refused(&escalating("\"1h\""));
    assert!(error.contains("rule `r`") && error.contains("escalate"), "{error}");
}

#[test]
fn delays_are_at_least_a_second_and_strictly_increasing() {
    for too_short in ["500ms", "0s", "999ms"] {
        let text = escalating(&format!("{{ after = \"{too_short}\", to = [\"dave\"] }}"));
        assert_refused(&text, "escalate", &["step 1", too_short, "shorter than one second"]);
        let text = rule(&format!("approvers = [\"bob\"]\nremind = \"{too_short}\""));
        assert_refused(&text, "remind", &[too_short, "shorter than one second"]);
    }
    for nonsense in ["soon", "", "15", "-5m"] {
        let text = escalating(&format!("{{ after = \"{nonsense}\", to = [\"dave\"] }}"));
        assert_refused(&text, "escalate", &["step 1", "is not a duration"]);
        let text = rule(&format!("approvers = [\"bob\"]\nremind = \"{nonsense}\""));
        assert_refused(&text, "remind", &["is not a duration"]);
    }
    assert_refused(
        &escalating("{ after = \"30m\", to = [\"dave\"] }, { after = \"15m\", to = [\"erin\"] }"),
        "escalate",
        &["step 2", "`after = \"15m\"` must be later than the step before"],
    );
    assert_refused(
        &escalating("{ after = \"15m\", to = [\"dave\"] }, { after = \"900s\", action = \"deny\" }"),
        "escalate",
        &["step 2", "must be later"],
    );
    // Later by a second is enough.
    let route = route(&escalating("{ after = \"15m\", to = [\"dave\"] }, { after = \"901s\", action = \"deny\" }"));
    assert_eq!(route.schedule.escalate[1].after, 901_000);
}

#[test]
fn nothing_follows_a_deny_step() {
    assert_refused(
        &escalating("{ after = \"1h\", action = \"deny\" }, { after = \"2h\", to = [\"dave\"] }"),
        "escalate",
        &["step 2", "a step after `action = \"deny\"` never runs"],
    );
    assert_refused(
        &escalating(
            "{ after = \"15m\", to = [\"dave\"] }, { after = \"1h\", action = \"deny\" }, { after = \"2h\", action = \"deny\" }",
        ),
        "escalate",
        &["step 3", "never runs"],
    );
}
