//! Rules, predicates, precedence, sticky decisions and error messages.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate::approval::lifecycle::grant;
use toolgate::tool::{GateAction, GateCall};
use toolgate_policy::grants;
use toolgate_policy::{
    DecisionScope, MatchSource, Policy, PolicyError, PolicyGate, PolicyHandle, PredicateConfig, RuleConfig,
    StickyAction, StickyDecision,
};

fn call<'a>(tool: &'a str, input: &'a Value) -> GateCall<'a> {
    GateCall { tool_name: tool, input, tool_call_id: "call-1", conversation_id: None, principal: None, groups: &[] }
}

fn policy(text: &str) -> Policy {
    Policy::from_toml_str(text).unwrap_or_else(|e| panic!("{e}"))
}

/// The action the policy decides for `tool` with `input`.
fn action(policy: &Policy, tool: &str, input: Value) -> Option<GateAction> {
    policy.decide(&call(tool, &input)).map(|verdict| verdict.action)
}

/// A one-rule deny policy on `t` with this predicate table.
fn deny_when(predicate: &str) -> Policy {
    policy(&format!("[[rule]]\naction = \"deny\"\ntool = \"t\"\n[rule.input]\n{predicate}\n"))
}

fn denies(policy: &Policy, input: Value) -> bool {
    action(policy, "t", input) == Some(GateAction::Deny)
}

fn error(text: &str) -> String {
    match Policy::from_toml_str(text) {
        Ok(_) => panic!("the policy should not load:\n{text}"),
        Err(error) => error.to_string(),
    }
}

// ---- predicates ----

#[test]
fn regex_is_searched_in_strings_only() {
    let policy = deny_when(r#""/command" = { regex = 'rm\s+-rf' }"#);
    assert!(denies(&policy, json!({"command": "cd / && rm  -rf *"})));
    assert!(!denies(&policy, json!({"command": "rm -r x"})));
    assert!(!denies(&policy, json!({"command": ["rm -rf"]})), "an array is not a string");
    assert!(!denies(&policy, json!({"other": "rm -rf"})), "a missing field does not match");
    let anchored = deny_when(r#""/command" = { regex = '^ls$' }"#);
    assert!(denies(&anchored, json!({"command": "ls"})));
    assert!(!denies(&anchored, json!({"command": "ls -la"})));
}

#[test]
fn glob_matches_whole_strings_and_star_crosses_slashes() {
    let policy = deny_when(r#""/path" = { glob = "/etc/*" }"#);
    assert!(denies(&policy, json!({"path": "/etc/hosts"})));
    assert!(denies(&policy, json!({"path": "/etc/ssl/certs/ca.pem"})), "literal_separator = false");
    assert!(!denies(&policy, json!({"path": "/tmp/etc/hosts"})));
    assert!(!denies(&policy, json!({"path": "/tmp/../etc/hosts"})), "no path normalisation");
    assert!(!denies(&policy, json!({"path": 5})));
    let alternatives = deny_when(r#""/name" = { glob = "*.{key,pem}" }"#);
    assert!(denies(&alternatives, json!({"name": "id.pem"})));
    assert!(!denies(&alternatives, json!({"name": "id.pub"})));
}

#[test]
fn numeric_comparisons() {
    let cases = [
        ("gt", 1000.0, [(999.0, false), (1000.0, false), (1000.5, true)]),
        ("ge", 1000.0, [(999.0, false), (1000.0, true), (1000.5, true)]),
        ("lt", 0.0, [(-1.0, true), (0.0, false), (1.0, false)]),
        ("le", 0.0, [(-1.0, true), (0.0, true), (1.0, false)]),
    ];
    for (operator, bound, samples) in cases {
        let policy = deny_when(&format!(r#""/amount" = {{ {operator} = {bound} }}"#));
        for (value, expected) in samples {
            assert_eq!(denies(&policy, json!({"amount": value})), expected, "{value} {operator} {bound}");
        }
        assert!(!denies(&policy, json!({"amount": "5000"})), "a string is not a number");
        assert!(!denies(&policy, json!({"amount": null})));
        assert!(!denies(&policy, json!({})));
    }
    let integer = deny_when(r#""/amount" = { gt = 1000 }"#);
    assert!(denies(&integer, json!({"amount": 5000})));
    assert!(denies(&integer, json!({"amount": 1000.01})));
}

#[test]
fn operators_combine() {
    let range = deny_when(r#""/amount" = { ge = 10, lt = 20 }"#);
    assert!(!denies(&range, json!({"amount": 9})));
    assert!(denies(&range, json!({"amount": 10})));
    assert!(denies(&range, json!({"amount": 19.9})));
    assert!(!denies(&range, json!({"amount": 20})));
    let both = deny_when(r#""/path" = { glob = "/etc/**", regex = "passwd" }"#);
    assert!(denies(&both, json!({"path": "/etc/passwd"})));
    assert!(!denies(&both, json!({"path": "/etc/hosts"})));
}

#[test]
fn all_predicates_must_hold() {
    let policy = deny_when("\"/a\" = { equals = 1 }\n\"/b\" = { equals = 2 }");
    assert!(denies(&policy, json!({"a": 1, "b": 2})));
    assert!(!denies(&policy, json!({"a": 1, "b": 3})));
    assert!(!denies(&policy, json!({"a": 1})));
}

#[test]
fn one_of_and_equals_compare_json_values() {
    let one_of = deny_when(r#""/to" = { one_of = ["a@x.com", "b@x.com", 7] }"#);
    assert!(denies(&one_of, json!({"to": "b@x.com"})));
    assert!(denies(&one_of, json!({"to": 7.0})), "numbers compare by value");
    assert!(!denies(&one_of, json!({"to": "c@x.com"})));
    assert!(!denies(&one_of, json!({"to": ["a@x.com"]})));

    let flag = deny_when(r#""/recursive" = { equals = true }"#);
    assert!(denies(&flag, json!({"recursive": true})));
    assert!(!denies(&flag, json!({"recursive": "true"})));
    assert!(!denies(&flag, json!({})), "a missing field never matches, even for deny");

    let whole = deny_when(r#""" = { equals = { path = "/tmp/x", opts = [1, { deep = true }] } }"#);
    assert!(denies(&whole, json!({"opts": [1.0, {"deep": true}], "path": "/tmp/x"})), "key order is irrelevant");
    assert!(!denies(&whole, json!({"path": "/tmp/x", "opts": [1, {"deep": true}], "extra": 1})));
    assert!(!denies(&whole, json!({"path": "/tmp/x"})));
}

#[test]
fn pointers_follow_rfc_6901() {
    let escaped = deny_when(r#""/a~1b/~0c" = { equals = 1 }"#);
    assert!(denies(&escaped, json!({"a/b": {"~c": 1}})));
    let index = deny_when(r#""/items/1/name" = { equals = "x" }"#);
    assert!(denies(&index, json!({"items": [{}, {"name": "x"}]})));
    assert!(!denies(&index, json!({"items": [{"name": "x"}]})));
}

// ---- tools and principals ----

#[test]
fn tool_globs() {
    let policy = policy(
        r#"
        [[rule]]
        action = "deny"
        tool = "shell__*"
        [[rule]]
        action = "ask"
        tool = "fs__{write,delete}_file"
        [[rule]]
        action = "allow"
        tool = "get_?eather"
        [[rule]]
        action = "allow"
        tool = "exact"
        "#,
    );
    assert_eq!(action(&policy, "shell__exec", json!({})), Some(GateAction::Deny));
    assert_eq!(action(&policy, "shell__", json!({})), Some(GateAction::Deny));
    assert_eq!(action(&policy, "myshell__exec", json!({})), None);
    assert_eq!(action(&policy, "fs__write_file", json!({})), Some(GateAction::Ask));
    assert_eq!(action(&policy, "fs__read_file", json!({})), None);
    assert_eq!(action(&policy, "get_weather", json!({})), Some(GateAction::Allow));
    assert_eq!(action(&policy, "exact", json!({})), Some(GateAction::Allow));
    assert_eq!(action(&policy, "exactly", json!({})), None);
    let default = Policy::from_rules(vec![RuleConfig::new(GateAction::Ask)]).unwrap();
    assert_eq!(action(&default, "anything", json!(null)), Some(GateAction::Ask), "tool defaults to `*`");
}

#[test]
fn principal_globs_never_match_anonymous_calls() {
    let policy = policy(
        r#"
        [[rule]]
        action = "deny"
        principal = "contractor-*"
        "#,
    );
    let input = json!({});
    let mut call = call("t", &input);
    assert!(policy.decide(&call).is_none(), "no principal: a rule with `principal` does not match");
    call.principal = Some("contractor-bob");
    let verdict = policy.decide(&call).unwrap();
    assert_eq!(verdict.action, GateAction::Deny);
    assert_eq!(verdict.reason.as_deref(), Some("rule #1 matched tool `t` for principal `contractor-bob`"));
    call.principal = Some("alice");
    assert!(policy.decide(&call).is_none());
}

// ---- precedence and reasons ----

#[test]
fn deny_beats_ask_beats_allow_in_any_order() {
    let rules = [
        ("allow", "a"),
        ("ask", "b"),
        ("deny", "c"),
        ("ask", "d"), // a second ask: never named while `b` matches
    ];
    let orders: [[usize; 4]; 4] = [[0, 1, 2, 3], [2, 1, 0, 3], [3, 1, 0, 2], [0, 3, 2, 1]];
    for order in orders {
        let text: String = order
            .iter()
            .map(|&i| format!("[[rule]]\nname = \"{}\"\naction = \"{}\"\n", rules[i].1, rules[i].0))
            .collect();
        let policy = policy(&text);
        let explanation = policy.explain(&call("t", &json!({})));
        assert_eq!(explanation.decision, Some(GateAction::Deny));
        assert_eq!(explanation.rule.as_deref(), Some("c"));
        assert_eq!(explanation.matches.len(), 4);

        let without_deny: String = order
            .iter()
            .filter(|&&i| i != 2)
            .map(|&i| format!("[[rule]]\nname = \"{}\"\naction = \"{}\"\n", rules[i].1, rules[i].0))
            .collect();
        let explanation = self::policy(&without_deny).explain(&call("t", &json!({})));
        assert_eq!(explanation.decision, Some(GateAction::Ask));
        let first_ask = order.iter().find(|&&i| rules[i].0 == "ask").map(|&i| rules[i].1);
        assert_eq!(explanation.rule.as_deref(), first_ask, "the first ask in file order");
    }
}

#[test]
fn nothing_matches_no_verdict() {
    let policy = policy("[[rule]]\naction = \"deny\"\ntool = \"x\"\n");
    let explanation = policy.explain(&call("y", &json!({})));
    assert_eq!(explanation.decision, None);
    assert!(explanation.matches.is_empty());
    assert!(explanation.verdict().is_none());
    assert!(Policy::empty().decide(&call("y", &json!({}))).is_none());
}

#[test]
fn reasons_list_each_pointer_and_value() {
    let policy = policy(
        r#"
        [[rule]]
        name = "ask-writes"
        action = "ask"
        tool = "fs__*"
        reason = "writes need a look"
        [rule.input]
        "/path" = { glob = "/tmp/**" }
        "/mode" = { one_of = [420, 493] }

        [[rule]]
        action = "deny"
        tool = "big"
        input = { "" = { regex = "x" } }
        "#,
    );
    let input = json!({"path": "/tmp/x", "mode": 420});
    let verdict = policy.decide(&call("fs__write_file", &input)).unwrap();
    assert_eq!(
        verdict.reason.as_deref(),
        Some(r#"rule `ask-writes` matched tool `fs__write_file`, /mode = 420, /path = "/tmp/x": writes need a look"#)
    );

    let long = "x".repeat(200);
    let input = Value::String(long);
    let verdict = policy.decide(&call("big", &input)).unwrap();
    let value = verdict.reason.as_deref().unwrap().strip_prefix("rule #2 matched tool `big`, input = ").unwrap();
    assert_eq!(value.chars().count(), 80);
    assert!(value.starts_with("\"xxx") && value.ends_with('…'), "{value}");
}

#[test]
fn explain_lists_every_match() {
    let policy = policy(
        r#"
        [[rule]]
        name = "allow-all"
        action = "allow"
        [[rule]]
        name = "other-tool"
        action = "deny"
        tool = "other"
        [[rule]]
        name = "ask-big"
        action = "ask"
        input = { "/n" = { gt = 10 } }
        "#,
    );
    let input = json!({"n": 11});
    let explanation = policy.explain(&call("t", &input));
    assert_eq!(explanation.decision, Some(GateAction::Ask));
    assert_eq!(explanation.rule.as_deref(), Some("ask-big"));
    let names: Vec<_> = explanation.matches.iter().map(|m| m.source.name()).collect();
    assert_eq!(names, ["allow-all", "ask-big"]);
    assert_eq!(explanation.matches[1].source, MatchSource::Rule { name: "ask-big".into(), position: 3 });
    assert_eq!(explanation.verdict(), policy.decide(&call("t", &input)));
    let text = explanation.to_string();
    assert!(text.starts_with("decision: ask (rule `ask-big` matched tool `t`, /n = 11)\n"), "{text}");
    assert!(text.contains("  allow rule `allow-all` matched tool `t`\n"), "{text}");
    let json = serde_json::to_value(&explanation).unwrap();
    assert_eq!(json["decision"], "ask");
    assert_eq!(json["matches"][1]["source"], json!({"kind": "rule", "name": "ask-big", "position": 3}));
}

// ---- loading ----

#[test]
fn other_top_level_keys_are_ignored() {
    let policy = policy(
        r#"
        title = "whatever"
        [[mcp]]
        name = "fs"
        command = "mcp-fs"
        unknown = { deeply = ["nested"] }
        [[rule]]
        action = "ask"
        [server]
        port = 3000
        "#,
    );
    assert_eq!(policy.rules().len(), 1);
    assert!(Policy::from_toml_str("").unwrap().is_empty());
    assert!(Policy::from_toml_str("[[mcp]]\nname = \"x\"\n").unwrap().is_empty());
}

#[test]
fn rules_keep_names_positions_and_configs() {
    let policy = policy("[[rule]]\naction = \"allow\"\n[[rule]]\nname = \"b\"\naction = \"deny\"\nreason = \"r\"\n");
    let rules = policy.rules();
    assert_eq!((rules[0].name(), rules[0].position(), rules[0].action()), ("rule #1", 1, GateAction::Allow));
    assert_eq!((rules[1].name(), rules[1].position(), rules[1].reason()), ("b", 2, Some("r")));
    assert_eq!(policy.rule("b").unwrap().config().action, GateAction::Deny);
}

#[test]
fn configs_round_trip_through_toml() {
    let rules = vec![
        RuleConfig::new(GateAction::Deny)
            .name("no-rm")
            .tool("shell__*")
            .principal("bob")
            .reason("no")
            .input("/command", PredicateConfig::regex(r"rm\s+-rf"))
            .input("/n", PredicateConfig { gt: Some(1.5), le: Some(9.0), ..PredicateConfig::default() })
            .input("", PredicateConfig::equals(json!({"a": [1, "x"]}))),
        RuleConfig::new(GateAction::Allow).input("/to", PredicateConfig::one_of([json!("a"), json!(2)])),
    ];
    #[derive(serde::Serialize)]
    struct File<'a> {
        rule: &'a [RuleConfig],
    }
    let text = toml::to_string(&File { rule: &rules }).unwrap();
    let policy = Policy::from_toml_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(policy.configs(), rules);
}

/// What a program that owns the whole file (e.g. the CLI) does: embed `Vec<RuleConfig>`.
#[test]
fn embedded_rule_configs_surface_unknown_keys_with_their_location() {
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct File {
        #[serde(default)]
        rule: Vec<RuleConfig>,
        #[serde(default)]
        mcp: Vec<toml::Table>,
    }
    let text = "[[mcp]]\nname = \"fs\"\n\n[[rule]]\naction = \"deny\"\ntol = \"shell__*\"\n";
    let error = toml::from_str::<File>(text).err().expect("an unknown key is an error").to_string();
    assert!(error.contains("unknown field `tol`"), "{error}");
    assert!(error.contains("line 6"), "{error}");

    let text = "[[rule]]\naction = \"deny\"\n[rule.input]\n\"/x\" = { regx = \"a\" }\n";
    let error = toml::from_str::<File>(text).err().expect("an unknown operator is an error").to_string();
    assert!(error.contains("unknown field `regx`"), "{error}");

    let text = "[[rule]]\naction = \"deny\"\ninput = { \"/x\" = { equals = 2000-01-01 } }\n";
    let file: File = toml::from_str(text).unwrap();
    let error = Policy::from_rules(file.rule).unwrap_err().to_string();
    assert!(error.contains("rule #1: invalid `input./x.equals`: TOML date-times are not JSON values"), "{error}");

    let text = "[[rule]]\naction = \"deny\"\ntool = \"t\"\n[rule.input]\n\"/x\" = { equals = 1 }\n[[mcp]]\n";
    let file: File = toml::from_str(text).unwrap();
    let policy = Policy::from_rules(file.rule).unwrap();
    assert!(denies(&policy, json!({"x": 1})));
}

#[test]
fn toml_syntax_errors_carry_line_and_column() {
    let error = Policy::from_toml_str("[[rule]]\naction = \"deny\"\ntool = \n").unwrap_err();
    let PolicyError::Toml { line, column, .. } = &error else { panic!("{error:?}") };
    assert_eq!((*line, *column), (Some(3), Some(8)));
    assert!(error.to_string().contains("line 3"), "{error}");

    let error = error_text_of(Policy::from_toml_str("[rule]\naction = \"deny\"\n"));
    assert_eq!(error, "line 1: `rule` must be an array of tables: write each rule as `[[rule]]`");
    let error = error_text_of(Policy::from_toml_str("title = \"x\"\nrule = \"deny\"\n"));
    assert!(error.starts_with("line 2: `rule` must be an array of tables"), "{error}");
}

fn error_text_of(result: Result<Policy, PolicyError>) -> String {
    result.map(|_| ()).unwrap_err().to_string()
}

#[test]
fn errors_name_the_rule_and_the_key() {
    let cases: &[(&str, &str)] = &[
        (
            "[[rule]]\nname = \"x\"\naction = \"deny\"\ntol = \"a\"\n",
            "rule `x` (line 1): unknown key `tol` (expected one of name, action, tool, principal, reason, input, approvers, quorum, self_approval, escalate, remind, history, mode)",
        ),
        ("[[rule]]\naction = \"allow\"\n\n[[rule]]\ntool = \"a\"\n", "rule #2 (line 4): missing `action`"),
        (
            "[[rule]]\nname = \"x\"\naction = \"block\"\n",
            "rule `x` (line 1): unknown action `block` (expected deny, ask or allow)",
        ),
        ("[[rule]]\naction = 1\n", "rule #1 (line 1): unknown action `1`"),
        ("[[rule]]\naction = \"Deny\"\n", "unknown action `Deny`"),
        (
            "[[rule]]\nname = \"x\"\naction = \"deny\"\ninput = { \"/a\" = { regx = \"b\" } }\n",
            "rule `x` (line 1): unknown operator `regx` for input `/a`",
        ),
        (
            "[[rule]]\nname = \"x\"\naction = \"deny\"\ninput = { \"/a\" = {} }\n",
            "rule `x` (line 1): empty predicate for input `/a`",
        ),
        (
            "[[rule]]\nname = \"x\"\naction = \"deny\"\ninput = { \"/a\" = 5 }\n",
            "rule `x` (line 1): invalid `input./a`: expected a predicate table",
        ),
        ("[[rule]]\naction = \"deny\"\ninput = 5\n", "rule #1 (line 1): invalid `input`"),
        ("[[rule]]\nname = \"x\"\naction = \"deny\"\ntool = \"a[\"\n", "rule `x` (line 1): invalid glob in `tool`"),
        ("[[rule]]\naction = \"deny\"\nprincipal = \"{a\"\n", "rule #1 (line 1): invalid glob in `principal`"),
        (
            "[[rule]]\naction = \"deny\"\ninput = { \"/p\" = { glob = \"[z-a]\" } }\n",
            "rule #1 (line 1): invalid glob in `input./p.glob`",
        ),
        (
            "[[rule]]\nname = \"x\"\naction = \"deny\"\ninput = { \"/a\" = { regex = \"(\" } }\n",
            "rule `x` (line 1): invalid regex for input `/a`",
        ),
        (
            "[[rule]]\nname = \"x\"\naction = \"deny\"\ninput = { \"a\" = { equals = 1 } }\n",
            "rule `x` (line 1): invalid JSON pointer `a`: a pointer is empty (the whole input) or starts with `/`",
        ),
        (
            "[[rule]]\naction = \"deny\"\ninput = { \"/a~2\" = { equals = 1 } }\n",
            "rule #1 (line 1): invalid JSON pointer `/a~2`",
        ),
        (
            "[[rule]]\nname = \"x\"\naction = \"deny\"\n[[rule]]\nname = \"x\"\naction = \"allow\"\n",
            "duplicate rule name `x` (rules #1 and #2)",
        ),
        ("[[rule]]\nname = \"\"\naction = \"deny\"\n", "invalid `name`: a name must not be empty"),
        ("[[rule]]\naction = \"deny\"\ntool = 5\n", "rule #1 (line 1): invalid `tool`: invalid type: integer `5`"),
        ("[[rule]]\naction = \"deny\"\ninput = { \"/a\" = { gt = \"x\" } }\n", "rule #1 (line 1): invalid `input"),
        ("[[rule]]\naction = \"deny\"\ninput = { \"/a\" = { gt = nan } }\n", "invalid `input./a.gt`: NaN"),
        (
            "[[rule]]\naction = \"deny\"\ninput = { \"/a\" = { equals = 1979-05-27 } }\n",
            "invalid `input./a.equals`: TOML date-times are not JSON values",
        ),
        ("rule = [1]\n", "rule #1 (line 1): a rule must be a table"),
    ];
    for (text, expected) in cases {
        let error = error(text);
        assert!(error.contains(expected), "for\n{text}\nexpected `{expected}` in\n`{error}`");
    }
}

#[test]
fn from_rules_errors_name_the_rule_without_a_line() {
    let rules = vec![
        RuleConfig::new(GateAction::Allow),
        RuleConfig::new(GateAction::Deny).input("/x", PredicateConfig::default()),
    ];
    let error = Policy::from_rules(rules).unwrap_err();
    assert_eq!(error.to_string(), "rule #2: empty predicate for input `/x` (give at least one operator)");
    assert_eq!(error.rule().map(|rule| rule.position), Some(2));
}

#[test]
fn a_later_line_is_reported() {
    let text = "[[rule]]\naction = \"allow\"\n\n# comment\n[[rule]]\nname = \"bad\"\naction = \"ask\"\ntool = \"[\"\n";
    let error = Policy::from_toml_str(text).unwrap_err();
    assert_eq!(error.rule().and_then(|rule| rule.line), Some(5), "{error}");
}

// ---- sticky decisions ----

const NOW: i64 = 1_700_000_000_000;

fn gate(text: &str, sticky: Vec<StickyDecision>) -> PolicyGate {
    PolicyGate::new(Arc::new(policy(text)), sticky, NOW)
}

fn in_conversation<'a>(tool: &'a str, input: &'a Value, conversation: &'a str, principal: &'a str) -> GateCall<'a> {
    GateCall {
        tool_name: tool,
        input,
        tool_call_id: "call-1",
        conversation_id: Some(conversation),
        principal: Some(principal),
        groups: &[],
    }
}

fn allow(id: &str, tool: &str, scope: DecisionScope) -> StickyDecision {
    StickyDecision::new(id, StickyAction::Allow, tool, scope, NOW - 1000)
}

/// Whether the gate offers a grant for the call.
fn covers(gate: &PolicyGate, call: &GateCall<'_>) -> bool {
    !grants::covering(gate.sticky(), call, gate.now_ms()).is_empty()
}

#[test]
fn sticky_scopes() {
    let input = json!({"path": "/tmp/x"});
    let cases = [
        (DecisionScope::Conversation { conversation_id: "c1".into() }, "c1", "alice", true),
        (DecisionScope::Conversation { conversation_id: "c1".into() }, "c2", "alice", false),
        (DecisionScope::Principal { principal: "alice".into() }, "c2", "alice", true),
        (DecisionScope::Principal { principal: "alice".into() }, "c1", "bob", false),
        (DecisionScope::Global, "c9", "zed", true),
    ];
    for (scope, conversation, principal, expected) in cases {
        let gate = gate("", vec![allow("d1", "fs__write_file", scope.clone())]);
        let covered = covers(&gate, &in_conversation("fs__write_file", &input, conversation, principal));
        assert_eq!(covered, expected, "{scope:?} in {conversation} by {principal}");
        let other_tool = covers(&gate, &in_conversation("fs__write", &input, conversation, principal));
        assert!(!other_tool, "the tool name is exact");
    }
    let anonymous = call("fs__write_file", &input);
    let gate =
        gate("", vec![allow("d1", "fs__write_file", DecisionScope::Conversation { conversation_id: "c1".into() })]);
    assert!(!covers(&gate, &anonymous));
}

#[test]
fn a_conversation_grant_lifts_only_its_authors_questions() {
    let input = json!({});
    let scope = DecisionScope::Conversation { conversation_id: "c1".into() };
    let gate = gate("", vec![allow("d1", "t", scope.clone()).created_by("alice")]);
    let ask = toolgate::tool::Verdict::ask();
    let lifts = |gate: &PolicyGate, call: &GateCall<'_>| {
        let offers = grants::covering(gate.sticky(), call, gate.now_ms());
        offers.iter().any(|offer| grant::may_lift(offer, &ask, call.principal))
    };
    assert!(lifts(&gate, &in_conversation("t", &input, "c1", "alice")));
    assert!(!lifts(&gate, &in_conversation("t", &input, "c1", "bob")), "bob shares the chat, not the grant");
    let no_principal = GateCall { conversation_id: Some("c1"), ..call("t", &input) };
    assert!(!lifts(&gate, &no_principal));
    let unowned = self::gate("", vec![allow("d1", "t", scope)]);
    assert!(lifts(&unowned, &no_principal), "an unowned grant lifts the questions of a server without principals");
    assert!(!lifts(&unowned, &in_conversation("t", &input, "c1", "bob")), "but not a principal's");

    // A conversation-scoped deny still binds only its author's calls.
    let never = StickyDecision::new(
        "n1",
        StickyAction::Deny,
        "t",
        DecisionScope::Conversation { conversation_id: "c1".into() },
        0,
    )
    .created_by("alice");
    let gate = self::gate("", vec![never]);
    assert!(gate.decide(&in_conversation("t", &input, "c1", "alice")).is_some());
    assert!(gate.decide(&in_conversation("t", &input, "c1", "bob")).is_none());
}

#[test]
fn sticky_input_is_exact() {
    let sticky = allow("d1", "t", DecisionScope::Global).with_input(json!({"path": "/tmp/x", "n": 1}));
    let gate = gate("", vec![sticky]);
    assert!(covers(&gate, &call("t", &json!({"n": 1.0, "path": "/tmp/x"}))));
    assert!(!covers(&gate, &call("t", &json!({"n": 1, "path": "/tmp/y"}))));
    assert!(!covers(&gate, &call("t", &json!({"path": "/tmp/x"}))));
}

#[test]
fn sticky_expiry() {
    let input = json!({});
    for (expires_at, matches) in [(NOW - 1, false), (NOW, false), (NOW + 1, true)] {
        let gate = gate("", vec![allow("d1", "t", DecisionScope::Global).expires_at(expires_at)]);
        assert_eq!(covers(&gate, &call("t", &input)), matches, "expires at now{:+}", expires_at - NOW);
    }
}

#[test]
fn sticky_decisions_obey_precedence() {
    let input = json!({"path": "/etc/hosts"});
    let sticky_allow = allow("always", "fs__write_file", DecisionScope::Global);
    let rules = r#"
        [[rule]]
        name = "ask-etc"
        action = "ask"
        input = { "/path" = { glob = "/etc/**" } }
    "#;
    let verdict = gate(rules, vec![sticky_allow.clone()]).decide(&call("fs__write_file", &input)).unwrap();
    assert_eq!(verdict.action, GateAction::Ask, "a sticky allow is a grant, not a rule: the file's ask stands");

    let deny_rule = "[[rule]]\nname = \"no\"\naction = \"deny\"\n";
    let verdict = gate(deny_rule, vec![sticky_allow.clone()]).decide(&call("fs__write_file", &input)).unwrap();
    assert_eq!(
        (verdict.action, verdict.reason.as_deref().unwrap_or_default()),
        (GateAction::Deny, "rule `no` matched tool `fs__write_file`")
    );

    let never = StickyDecision::new("never", StickyAction::Deny, "fs__write_file", DecisionScope::Global, NOW)
        .created_by("alice")
        .note("it broke prod");
    let allow_rule = "[[rule]]\naction = \"allow\"\n";
    let verdict = gate(allow_rule, vec![sticky_allow.clone(), never]).decide(&call("fs__write_file", &input)).unwrap();
    assert_eq!(verdict.action, GateAction::Deny, "a sticky deny beats a file allow");
    assert_eq!(
        verdict.reason.as_deref(),
        Some("sticky decision `never` (never allow `fs__write_file` everywhere, by alice): it broke prod")
    );

    let gate = gate("", vec![sticky_allow]);
    assert_eq!(gate.decide(&call("fs__write_file", &input)), None, "no rule decides");
    assert!(covers(&gate, &call("fs__write_file", &input)), "the grant is offered to lift a question");
}

#[test]
fn sticky_reasons() {
    let conversation =
        allow("d1", "fs__write_file", DecisionScope::Conversation { conversation_id: "c1".into() }).created_by("alice");
    assert_eq!(conversation.describe(), "grant `d1` (always allow `fs__write_file` in this conversation, by alice)");
    let mut limited = allow("d3", "t", DecisionScope::Global);
    limited.uses = Some(5);
    limited.input_match.insert("/n".into(), serde_json::from_value(json!({"le": 3})).unwrap());
    assert_eq!(limited.describe(), "grant `d3` (allow 5 calls of `t` with inputs like this everywhere)");
    let principal = allow("d2", "t", DecisionScope::Principal { principal: "bob".into() }).with_input(json!({}));
    assert_eq!(principal.describe(), "grant `d2` (always allow `t` with exactly this input for bob)");
}

#[test]
fn sticky_json_shape() {
    let sticky = StickyDecision::new(
        "d1",
        StickyAction::Allow,
        "fs__write_file",
        DecisionScope::Conversation { conversation_id: "c1".into() },
        5,
    )
    .expires_at(9)
    .created_by("alice");
    let json = serde_json::to_value(&sticky).unwrap();
    assert_eq!(
        json,
        json!({
            "id": "d1",
            "action": "allow",
            "tool": "fs__write_file",
            "scope": {"kind": "conversation", "conversationId": "c1"},
            "expiresAt": 9,
            "createdAt": 5,
            "createdBy": "alice"
        })
    );
    assert_eq!(serde_json::from_value::<StickyDecision>(json).unwrap(), sticky);
    for (scope, expected) in [
        (DecisionScope::Principal { principal: "bob".into() }, json!({"kind": "principal", "principal": "bob"})),
        (DecisionScope::Global, json!({"kind": "global"})),
    ] {
        assert_eq!(serde_json::to_value(&scope).unwrap(), expected);
        assert_eq!(serde_json::from_value::<DecisionScope>(expected).unwrap(), scope);
    }
    let parsed: StickyDecision = serde_json::from_value(json!({
        "id": "d2", "action": "deny", "tool": "t", "input": {"a": 1},
        "scope": {"kind": "global"}, "createdAt": 1, "note": "n"
    }))
    .unwrap();
    assert_eq!(
        (parsed.action, parsed.input, parsed.note.as_deref()),
        (StickyAction::Deny, Some(json!({"a": 1})), Some("n"))
    );
}

#[test]
fn gate_explains_sticky_matches() {
    let deny = |id: &str| StickyDecision::new(id, StickyAction::Deny, "t", DecisionScope::Global, NOW - 1000);
    let gate = gate(
        "[[rule]]\nname = \"no\"\naction = \"deny\"\n",
        vec![deny("d1"), deny("old").expires_at(NOW), allow("grant", "t", DecisionScope::Global)],
    );
    let explanation = gate.explain(&call("t", &json!({})));
    let sources: Vec<_> = explanation.matches.iter().map(|m| m.source.clone()).collect();
    assert_eq!(
        sources,
        [MatchSource::Rule { name: "no".into(), position: 1 }, MatchSource::Sticky { id: "d1".into() }],
        "live denies match; a grant is no rule"
    );
    assert_eq!(explanation.rule.as_deref(), Some("no"), "file rules come first among equals");
}

// ---- handle ----

#[test]
fn handle_swaps_for_every_clone() {
    let handle = PolicyHandle::default();
    let reader = handle.clone();
    let snapshot = reader.current();
    handle.replace(policy("[[rule]]\naction = \"deny\"\n"));
    assert!(snapshot.is_empty(), "a snapshot never changes");
    assert_eq!(action(&reader.current(), "t", json!({})), Some(GateAction::Deny));
    assert_eq!(reader.gate(vec![], NOW).decide(&call("t", &json!({}))).map(|v| v.action), Some(GateAction::Deny));
}

/// `principal = "group:NAME"` matches the caller's groups, never a principal
/// that is merely named like the group; other principal globs match names only.
#[test]
fn group_rules_match_the_callers_groups() {
    let policy = policy(
        "[[rule]]\nname = \"finance-pays\"\naction = \"allow\"\ntool = \"pay\"\nprincipal = \"group:fin*\"\n\
         [[rule]]\naction = \"deny\"\ntool = \"pay\"\nprincipal = \"mallory\"\n",
    );
    let input = json!({});
    let finance = ["finance".to_owned()];
    let member = GateCall { principal: Some("bob"), groups: &finance, ..call("pay", &input) };
    let verdict = policy.decide(&member).expect("the group rule matches");
    assert_eq!(verdict.action, GateAction::Allow);
    assert!(verdict.reason.as_deref().unwrap_or_default().contains("finance-pays"), "{:?}", verdict.reason);
    let named_like_it = GateCall { principal: Some("group:finance"), ..call("pay", &input) };
    assert!(policy.decide(&named_like_it).is_none(), "a name is not a membership");
    let mallory_in_finance = GateCall { principal: Some("mallory"), groups: &finance, ..call("pay", &input) };
    assert_eq!(policy.decide(&mallory_in_finance).unwrap().action, GateAction::Deny, "deny still wins");
    let other_group = ["sales".to_owned()];
    let outsider = GateCall { principal: Some("bob"), groups: &other_group, ..call("pay", &input) };
    assert!(policy.decide(&outsider).is_none());
}

#[test]
fn an_ask_rule_routes_to_its_approvers_and_bad_routing_names_the_rule() {
    let policy = Policy::from_toml_str(
        "[[rule]]\nname = \"big\"\naction = \"ask\"\ntool = \"t\"\napprovers = [\"group:finance\", \"dave\"]\nquorum = 2\n",
    )
    .unwrap();
    let input = json!({});
    let verdict = policy.decide(&call("t", &input)).unwrap();
    let route = verdict.route.expect("routed");
    assert_eq!(route.approvers, ["group:finance", "dave"]);
    assert_eq!((route.quorum, route.self_approval), (2, false));
    assert_eq!(policy.explain(&call("t", &input)).verdict().unwrap().route, Some(route));
    for (rule, complaint) in [
        ("action = \"deny\"\napprovers = [\"bob\"]", "only an `ask` rule"),
        ("action = \"ask\"\nquorum = 2", "`quorum` needs `approvers`"),
        ("action = \"ask\"\nself_approval = true", "`self_approval` needs `approvers`"),
        ("action = \"ask\"\napprovers = [\"bob\"]\nquorum = 0", "at least 1"),
        ("action = \"ask\"\napprovers = [\"bob\"]\nquorum = 2", "needs at least 2 approvers"),
        ("action = \"ask\"\napprovers = [\"group:\"]", "is not a principal"),
    ] {
        let text = format!("[[rule]]\nname = \"r\"\ntool = \"t\"\n{rule}\n");
        let error = Policy::from_toml_str(&text).unwrap_err().to_string();
        assert!(error.contains("`r`") && error.contains(complaint), "{rule}: {error}");
    }
}

#[test]
fn the_digest_names_the_rules_as_loaded_not_their_layout() {
    let one = policy("[[rule]]\nname = \"a\"\naction = \"ask\"\ntool = \"x\"\n");
    let laid_out = policy("# the same rule\n[[rule]]\ntool = \"x\"\naction = \"ask\"\n\nname = \"a\"\n");
    let changed = policy("[[rule]]\nname = \"a\"\naction = \"deny\"\ntool = \"x\"\n");
    let digest = one.digest().expect("a loaded config has a digest");
    assert_eq!(digest.len(), 43, "base64url SHA-256: {digest}");
    assert_eq!(laid_out.digest(), Some(digest), "comments, order of keys and blank lines do not count");
    assert_ne!(changed.digest(), Some(digest), "a changed rule does");
    assert_eq!(Policy::empty().digest(), None, "no rules file, no digest");
}
