//! `--decisions FILE`: answers to approval requests, one JSON object a line,
//! used in order, one per request.
//!
//! ```text
//! {"decision": "approve"}
//! {"decision": "deny", "reason": "keep that file"}
//! {"decision": "edit", "input": {"path": "old.txt"}, "tool": "delete_file"}
//! {"decision": "always"}
//! ```
//!
//! `always` approves and keeps "always allow this tool in this chat" (the `a`
//! key): a sticky decision, so later calls of the tool are not asked about.
//!
//! `tool`, when given, must name the tool whose approval the line answers.
//! Blank lines are skipped. The whole file is read and checked up front.

use std::collections::VecDeque;
use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

use super::render::Pending;

/// What a line decides.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Run the call as asked.
    Approve,
    /// Do not run it.
    Deny(Option<String>),
    /// Run it with this input.
    Edit(Value),
    /// Run it, and always allow the tool in this chat.
    Always,
}

/// One line of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its line number (from 1).
    pub line: usize,
    /// The answer.
    pub answer: Answer,
    /// The tool it is meant for, if it says.
    pub tool: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    decision: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    tool: Option<String>,
}

/// The decisions of a file not used yet.
#[derive(Debug)]
pub struct Decisions {
    name: String,
    entries: VecDeque<Entry>,
    used: usize,
}

impl Decisions {
    /// Reads and checks a decisions file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read --decisions {}", path.display()))?;
        Self::parse(&path.display().to_string(), &text)
    }

    /// Parses the text of a decisions file called `name`.
    pub fn parse(name: &str, text: &str) -> anyhow::Result<Self> {
        let mut entries = VecDeque::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            if raw.trim().is_empty() {
                continue;
            }
            let where_ = || format!("--decisions {name}, line {line}");
            let parsed: Line = serde_json::from_str(raw).with_context(where_)?;
            let answer = match (parsed.decision.as_str(), parsed.reason, parsed.input) {
                ("approve", None, None) => Answer::Approve,
                ("always", None, None) => Answer::Always,
                ("deny", reason, None) => Answer::Deny(reason),
                ("edit", None, Some(input)) => Answer::Edit(input),
                ("edit", _, None) => bail!("{}: an `edit` needs the new `input`", where_()),
                ("approve" | "always" | "edit", Some(_), _) => bail!("{}: only a `deny` takes a `reason`", where_()),
                ("approve" | "always" | "deny", _, Some(_)) => {
                    bail!("{}: only an `edit` takes an `input`", where_())
                }
                (other, ..) => {
                    bail!("{}: `decision` must be `approve`, `always`, `deny` or `edit`, not `{other}`", where_())
                }
            };
            entries.push_back(Entry { line, answer, tool: parsed.tool });
        }
        Ok(Self { name: name.to_owned(), entries, used: 0 })
    }

    /// The file's name, as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The next decision, for this request; an error when there is none left or
    /// it names another tool.
    pub fn next(&mut self, pending: &Pending) -> anyhow::Result<Entry> {
        let Some(entry) = self.entries.pop_front() else {
            bail!(
                "--decisions {} has no decision left for the approval of {} (call {}, input {}): it held {}",
                self.name,
                pending.tool_name,
                pending.tool_call_id,
                pending.input,
                match self.used {
                    1 => "1 decision".to_owned(),
                    n => format!("{n} decisions"),
                }
            );
        };
        self.used += 1;
        if let Some(tool) = &entry.tool
            && tool != &pending.tool_name
        {
            bail!(
                "--decisions {}, line {}: the decision is for `{tool}`, but the approval requested is for `{}` (call {})",
                self.name,
                entry.line,
                pending.tool_name,
                pending.tool_call_id
            );
        }
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn pending(tool: &str) -> Pending {
        Pending {
            approval_id: "apr_1".into(),
            tool_call_id: "call-1".into(),
            tool_name: tool.into(),
            input: json!({"path": "notes.txt"}),
            reason: None,
        }
    }

    #[test]
    fn lines_are_used_in_order() {
        let text = r#"{"decision":"approve"}

{"decision":"deny","reason":"no"}
{"decision":"edit","input":{"path":"old.txt"},"tool":"delete_file"}
"#;
        let mut decisions = Decisions::parse("d.jsonl", text).unwrap();
        let answers: Vec<(usize, Answer)> = (0..3)
            .map(|_| decisions.next(&pending("delete_file")).unwrap())
            .map(|entry| (entry.line, entry.answer))
            .collect();
        assert_eq!(
            answers,
            [(1, Answer::Approve), (3, Answer::Deny(Some("no".into()))), (4, Answer::Edit(json!({"path": "old.txt"})))]
        );
        let error = decisions.next(&pending("delete_file")).unwrap_err().to_string();
        assert!(
            error.contains("no decision left") && error.contains("delete_file") && error.contains("call-1"),
            "{error}"
        );
    }

    #[test]
    fn a_decision_for_another_tool_names_both() {
        let mut decisions = Decisions::parse("d.jsonl", r#"{"decision":"approve","tool":"transfer_money"}"#).unwrap();
        let error = decisions.next(&pending("delete_file")).unwrap_err().to_string();
        assert!(error.contains("`transfer_money`") && error.contains("`delete_file`"), "{error}");
    }

    #[test]
    fn malformed_lines_are_named() {
        for (text, expected) in [
            ("{\"decision\":\"maybe\"}", "not `maybe`"),
            ("{\"decision\":\"edit\"}", "needs the new `input`"),
            ("{\"decision\":\"approve\",\"input\":{}}", "only an `edit` takes an `input`"),
            ("{\"decision\":\"approve\",\"reason\":\"x\"}", "only a `deny` takes a `reason`"),
            ("{\"decision\":\"approve\",\"why\":1}", "unknown field `why`"),
            ("\n\nnot json", "line 3"),
        ] {
            let error = format!("{:#}", Decisions::parse("d.jsonl", text).unwrap_err());
            assert!(error.contains(expected) && error.contains("d.jsonl"), "{text}: {error}");
        }
    }
}
