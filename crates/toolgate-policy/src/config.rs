//! The rule format as written: [`RuleConfig`] and [`PredicateConfig`].
//!
//! These types only describe rules; nothing is checked until
//! [`Policy::from_rules`](crate::Policy::from_rules) compiles them. Both
//! deserialize with `deny_unknown_fields`, so a program that embeds
//! `rule: Vec<RuleConfig>` in its own whole-file struct gets toml's
//! ``unknown field `x` `` error (with line and column) for a misspelt key.
//! [`Policy::from_toml_str`](crate::Policy::from_toml_str) checks keys itself
//! first and names the rule in its errors.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use toolgate::tool::GateAction;

/// The keys a `[[rule]]` table may have.
pub const RULE_KEYS: [&str; 13] = [
    "name",
    "action",
    "tool",
    "principal",
    "reason",
    "input",
    "approvers",
    "quorum",
    "self_approval",
    "escalate",
    "remind",
    "history",
    "mode",
];

/// The keys a rule's `[rule.history]` table may have.
pub const HISTORY_KEYS: [&str; 9] =
    ["window", "tz", "scope", "tools", "count", "sum", "first_time", "distinct", "include"];

/// The operators a predicate table may have.
pub const OPERATORS: [&str; 8] = ["regex", "glob", "lt", "le", "gt", "ge", "one_of", "equals"];

/// One `[[rule]]` table as written. See the crate docs for the format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Unique name; default `rule #N` (1-based position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the rule decides (`allow`, `ask` or `deny`).
    pub action: GateAction,
    /// Glob over tool names; default `*`.
    #[serde(default = "any_tool")]
    pub tool: String,
    /// Glob over the principal; a rule with one never matches a call without a principal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// Text shown to the person (and, for a denial, the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// JSON pointer → predicate; all must hold.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input: BTreeMap<String, PredicateConfig>,
    /// For `ask`: who decides (principals and `group:NAME`); default the
    /// conversation's owner.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// For `ask` with `approvers`: distinct approvals needed (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<u32>,
    /// For `ask` with `approvers`: whether the requester may count (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_approval: Option<bool>,
    /// For `ask` with `approvers`: what happens while nobody decides, each
    /// delay counted from the approval's issue time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalate: Vec<EscalationConfig>,
    /// For `ask` with `approvers`: remind the approvers this often while
    /// pending (`10m`, the `--approval-ttl` syntax).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind: Option<String>,
    /// A term over the calls that already ran: the rule matches only when it
    /// holds too (see [`crate::history`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryConfig>,
    /// `enforce` (the default) or `shadow`: a shadow rule decides nothing;
    /// what it would have decided is recorded as a `shadowed` audit event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// A rule's `[rule.history]` table as written (see [`crate::history`]):
/// a window, a scope, the tools counted, and one term (`count`, `sum`,
/// `first_time` or `distinct`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryConfig {
    /// A duration (`24h`, `30m`, `7d`) or `today`.
    pub window: String,
    /// For `window = "today"`: `UTC` (the default) or a fixed offset such as `+02:00`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// `principal` (the default), `conversation`, `everyone` or `group:NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Glob over the tools of the calls counted; default the rule's `tool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<String>,
    /// The number of earlier calls (this one not included) compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<BoundsConfig>,
    /// The sum of a number in the earlier calls' inputs compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum: Option<MeasureConfig>,
    /// This call's value at this pointer was never seen in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_time: Option<String>,
    /// The number of distinct values at a pointer compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinct: Option<MeasureConfig>,
    /// `pending`: also count approved calls that have not run yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<String>,
}

/// Comparisons a figure must pass, all of them: `{ gte = 3 }`, `{ gt = 1, lt = 5 }`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundsConfig {
    /// Greater than.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gt: Option<f64>,
    /// Greater than or equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gte: Option<f64>,
    /// Less than.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lt: Option<f64>,
    /// Less than or equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lte: Option<f64>,
    /// Equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eq: Option<f64>,
}

/// A figure over a pointer of the calls' inputs (`sum`, `distinct`), with its comparisons.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasureConfig {
    /// The JSON pointer into each call's input (`/amount`).
    pub path: String,
    /// Count this call's value too (default false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plus_this_call: bool,
    /// Greater than.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gt: Option<f64>,
    /// Greater than or equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gte: Option<f64>,
    /// Less than.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lt: Option<f64>,
    /// Less than or equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lte: Option<f64>,
    /// Equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eq: Option<f64>,
}

impl MeasureConfig {
    /// Its comparisons.
    pub fn bounds(&self) -> BoundsConfig {
        BoundsConfig { gt: self.gt, gte: self.gte, lt: self.lt, lte: self.lte, eq: self.eq }
    }
}

/// One escalation step as written: `{ after = "15m", to = ["group:leads"] }`
/// or `{ after = "1h", action = "deny" }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EscalationConfig {
    /// The delay from issue (`15m`, `1h`).
    pub after: String,
    /// Principals and `group:NAME`s who join the approvers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    /// `deny`: resolve the approval as denied instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

fn any_tool() -> String {
    "*".to_owned()
}

impl RuleConfig {
    /// A rule with this action matching every call.
    pub fn new(action: GateAction) -> Self {
        Self {
            name: None,
            action,
            tool: any_tool(),
            principal: None,
            reason: None,
            input: BTreeMap::new(),
            approvers: Vec::new(),
            quorum: None,
            self_approval: None,
            escalate: Vec::new(),
            remind: None,
            history: None,
            mode: None,
        }
    }

    /// Routes the approval to these approvers, `quorum` of whom must approve.
    pub fn approvers(mut self, approvers: impl IntoIterator<Item = impl Into<String>>, quorum: u32) -> Self {
        self.approvers = approvers.into_iter().map(Into::into).collect();
        self.quorum = Some(quorum);
        self
    }

    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the tool glob.
    pub fn tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = tool.into();
        self
    }

    /// Sets the principal glob.
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// Sets the reason.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Adds (or replaces) the predicate on one JSON pointer.
    pub fn input(mut self, pointer: impl Into<String>, predicate: PredicateConfig) -> Self {
        self.input.insert(pointer.into(), predicate);
        self
    }
}

/// A predicate on one input value: every operator set must hold.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredicateConfig {
    /// The value is a string in which this regex finds a match (unanchored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// The value is a string this glob matches (whole string; `*` also crosses `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
    /// The value is a number `<` this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lt: Option<f64>,
    /// The value is a number `<=` this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub le: Option<f64>,
    /// The value is a number `>` this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gt: Option<f64>,
    /// The value is a number `>=` this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ge: Option<f64>,
    /// The value equals (as JSON) one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<Value>>,
    /// The value equals this (as JSON; numbers compare by value, `1 == 1.0`).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub equals: Option<Value>,
}

/// Keeps an explicit JSON `null` as `Some(Null)` (a missing key is `None`).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl PredicateConfig {
    /// A `regex` predicate.
    pub fn regex(pattern: impl Into<String>) -> Self {
        Self { regex: Some(pattern.into()), ..Self::default() }
    }

    /// A `glob` predicate.
    pub fn glob(pattern: impl Into<String>) -> Self {
        Self { glob: Some(pattern.into()), ..Self::default() }
    }

    /// An `equals` predicate.
    pub fn equals(value: impl Into<Value>) -> Self {
        Self { equals: Some(value.into()), ..Self::default() }
    }

    /// A `one_of` predicate.
    pub fn one_of(values: impl IntoIterator<Item = Value>) -> Self {
        Self { one_of: Some(values.into_iter().collect()), ..Self::default() }
    }

    /// A `gt` predicate.
    pub fn gt(bound: f64) -> Self {
        Self { gt: Some(bound), ..Self::default() }
    }

    /// A `ge` predicate.
    pub fn ge(bound: f64) -> Self {
        Self { ge: Some(bound), ..Self::default() }
    }

    /// An `lt` predicate.
    pub fn lt(bound: f64) -> Self {
        Self { lt: Some(bound), ..Self::default() }
    }

    /// An `le` predicate.
    pub fn le(bound: f64) -> Self {
        Self { le: Some(bound), ..Self::default() }
    }

    /// True when no operator is set (an error at compile time).
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}
