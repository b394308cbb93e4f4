//! How `toolgate approvals` prints inbox items (`toolgate_server::approval_item`).
//!
//! - `jsonl`: every item as one line of JSON, as the server sends it.
//! - `text`: a listing is a table (id, state, tool, requester, approvers
//!   with `k of quorum`, created, a short input); one item (`show`, a vote,
//!   a withdrawal) is one field a line; `watch` prints a table row per item.
//!
//! `watch --decide` shows each approval it asks about as a [`card`] (its
//! fields with the input pretty-printed, whatever `--output` says: the card
//! is for the person) and the vote's result as an [`outcome`] line.

use std::io::Write;

use clap::ValueEnum;
use serde_json::Value;

/// The longest input a table row shows, in characters.
const SHORT_INPUT: usize = 40;

/// The columns of a listing.
const COLUMNS: [&str; 7] = ["ID", "STATE", "TOOL", "REQUESTER", "APPROVERS", "CREATED", "INPUT"];

/// The `--output` format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Readable lines.
    Text,
    /// One JSON object a line.
    Jsonl,
}

/// Prints items to stdout in one format.
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    output: Output,
}

impl Printer {
    /// A printer of `output`.
    pub fn new(output: Output) -> Self {
        Self { output }
    }

    /// Whether it prints JSON lines.
    pub fn is_jsonl(&self) -> bool {
        self.output == Output::Jsonl
    }

    /// A listing.
    pub fn list(&self, items: &[Value]) -> anyhow::Result<()> {
        let text = match self.output {
            Output::Jsonl => items.iter().map(|item| format!("{item}\n")).collect(),
            Output::Text if items.is_empty() => "no approvals\n".to_owned(),
            Output::Text => table(items),
        };
        write(&text)
    }

    /// One item: its fields (text) or its JSON.
    pub fn item(&self, item: &Value) -> anyhow::Result<()> {
        match self.output {
            Output::Jsonl => write(&format!("{item}\n")),
            Output::Text => write(&fields(item)),
        }
    }

    /// One item of a stream, on one line.
    pub fn line(&self, item: &Value) -> anyhow::Result<()> {
        match self.output {
            Output::Jsonl => write(&format!("{item}\n")),
            Output::Text => write(&format!("{}\n", row(item).join("  "))),
        }
    }
}

/// Writes `text` to stdout and flushes it (a watch prints as items arrive).
fn write(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// The items as a table with a header, columns padded to their widest cell.
fn table(items: &[Value]) -> String {
    let rows: Vec<[String; 7]> = items.iter().map(row).collect();
    let mut widths = COLUMNS.map(|name| name.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header = COLUMNS.map(str::to_owned);
    let mut text = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row.iter().zip(widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text
}

/// The cells of one item's row.
fn row(item: &Value) -> [String; 7] {
    [
        string(&item["id"]),
        string(&item["state"]),
        string(&item["tool"]),
        string(&item["requester"]),
        approvers(item),
        string(&item["createdAt"]),
        short(&item["input"].to_string()),
    ]
}

/// One field a line, for `show` and the answer to a vote.
fn fields(item: &Value) -> String {
    field_lines(item, item["input"].to_string())
}

/// An approval `watch --decide` asks about: `? approve TOOL` and its fields,
/// indented, the input pretty-printed over as many lines as it takes.
pub fn card(item: &Value) -> String {
    let input = serde_json::to_string_pretty(&item["input"]).unwrap_or_else(|_| item["input"].to_string());
    let fields = field_lines(item, input.replace('\n', &format!("\n{:13}", "")));
    let mut text = format!("? approve {}\n", string(&item["tool"]));
    for line in fields.lines() {
        text.push_str(&format!("  {line}\n"));
    }
    text
}

/// The result of `watch --decide`'s vote (`vote`: `approval`, `denial`...),
/// on one line: `  your approval is recorded: apr_1 is approved`, or `...:
/// apr_1 is pending, waiting for group:finance (1 of 2)`.
pub fn outcome(vote: &str, item: &Value) -> String {
    let mut text = format!("  your {vote} is recorded: {} is {}", string(&item["id"]), string(&item["state"]));
    if item["state"] == "pending" {
        text.push_str(&format!(", waiting for {}", approvers(item)));
    }
    text
}

/// The fields of `item` one a line, its input written as `input`.
fn field_lines(item: &Value, input: String) -> String {
    let mut lines: Vec<(&str, String)> = vec![
        ("id", string(&item["id"])),
        ("state", string(&item["state"])),
        ("tool", string(&item["tool"])),
        ("input", input),
    ];
    if let Some(reason) = item["reason"].as_str() {
        lines.push(("reason", reason.to_owned()));
    }
    lines.extend([
        ("conversation", string(&item["conversationId"])),
        ("requester", string(&item["requester"])),
        ("approvers", approvers(item)),
    ]);
    let votes: Vec<String> = item["votes"].as_array().into_iter().flatten().map(vote).collect();
    if votes.is_empty() {
        lines.push(("votes", "none".to_owned()));
    }
    lines.extend(votes.into_iter().enumerate().map(|(n, vote)| (if n == 0 { "votes" } else { "" }, vote)));
    lines.extend([("created", string(&item["createdAt"])), ("expires", string(&item["expiresAt"]))]);
    lines.iter().map(|(name, value)| format!("{name:<13}{value}\n")).collect()
}

/// `bob approve 2025-...` or `carol deny 2025-...: the reason`.
fn vote(vote: &Value) -> String {
    let mut text = format!("{} {} {}", string(&vote["principal"]), string(&vote["decision"]), string(&vote["at"]));
    if let Some(reason) = vote["reason"].as_str() {
        text.push_str(": ");
        text.push_str(reason);
    }
    text
}

/// `group:finance, dave (1 of 2)`: the approvers and the approvals so far of the quorum.
fn approvers(item: &Value) -> String {
    let names: Vec<String> = item["approvers"].as_array().into_iter().flatten().map(string).collect();
    let approved = item["votes"].as_array().into_iter().flatten().filter(|vote| vote["decision"] == "approve").count();
    let names = if names.is_empty() { "-".to_owned() } else { names.join(", ") };
    format!("{names} ({approved} of {})", item["quorum"].as_u64().unwrap_or(1))
}

/// A string field as is, `-` when absent or null, other JSON as written.
fn string(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    }
}

/// `text` cut to [`SHORT_INPUT`] characters, with `…` when cut.
fn short(text: &str) -> String {
    if text.chars().count() <= SHORT_INPUT {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(SHORT_INPUT - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn item() -> Value {
        json!({"id": "apr_1", "toolCallId": "call-1", "tool": "pay", "input": {"amount": 1200, "to": "a very long payee name indeed"},
            "reason": null, "conversationId": "chat-1", "requester": "alice", "approvers": ["group:finance"], "quorum": 2,
            "votes": [{"principal": "bob", "decision": "approve", "at": "2025-01-01T00:00:01.000Z"},
                      {"principal": "carol", "decision": "deny", "reason": "no", "at": "2025-01-01T00:00:02.000Z"}],
            "state": "denied", "createdAt": "2025-01-01T00:00:00.000Z", "expiresAt": "2025-01-02T00:00:00.000Z"})
    }

    #[test]
    fn a_row_counts_approvals_against_the_quorum_and_cuts_the_input() {
        let row = row(&item());
        assert_eq!(row[4], "group:finance (1 of 2)");
        assert_eq!(row[6].chars().count(), SHORT_INPUT);
        assert!(row[6].ends_with('…'));
        let table = table(&[item()]);
        assert!(table.starts_with("ID     STATE   TOOL  REQUESTER  APPROVERS"), "{table}");
    }

    #[test]
    fn fields_list_every_vote() {
        let text = fields(&item());
        assert!(text.contains("votes        bob approve 2025-01-01T00:00:01.000Z\n"), "{text}");
        assert!(text.contains("             carol deny 2025-01-01T00:00:02.000Z: no\n"), "{text}");
        assert!(!text.contains("reason"), "{text}");
    }

    #[test]
    fn a_card_pretty_prints_the_input_under_its_field() {
        let mut item = item();
        item["conversationId"] = json!("mcp:alice:claude-desktop");
        let text = card(&item);
        assert!(text.starts_with("? approve pay\n  id           apr_1\n"), "{text}");
        assert!(text.contains("  input        {\n                 \"amount\": 1200,\n"), "{text}");
        assert!(text.contains("\n               }\n"), "{text}");
        assert!(text.contains("  conversation mcp:alice:claude-desktop\n"), "{text}");
        assert!(text.contains("  approvers    group:finance (1 of 2)\n"), "{text}");
        assert_eq!(outcome("approval", &item), "  your approval is recorded: apr_1 is denied");
        item["state"] = json!("pending");
        let pending = outcome("denial", &item);
        assert_eq!(pending, "  your denial is recorded: apr_1 is pending, waiting for group:finance (1 of 2)");
    }
}
