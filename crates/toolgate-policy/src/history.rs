//! History terms: a rule that also looks at the calls that already ran.
//!
//! ```toml
//! [[rule]]
//! name = "daily-transfer-limit"
//! action = "ask"
//! tool = "transfer_money"
//! [rule.history]
//! window = "24h"            # a duration, or "today" (in the server's time zone, or `tz`: UTC, +02:00, Europe/Oslo)
//! scope = "principal"       # principal | conversation | everyone | group:NAME
//! tools = "transfer_money"  # glob over the calls counted (default: the rule's tool)
//! sum = { path = "/amount", plus_this_call = true, gt = 10000 }
//! ```
//!
//! One term per rule: `count = { gte = 3 }` (the earlier calls, this one not
//! included: `gte = 2` matches the third), `sum = { path, plus_this_call,
//! ... }` (the numbers at `path`; this call's only with `plus_this_call`),
//! `first_time = "/to"` (this call's value was never seen in the window), or
//! `distinct = { path, plus_this_call, ... }` (how many different values).
//! Comparisons are `gt`, `gte`, `lt`, `lte` and `eq`; all given must hold.
//! `include = "pending"` counts approved calls that have not run yet too.
//!
//! A rule with a term matches a call when its `tool`, `principal` and
//! `input` matchers match and the term holds; the ranking is the usual one
//! (deny > ask > allow). The calls counted are the ledger's
//! ([`toolgate::ledger::HistoryStore`]): a call counts when it is in the
//! scope, its tool matches `tools`, and it ran within the window (for a
//! duration `d`, later than `now - d`; for `today`, at or after midnight).
//!
//! The term fails closed: when the history cannot be read (no store, or the
//! store fails), a `deny` or `ask` rule whose other matchers match asks, and
//! an `allow` rule does not match.

use globset::GlobMatcher;
use serde_json::Value;
use toolgate::ledger::{HistoryEntry, HistoryQuery, HistoryScope, Millis};
use toolgate::tool::GateCall;

use crate::config::{BoundsConfig, HistoryConfig, MeasureConfig};
use crate::error::{PolicyError, RuleRef};
use crate::predicate::{check_pointer, compile_glob, json_eq, render_value};

const DAY_MS: Millis = 24 * 60 * 60 * 1000;

/// A compiled `[rule.history]` table.
#[derive(Debug, Clone)]
pub struct HistoryTerm {
    window: Window,
    scope: Scope,
    tools: Option<GlobMatcher>,
    measure: Measure,
    include_pending: bool,
}

#[derive(Debug, Clone)]
enum Window {
    /// The last `millis`, as written (`24h`).
    Last { millis: Millis, text: String },
    /// Since midnight in this time zone (the server's, unless `tz` names one).
    Today { zone: jiff::tz::TimeZone },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Scope {
    Principal,
    Conversation,
    Everyone,
    Group(String),
}

#[derive(Debug, Clone)]
enum Measure {
    Count(Bounds),
    Sum { pointer: String, plus_this_call: bool, bounds: Bounds },
    FirstTime { pointer: String },
    Distinct { pointer: String, plus_this_call: bool, bounds: Bounds },
}

#[derive(Debug, Clone, Default)]
struct Bounds(Vec<(&'static str, f64)>);

/// What a term says about one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    /// It holds; why, with the figures.
    Holds(String),
    /// It does not hold; the figures.
    Fails(String),
    /// The history could not be read; why.
    Unknown(String),
}

impl HistoryTerm {
    /// Compiles the table of `rule`.
    pub(crate) fn compile(rule: &RuleRef, config: &HistoryConfig) -> Result<Self, PolicyError> {
        let invalid = |key: &str, message: String| PolicyError::InvalidValue {
            rule: rule.clone(),
            key: format!("history.{key}"),
            message,
        };
        let window = compile_window(&config.window, config.tz.as_deref()).map_err(|(key, m)| invalid(key, m))?;
        let scope = match config.scope.as_deref().unwrap_or("principal") {
            "principal" => Scope::Principal,
            "conversation" => Scope::Conversation,
            "everyone" => Scope::Everyone,
            other => match other.strip_prefix(crate::GROUP_PREFIX) {
                Some(group) if !group.trim().is_empty() => Scope::Group(group.to_owned()),
                _ => {
                    let message = format!("`{other}`: expected principal, conversation, everyone or group:NAME");
                    return Err(invalid("scope", message));
                }
            },
        };
        let tools = config.tools.as_deref().map(|glob| compile_glob(rule, "history.tools", glob)).transpose()?;
        let include_pending = match config.include.as_deref() {
            None => false,
            Some("pending") => true,
            Some(other) => return Err(invalid("include", format!("`{other}`: the only value is \"pending\""))),
        };
        let measure = compile_measure(config).map_err(|(key, message)| invalid(key, message))?;
        Ok(Self { window, scope, tools, measure, include_pending })
    }

    /// The query that reads what this term needs for `call` at `now`
    /// (`groups`: the configured members of a group).
    pub fn query(&self, call: &GateCall<'_>, now: Millis, members: impl Fn(&str) -> Vec<String>) -> HistoryQuery {
        let scope = match &self.scope {
            Scope::Principal => HistoryScope::Principal(call.principal.map(str::to_owned)),
            Scope::Conversation => HistoryScope::Conversation(call.conversation_id.unwrap_or_default().to_owned()),
            Scope::Everyone => HistoryScope::Everyone,
            Scope::Group(group) => HistoryScope::Principals(members(group)),
        };
        HistoryQuery { since: self.since(now), scope, include_pending: self.include_pending }
    }

    /// The window's first millisecond at `now`.
    pub fn since(&self, now: Millis) -> Millis {
        match &self.window {
            Window::Last { millis, .. } => now.saturating_sub(*millis).saturating_add(1),
            // Midnight where the zone says it is (a day may be 23 or 25 hours long); a time jiff cannot place
            // (out of its range) counts a whole day back, the wider window.
            Window::Today { zone } => jiff::Timestamp::from_millisecond(now)
                .and_then(|at| at.to_zoned_datetime(zone.clone()).start_of_day())
                .map_or(now.saturating_sub(DAY_MS).saturating_add(1), |midnight| midnight.timestamp().as_millisecond()),
        }
    }

    /// Whether the term holds for `call` over `entries` (read with
    /// [`Self::query`], possibly wider). `rule_tool` counts the calls when
    /// the term names no `tools`. Every entry read from the window's start
    /// (`query.since`) on counts, even one stamped after the time the call
    /// is judged at (recorded by a replica whose clock runs ahead, or by a
    /// claim that read its clock after this one): it is on record before
    /// this call, and the guard of the read
    /// ([`toolgate::ledger::HistoryGuard`]) counts it too, so a verdict that
    /// left it out would pass a limit the guarded write then lets through.
    pub fn evaluate(
        &self,
        rule_tool: &GlobMatcher,
        call: &GateCall<'_>,
        query: &HistoryQuery,
        entries: &[HistoryEntry],
    ) -> Fact {
        let tools = self.tools.as_ref().unwrap_or(rule_tool);
        let counted: Vec<&HistoryEntry> = entries
            .iter()
            .filter(|entry| entry.at >= query.since)
            .filter(|entry| self.include_pending || !entry.pending)
            .filter(|entry| query.scope.covers(entry) && tools.is_match(&entry.tool_name))
            .collect();
        let (holds, text) = self.measure.judge(&counted, call.input);
        let text = format!("{text} {} ({})", self.window_text(), self.scope_text(call));
        if holds { Fact::Holds(text) } else { Fact::Fails(text) }
    }

    fn window_text(&self) -> String {
        match &self.window {
            Window::Last { text, .. } => format!("in the last {text}"),
            Window::Today { .. } => "today".to_owned(),
        }
    }

    fn scope_text(&self, call: &GateCall<'_>) -> String {
        match &self.scope {
            Scope::Principal => match call.principal {
                Some(principal) => format!("principal `{principal}`"),
                None => "calls without a principal".to_owned(),
            },
            Scope::Conversation => "this conversation".to_owned(),
            Scope::Everyone => "everyone".to_owned(),
            Scope::Group(group) => format!("group `{group}`"),
        }
    }
}

impl Measure {
    /// Whether the measure passes over the counted calls, and the figures.
    fn judge(&self, counted: &[&HistoryEntry], input: &Value) -> (bool, String) {
        match self {
            Self::Count(bounds) => {
                let count = counted.len() as f64;
                let calls = if counted.len() == 1 { "call" } else { "calls" };
                (bounds.hold(count), format!("{} earlier {calls}{}", figure(count), bounds.text()))
            }
            Self::Sum { pointer, plus_this_call, bounds } => {
                let earlier: f64 = counted.iter().filter_map(|entry| number_at(&entry.input, pointer)).sum();
                let this = number_at(input, pointer).filter(|_| *plus_this_call);
                let total = earlier + this.unwrap_or(0.0);
                let text = match this {
                    Some(this) => {
                        format!("{pointer} summed {} + {} = {}", figure(earlier), figure(this), figure(total))
                    }
                    None => format!("{pointer} summed {}", figure(earlier)),
                };
                (bounds.hold(total), format!("{text}{}", bounds.text()))
            }
            Self::FirstTime { pointer } => match input.pointer(pointer) {
                None => (false, format!("this call has no {pointer}")),
                Some(value) => {
                    let seen =
                        counted.iter().any(|entry| entry.input.pointer(pointer).is_some_and(|v| json_eq(v, value)));
                    let text = if seen { "seen before" } else { "never seen before" };
                    (!seen, format!("{pointer} = {} {text}", render_value(value)))
                }
            },
            Self::Distinct { pointer, plus_this_call, bounds } => {
                let mut values: Vec<&Value> = Vec::new();
                let this = input.pointer(pointer).filter(|_| *plus_this_call);
                for value in counted.iter().filter_map(|entry| entry.input.pointer(pointer)).chain(this) {
                    if !values.iter().any(|seen| json_eq(seen, value)) {
                        values.push(value);
                    }
                }
                let count = values.len() as f64;
                (bounds.hold(count), format!("{} distinct {pointer}{}", figure(count), bounds.text()))
            }
        }
    }
}

impl Bounds {
    fn compile(config: &BoundsConfig) -> Result<Self, String> {
        let all = [("gt", config.gt), ("gte", config.gte), ("lt", config.lt), ("lte", config.lte), ("eq", config.eq)];
        let bounds: Vec<(&'static str, f64)> = all.into_iter().filter_map(|(op, v)| v.map(|v| (op, v))).collect();
        if bounds.is_empty() {
            return Err("give at least one comparison (gt, gte, lt, lte, eq)".to_owned());
        }
        if bounds.iter().any(|(_, bound)| bound.is_nan()) {
            return Err("a bound must be a number, not NaN".to_owned());
        }
        Ok(Self(bounds))
    }

    fn hold(&self, figure: f64) -> bool {
        self.0.iter().all(|(op, bound)| match *op {
            "gt" => figure > *bound,
            "gte" => figure >= *bound,
            "lt" => figure < *bound,
            "lte" => figure <= *bound,
            _ => figure == *bound,
        })
    }

    /// ` > 10,000`, ` >= 2 and < 5`.
    fn text(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(op, bound)| {
                let sign = match *op {
                    "gt" => ">",
                    "gte" => ">=",
                    "lt" => "<",
                    "lte" => "<=",
                    _ => "=",
                };
                format!("{sign} {}", figure(*bound))
            })
            .collect();
        format!(" vs {}", parts.join(" and "))
    }
}

fn compile_window(window: &str, tz: Option<&str>) -> Result<Window, (&'static str, String)> {
    if window == "today" {
        return Ok(Window::Today { zone: compile_zone(tz)? });
    }
    if tz.is_some() {
        return Err(("tz", "`tz` goes with `window = \"today\"` only".to_owned()));
    }
    let duration = humantime::parse_duration(window).map_err(|error| {
        ("window", format!("`{window}` is neither a duration (24h, 30m, 7d) nor \"today\": {error}"))
    })?;
    let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
    if millis < 1000 {
        return Err(("window", format!("`{window}` is shorter than one second")));
    }
    Ok(Window::Last { millis, text: window.to_owned() })
}

/// The zone `tz` names (`UTC`, a fixed offset such as `+02:00`, or an IANA
/// name such as `Europe/Oslo`); the server's own without one.
fn compile_zone(tz: Option<&str>) -> Result<jiff::tz::TimeZone, (&'static str, String)> {
    let Some(tz) = tz else { return Ok(jiff::tz::TimeZone::system()) };
    let fixed = utc_offset(tz)
        .and_then(|millis| i32::try_from(millis / 1000).ok())
        .and_then(|seconds| jiff::tz::Offset::from_seconds(seconds).ok());
    match fixed {
        Some(offset) => Ok(jiff::tz::TimeZone::fixed(offset)),
        None => jiff::tz::TimeZone::get(tz).map_err(|_| {
            ("tz", format!("`{tz}`: expected UTC, an offset such as +02:00, or a time zone such as Europe/Oslo"))
        }),
    }
}

/// `UTC`, `Z`, `+HH:MM` or `-HH:MM`, in milliseconds.
fn utc_offset(tz: &str) -> Option<Millis> {
    if tz.eq_ignore_ascii_case("utc") || tz == "Z" {
        return Some(0);
    }
    let (sign, rest) = match tz.as_bytes().first()? {
        b'+' => (1, &tz[1..]),
        b'-' => (-1, &tz[1..]),
        _ => return None,
    };
    let (hours, minutes) = rest.split_once(':')?;
    let (hours, minutes): (i64, i64) = (hours.parse().ok()?, minutes.parse().ok()?);
    if hours.to_string().len() > 2 || !(0..=14).contains(&hours) || !(0..60).contains(&minutes) {
        return None;
    }
    Some(sign * (hours * 60 + minutes) * 60 * 1000)
}

fn compile_measure(config: &HistoryConfig) -> Result<Measure, (&'static str, String)> {
    let given = [config.count.is_some(), config.sum.is_some(), config.first_time.is_some(), config.distinct.is_some()];
    if given.iter().filter(|given| **given).count() != 1 {
        return Err(("history", "give exactly one of count, sum, first_time or distinct".to_owned()));
    }
    let pointer = |key: &'static str, path: &str| -> Result<String, (&'static str, String)> {
        if path.is_empty() {
            return Err((key, "a path points into the input, e.g. \"/amount\"".to_owned()));
        }
        check_pointer(path).map_err(|message| (key, format!("`{path}`: {message}")))?;
        Ok(path.to_owned())
    };
    let measured = |key: &'static str, config: &MeasureConfig| {
        let bounds = Bounds::compile(&config.bounds()).map_err(|message| (key, message))?;
        Ok::<_, (&'static str, String)>((pointer(key, &config.path)?, config.plus_this_call, bounds))
    };
    if let Some(count) = &config.count {
        return Bounds::compile(count).map(Measure::Count).map_err(|message| ("count", message));
    }
    if let Some(sum) = &config.sum {
        let (pointer, plus_this_call, bounds) = measured("sum", sum)?;
        return Ok(Measure::Sum { pointer, plus_this_call, bounds });
    }
    if let Some(path) = &config.first_time {
        return Ok(Measure::FirstTime { pointer: pointer("first_time", path)? });
    }
    let distinct = config.distinct.as_ref().ok_or(("history", String::new()))?;
    let (pointer, plus_this_call, bounds) = measured("distinct", distinct)?;
    Ok(Measure::Distinct { pointer, plus_this_call, bounds })
}

fn number_at(input: &Value, pointer: &str) -> Option<f64> {
    input.pointer(pointer).and_then(Value::as_f64)
}

/// A figure as people read it: `9,500`, `12.5`.
pub(crate) fn figure(value: f64) -> String {
    if value.fract() != 0.0 || value.abs() >= 1e15 {
        return format!("{value:.2}").trim_end_matches('0').trim_end_matches('.').to_owned();
    }
    let digits = format!("{}", value.abs() as u64);
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    if value < 0.0 { format!("-{grouped}") } else { grouped }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(figure(9500.0), "9,500");
        assert_eq!(figure(1_000_000.0), "1,000,000");
        assert_eq!(figure(12.5), "12.5");
        assert_eq!(figure(-1234.0), "-1,234");
        assert_eq!(figure(0.0), "0");
    }

    #[test]
    fn offsets_parse_and_bad_ones_do_not() {
        assert_eq!(utc_offset("UTC"), Some(0));
        assert_eq!(utc_offset("+02:00"), Some(2 * 3_600_000));
        assert_eq!(utc_offset("-05:30"), Some(-(5 * 60 + 30) * 60_000));
        assert_eq!(utc_offset("Europe/Oslo"), None);
        assert!(compile_zone(Some("Europe/Oslo")).is_ok());
        assert!(compile_zone(Some("Mars/Olympus_Mons")).is_err());
        assert_eq!(utc_offset("+25:00"), None);
    }
}
