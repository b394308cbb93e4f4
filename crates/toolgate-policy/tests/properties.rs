//! Property tests: the verdict is the maximum action over the matching rules
//! (checked against an independent model of matching), a matching deny is
//! never overridden, and expired sticky decisions never match.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use toolgate::tool::{GateAction, GateCall};
use toolgate_policy::{
    DecisionScope, MatchSource, Policy, PolicyGate, PredicateConfig, RuleConfig, StickyAction, StickyDecision,
};

const TOOLS: [&str; 3] = ["a", "ab", "b"];
const NOW: i64 = 1_000_000;

#[derive(Debug, Clone)]
enum ToolPattern {
    Any,
    Exact(&'static str),
    PrefixA,
}

#[derive(Debug, Clone)]
enum Pred {
    XEquals(i64),
    XGreater(i64),
    XOneOf(i64, i64),
    YContains(&'static str),
    YStartsWithBar,
    YGlobFoo,
}

#[derive(Debug, Clone)]
struct GenRule {
    named: bool,
    action: GateAction,
    tool: ToolPattern,
    principal: Option<&'static str>,
    preds: Vec<Pred>,
}

#[derive(Debug, Clone)]
struct GenCall {
    tool: &'static str,
    principal: Option<&'static str>,
    conversation: Option<&'static str>,
    input: Value,
}

fn action() -> impl Strategy<Value = GateAction> {
    prop_oneof![Just(GateAction::Allow), Just(GateAction::Ask), Just(GateAction::Deny)]
}

fn tool_pattern() -> impl Strategy<Value = ToolPattern> {
    prop_oneof![
        Just(ToolPattern::Any),
        proptest::sample::select(&TOOLS[..]).prop_map(ToolPattern::Exact),
        Just(ToolPattern::PrefixA)
    ]
}

fn pred() -> impl Strategy<Value = Pred> {
    prop_oneof![
        (0i64..4).prop_map(Pred::XEquals),
        (-1i64..4).prop_map(Pred::XGreater),
        (0i64..4, 0i64..4).prop_map(|(a, b)| Pred::XOneOf(a, b)),
        proptest::sample::select(&["foo", "bar", "oba"][..]).prop_map(Pred::YContains),
        Just(Pred::YStartsWithBar),
        Just(Pred::YGlobFoo),
    ]
}

fn gen_rule() -> impl Strategy<Value = GenRule> {
    (
        any::<bool>(),
        action(),
        tool_pattern(),
        proptest::option::of(proptest::sample::select(&["p", "*"][..])),
        proptest::collection::vec(pred(), 0..3),
    )
        .prop_map(|(named, action, tool, principal, preds)| GenRule { named, action, tool, principal, preds })
}

fn gen_call() -> impl Strategy<Value = GenCall> {
    let x =
        prop_oneof![Just(None), (0i64..4).prop_map(|n| Some(json!(n))), Just(Some(json!("1"))), Just(Some(json!(2.0)))];
    let y = proptest::option::of(proptest::sample::select(&["foo", "bar", "foobar", "xobar"][..]));
    (
        proptest::sample::select(&TOOLS[..]),
        proptest::option::of(proptest::sample::select(&["p", "q"][..])),
        proptest::option::of(proptest::sample::select(&["c1", "c2"][..])),
        x,
        y,
    )
        .prop_map(|(tool, principal, conversation, x, y)| {
            let mut input = Map::new();
            if let Some(x) = x {
                input.insert("x".into(), x);
            }
            if let Some(y) = y {
                input.insert("y".into(), json!(y));
            }
            GenCall { tool, principal, conversation, input: Value::Object(input) }
        })
}

fn gen_scope() -> impl Strategy<Value = DecisionScope> {
    prop_oneof![
        proptest::sample::select(&["c1", "c2"][..])
            .prop_map(|id| DecisionScope::Conversation { conversation_id: id.into() }),
        proptest::sample::select(&["p", "q"][..]).prop_map(|p| DecisionScope::Principal { principal: p.into() }),
        Just(DecisionScope::Global),
    ]
}

fn gen_sticky() -> impl Strategy<Value = StickyDecision> {
    (
        prop_oneof![Just(StickyAction::Allow), Just(StickyAction::Deny)],
        proptest::sample::select(&TOOLS[..]),
        gen_scope(),
        proptest::option::of((0i64..4).prop_map(|x| json!({ "x": x }))),
        proptest::option::of(NOW - 5..NOW + 5),
        proptest::option::of(proptest::sample::select(&["p", "q"][..])),
    )
        .prop_map(|(action, tool, scope, input, expires_at, author)| StickyDecision {
            id: String::new(),
            action,
            tool: tool.into(),
            input,
            scope,
            expires_at,
            created_at: 0,
            created_by: author.map(str::to_owned),
            note: None,
            ..StickyDecision::new("", action, tool, DecisionScope::Global, 0)
        })
}

/// Gives stickies unique ids.
fn numbered(mut sticky: Vec<StickyDecision>) -> Vec<StickyDecision> {
    for (index, decision) in sticky.iter_mut().enumerate() {
        decision.id = format!("s{index}");
    }
    sticky
}

fn config(rule: &GenRule, index: usize) -> RuleConfig {
    let mut config = RuleConfig::new(rule.action);
    if rule.named {
        config = config.name(format!("r{index}"));
    }
    config = config.tool(match rule.tool {
        ToolPattern::Any => "*",
        ToolPattern::Exact(tool) => tool,
        ToolPattern::PrefixA => "a*",
    });
    if let Some(principal) = rule.principal {
        config = config.principal(principal);
    }
    for pred in &rule.preds {
        // Several predicates on one pointer merge into one table (all must hold).
        let (pointer, add): (&str, PredicateConfig) = match pred {
            Pred::XEquals(n) => ("/x", PredicateConfig::equals(*n)),
            Pred::XGreater(n) => ("/x", PredicateConfig::gt(*n as f64)),
            Pred::XOneOf(a, b) => ("/x", PredicateConfig::one_of([json!(a), json!(b)])),
            Pred::YContains(text) => ("/y", PredicateConfig::regex(*text)),
            Pred::YStartsWithBar => ("/y", PredicateConfig::regex("^bar")),
            Pred::YGlobFoo => ("/y", PredicateConfig::glob("foo*")),
        };
        merge(config.input.entry(pointer.into()).or_default(), add);
    }
    config
}

/// Merges `add` into `into`; a repeated operator replaces the earlier one (the model does the same).
fn merge(into: &mut PredicateConfig, add: PredicateConfig) {
    into.regex = add.regex.or(into.regex.take());
    into.glob = add.glob.or(into.glob.take());
    into.gt = add.gt.or(into.gt);
    into.one_of = add.one_of.or(into.one_of.take());
    into.equals = add.equals.or(into.equals.take());
}

/// The predicates that take effect after merging: the last of each operator per pointer.
fn effective(preds: &[Pred]) -> Vec<&Pred> {
    let kind = |pred: &Pred| match pred {
        Pred::XEquals(_) => 0,
        Pred::XGreater(_) => 1,
        Pred::XOneOf(..) => 2,
        Pred::YContains(_) | Pred::YStartsWithBar => 3,
        Pred::YGlobFoo => 4,
    };
    preds
        .iter()
        .enumerate()
        .filter(|(i, p)| !preds[i + 1..].iter().any(|q| kind(q) == kind(p)))
        .map(|(_, p)| p)
        .collect()
}

/// An independent model of rule matching.
fn model_matches(rule: &GenRule, call: &GenCall) -> bool {
    let tool = match rule.tool {
        ToolPattern::Any => true,
        ToolPattern::Exact(tool) => tool == call.tool,
        ToolPattern::PrefixA => call.tool.starts_with('a'),
    };
    let principal = match (rule.principal, call.principal) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some("*"), Some(_)) => true,
        (Some(pattern), Some(who)) => pattern == who,
    };
    let x = call.input.get("x").and_then(Value::as_f64);
    let y = call.input.get("y").and_then(Value::as_str);
    let preds = effective(&rule.preds).into_iter().all(|pred| match pred {
        Pred::XEquals(n) => x == Some(*n as f64),
        Pred::XGreater(n) => x.is_some_and(|x| x > *n as f64),
        Pred::XOneOf(a, b) => x.is_some_and(|x| x == *a as f64 || x == *b as f64),
        Pred::YContains(text) => y.is_some_and(|y| y.contains(text)),
        Pred::YStartsWithBar => y.is_some_and(|y| y.starts_with("bar")),
        Pred::YGlobFoo => y.is_some_and(|y| y.starts_with("foo")),
    });
    tool && principal && preds
}

fn model_sticky(sticky: &StickyDecision, call: &GenCall) -> bool {
    let scope = match &sticky.scope {
        DecisionScope::Conversation { conversation_id: id } => {
            call.conversation == Some(id.as_str())
                && sticky.created_by.as_deref().is_none_or(|author| call.principal == Some(author))
        }
        DecisionScope::Principal { principal: p } => call.principal == Some(p.as_str()),
        DecisionScope::Global => true,
    };
    let input = sticky.input.as_ref().is_none_or(|input| {
        input.get("x").and_then(Value::as_f64) == call.input.get("x").and_then(Value::as_f64)
            && call.input.get("y").is_none()
    });
    sticky.expires_at.is_none_or(|at| at > NOW) && sticky.tool == call.tool && scope && input
}

fn gate_call(call: &GenCall) -> GateCall<'_> {
    GateCall {
        tool_name: call.tool,
        input: &call.input,
        tool_call_id: "call",
        conversation_id: call.conversation,
        principal: call.principal,
        groups: &[],
    }
}

fn name(rule: &GenRule, index: usize) -> String {
    if rule.named { format!("r{index}") } else { format!("rule #{}", index + 1) }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The decision is max(action) over matching rules and sticky denies
    /// (deny > ask > allow), naming the first match of that action.
    #[test]
    fn verdict_is_the_maximum_over_matches(
        rules in proptest::collection::vec(gen_rule(), 0..8),
        sticky in proptest::collection::vec(gen_sticky(), 0..4),
        call in gen_call(),
    ) {
        let sticky = numbered(sticky);
        let policy = Policy::from_rules(rules.iter().enumerate().map(|(i, r)| config(r, i)).collect()).unwrap();
        let gate = PolicyGate::new(Arc::new(policy), sticky.clone(), NOW);
        let explanation = gate.explain(&gate_call(&call));

        let mut expected: Vec<(String, GateAction)> = rules
            .iter()
            .enumerate()
            .filter(|(_, rule)| model_matches(rule, &call))
            .map(|(i, rule)| (name(rule, i), rule.action))
            .collect();
        // An allowing decision is a grant: it ranks as no rule (it lifts a question later).
        let denies = sticky.iter().filter(|s| s.action == StickyAction::Deny);
        expected.extend(denies.filter(|s| model_sticky(s, &call)).map(|s| (s.id.clone(), s.action.into())));

        let names: Vec<(String, GateAction)> =
            explanation.matches.iter().map(|m| (m.source.name().to_owned(), m.action)).collect();
        prop_assert_eq!(&names, &expected);
        let max = expected.iter().map(|(_, action)| *action).max();
        prop_assert_eq!(explanation.decision, max);
        let first = expected.iter().find(|(_, action)| Some(*action) == max).map(|(name, _)| name.clone());
        prop_assert_eq!(&explanation.rule, &first);
        prop_assert_eq!(gate.decide(&gate_call(&call)), explanation.verdict());
        if let Some(verdict) = gate.decide(&gate_call(&call)) {
            prop_assert_eq!(Some(verdict.action), max);
        }
    }

    /// A matching deny (a file rule or a sticky decision) wins whatever else
    /// matches, in any position.
    #[test]
    fn a_matching_deny_is_never_overridden(
        rules in proptest::collection::vec(gen_rule(), 0..8),
        sticky in proptest::collection::vec(gen_sticky(), 0..4),
        call in gen_call(),
        as_sticky in any::<bool>(),
        position in any::<prop::sample::Index>(),
    ) {
        let mut rules = rules;
        let mut sticky = sticky;
        if as_sticky {
            let scope = match (call.conversation, call.principal) {
                (Some(id), _) => DecisionScope::Conversation { conversation_id: id.into() },
                (None, Some(p)) => DecisionScope::Principal { principal: p.into() },
                (None, None) => DecisionScope::Global,
            };
            let deny = StickyDecision::new("", StickyAction::Deny, call.tool, scope, 0);
            let at = position.index(sticky.len() + 1);
            sticky.insert(at, if at % 2 == 0 { deny } else { deny.expires_at(NOW + 1) });
        } else {
            let deny = GenRule { named: true, action: GateAction::Deny, tool: ToolPattern::Exact(call.tool), principal: None, preds: vec![] };
            rules.insert(position.index(rules.len() + 1), deny);
        }
        // Everything else allows, as broadly as possible.
        rules.push(GenRule { named: false, action: GateAction::Allow, tool: ToolPattern::Any, principal: None, preds: vec![] });
        sticky.push(StickyDecision::new("", StickyAction::Allow, call.tool, DecisionScope::Global, 0));
        let sticky = numbered(sticky);
        let policy = Policy::from_rules(rules.iter().enumerate().map(|(i, r)| config(r, i)).collect()).unwrap();
        let gate = PolicyGate::new(Arc::new(policy), sticky, NOW);
        let verdict = gate.decide(&gate_call(&call)).expect("a deny matched");
        prop_assert_eq!(verdict.action, GateAction::Deny);
        let explanation = gate.explain(&gate_call(&call));
        let winner = explanation.matches.iter().find(|m| Some(m.source.name()) == explanation.rule.as_deref()).unwrap();
        prop_assert_eq!(winner.action, GateAction::Deny);
        prop_assert_eq!(Some(&winner.reason), verdict.reason.as_ref());
    }

    /// Expired sticky decisions never match, whatever else they say.
    #[test]
    fn expired_sticky_decisions_never_match(
        sticky in proptest::collection::vec(gen_sticky(), 1..6),
        expired in proptest::collection::vec(any::<bool>(), 6),
        age in 0i64..1000,
        call in gen_call(),
    ) {
        let mut sticky = numbered(sticky);
        for (decision, expired) in sticky.iter_mut().zip(&expired) {
            if *expired {
                decision.expires_at = Some(NOW - age);
                // Make it otherwise match the call.
                decision.tool = call.tool.into();
                decision.scope = DecisionScope::Global;
                decision.input = None;
            }
        }
        let gate = PolicyGate::new(Arc::new(Policy::empty()), sticky.clone(), NOW);
        let explanation = gate.explain(&gate_call(&call));
        for matched in &explanation.matches {
            let MatchSource::Sticky { id } = &matched.source else { unreachable!("no file rules") };
            let decision = sticky.iter().find(|s| &s.id == id).unwrap();
            prop_assert!(!decision.is_expired(NOW), "{} matched after expiring", id);
        }
        if sticky.iter().all(|s| s.is_expired(NOW)) {
            prop_assert!(gate.decide(&gate_call(&call)).is_none());
        }
    }
}
