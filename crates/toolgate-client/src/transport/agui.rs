//! AG-UI 1.0 over HTTP (`@ag-ui/client`'s `HttpAgent` semantics): each
//! request is a `RunAgentInput` for the thread named by the chat id; approval
//! answers go as `resume` entries for the previous run's interrupts (the
//! approval id is the interrupt id; an edit is `editedArgs`), and the last
//! `STATE_SNAPSHOT` of the thread is sent back as `state`.
//!
//! The run's events become UI chunks, so a chat behaves the same over every
//! transport: text and reasoning messages become text and reasoning parts,
//! tool calls become tool parts, `TOOL_CALL_RESULT` their outputs (a
//! `{"denied": true}` result is a denial), an interrupt outcome becomes
//! approval requests, `CUSTOM toolgate.warning` a warning. A `RUN_ERROR`
//! before anything else is a refusal ([`ClientError::Rejected`] with its
//! code); later, an `error` chunk. AG-UI has no stream resumption.

use std::collections::HashMap;
use std::sync::Mutex;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use toolgate_agui::{Event, RunOutcome, WARNING_EVENT};
use toolgate_ui::{ToolState, UiChunk, UiMessage, UiPart, UiRole};

use crate::error::ClientError;
use crate::transport::http::accepted;
use crate::transport::{ChatTransport, ChunkStream, TransportRequest};

/// A transport to an AG-UI endpoint such as `http://127.0.0.1:3000/ag-ui`.
#[derive(Debug)]
pub struct AguiTransport {
    endpoint: String,
    client: reqwest::Client,
    /// The last state snapshot of each thread.
    states: std::sync::Arc<Mutex<HashMap<String, Value>>>,
}

impl AguiTransport {
    /// A transport to this endpoint URL.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self { endpoint: endpoint.into(), client: reqwest::Client::new(), states: Default::default() }
    }

    async fn run(&self, request: TransportRequest) -> Result<ChunkStream, ClientError> {
        let thread_id = request.chat_id.clone();
        let state = self.states.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&thread_id).cloned();
        let resume = resume_entries(&request.messages);
        let mut body = json!({
            "threadId": thread_id,
            "runId": format!("run-{}", uuid::Uuid::now_v7().simple()),
            "state": state.unwrap_or_else(|| json!({})),
            "messages": agui_messages(&request.messages),
            "tools": [],
            "context": [],
            "forwardedProps": {},
        });
        if !resume.is_empty() {
            body["resume"] = Value::Array(resume);
        }
        let response = self
            .client
            .post(&self.endpoint)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(&body)
            .send()
            .await
            .map_err(|error| ClientError::Transport(format!("POST {}: {error}", self.endpoint)))?;
        let mut events = crate::transport::sse::data_stream(accepted(response).await?.bytes_stream());
        let mut decoder = RunDecoder::new(thread_id, std::sync::Arc::clone(&self.states));
        // Read up to the first event that says what the run does: an early RUN_ERROR is a refusal.
        let mut first = Vec::new();
        while first.iter().all(|chunk| matches!(chunk, Ok(UiChunk::Start { .. }))) {
            let Some(data) = events.next().await else { return Err(ClientError::Disconnected) };
            let event = decode_event(&data?)?;
            if let Some(Event::RunError { message, code }) = &event {
                return Err(ClientError::Rejected {
                    status: None,
                    code: code.clone().unwrap_or_else(|| "run_error".into()),
                    message: message.clone(),
                });
            }
            decoder.decode(event, &mut first);
        }
        let rest = events.flat_map(move |data| {
            let mut chunks = Vec::new();
            match data.and_then(|data| decode_event(&data)) {
                Ok(event) => decoder.decode(event, &mut chunks),
                Err(error) => chunks.push(Err(error)),
            }
            futures::stream::iter(chunks)
        });
        Ok(Box::pin(futures::stream::iter(first).chain(rest)))
    }
}

impl ChatTransport for AguiTransport {
    fn send(&self, request: TransportRequest) -> BoxFuture<'_, Result<ChunkStream, ClientError>> {
        Box::pin(self.run(request))
    }

    fn reconnect(&self, _chat_id: &str) -> BoxFuture<'_, Result<Option<ChunkStream>, ClientError>> {
        Box::pin(async { Ok(None) })
    }
}

/// One event, or `None` for an event type this client does not read.
fn decode_event(data: &str) -> Result<Option<Event>, ClientError> {
    let value: Value =
        serde_json::from_str(data).map_err(|error| ClientError::MalformedChunk(format!("AG-UI event: {error}")))?;
    let kind = value.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
    match serde_json::from_value::<Event>(value) {
        Ok(event) => Ok(Some(event)),
        Err(_) if !KNOWN_EVENTS.contains(&kind.as_str()) => Ok(None),
        Err(error) => Err(ClientError::MalformedChunk(format!("`{kind}` event: {error}"))),
    }
}

/// The event types [`Event`] reads.
const KNOWN_EVENTS: &[&str] = &[
    "RUN_STARTED",
    "RUN_FINISHED",
    "RUN_ERROR",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "STATE_SNAPSHOT",
    "MESSAGES_SNAPSHOT",
    "REASONING_START",
    "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END",
    "REASONING_END",
    "CUSTOM",
];

/// Turns one run's events into UI chunks.
struct RunDecoder {
    thread_id: String,
    states: std::sync::Arc<Mutex<HashMap<String, Value>>>,
    /// Tool call arguments so far, by call id.
    arguments: HashMap<String, (String, String)>,
    /// A new step starts at the next text or tool call (at the start, and after tool results).
    step_due: bool,
    finished: bool,
}

impl RunDecoder {
    fn new(thread_id: String, states: std::sync::Arc<Mutex<HashMap<String, Value>>>) -> Self {
        Self { thread_id, states, arguments: HashMap::new(), step_due: true, finished: false }
    }

    fn step(&mut self, out: &mut Vec<Result<UiChunk, ClientError>>) {
        if std::mem::take(&mut self.step_due) {
            out.push(Ok(UiChunk::StartStep));
        }
    }

    fn decode(&mut self, event: Option<Event>, out: &mut Vec<Result<UiChunk, ClientError>>) {
        let Some(event) = event else { return };
        match event {
            Event::RunStarted { .. } => out.push(Ok(UiChunk::Start { message_id: None })),
            Event::RunFinished { outcome, .. } => {
                if let Some(RunOutcome::Interrupt { interrupts }) = outcome {
                    for interrupt in interrupts {
                        if let Some(tool_call_id) = interrupt.tool_call_id {
                            out.push(Ok(UiChunk::ToolApprovalRequest {
                                approval_id: interrupt.id,
                                tool_call_id,
                                signature: None,
                            }));
                        }
                    }
                }
                self.finished = true;
                out.push(Ok(UiChunk::Finish { finish_reason: None }));
            }
            Event::RunError { message, code } => {
                let code = code.unwrap_or_else(|| "run_error".into());
                out.push(Ok(UiChunk::Error { error_text: format!("{code}: {message}") }));
                self.finished = true;
            }
            Event::TextMessageStart { message_id, .. } => {
                self.step(out);
                out.push(Ok(UiChunk::TextStart { id: message_id }));
            }
            Event::TextMessageContent { message_id, delta } => {
                out.push(Ok(UiChunk::TextDelta { id: message_id, delta }));
            }
            Event::TextMessageEnd { message_id } => out.push(Ok(UiChunk::TextEnd { id: message_id })),
            Event::ReasoningMessageStart { message_id, .. } => {
                self.step(out);
                out.push(Ok(UiChunk::ReasoningStart { id: message_id }));
            }
            Event::ReasoningMessageContent { message_id, delta } => {
                out.push(Ok(UiChunk::ReasoningDelta { id: message_id, delta }));
            }
            Event::ReasoningMessageEnd { message_id } => out.push(Ok(UiChunk::ReasoningEnd { id: message_id })),
            Event::ReasoningStart { .. } | Event::ReasoningEnd { .. } | Event::MessagesSnapshot { .. } => {}
            Event::ToolCallStart { tool_call_id, tool_call_name, .. } => {
                self.step(out);
                self.arguments.insert(tool_call_id.clone(), (tool_call_name.clone(), String::new()));
                out.push(Ok(UiChunk::ToolInputStart {
                    tool_call_id,
                    tool_name: tool_call_name,
                    provider_executed: None,
                    dynamic: None,
                }));
            }
            Event::ToolCallArgs { tool_call_id, delta } => {
                if let Some((_, arguments)) = self.arguments.get_mut(&tool_call_id) {
                    arguments.push_str(&delta);
                }
                out.push(Ok(UiChunk::ToolInputDelta { tool_call_id, input_text_delta: delta }));
            }
            Event::ToolCallEnd { tool_call_id } => {
                let (tool_name, arguments) = self.arguments.remove(&tool_call_id).unwrap_or_default();
                let text = if arguments.trim().is_empty() { "{}" } else { arguments.as_str() };
                out.push(Ok(match serde_json::from_str::<Value>(text) {
                    Ok(input) => UiChunk::ToolInputAvailable {
                        tool_call_id,
                        tool_name,
                        input,
                        provider_executed: None,
                        dynamic: None,
                        provider_metadata: None,
                    },
                    Err(error) => UiChunk::ToolInputError {
                        tool_call_id,
                        tool_name,
                        input: Value::String(arguments),
                        error_text: format!("the arguments are not JSON: {error}"),
                        provider_executed: None,
                        dynamic: None,
                    },
                }));
            }
            Event::ToolCallResult { tool_call_id, content, .. } => {
                self.step_due = true;
                let output = serde_json::from_str::<Value>(&content).unwrap_or(Value::String(content));
                let denied = output.get("denied").and_then(Value::as_bool) == Some(true);
                out.push(Ok(if denied {
                    UiChunk::ToolOutputDenied { tool_call_id }
                } else {
                    UiChunk::ToolOutputAvailable {
                        tool_call_id,
                        output,
                        preliminary: None,
                        dynamic: None,
                        provider_executed: None,
                    }
                }));
            }
            Event::StateSnapshot { snapshot } => {
                let mut states = self.states.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                states.insert(self.thread_id.clone(), snapshot);
            }
            Event::Custom { name, value } => {
                if name == WARNING_EVENT {
                    out.push(Ok(UiChunk::Warning { data: value, transient: true }));
                }
            }
        }
    }
}

/// The answers of the last assistant message, as `resume` entries.
fn resume_entries(messages: &[UiMessage]) -> Vec<Value> {
    let Some(last) = messages.last().filter(|message| message.role == UiRole::Assistant) else {
        return Vec::new();
    };
    last.tool_parts()
        .filter(|(_, tool)| tool.state == ToolState::ApprovalResponded)
        .filter_map(|(_, tool)| {
            let approval = tool.approval.as_ref()?;
            let mut payload = json!({"approved": approval.approved?});
            if let Some(reason) = &approval.reason {
                payload["reason"] = json!(reason);
            }
            if let Some(edited) = &approval.edited_input {
                payload["editedArgs"] = edited.clone();
            }
            Some(json!({"interruptId": approval.id, "status": "resolved", "payload": payload}))
        })
        .collect()
}

/// The conversation as AG-UI messages: per UI step, an assistant message with
/// its text and tool calls, then a tool message per settled call.
fn agui_messages(messages: &[UiMessage]) -> Vec<Value> {
    let mut out = Vec::new();
    for message in messages {
        match message.role {
            UiRole::User | UiRole::System => {
                let text: String = message
                    .parts
                    .iter()
                    .filter_map(|part| if let UiPart::Text { text } = part { Some(text.as_str()) } else { None })
                    .collect();
                let role = if message.role == UiRole::User { "user" } else { "system" };
                out.push(json!({"id": message.id, "role": role, "content": text}));
            }
            UiRole::Assistant => {
                for (step, parts) in message.parts.split(|part| matches!(part, UiPart::StepStart)).enumerate() {
                    push_step(&mut out, &format!("{}-{step}", message.id), parts);
                }
            }
        }
    }
    out
}

fn push_step(out: &mut Vec<Value>, id: &str, parts: &[UiPart]) {
    let text: String = parts
        .iter()
        .filter_map(|part| if let UiPart::Text { text } = part { Some(text.as_str()) } else { None })
        .collect();
    let tools: Vec<_> = parts
        .iter()
        .filter_map(|part| match part {
            UiPart::Tool(tool) if tool.provider_executed != Some(true) && tool.input.is_some() => Some(tool),
            _ => None,
        })
        .collect();
    if text.is_empty() && tools.is_empty() {
        return;
    }
    let calls: Vec<Value> = tools
        .iter()
        .map(|tool| {
            let arguments = tool.input.as_ref().map(Value::to_string).unwrap_or_else(|| "{}".into());
            json!({"id": tool.tool_call_id, "type": "function", "function": {"name": tool.tool_name, "arguments": arguments}})
        })
        .collect();
    let mut assistant = json!({"id": id, "role": "assistant"});
    if !text.is_empty() {
        assistant["content"] = json!(text);
    }
    if !calls.is_empty() {
        assistant["toolCalls"] = Value::Array(calls);
    }
    out.push(assistant);
    for tool in tools {
        let content = match tool.state {
            ToolState::OutputAvailable => tool.output.as_ref().map(Value::to_string),
            ToolState::OutputError => tool.error_text.clone(),
            ToolState::OutputDenied => {
                let reason = tool.approval.as_ref().and_then(|approval| approval.reason.clone());
                Some(json!({"denied": true, "reason": reason}).to_string())
            }
            ToolState::InputStreaming
            | ToolState::InputAvailable
            | ToolState::ApprovalRequested
            | ToolState::ApprovalResponded => None,
        };
        if let Some(content) = content {
            out.push(json!({
                "id": format!("{id}-result-{}", tool.tool_call_id),
                "role": "tool",
                "toolCallId": tool.tool_call_id,
                "content": content,
            }));
        }
    }
}
