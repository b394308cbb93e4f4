//! The prompt and output format: how a conversation with tools becomes chat
//! messages for the model's template, and how the model's output becomes text
//! and tool calls.
//!
//! # Prompt
//!
//! When tools are offered, a tool section is appended to the system message
//! (one is created when the conversation has none):
//!
//! ```text
//! # Tools
//!
//! You can call the following tools. Each line describes one tool: its name, what it does, and the JSON Schema
//! of its arguments.
//! <tools>
//! {"name":"delete_file","description":"Delete a file.","parameters":{"type":"object",...}}
//! </tools>
//!
//! To call a tool, answer with exactly one line and nothing else:
//! <tool_call>{"name": "<tool name>", "arguments": <the arguments as a JSON object>}</tool_call>
//! The tool's result comes back in a message that starts with <tool_response>.
//! If no tool is needed, answer in plain text.
//! ```
//!
//! The last sentence depends on the tool choice (`required`: "You must call one of the tools now.", a named
//! tool: "You must call the tool `NAME` now."). With `tool_choice: none` the section is left out.
//!
//! An earlier tool call in the history is written into its assistant message in the same
//! `<tool_call>...</tool_call>` form. A tool result becomes a user message:
//!
//! ```text
//! <tool_response>{"name":"delete_file","result":{"deleted":"notes.txt"}}</tool_response>
//! ```
//!
//! with `"error"` instead of `"result"` for a failed tool, and `"denied"` (the person's reason, or
//! `Tool call execution denied.`) for a call a person denied.
//!
//! # Output
//!
//! The model answers with plain text, or with one `<tool_call>{"name": ..., "arguments": ...}</tool_call>`
//! (generation stops at `</tool_call>`; text before it is kept). A grammar makes the call's JSON valid
//! against the tool's schema (see [`crate::grammar`]).

use serde_json::{Map, Value, json};
use toolgate_protocol::{
    AssistantContent, AssistantPart, DENIED_TEXT, ModelMessage, ToolChoice, ToolPart, ToolResultOutput, ToolSpec,
    UserContent, UserPart,
};

/// Opens a tool call in the model's output.
pub const TOOL_CALL_OPEN: &str = "<tool_call>";
/// Closes a tool call in the model's output.
pub const TOOL_CALL_CLOSE: &str = "</tool_call>";

/// One message for the chat template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: &'static str,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    fn new(role: &'static str, content: impl Into<String>) -> Self {
        Self { role, content: content.into() }
    }
}

/// A function tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionTool {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    pub schema: Value,
}

/// The function tools a request offers under its tool choice: none for `none`, the named one for a named
/// choice, else all. Provider tools are skipped: a local model cannot run them.
pub fn offered_tools(tools: &[ToolSpec], choice: &ToolChoice) -> Vec<FunctionTool> {
    if *choice == ToolChoice::None {
        return Vec::new();
    }
    tools
        .iter()
        .filter_map(|tool| match tool {
            ToolSpec::Function { name, description, input_schema } => Some(FunctionTool {
                name: name.clone(),
                description: description.clone(),
                schema: input_schema.clone(),
            }),
            ToolSpec::Provider { .. } => None,
        })
        .filter(|tool| match choice {
            ToolChoice::Tool { tool_name } => tool.name == *tool_name,
            _ => true,
        })
        .collect()
}

/// The tool section of the system message (see the module docs); empty without tools.
pub fn tools_prompt(tools: &[FunctionTool], choice: &ToolChoice) -> String {
    if tools.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "# Tools\n\nYou can call the following tools. Each line describes one tool: its name, what it does, \
         and the JSON Schema of its arguments.\n<tools>\n",
    );
    for tool in tools {
        let mut line = Map::new();
        line.insert("name".into(), Value::String(tool.name.clone()));
        if let Some(description) = &tool.description {
            line.insert("description".into(), Value::String(description.clone()));
        }
        line.insert("parameters".into(), strip_schema_noise(&tool.schema));
        out.push_str(&Value::Object(line).to_string());
        out.push('\n');
    }
    out.push_str("</tools>\n\nTo call a tool, answer with exactly one line and nothing else:\n");
    out.push_str(TOOL_CALL_OPEN);
    out.push_str(r#"{"name": "<tool name>", "arguments": <the arguments as a JSON object>}"#);
    out.push_str(TOOL_CALL_CLOSE);
    out.push_str("\nThe tool's result comes back in a message that starts with <tool_response>.\n");
    out.push_str(&match choice {
        ToolChoice::Tool { tool_name } => format!("You must call the tool `{tool_name}` now."),
        ToolChoice::Required => "You must call one of the tools now.".to_owned(),
        ToolChoice::Auto | ToolChoice::None => {
            "When a tool can do what the user asks, call it instead of answering. If no tool is needed, answer in \
             plain text."
                .to_owned()
        }
    });
    out
}

/// The schema without keys that only cost prompt tokens (`$schema`, `title`).
fn strip_schema_noise(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| !matches!(key.as_str(), "$schema" | "title"))
                .map(|(key, value)| (key.clone(), strip_schema_noise(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_schema_noise).collect()),
        other => other.clone(),
    }
}

/// The text the model sees for an earlier tool call.
pub fn tool_call_text(name: &str, input: &Value) -> String {
    format!("{TOOL_CALL_OPEN}{}{TOOL_CALL_CLOSE}", json!({"name": name, "arguments": input}))
}

/// The text the model sees for a tool result.
pub fn tool_response_text(name: &str, output: &ToolResultOutput) -> String {
    let body = match output {
        ToolResultOutput::Text { value, .. } => json!({"name": name, "result": value}),
        ToolResultOutput::Json { value, .. } => json!({"name": name, "result": value}),
        ToolResultOutput::ErrorText { value, .. } => json!({"name": name, "error": value}),
        ToolResultOutput::ErrorJson { value, .. } => json!({"name": name, "error": value}),
        ToolResultOutput::ExecutionDenied { reason, .. } => {
            json!({"name": name, "denied": reason.clone().unwrap_or_else(|| DENIED_TEXT.to_owned())})
        }
        ToolResultOutput::Content { value, .. } => {
            let parts: Vec<Value> = value
                .iter()
                .map(|part| match serde_json::to_value(part) {
                    Ok(Value::Object(map)) if map.get("type") == Some(&json!("text")) => {
                        map.get("text").cloned().unwrap_or(Value::Null)
                    }
                    _ => Value::String("[media]".into()),
                })
                .collect();
            json!({"name": name, "result": parts})
        }
    };
    format!("<tool_response>{body}</tool_response>")
}

/// The conversation as chat messages, with the tool section appended to the system message.
pub fn chat_messages(prompt: &[ModelMessage], tools_section: &str) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::new();
    for message in prompt {
        match message {
            ModelMessage::System(system) => out.push(ChatMessage::new("system", system.content.clone())),
            ModelMessage::User(user) => {
                let text = match &user.content {
                    UserContent::Text(text) => text.clone(),
                    UserContent::Parts(parts) => parts
                        .iter()
                        .filter_map(|part| match part {
                            UserPart::Text(text) => Some(text.text.clone()),
                            UserPart::Image(_) => Some("[image]".to_owned()),
                            UserPart::File(file) => Some(format!("[file {}]", file.filename.as_deref().unwrap_or(""))),
                            UserPart::ToolApproval(_) => None,
                        })
                        .collect::<Vec<_>>()
                        .join("\n"),
                };
                out.push(ChatMessage::new("user", text));
            }
            ModelMessage::Assistant(assistant) => {
                let text = match &assistant.content {
                    AssistantContent::Text(text) => text.clone(),
                    AssistantContent::Parts(parts) => parts
                        .iter()
                        .filter_map(|part| match part {
                            AssistantPart::Text(text) => Some(text.text.clone()),
                            AssistantPart::ToolCall(call) => Some(tool_call_text(&call.tool_name, &call.input)),
                            AssistantPart::ToolResult(result) => {
                                Some(tool_response_text(&result.tool_name, &result.output))
                            }
                            _ => None,
                        })
                        .filter(|text| !text.is_empty())
                        .collect::<Vec<_>>()
                        .join("\n"),
                };
                out.push(ChatMessage::new("assistant", text));
            }
            ModelMessage::Tool(tool) => {
                let text = tool
                    .content
                    .iter()
                    .filter_map(|part| match part {
                        ToolPart::ToolResult(result) => Some(tool_response_text(&result.tool_name, &result.output)),
                        ToolPart::ToolApprovalResponse(_) => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                if !text.is_empty() {
                    out.push(ChatMessage::new("user", text));
                }
            }
        }
    }
    if !tools_section.is_empty() {
        match out.iter_mut().find(|message| message.role == "system") {
            Some(system) if !system.content.is_empty() => {
                system.content.push_str("\n\n");
                system.content.push_str(tools_section);
            }
            Some(system) => system.content.push_str(tools_section),
            None => out.insert(0, ChatMessage::new("system", tools_section)),
        }
    }
    out
}

/// The ChatML rendering used when the model has no usable chat template.
pub fn chatml(messages: &[ChatMessage]) -> String {
    let mut out = String::new();
    for message in messages {
        out.push_str(&format!("<|im_start|>{}\n{}<|im_end|>\n", message.role, message.content));
    }
    out.push_str("<|im_start|>assistant\n");
    out
}

/// Why the model's output is not a tool call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// The output ended inside `<tool_call>`.
    #[error("the tool call was cut off before `{TOOL_CALL_CLOSE}`: {0}")]
    Unterminated(String),
    /// The call is not JSON.
    #[error("the tool call is not JSON ({error}): {text}")]
    NotJson {
        /// The parser's message.
        error: String,
        /// The call's text.
        text: String,
    },
    /// The call is JSON, but not `{"name": string, "arguments": object}`.
    #[error("the tool call must be {{\"name\": string, \"arguments\": object}}, got {0}")]
    Shape(String),
    /// The call names a tool that was not offered.
    #[error("the model called `{0}`, which is not an offered tool")]
    UnknownTool(String),
}

/// A parsed tool call: the tool's name and its arguments as JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

/// Parses the JSON between `<tool_call>` and `</tool_call>`.
pub fn parse_tool_call(text: &str, tools: &[FunctionTool]) -> Result<ParsedCall, OutputError> {
    let value: Value = serde_json::from_str(text.trim())
        .map_err(|error| OutputError::NotJson { error: error.to_string(), text: text.to_owned() })?;
    let Value::Object(mut map) = value else { return Err(OutputError::Shape(text.to_owned())) };
    let (Some(Value::String(name)), Some(arguments @ Value::Object(_))) = (map.remove("name"), map.remove("arguments"))
    else {
        return Err(OutputError::Shape(text.to_owned()));
    };
    if !tools.iter().any(|tool| tool.name == name) {
        return Err(OutputError::UnknownTool(name));
    }
    Ok(ParsedCall { name, arguments: arguments.to_string() })
}

/// What the output splitter found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Text to show.
    Text(String),
    /// The JSON text of a complete tool call (between the tags).
    Call(String),
    /// A stop sequence was reached.
    Stop,
}

/// Splits streamed output into text and one tool call, holding back text that may be the start of
/// `<tool_call>` or of a stop sequence.
#[derive(Debug)]
pub struct OutputSplitter {
    tools: bool,
    stop_sequences: Vec<String>,
    buffer: String,
    in_call: bool,
    done: bool,
}

impl OutputSplitter {
    /// A splitter; `tools` says whether tool calls are recognised.
    pub fn new(tools: bool, stop_sequences: Vec<String>) -> Self {
        let stop_sequences = stop_sequences.into_iter().filter(|stop| !stop.is_empty()).collect();
        Self { tools, stop_sequences, buffer: String::new(), in_call: false, done: false }
    }

    /// True after a complete tool call or a stop sequence: generation should end.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Feeds more output.
    pub fn feed(&mut self, piece: &str) -> Vec<Event> {
        let mut events = Vec::new();
        if self.done {
            return events;
        }
        self.buffer.push_str(piece);
        if !self.in_call {
            let open = self.tools.then(|| self.buffer.find(TOOL_CALL_OPEN)).flatten();
            let stop = self
                .stop_sequences
                .iter()
                .filter_map(|stop| self.buffer.find(stop.as_str()))
                .filter(|at| open.is_none_or(|open| *at < open))
                .min();
            if let Some(at) = stop {
                push_text(&mut events, &self.buffer[..at]);
                self.buffer.clear();
                self.done = true;
                events.push(Event::Stop);
                return events;
            }
            match open {
                Some(at) => {
                    push_text(&mut events, &self.buffer[..at]);
                    self.buffer.drain(..at + TOOL_CALL_OPEN.len());
                    self.in_call = true;
                }
                None => {
                    let keep = self.held_back();
                    let emit = self.buffer.len() - keep;
                    push_text(&mut events, &self.buffer[..emit]);
                    self.buffer.drain(..emit);
                }
            }
        }
        if self.in_call
            && let Some(at) = self.buffer.find(TOOL_CALL_CLOSE)
        {
            events.push(Event::Call(self.buffer[..at].to_owned()));
            self.buffer.clear();
            self.in_call = false;
            self.done = true;
        }
        events
    }

    /// Ends the output: flushes held text, or fails inside an unfinished call.
    pub fn finish(&mut self) -> Result<Vec<Event>, OutputError> {
        if self.in_call {
            return Err(OutputError::Unterminated(std::mem::take(&mut self.buffer)));
        }
        let mut events = Vec::new();
        push_text(&mut events, &std::mem::take(&mut self.buffer));
        Ok(events)
    }

    /// How many bytes at the end of the buffer may start a tag or stop sequence.
    fn held_back(&self) -> usize {
        let patterns =
            self.tools.then_some(TOOL_CALL_OPEN).into_iter().chain(self.stop_sequences.iter().map(String::as_str));
        patterns
            .map(|pattern| {
                (1..pattern.len().min(self.buffer.len() + 1))
                    .rev()
                    .find(|len| pattern.is_char_boundary(*len) && self.buffer.ends_with(&pattern[..*len]))
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0)
    }
}

fn push_text(events: &mut Vec<Event>, text: &str) {
    if !text.is_empty() {
        events.push(Event::Text(text.to_owned()));
    }
}

/// Takes the longest valid UTF-8 prefix out of `bytes`, keeping an incomplete trailing character for later.
/// Invalid bytes become U+FFFD.
pub fn take_utf8(bytes: &mut Vec<u8>) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            let text = text.to_owned();
            bytes.clear();
            text
        }
        Err(error) if error.error_len().is_none() => {
            let valid = error.valid_up_to();
            let text = String::from_utf8_lossy(&bytes[..valid]).into_owned();
            bytes.drain(..valid);
            text
        }
        Err(_) => {
            let text = String::from_utf8_lossy(bytes).into_owned();
            bytes.clear();
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use toolgate_protocol::{ToolCallPart, ToolResultPart};

    use super::*;

    fn delete_file() -> FunctionTool {
        FunctionTool {
            name: "delete_file".into(),
            description: Some("Delete a file.".into()),
            schema: json!({"$schema": "x", "title": "DeleteFileInput", "type": "object",
                "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }
    }

    fn split(splitter: &mut OutputSplitter, pieces: &[&str]) -> Vec<Event> {
        let mut events: Vec<Event> = pieces.iter().flat_map(|piece| splitter.feed(piece)).collect();
        if !splitter.is_done() {
            events.extend(splitter.finish().unwrap());
        }
        // Merge adjacent text for easy comparison.
        let mut merged: Vec<Event> = Vec::new();
        for event in events {
            match (merged.last_mut(), event) {
                (Some(Event::Text(last)), Event::Text(text)) => last.push_str(&text),
                (_, event) => merged.push(event),
            }
        }
        merged
    }

    #[test]
    fn text_and_a_call_split_across_pieces() {
        let mut splitter = OutputSplitter::new(true, vec![]);
        let events = split(
            &mut splitter,
            &[
                "Sure. <to",
                "ol_c",
                "all>{\"name\": \"delete_file\", ",
                "\"arguments\": {\"path\": \"a\"}}</tool",
                "_call>junk",
            ],
        );
        assert_eq!(
            events,
            vec![
                Event::Text("Sure. ".into()),
                Event::Call(r#"{"name": "delete_file", "arguments": {"path": "a"}}"#.into())
            ]
        );
    }

    #[test]
    fn a_lookalike_tag_is_text_and_tags_are_text_without_tools() {
        let mut splitter = OutputSplitter::new(true, vec![]);
        assert_eq!(split(&mut splitter, &["a <to", "ast> b <"]), vec![Event::Text("a <toast> b <".into())]);
        let mut splitter = OutputSplitter::new(false, vec![]);
        assert_eq!(split(&mut splitter, &["<tool_call>{}"]), vec![Event::Text("<tool_call>{}".into())]);
    }

    #[test]
    fn stop_sequences_end_the_text() {
        let mut splitter = OutputSplitter::new(true, vec!["END".into()]);
        assert_eq!(split(&mut splitter, &["one E", "N", "D two"]), vec![Event::Text("one ".into()), Event::Stop]);
    }

    #[test]
    fn an_unfinished_call_is_a_typed_error() {
        let mut splitter = OutputSplitter::new(true, vec![]);
        splitter.feed("<tool_call>{\"name\": \"delete_file\"");
        assert_eq!(splitter.finish(), Err(OutputError::Unterminated("{\"name\": \"delete_file\"".into())));
    }

    #[test]
    fn calls_parse_or_fail_with_typed_errors() {
        let tools = [delete_file()];
        assert_eq!(
            parse_tool_call(r#" {"name": "delete_file", "arguments": {"path": "a.txt"}} "#, &tools),
            Ok(ParsedCall { name: "delete_file".into(), arguments: r#"{"path":"a.txt"}"#.into() })
        );
        assert!(matches!(parse_tool_call("{\"name\": ", &tools), Err(OutputError::NotJson { .. })));
        assert!(matches!(parse_tool_call("[1]", &tools), Err(OutputError::Shape(_))));
        assert!(matches!(
            parse_tool_call(r#"{"name": "delete_file", "arguments": 3}"#, &tools),
            Err(OutputError::Shape(_))
        ));
        assert_eq!(
            parse_tool_call(r#"{"name": "rm", "arguments": {}}"#, &tools),
            Err(OutputError::UnknownTool("rm".into()))
        );
    }

    #[test]
    fn utf8_split_across_tokens_is_reassembled() {
        let mut bytes = "é".as_bytes()[..1].to_vec();
        assert_eq!(take_utf8(&mut bytes), "");
        bytes.extend_from_slice(&"é".as_bytes()[1..]);
        assert_eq!(take_utf8(&mut bytes), "é");
        assert!(bytes.is_empty());
    }

    #[test]
    fn offered_tools_follow_the_tool_choice() {
        let specs = vec![
            ToolSpec::Function { name: "a".into(), description: None, input_schema: json!({"type": "object"}) },
            ToolSpec::Function { name: "b".into(), description: None, input_schema: json!({"type": "object"}) },
            ToolSpec::Provider { name: "mcp".into(), id: "openai.mcp".into(), args: json!({}) },
        ];
        let names = |choice: ToolChoice| -> Vec<String> {
            offered_tools(&specs, &choice).into_iter().map(|tool| tool.name).collect()
        };
        assert_eq!(names(ToolChoice::Auto), ["a", "b"]);
        assert_eq!(names(ToolChoice::Required), ["a", "b"]);
        assert_eq!(names(ToolChoice::None), Vec::<String>::new());
        assert_eq!(names(ToolChoice::Tool { tool_name: "b".into() }), ["b"]);
    }

    #[test]
    fn the_prompt_carries_tools_calls_results_and_denials() {
        let tools = [delete_file()];
        let section = tools_prompt(&tools, &ToolChoice::Tool { tool_name: "delete_file".into() });
        assert!(section.contains(r#"{"name":"delete_file","description":"Delete a file.","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}"#), "{section}");
        assert!(section.ends_with("You must call the tool `delete_file` now."));
        let call = |id: &str| ToolCallPart {
            tool_call_id: id.into(),
            tool_name: "delete_file".into(),
            input: json!({"path": "a.txt"}),
            provider_executed: None,
            provider_options: None,
        };
        let result = |id: &str, output| ToolResultPart {
            tool_call_id: id.into(),
            tool_name: "delete_file".into(),
            output,
            provider_options: None,
        };
        let prompt = vec![
            ModelMessage::user("delete a.txt twice"),
            ModelMessage::Assistant(toolgate_protocol::AssistantMessage {
                content: AssistantContent::Parts(vec![
                    AssistantPart::ToolCall(call("1")),
                    AssistantPart::ToolCall(call("2")),
                ]),
                provider_options: None,
            }),
            ModelMessage::Tool(toolgate_protocol::ToolMessage {
                content: vec![
                    ToolPart::ToolResult(result("1", ToolResultOutput::json(json!({"deleted": "a.txt"})))),
                    ToolPart::ToolResult(result("2", ToolResultOutput::denied(None))),
                ],
                provider_options: None,
            }),
        ];
        let messages = chat_messages(&prompt, &section);
        assert_eq!(messages.iter().map(|m| m.role).collect::<Vec<_>>(), ["system", "user", "assistant", "user"]);
        assert_eq!(
            messages[2].content,
            "<tool_call>{\"name\":\"delete_file\",\"arguments\":{\"path\":\"a.txt\"}}</tool_call>\n\
             <tool_call>{\"name\":\"delete_file\",\"arguments\":{\"path\":\"a.txt\"}}</tool_call>"
        );
        assert_eq!(
            messages[3].content,
            "<tool_response>{\"name\":\"delete_file\",\"result\":{\"deleted\":\"a.txt\"}}</tool_response>\n\
             <tool_response>{\"name\":\"delete_file\",\"denied\":\"Tool call execution denied.\"}</tool_response>"
        );
        let reason = tool_response_text("delete_file", &ToolResultOutput::denied(Some("not that one".into())));
        assert!(reason.contains(r#""denied":"not that one""#));
        assert!(chatml(&messages).ends_with("<|im_end|>\n<|im_start|>assistant\n"));
    }
}
