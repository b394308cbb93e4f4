//! Compiled input predicates and JSON value helpers.
//!
//! A predicate looks one value up by JSON pointer (RFC 6901; `""` is the
//! whole input) and holds when every operator holds. A pointer that does not
//! resolve makes the predicate false. `regex` and `glob` hold only for string
//! values, `lt`/`le`/`gt`/`ge` only for numbers; `equals` and `one_of`
//! compare JSON values, numbers by value (`1 == 1.0`), objects regardless of
//! key order. Every operator runs in time linear in the value's size: the
//! `regex` crate (which globset also compiles to) never backtracks.

use globset::GlobMatcher;
use regex::Regex;
use std::collections::BTreeMap;

use serde_json::{Number, Value};

use crate::config::PredicateConfig;
use crate::error::{PolicyError, RuleRef};

/// The longest rendering of a value in a reason, in characters.
const VALUE_WIDTH: usize = 80;

/// One compiled predicate: a pointer and the operators that must hold.
#[derive(Debug, Clone)]
pub(crate) struct Predicate {
    pointer: String,
    ops: Vec<Op>,
}

#[derive(Debug, Clone)]
enum Op {
    Regex(Regex),
    Glob(GlobMatcher),
    Compare(Cmp, f64),
    OneOf(Vec<Value>),
    Equals(Value),
}

#[derive(Debug, Clone, Copy)]
enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    fn name(self) -> &'static str {
        match self {
            Self::Lt => "lt",
            Self::Le => "le",
            Self::Gt => "gt",
            Self::Ge => "ge",
        }
    }

    fn holds(self, number: f64, bound: f64) -> bool {
        match self {
            Self::Lt => number < bound,
            Self::Le => number <= bound,
            Self::Gt => number > bound,
            Self::Ge => number >= bound,
        }
    }
}

impl Predicate {
    /// Compiles one predicate of `rule`.
    pub(crate) fn compile(rule: &RuleRef, pointer: &str, config: &PredicateConfig) -> Result<Self, PolicyError> {
        check_pointer(pointer).map_err(|message| PolicyError::InvalidPointer {
            rule: rule.clone(),
            pointer: pointer.to_owned(),
            message,
        })?;
        if config.is_empty() {
            return Err(PolicyError::EmptyPredicate { rule: rule.clone(), pointer: pointer.to_owned() });
        }
        let mut ops = Vec::new();
        if let Some(pattern) = &config.regex {
            let regex = Regex::new(pattern).map_err(|e| PolicyError::InvalidRegex {
                rule: rule.clone(),
                pointer: pointer.to_owned(),
                message: e.to_string(),
            })?;
            ops.push(Op::Regex(regex));
        }
        if let Some(pattern) = &config.glob {
            ops.push(Op::Glob(compile_glob(rule, &format!("input.{pointer}.glob"), pattern)?));
        }
        let bounds = [(Cmp::Lt, config.lt), (Cmp::Le, config.le), (Cmp::Gt, config.gt), (Cmp::Ge, config.ge)];
        for (cmp, bound) in bounds {
            if let Some(bound) = bound {
                if bound.is_nan() {
                    return Err(invalid(rule, pointer, cmp.name(), "NaN never compares; use a number"));
                }
                ops.push(Op::Compare(cmp, bound));
            }
        }
        if let Some(values) = &config.one_of {
            for value in values {
                check_json(rule, pointer, "one_of", value)?;
            }
            ops.push(Op::OneOf(values.clone()));
        }
        if let Some(value) = &config.equals {
            check_json(rule, pointer, "equals", value)?;
            ops.push(Op::Equals(value.clone()));
        }
        Ok(Self { pointer: pointer.to_owned(), ops })
    }

    /// The JSON pointer.
    pub(crate) fn pointer(&self) -> &str {
        &self.pointer
    }

    /// The value the predicate matched in `input`, or `None` when it does not hold.
    pub(crate) fn matched<'v>(&self, input: &'v Value) -> Option<&'v Value> {
        let value = if self.pointer.is_empty() { input } else { input.pointer(&self.pointer)? };
        self.ops.iter().all(|op| op.holds(value)).then_some(value)
    }
}

impl Op {
    fn holds(&self, value: &Value) -> bool {
        match self {
            Self::Regex(regex) => value.as_str().is_some_and(|text| regex.is_match(text)),
            Self::Glob(glob) => value.as_str().is_some_and(|text| glob.is_match(text)),
            Self::Compare(cmp, bound) => value.as_f64().is_some_and(|number| cmp.holds(number, *bound)),
            Self::OneOf(values) => values.iter().any(|candidate| json_eq(candidate, value)),
            Self::Equals(expected) => json_eq(expected, value),
        }
    }
}

/// Compiles a glob: `*` and `?` also match `/`, `\` escapes, case-sensitive.
pub(crate) fn compile_glob(rule: &RuleRef, key: &str, pattern: &str) -> Result<GlobMatcher, PolicyError> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|e| PolicyError::InvalidGlob { rule: rule.clone(), key: key.to_owned(), message: e.to_string() })
}

/// A JSON pointer is `""` or starts with `/`; `~` must be followed by `0` or `1`.
pub(crate) fn check_pointer(pointer: &str) -> Result<(), &'static str> {
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err("a pointer is empty (the whole input) or starts with `/`");
    }
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err("`~` must be followed by `0` (for `~`) or `1` (for `/`)");
        }
    }
    Ok(())
}

/// Rejects what TOML has and JSON lacks (date-times deserialize as a private table).
fn check_json(rule: &RuleRef, pointer: &str, operator: &str, value: &Value) -> Result<(), PolicyError> {
    match value {
        Value::Object(map) if map.keys().any(|key| key.starts_with("$__toml_private")) => {
            Err(invalid(rule, pointer, operator, DATETIME))
        }
        Value::Object(map) => map.values().try_for_each(|value| check_json(rule, pointer, operator, value)),
        Value::Array(items) => items.iter().try_for_each(|value| check_json(rule, pointer, operator, value)),
        _ => Ok(()),
    }
}

fn invalid(rule: &RuleRef, pointer: &str, operator: &str, message: &str) -> PolicyError {
    PolicyError::InvalidValue {
        rule: rule.clone(),
        key: format!("input.{pointer}.{operator}"),
        message: message.to_owned(),
    }
}

/// JSON equality with numbers compared by value and objects by key set.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => number_eq(x, y),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(key, x)| y.get(key).is_some_and(|y| json_eq(x, y)))
        }
        _ => a == b,
    }
}

fn number_eq(x: &Number, y: &Number) -> bool {
    if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
        return x == y;
    }
    if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
        return x == y;
    }
    match (x.as_f64(), y.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// A value as compact JSON, cut to about 80 characters.
pub(crate) fn render_value(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= VALUE_WIDTH {
        return text;
    }
    let mut cut: String = text.chars().take(VALUE_WIDTH - 1).collect();
    cut.push('…');
    cut
}

/// How a pointer reads in a reason: `input` for the whole input.
pub(crate) fn render_pointer(pointer: &str) -> &str {
    if pointer.is_empty() { "input" } else { pointer }
}

/// TOML date-times have no JSON counterpart (and deserialize differently
/// through `toml::Value` and `toml::from_str`), so they are refused.
pub(crate) const DATETIME: &str = "TOML date-times are not JSON values; quote it as a string";

/// Whether every predicate of a grant holds for `input` (none: any input).
/// A predicate that does not compile (a corrupt row) holds for nothing: a
/// grant only ever allows, so it fails closed by covering no call.
pub(crate) fn grant_input_holds(id: &str, predicates: &BTreeMap<String, PredicateConfig>, input: &Value) -> bool {
    if predicates.is_empty() {
        return true;
    }
    let rule = RuleRef::new(1, Some(id.to_owned()));
    predicates.iter().all(|(pointer, config)| match Predicate::compile(&rule, pointer, config) {
        Ok(predicate) => predicate.matched(input).is_some(),
        Err(error) => {
            tracing::warn!(grant = id, %error, "a grant's input predicate does not compile; it covers nothing");
            false
        }
    })
}
