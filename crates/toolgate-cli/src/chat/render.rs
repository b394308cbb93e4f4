//! What `toolgate chat` prints: the text view of a conversation (streamed
//! text, tool calls and their outcomes, folded JSON, edit summaries) and the
//! JSON-lines view (`--output jsonl`: one object per chat event).

use std::collections::HashMap;
use std::io::{self, Write};

use crossterm::style::{Color, Stylize};
use serde_json::{Map, Value, json};
use toolgate_client::{ChatEvent, ClientError, Decision, MessageChange, ToolState, UiMessage, UiPart};
use toolgate_ui::{UiChunk, UiRole};

/// Strings longer than this many characters are cut when shown.
pub const FOLD_AT: usize = 200;

/// `value` with every string longer than `limit` characters cut, saying how much was left out.
pub fn fold(value: &Value, limit: usize) -> Value {
    match value {
        Value::String(text) => Value::String(fold_str(text, limit)),
        Value::Array(items) => Value::Array(items.iter().map(|item| fold(item, limit)).collect()),
        Value::Object(fields) => {
            Value::Object(fields.iter().map(|(key, value)| (key.clone(), fold(value, limit))).collect())
        }
        other => other.clone(),
    }
}

fn fold_str(text: &str, limit: usize) -> String {
    let total = text.chars().count();
    if total <= limit {
        return text.to_owned();
    }
    let head: String = text.chars().take(limit).collect();
    format!("{head}… ({} more chars)", total - limit)
}

/// Pretty JSON with long strings folded.
pub fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(&fold(value, FOLD_AT)).unwrap_or_else(|_| value.to_string())
}

/// One-line JSON, at most about `limit` characters.
pub fn compact(value: &Value, limit: usize) -> String {
    fold_str(&value.to_string(), limit)
}

/// What an edit changed, one line per changed field: `path: "a" → "b"`,
/// `+ field: value` (added), `- field: value` (removed).
pub fn diff(before: &Value, after: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    diff_into("", before, after, &mut lines);
    lines
}

fn diff_into(path: &str, before: &Value, after: &Value, lines: &mut Vec<String>) {
    if before == after {
        return;
    }
    let show = |value: &Value| compact(value, 80);
    let name = |path: &str| if path.is_empty() { "(input)".to_owned() } else { path.to_owned() };
    match (before, after) {
        (Value::Object(old), Value::Object(new)) => {
            for (key, old_value) in old {
                let field = field_path(path, key);
                match new.get(key) {
                    Some(new_value) => diff_into(&field, old_value, new_value, lines),
                    None => lines.push(format!("- {field}: {}", show(old_value))),
                }
            }
            for (key, new_value) in new.iter().filter(|(key, _)| !old.contains_key(*key)) {
                lines.push(format!("+ {}: {}", field_path(path, key), show(new_value)));
            }
        }
        (Value::Array(old), Value::Array(new)) if old.len() == new.len() => {
            for (index, (old_value, new_value)) in old.iter().zip(new).enumerate() {
                diff_into(&format!("{path}[{index}]"), old_value, new_value, lines);
            }
        }
        _ => lines.push(format!("{}: {} → {}", name(path), show(before), show(after))),
    }
}

fn field_path(parent: &str, key: &str) -> String {
    let plain = !key.is_empty() && key.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    match (parent.is_empty(), plain) {
        (true, true) => key.to_owned(),
        (false, true) => format!("{parent}.{key}"),
        (_, false) => format!("{parent}[{}]", Value::String(key.to_owned())),
    }
}

/// Indents every line of `text` by `prefix`.
pub fn indent(text: &str, prefix: &str) -> String {
    text.lines().map(|line| format!("{prefix}{line}")).collect::<Vec<_>>().join("\n")
}

/// An approval request waiting for an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// The id to answer with.
    pub approval_id: String,
    /// The call.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
    /// The input the model gave.
    pub input: Value,
    /// Why the server asks, when it says.
    pub reason: Option<String>,
}

/// Who gave an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answerer {
    /// The person at the terminal.
    Person,
    /// The person earlier, with `a` (always allow this tool).
    AlwaysAllowed,
    /// `--approve-all`.
    ApproveAll,
    /// `--deny-all`.
    DenyAll,
    /// A line of `--decisions FILE`.
    DecisionsFile,
}

impl Answerer {
    fn as_str(self) -> &'static str {
        match self {
            Self::Person => "person",
            Self::AlwaysAllowed => "always-allow",
            Self::ApproveAll => "approve-all",
            Self::DenyAll => "deny-all",
            Self::DecisionsFile => "decisions-file",
        }
    }
}

/// Where the session's output goes.
pub enum Renderer {
    /// The text view.
    Text(TextView),
    /// `--output jsonl`.
    Jsonl,
}

impl Renderer {
    /// Shows one chat event; `messages` is the chat as it is now.
    pub fn event(&mut self, event: &ChatEvent, messages: impl FnOnce() -> Vec<UiMessage>) -> io::Result<()> {
        match self {
            Self::Text(view) => view.event(event, messages),
            Self::Jsonl => json_line(&event_json(event)),
        }
    }

    /// Shows an answer given to an approval request (`note` says how, in the text view).
    pub fn decision(&mut self, pending: &Pending, decision: &Decision, by: Answerer, note: &str) -> io::Result<()> {
        match self {
            Self::Text(view) => view.decision(pending, decision, by, note),
            Self::Jsonl => {
                let mut line = json!({
                    "type": "decision",
                    "approvalId": pending.approval_id,
                    "toolCallId": pending.tool_call_id,
                    "toolName": pending.tool_name,
                    "by": by.as_str(),
                });
                let fields = line.as_object_mut().expect("an object");
                match decision {
                    Decision::Approve => {
                        fields.insert("decision".into(), json!("approve"));
                    }
                    Decision::ApproveWithInput(input) => {
                        fields.insert("decision".into(), json!("edit"));
                        fields.insert("input".into(), input.clone());
                    }
                    Decision::Deny { reason } => {
                        fields.insert("decision".into(), json!("deny"));
                        if let Some(reason) = reason {
                            fields.insert("reason".into(), json!(reason));
                        }
                    }
                }
                json_line(&line)
            }
        }
    }

    /// A line for the person (the text view) or for stderr (JSON lines, which keep stdout for events).
    pub fn notice(&mut self, text: &str) -> io::Result<()> {
        match self {
            Self::Text(view) => view.notice(text),
            Self::Jsonl => {
                eprintln!("toolgate: {text}");
                Ok(())
            }
        }
    }

    /// A failure the chat returned without emitting an event for it.
    pub fn error(&mut self, error: &ClientError) -> io::Result<()> {
        match self {
            Self::Text(view) => view.error(&error.to_string()),
            Self::Jsonl => json_line(&error_json(error)),
        }
    }

    /// Ends the current line of streamed text, if one is open (before a prompt).
    pub fn end_line(&mut self) -> io::Result<()> {
        match self {
            Self::Text(view) => view.end_line(),
            Self::Jsonl => Ok(()),
        }
    }
}

fn json_line(value: &Value) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{value}")?;
    out.flush()
}

fn error_json(error: &ClientError) -> Value {
    let mut line = json!({"type": "error", "message": error.to_string()});
    if let Some(code) = error.code() {
        line["code"] = json!(code);
    }
    line
}

/// One chat event as a JSON object.
pub fn event_json(event: &ChatEvent) -> Value {
    match event {
        ChatEvent::MessageAdded { message } => json!({"type": "message-added", "message": message}),
        ChatEvent::MessageUpdated { message_id, change } => {
            let mut line = Map::new();
            line.insert("type".into(), json!("message-updated"));
            line.insert("messageId".into(), json!(message_id));
            match change {
                MessageChange::Streamed(chunk) => {
                    line.insert("change".into(), json!("streamed"));
                    line.insert("chunk".into(), serde_json::to_value(chunk).unwrap_or(Value::Null));
                }
                MessageChange::Answered { tool_call_id } => {
                    line.insert("change".into(), json!("answered"));
                    line.insert("toolCallId".into(), json!(tool_call_id));
                }
                MessageChange::ToolOutput { tool_call_id } => {
                    line.insert("change".into(), json!("tool-output"));
                    line.insert("toolCallId".into(), json!(tool_call_id));
                }
            }
            Value::Object(line)
        }
        ChatEvent::ToolStateChanged { message_id, tool_call_id, tool_name, from, to } => json!({
            "type": "tool-state-changed",
            "messageId": message_id,
            "toolCallId": tool_call_id,
            "toolName": tool_name,
            "from": from.map(ToolState::as_str),
            "to": to.as_str(),
        }),
        ChatEvent::ApprovalRequested { message_id, approval_id, tool_call_id, tool_name, input, reason } => json!({
            "type": "approval-requested",
            "messageId": message_id,
            "approvalId": approval_id,
            "toolCallId": tool_call_id,
            "toolName": tool_name,
            "input": input,
            "reason": reason,
        }),
        ChatEvent::StatusChanged { from, to } => {
            json!({"type": "status-changed", "from": from.as_str(), "to": to.as_str()})
        }
        ChatEvent::Error { error } => error_json(error),
    }
}

/// The text view: streamed text as it comes, tool calls and outcomes as indented, folded JSON.
pub struct TextView {
    color: bool,
    /// Whether user messages are echoed (when nobody typed them at a prompt).
    echo_user: bool,
    /// Whether the cursor is at the start of a line.
    line_start: bool,
    /// Tool names by call id, for outputs that arrive in a later response.
    tools: HashMap<String, String>,
}

impl TextView {
    /// A text view; `color` turns on ANSI colors, `echo_user` prints user messages.
    pub fn new(color: bool, echo_user: bool) -> Self {
        Self { color, echo_user, line_start: true, tools: HashMap::new() }
    }

    fn paint(&self, text: &str, color: Color) -> String {
        if self.color { text.with(color).to_string() } else { text.to_owned() }
    }

    fn dim(&self, text: &str) -> String {
        if self.color { text.dark_grey().to_string() } else { text.to_owned() }
    }

    fn write(&mut self, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        let mut out = io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()?;
        self.line_start = text.ends_with('\n');
        Ok(())
    }

    /// Ends the open line, if any.
    pub fn end_line(&mut self) -> io::Result<()> {
        if self.line_start { Ok(()) } else { self.write("\n") }
    }

    /// Writes whole lines, after ending the open one.
    fn block(&mut self, text: &str) -> io::Result<()> {
        self.end_line()?;
        self.write(&format!("{text}\n"))
    }

    fn notice(&mut self, text: &str) -> io::Result<()> {
        let line = self.dim(text);
        self.block(&line)
    }

    fn error(&mut self, text: &str) -> io::Result<()> {
        self.end_line()?;
        let line = self.paint(&format!("error: {text}"), Color::Red);
        eprintln!("{line}");
        Ok(())
    }

    fn event(&mut self, event: &ChatEvent, messages: impl FnOnce() -> Vec<UiMessage>) -> io::Result<()> {
        match event {
            ChatEvent::MessageAdded { message } if self.echo_user && message.role == UiRole::User => {
                let text: Vec<&str> = message
                    .parts
                    .iter()
                    .filter_map(|part| match part {
                        UiPart::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                let line = format!("{} {}", self.paint("you>", Color::Cyan), text.join(" "));
                self.block(&line)
            }
            ChatEvent::MessageUpdated { change: MessageChange::Streamed(chunk), .. } => self.chunk(chunk, messages),
            ChatEvent::Error { error } => self.error(&error.to_string()),
            _ => Ok(()),
        }
    }

    fn chunk(&mut self, chunk: &UiChunk, messages: impl FnOnce() -> Vec<UiMessage>) -> io::Result<()> {
        match chunk {
            UiChunk::TextDelta { delta, .. } => self.write(delta),
            UiChunk::TextEnd { .. } => self.end_line(),
            UiChunk::ReasoningDelta { delta, .. } => {
                let text = self.dim(delta);
                self.write(&text)
            }
            UiChunk::ReasoningEnd { .. } => self.end_line(),
            UiChunk::ToolInputStart { tool_call_id, tool_name, .. } => {
                self.tools.insert(tool_call_id.clone(), tool_name.clone());
                Ok(())
            }
            UiChunk::ToolInputAvailable { tool_call_id, tool_name, input, .. } => {
                self.tools.insert(tool_call_id.clone(), tool_name.clone());
                let head = format!("{} {}", self.paint("tool call", Color::Blue), self.paint(tool_name, Color::Blue));
                self.block(&format!(
                    "{head} {}\n{}",
                    self.dim(&format!("({tool_call_id})")),
                    indent(&pretty(input), "  ")
                ))
            }
            UiChunk::ToolInputError { tool_call_id, tool_name, input, error_text, .. } => {
                self.tools.insert(tool_call_id.clone(), tool_name.clone());
                let head = self.paint(&format!("✗ {tool_name} was called with an invalid input:"), Color::Red);
                self.block(&format!("{head} {error_text}\n{}", indent(&pretty(input), "  ")))
            }
            UiChunk::ToolOutputAvailable { tool_call_id, output, preliminary, .. } => {
                let name = self.tool_name(tool_call_id, messages);
                let label = if *preliminary == Some(true) { "preliminary result" } else { "result" };
                let head = self.paint(&format!("✓ {name} {label}:"), Color::Green);
                self.block(&format!("{head}\n{}", indent(&pretty(output), "  ")))
            }
            UiChunk::ToolOutputError { tool_call_id, error_text, .. } => {
                let name = self.tool_name(tool_call_id, messages);
                let line = self.paint(&format!("✗ {name} failed: {}", fold_str(error_text, FOLD_AT)), Color::Red);
                self.block(&line)
            }
            UiChunk::ToolOutputDenied { tool_call_id } => {
                let messages = messages();
                let part = messages
                    .iter()
                    .flat_map(|message| message.tool_parts().map(|(_, tool)| tool))
                    .find(|tool| &tool.tool_call_id == tool_call_id);
                let name = part.map(|tool| tool.tool_name.clone()).or_else(|| self.tools.get(tool_call_id).cloned());
                let name = name.unwrap_or_else(|| tool_call_id.clone());
                let why = match part.and_then(|tool| tool.approval.as_ref()) {
                    Some(approval) => match &approval.reason {
                        Some(reason) => format!(": {reason}"),
                        None => " (no reason given)".to_owned(),
                    },
                    None => " by its policy".to_owned(),
                };
                let line = self.paint(&format!("✗ {name} denied{why}"), Color::Yellow);
                self.block(&line)
            }
            UiChunk::Warning { data, .. } => {
                let message =
                    data.get("message").and_then(Value::as_str).map_or_else(|| data.to_string(), str::to_owned);
                let line = self.paint(&format!("warning: {message}"), Color::Yellow);
                self.block(&line)
            }
            _ => Ok(()),
        }
    }

    fn tool_name(&self, tool_call_id: &str, messages: impl FnOnce() -> Vec<UiMessage>) -> String {
        if let Some(name) = self.tools.get(tool_call_id) {
            return name.clone();
        }
        messages()
            .iter()
            .flat_map(|message| message.tool_parts().map(|(_, tool)| tool))
            .find(|tool| tool.tool_call_id == tool_call_id)
            .map_or_else(|| tool_call_id.to_owned(), |tool| tool.tool_name.clone())
    }

    fn decision(&mut self, pending: &Pending, decision: &Decision, by: Answerer, note: &str) -> io::Result<()> {
        let name = &pending.tool_name;
        let how = match by {
            Answerer::Person => String::new(),
            Answerer::AlwaysAllowed => format!(" ({name} is always allowed in this session)"),
            Answerer::ApproveAll => " (--approve-all)".to_owned(),
            Answerer::DenyAll => " (--deny-all)".to_owned(),
            Answerer::DecisionsFile => format!(" ({note})"),
        };
        let text = match decision {
            Decision::Approve => self.paint(&format!("→ approved {name}{how}"), Color::Green),
            Decision::ApproveWithInput(input) => {
                let changes = diff(&pending.input, input);
                let head = self.paint(&format!("→ approved {name} with an edited input{how}:"), Color::Green);
                format!("{head}\n{}", indent(&changes.join("\n"), "  "))
            }
            Decision::Deny { reason: Some(reason) } => {
                self.paint(&format!("→ denied {name}{how}: {reason}"), Color::Yellow)
            }
            Decision::Deny { reason: None } => self.paint(&format!("→ denied {name}{how}"), Color::Yellow),
        };
        self.block(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn long_strings_are_folded_and_say_how_much_is_left() {
        let long = "x".repeat(250);
        let folded = fold(&json!({"a": [long], "b": 1, "c": "short"}), 200);
        assert_eq!(folded, json!({"a": [format!("{}… (50 more chars)", "x".repeat(200))], "b": 1, "c": "short"}));
        let multibyte = "é".repeat(201);
        assert_eq!(fold(&json!(multibyte), 200), json!(format!("{}… (1 more chars)", "é".repeat(200))));
    }

    #[test]
    fn the_diff_names_each_changed_field() {
        let before = json!({"path": "notes.txt", "opts": {"force": false, "tags": [1, 2]}, "gone": 1});
        let after = json!({"path": "old.txt", "opts": {"force": true, "tags": [1, 3]}, "new key": "x"});
        assert_eq!(
            diff(&before, &after),
            [
                r#"path: "notes.txt" → "old.txt""#,
                "opts.force: false → true",
                "opts.tags[1]: 2 → 3",
                "- gone: 1",
                r#"+ ["new key"]: "x""#,
            ]
        );
        assert_eq!(diff(&json!(1), &json!("a")), [r#"(input): 1 → "a""#]);
        assert!(diff(&before, &before).is_empty());
    }

    #[test]
    fn events_become_json_lines() {
        let event = ChatEvent::ToolStateChanged {
            message_id: "m".into(),
            tool_call_id: "c".into(),
            tool_name: "t".into(),
            from: None,
            to: ToolState::InputAvailable,
        };
        assert_eq!(
            event_json(&event),
            json!({"type": "tool-state-changed", "messageId": "m", "toolCallId": "c", "toolName": "t",
                "from": null, "to": "input-available"})
        );
        let error = ChatEvent::Error {
            error: ClientError::Rejected {
                status: Some(409),
                code: "approval_already_decided".into(),
                message: "m".into(),
            },
        };
        assert_eq!(event_json(&error)["code"], "approval_already_decided");
    }
}
