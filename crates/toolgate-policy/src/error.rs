//! [`PolicyError`]: why rules do not load. Every error about one rule names
//! it ([`RuleRef`]: its name, else its 1-based position, plus the line when
//! the rules came from TOML text) and the offending key or value.

use std::fmt;

/// Which rule an error is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRef {
    /// 1-based position in the rule list.
    pub position: usize,
    /// The rule's `name`, when it has one.
    pub name: Option<String>,
    /// The line of the `[[rule]]` table, when parsed from TOML text.
    pub line: Option<usize>,
}

impl RuleRef {
    /// The rule at this 1-based position, with its name if any.
    pub fn new(position: usize, name: Option<String>) -> Self {
        Self { position, name, line: None }
    }
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "rule `{name}`")?,
            None => write!(f, "rule #{}", self.position)?,
        }
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

/// Why a policy does not load.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The text is not TOML, or the `rule` key is not an array of tables
    /// (toml's message, with line and column).
    #[error("invalid policy file: {source}")]
    Toml {
        /// 1-based line of the error, when known.
        line: Option<usize>,
        /// 1-based column of the error, when known.
        column: Option<usize>,
        /// toml's error.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// `rule` is not an array of tables (e.g. `[rule]` instead of `[[rule]]`).
    #[error("line {line}: `rule` must be an array of tables: write each rule as `[[rule]]`")]
    NotAnArray {
        /// The line of the `rule` key or table.
        line: usize,
    },
    /// A `[[rule]]` entry is not a table.
    #[error("{rule}: a rule must be a table")]
    NotATable {
        /// The rule.
        rule: RuleRef,
    },
    /// The rule has no `action`.
    #[error("{rule}: missing `action` (deny, ask or allow)")]
    MissingAction {
        /// The rule.
        rule: RuleRef,
    },
    /// The `action` is not `deny`, `ask` or `allow`.
    #[error("{rule}: unknown action `{value}` (expected deny, ask or allow)")]
    UnknownAction {
        /// The rule.
        rule: RuleRef,
        /// The value written.
        value: String,
    },
    /// A key the rule format does not know.
    #[error(
        "{rule}: unknown key `{key}` (expected one of name, action, tool, principal, reason, input, approvers, quorum, self_approval, escalate, remind, history, mode)"
    )]
    UnknownKey {
        /// The rule.
        rule: RuleRef,
        /// The key written.
        key: String,
    },
    /// An operator the predicate format does not know.
    #[error(
        "{rule}: unknown operator `{operator}` for input `{pointer}` (expected one of regex, glob, lt, le, gt, ge, one_of, equals)"
    )]
    UnknownOperator {
        /// The rule.
        rule: RuleRef,
        /// The JSON pointer.
        pointer: String,
        /// The operator written.
        operator: String,
    },
    /// A value of the wrong type or shape.
    #[error("{rule}: invalid `{key}`: {message}")]
    InvalidValue {
        /// The rule.
        rule: RuleRef,
        /// The key (e.g. `tool`, `input./amount.gt`).
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A glob that does not compile.
    #[error("{rule}: invalid glob in `{key}`: {message}")]
    InvalidGlob {
        /// The rule.
        rule: RuleRef,
        /// `tool`, `principal` or `input.<pointer>.glob`.
        key: String,
        /// The glob and globset's message.
        message: String,
    },
    /// A regex that does not compile.
    #[error("{rule}: invalid regex for input `{pointer}`: {message}")]
    InvalidRegex {
        /// The rule.
        rule: RuleRef,
        /// The JSON pointer.
        pointer: String,
        /// The regex crate's message (it quotes the pattern).
        message: String,
    },
    /// A JSON pointer that is neither empty nor starts with `/`, or has a bad `~` escape.
    #[error("{rule}: invalid JSON pointer `{pointer}`: {message}")]
    InvalidPointer {
        /// The rule.
        rule: RuleRef,
        /// The pointer written.
        pointer: String,
        /// What is wrong.
        message: &'static str,
    },
    /// A predicate table without operators.
    #[error("{rule}: empty predicate for input `{pointer}` (give at least one operator)")]
    EmptyPredicate {
        /// The rule.
        rule: RuleRef,
        /// The JSON pointer.
        pointer: String,
    },
    /// Two rules with the same name.
    #[error("duplicate rule name `{name}` (rules #{first} and #{second})")]
    DuplicateName {
        /// The name.
        name: String,
        /// 1-based position of the first rule with it.
        first: usize,
        /// 1-based position of the second.
        second: usize,
    },
}

/// The rule an error names, by reference or mutably as `$error` is (one
/// list of the variants that name a rule, exhaustive over the enum).
macro_rules! rule_of {
    ($error:expr) => {
        match $error {
            PolicyError::NotATable { rule }
            | PolicyError::MissingAction { rule }
            | PolicyError::UnknownAction { rule, .. }
            | PolicyError::UnknownKey { rule, .. }
            | PolicyError::UnknownOperator { rule, .. }
            | PolicyError::InvalidValue { rule, .. }
            | PolicyError::InvalidGlob { rule, .. }
            | PolicyError::InvalidRegex { rule, .. }
            | PolicyError::InvalidPointer { rule, .. }
            | PolicyError::EmptyPredicate { rule, .. } => Some(rule),
            PolicyError::Toml { .. } | PolicyError::NotAnArray { .. } | PolicyError::DuplicateName { .. } => None,
        }
    };
}

impl PolicyError {
    /// The rule the error is about, when it is about one.
    pub fn rule(&self) -> Option<&RuleRef> {
        rule_of!(self)
    }

    /// A toml error, with its 1-based line and column computed from `text`.
    pub(crate) fn toml(source: toml::de::Error, text: &str) -> Self {
        let (line, column) = match source.span() {
            Some(span) => {
                let (line, column) = line_col(text, span.start);
                (Some(line), Some(column))
            }
            None => (None, None),
        };
        Self::Toml { line, column, source: Box::new(source) }
    }

    /// Sets the line of the rule the error names (no-op for other errors).
    pub(crate) fn at_line(mut self, line: Option<usize>) -> Self {
        if let Some(rule) = self.rule_mut() {
            rule.line = rule.line.or(line);
        }
        self
    }

    fn rule_mut(&mut self) -> Option<&mut RuleRef> {
        rule_of!(self)
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = floor_char_boundary(text, offset.min(text.len()));
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}
