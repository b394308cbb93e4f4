//! Compiling rules: [`Policy`] (the compiled rule set) and [`Rule`].
//!
//! Everything is checked and compiled at load time (globs, regexes, JSON
//! pointers, names), so evaluating a call only runs compiled matchers.
//! [`Policy::from_toml_str`] reads only the document's `rule` array and
//! ignores every other top-level key (e.g. `[[mcp]]`).

use std::collections::HashMap;

use globset::GlobMatcher;
use serde::Deserialize;
use serde_json::Value;
use toolgate::approval::lifecycle::{Escalation, Route, Schedule};
use toolgate::ledger::Millis;
use toolgate::tool::{GateAction, GateCall};

use crate::config::{HISTORY_KEYS, OPERATORS, RULE_KEYS, RuleConfig};
use crate::error::{PolicyError, RuleRef, line_col};
use crate::history::HistoryTerm;
use crate::predicate::{DATETIME, Predicate, compile_glob, render_pointer, render_value};

/// How a rule's `principal` and `approvers` name a group: `group:finance`.
pub use toolgate::approval::lifecycle::GROUP_PREFIX;

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    name: String,
    position: usize,
    tool: GlobMatcher,
    principal: Option<GlobMatcher>,
    predicates: Vec<Predicate>,
    route: Option<Route>,
    history: Option<HistoryTerm>,
    shadow: bool,
    config: RuleConfig,
}

impl Rule {
    /// Compiles the rule at 1-based `position`.
    fn compile(config: RuleConfig, position: usize) -> Result<Self, PolicyError> {
        let rule = RuleRef::new(position, config.name.clone());
        if config.name.as_deref().is_some_and(|name| name.trim().is_empty()) {
            return Err(PolicyError::InvalidValue {
                rule,
                key: "name".into(),
                message: "a name must not be empty".into(),
            });
        }
        let tool = compile_glob(&rule, "tool", &config.tool)?;
        let principal = config.principal.as_deref().map(|glob| compile_glob(&rule, "principal", glob)).transpose()?;
        let predicates = config
            .input
            .iter()
            .map(|(pointer, predicate)| Predicate::compile(&rule, pointer, predicate))
            .collect::<Result<_, _>>()?;
        let route = compile_route(&rule, &config)?;
        let history = config.history.as_ref().map(|history| HistoryTerm::compile(&rule, history)).transpose()?;
        let shadow = match config.mode.as_deref() {
            None | Some("enforce") => false,
            Some("shadow") => true,
            Some(other) => {
                let message = format!("`{other}`: expected \"enforce\" or \"shadow\"");
                return Err(PolicyError::InvalidValue { rule, key: "mode".into(), message });
            }
        };
        let name = config.name.clone().unwrap_or_else(|| format!("rule #{position}"));
        Ok(Self { name, position, tool, principal, predicates, route, history, shadow, config })
    }

    /// Who must approve, for an `ask` rule with `approvers`.
    pub fn route(&self) -> Option<&Route> {
        self.route.as_ref()
    }

    /// Its history term, if any: the rule matches only when it holds too.
    pub fn history(&self) -> Option<&HistoryTerm> {
        self.history.as_ref()
    }

    /// True for a rule in shadow mode (`mode = "shadow"`): it decides nothing,
    /// and what it would have decided is recorded.
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// The compiled `tool` glob.
    pub fn tool_matcher(&self) -> &GlobMatcher {
        &self.tool
    }

    /// The name (`rule #N` when the rule has none).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// 1-based position in the file.
    pub fn position(&self) -> usize {
        self.position
    }

    /// What it decides.
    pub fn action(&self) -> GateAction {
        self.config.action
    }

    /// Its `reason`, if any.
    pub fn reason(&self) -> Option<&str> {
        self.config.reason.as_deref()
    }

    /// The rule as written.
    pub fn config(&self) -> &RuleConfig {
        &self.config
    }

    /// Whether the rule's matchers match the call: tool glob, principal glob
    /// (never without a principal) and every input predicate. A history
    /// term is judged apart ([`HistoryTerm::evaluate`]).
    pub fn matches(&self, call: &GateCall<'_>) -> bool {
        self.matched_values(call).is_some()
    }

    /// The value each predicate matched, in pointer order, or `None` when the rule does not match.
    fn matched_values<'v>(&self, call: &GateCall<'v>) -> Option<Vec<(&str, &'v Value)>> {
        if !self.tool.is_match(call.tool_name) {
            return None;
        }
        if let Some(principal) = &self.principal
            && !self.principal_matches(principal, call)
        {
            return None;
        }
        self.predicates.iter().map(|predicate| Some((predicate.pointer(), predicate.matched(call.input)?))).collect()
    }

    /// A `group:NAME` glob matches the call's groups (as `group:NAME`), any
    /// other glob its principal: a principal that is named like a group is no member of it.
    fn principal_matches(&self, glob: &GlobMatcher, call: &GateCall<'_>) -> bool {
        let of_groups = self.config.principal.as_deref().is_some_and(|pattern| pattern.starts_with(GROUP_PREFIX));
        if of_groups {
            call.groups.iter().any(|group| glob.is_match(format!("{GROUP_PREFIX}{group}")))
        } else {
            call.principal.is_some_and(|who| glob.is_match(who))
        }
    }

    /// Why the rule decides the call: ``rule `x` matched tool `t`, /path = "/tmp/x": reason``,
    /// or `None` when it does not match.
    pub fn describe_match(&self, call: &GateCall<'_>) -> Option<String> {
        self.describe_with(call, None)
    }

    /// [`Self::describe_match`] with what the history term found (`history: …`) before the reason.
    pub fn describe_with(&self, call: &GateCall<'_>, history: Option<&str>) -> Option<String> {
        let values = self.matched_values(call)?;
        let mut text = match &self.config.name {
            Some(name) => format!("rule `{name}`"),
            None => self.name.clone(),
        };
        text.push_str(&format!(" matched tool `{}`", call.tool_name));
        if self.principal.is_some()
            && let Some(principal) = call.principal
        {
            text.push_str(&format!(" for principal `{principal}`"));
        }
        for (pointer, value) in values {
            text.push_str(&format!(", {} = {}", render_pointer(pointer), render_value(value)));
        }
        if let Some(history) = history {
            text.push_str(", history: ");
            text.push_str(history);
        }
        if let Some(reason) = &self.config.reason {
            text.push_str(": ");
            text.push_str(reason);
        }
        Some(text)
    }
}

/// A compiled rule set. Cheap to evaluate; share it behind an `Arc`
/// (see [`PolicyHandle`](crate::PolicyHandle) for live reloads).
#[derive(Debug, Clone, Default)]
pub struct Policy {
    rules: Vec<Rule>,
    /// base64url SHA-256 of the canonical JSON of the rules as loaded.
    digest: Option<String>,
}

impl Policy {
    /// A policy without rules: it never decides anything.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Compiles rules in order (position 1 first).
    pub fn from_rules(rules: Vec<RuleConfig>) -> Result<Self, PolicyError> {
        Self::compile(rules.into_iter().map(|rule| (rule, None)))
    }

    /// Parses the `rule` array of a TOML document and compiles it; other
    /// top-level keys are ignored. Errors name the rule and its line.
    pub fn from_toml_str(text: &str) -> Result<Self, PolicyError> {
        #[derive(Deserialize)]
        struct Document {
            #[serde(default)]
            rule: Vec<toml::Spanned<toml::Value>>,
        }
        let document: Document =
            toml::from_str(text).map_err(|e| not_an_array(text).unwrap_or_else(|| PolicyError::toml(e, text)))?;
        let mut rules = Vec::with_capacity(document.rule.len());
        for (index, spanned) in document.rule.into_iter().enumerate() {
            let line = Some(line_col(text, spanned.span().start).0);
            let rule = parse_rule(spanned.into_inner(), index + 1).map_err(|e| e.at_line(line))?;
            rules.push((rule, line));
        }
        Self::compile(rules.into_iter())
    }

    fn compile(rules: impl Iterator<Item = (RuleConfig, Option<usize>)>) -> Result<Self, PolicyError> {
        let mut compiled = Vec::new();
        let mut names: HashMap<String, usize> = HashMap::new();
        for (index, (config, line)) in rules.enumerate() {
            let rule = Rule::compile(config, index + 1).map_err(|e| e.at_line(line))?;
            if let Some(&first) = names.get(rule.name()) {
                return Err(PolicyError::DuplicateName { name: rule.name, first, second: index + 1 });
            }
            names.insert(rule.name.clone(), index + 1);
            compiled.push(rule);
        }
        let configs: Vec<&RuleConfig> = compiled.iter().map(|rule| &rule.config).collect();
        let digest =
            serde_json::to_value(&configs).ok().and_then(|value| toolgate::approval::input_digest(&value).ok());
        Ok(Self { rules: compiled, digest })
    }

    /// The digest of the rules config as loaded: base64url SHA-256 of the
    /// canonical JSON (RFC 8785) of its rules, in order, as parsed (so a
    /// comment or layout change keeps it, a changed rule changes it).
    /// Receipts name it as the config that held the rule that asked. `None`
    /// for [`Policy::empty`] (no rules file).
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// The rules, in file order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rule with this name (`rule #N` for an unnamed one).
    pub fn rule(&self, name: &str) -> Option<&Rule> {
        self.rules.iter().find(|rule| rule.name == name)
    }

    /// True without rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules' configs, e.g. to write them back out.
    pub fn configs(&self) -> Vec<RuleConfig> {
        self.rules.iter().map(|rule| rule.config.clone()).collect()
    }
}

/// The route of an `ask` rule with `approvers`; `quorum` and
/// `self_approval` need `approvers`, and `approvers` needs `ask`.
fn compile_route(rule: &RuleRef, config: &RuleConfig) -> Result<Option<Route>, PolicyError> {
    let invalid = |key: &str, message: &str| PolicyError::InvalidValue {
        rule: rule.clone(),
        key: key.into(),
        message: message.into(),
    };
    if config.approvers.is_empty() {
        return match (config.quorum, config.self_approval, config.escalate.is_empty(), &config.remind) {
            (None, None, true, None) => Ok(None),
            (Some(_), ..) => Err(invalid("quorum", "`quorum` needs `approvers`")),
            (None, Some(_), ..) => Err(invalid("self_approval", "`self_approval` needs `approvers`")),
            (None, None, false, _) => Err(invalid(
                "escalate",
                "`escalate` needs `approvers` (name who decides first, e.g. the team that owns the tool)",
            )),
            (None, None, true, Some(_)) => Err(invalid("remind", "`remind` needs `approvers`")),
        };
    }
    if config.action != GateAction::Ask {
        return Err(invalid("approvers", "only an `ask` rule has approvers"));
    }
    check_principals(&config.approvers).map_err(|message| invalid("approvers", &message))?;
    let quorum = config.quorum.unwrap_or(1);
    if quorum == 0 {
        return Err(invalid("quorum", "the quorum must be at least 1"));
    }
    let named = config.approvers.iter().filter(|approver| !approver.starts_with(GROUP_PREFIX)).count();
    if config.approvers.iter().all(|approver| !approver.starts_with(GROUP_PREFIX)) && quorum as usize > named {
        return Err(invalid("quorum", &format!("a quorum of {quorum} needs at least {quorum} approvers")));
    }
    let schedule = compile_schedule(config).map_err(|(key, message)| invalid(key, &message))?;
    Ok(Some(Route {
        approvers: config.approvers.clone(),
        quorum,
        self_approval: config.self_approval.unwrap_or(false),
        schedule,
    }))
}

/// Every entry a principal or `group:NAME`.
fn check_principals(principals: &[String]) -> Result<(), String> {
    for approver in principals {
        let name = approver.strip_prefix(GROUP_PREFIX).unwrap_or(approver);
        if name.trim().is_empty() || name.chars().any(char::is_control) {
            return Err(format!("`{approver}` is not a principal or `group:NAME`"));
        }
    }
    Ok(())
}

/// The escalation steps and reminders of a rule with approvers: delays of at
/// least a second, in increasing order, each step either `to` or
/// `action = "deny"`, nothing after a deny.
fn compile_schedule(config: &RuleConfig) -> Result<Schedule, (&'static str, String)> {
    let mut escalate: Vec<Escalation> = Vec::new();
    for (index, step) in config.escalate.iter().enumerate() {
        let at = |message: String| ("escalate", format!("step {}: {message}", index + 1));
        let after = delay(&step.after).map_err(at)?;
        if let Some(last) = escalate.last() {
            if last.deny {
                return Err(at("a step after `action = \"deny\"` never runs".to_owned()));
            }
            if after <= last.after {
                return Err(at(format!("`after = \"{}\"` must be later than the step before", step.after)));
            }
        }
        let deny = match step.action.as_deref() {
            None => false,
            Some("deny") => true,
            Some(other) => return Err(at(format!("`action = \"{other}\"`: the only action is \"deny\""))),
        };
        match (deny, step.to.is_empty()) {
            (true, false) => return Err(at("a step has either `to` or `action = \"deny\"`, not both".to_owned())),
            (false, true) => return Err(at("a step needs `to` (who joins) or `action = \"deny\"`".to_owned())),
            _ => {}
        }
        check_principals(&step.to).map_err(at)?;
        escalate.push(Escalation { after, to: step.to.clone(), deny });
    }
    let remind = match &config.remind {
        None => None,
        Some(text) => Some(delay(text).map_err(|message| ("remind", message))?),
    };
    Ok(Schedule { escalate, remind, ..Schedule::default() })
}

/// A delay in the `--approval-ttl` syntax (`2s`, `15m`, `1h`), at least a second.
fn delay(text: &str) -> Result<Millis, String> {
    let duration = humantime::parse_duration(text).map_err(|error| format!("`{text}` is not a duration: {error}"))?;
    if duration < std::time::Duration::from_secs(1) {
        return Err(format!("`{text}` is shorter than one second"));
    }
    Ok(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX))
}

/// The clearer error for `[rule]` (or `rule = 1`) written instead of `[[rule]]`.
fn not_an_array(text: &str) -> Option<PolicyError> {
    #[derive(Deserialize)]
    struct Loose {
        rule: Option<toml::Spanned<toml::Value>>,
    }
    let rule = toml::from_str::<Loose>(text).ok()?.rule?;
    (!rule.get_ref().is_array()).then(|| PolicyError::NotAnArray { line: line_col(text, rule.span().start).0 })
}

/// Checks one `[[rule]]` table's keys and action, then deserializes it.
fn parse_rule(value: toml::Value, position: usize) -> Result<RuleConfig, PolicyError> {
    let toml::Value::Table(table) = value else {
        return Err(PolicyError::NotATable { rule: RuleRef::new(position, None) });
    };
    let rule = RuleRef::new(position, table.get("name").and_then(toml::Value::as_str).map(str::to_owned));
    if let Some(key) = table.keys().find(|key| !RULE_KEYS.contains(&key.as_str())) {
        return Err(PolicyError::UnknownKey { rule, key: key.clone() });
    }
    match table.get("action") {
        None => return Err(PolicyError::MissingAction { rule }),
        Some(toml::Value::String(action)) if GateAction::parse(action).is_some() => {}
        Some(toml::Value::String(action)) => {
            return Err(PolicyError::UnknownAction { rule, value: action.clone() });
        }
        Some(other) => return Err(PolicyError::UnknownAction { rule, value: other.to_string() }),
    }
    if let Some(history) = table.get("history") {
        check_history_keys(&rule, history)?;
    }
    if let Some(input) = table.get("input") {
        let Some(input) = input.as_table() else {
            return Err(PolicyError::InvalidValue {
                rule,
                key: "input".into(),
                message: "expected a table of JSON pointer = predicate".into(),
            });
        };
        for (pointer, predicate) in input {
            let Some(predicate) = predicate.as_table() else {
                return Err(PolicyError::InvalidValue {
                    rule,
                    key: format!("input.{pointer}"),
                    message: format!("expected a predicate table such as {{ equals = ... }}, found {predicate}"),
                });
            };
            if predicate.is_empty() {
                return Err(PolicyError::EmptyPredicate { rule, pointer: pointer.clone() });
            }
            if let Some(operator) = predicate.keys().find(|key| !OPERATORS.contains(&key.as_str())) {
                return Err(PolicyError::UnknownOperator {
                    rule,
                    pointer: pointer.clone(),
                    operator: operator.clone(),
                });
            }
            if let Some((operator, _)) = predicate.iter().find(|(_, value)| has_datetime(value)) {
                return Err(PolicyError::InvalidValue {
                    rule,
                    key: format!("input.{pointer}.{operator}"),
                    message: DATETIME.into(),
                });
            }
        }
    }
    toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| {
        let message = e.to_string().trim().replace('\n', " ");
        let key = message.rsplit_once("in `").map_or("rule", |(_, key)| key.trim_end_matches('`')).to_owned();
        let message = e.message().to_owned();
        PolicyError::InvalidValue { rule, key, message }
    })
}

/// `history` is a table of known keys.
fn check_history_keys(rule: &RuleRef, history: &toml::Value) -> Result<(), PolicyError> {
    let invalid = |key: String, message: String| PolicyError::InvalidValue { rule: rule.clone(), key, message };
    let Some(table) = history.as_table() else {
        return Err(invalid(
            "history".into(),
            "expected a table such as { window = \"24h\", count = { gte = 3 } }".into(),
        ));
    };
    if let Some(key) = table.keys().find(|key| !HISTORY_KEYS.contains(&key.as_str())) {
        let expected = HISTORY_KEYS.join(", ");
        return Err(invalid(format!("history.{key}"), format!("unknown key (expected one of {expected})")));
    }
    Ok(())
}

fn has_datetime(value: &toml::Value) -> bool {
    match value {
        toml::Value::Datetime(_) => true,
        toml::Value::Array(items) => items.iter().any(has_datetime),
        toml::Value::Table(table) => table.values().any(has_datetime),
        _ => false,
    }
}
