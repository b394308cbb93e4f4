//! Responses API events → model stream parts.
//!
//! Contract:
//! - Message items: `text-start` (id = the `msg_` item id) when the item is
//!   added, `text-delta` per `response.output_text.delta`, `text-end` when it
//!   is done. A refusal is emitted as text.
//! - Reasoning: only summary text is readable; `reasoning_summary_text.delta`
//!   events become reasoning parts (id `<rs_id>:<summary_index>`), ended with
//!   the item. Reasoning without a summary (encrypted) emits nothing.
//! - Function calls: `tool-input-start` (id = `call_id`) when added, deltas,
//!   then `tool-input-end` and the `tool-call` when the item is done.
//! - MCP items are emitted when done (see [`super::items`]); `.added` events
//!   of MCP items and `mcp_list_tools` are ignored.
//! - `response.completed`/`response.incomplete` finish with usage and
//!   `{openai:{responseId}}`; `response.failed` and `error` events are typed
//!   errors. Unknown events are ignored; a known event that does not decode
//!   is [`ModelError::InvalidResponse`].
//! - A body that ends or breaks off before the response finished first emits
//!   any function call in progress whose arguments are complete JSON, then
//!   [`ModelError::StreamInterrupted`].

use std::collections::{BTreeSet, HashMap};

use toolgate_http::error::error_from_event;
use toolgate_http::{Parts, SseEvent, StreamDecoder};
use toolgate_model::ModelError;
use toolgate_protocol::{ModelStreamPart, ModelToolCall};

use super::items::{
    ApprovalAliases, McpCallItem, approval_request_call, finish_reason, function_call, mcp_call, response_metadata,
    usage_of,
};
use super::wire::{OutputContent, OutputItem, ResponseSummary, StreamEvent};
use crate::config::IdGenerator;

/// A function call whose arguments are still streaming.
struct PendingCall {
    /// The `fc_` item id, when the item had one.
    item_id: Option<String>,
    call_id: String,
    name: String,
    /// The arguments so far.
    arguments: String,
}

/// Decoder state for one streamed response.
pub struct ResponsesDecoder {
    ids: IdGenerator,
    aliases: ApprovalAliases,
    open_texts: BTreeSet<String>,
    open_reasoning: BTreeSet<String>,
    /// Function calls in progress, keyed by item id (or call id when the item has none).
    calls: HashMap<String, PendingCall>,
    pending_calls: bool,
    done: bool,
}

impl ResponsesDecoder {
    /// A decoder that knows the approval aliases of the prompt and names
    /// approval-request calls with `ids`.
    pub fn new(ids: IdGenerator, aliases: ApprovalAliases) -> Self {
        Self {
            ids,
            aliases,
            open_texts: BTreeSet::new(),
            open_reasoning: BTreeSet::new(),
            calls: HashMap::new(),
            pending_calls: false,
            done: false,
        }
    }

    /// Handles one parsed event.
    pub fn event(&mut self, event: StreamEvent, out: &mut Parts) {
        match event {
            StreamEvent::OutputItemAdded { item } => self.item_added(item, out),
            StreamEvent::OutputItemDone { item } => self.item_done(item, out),
            StreamEvent::OutputTextDelta { item_id, delta } => {
                if !delta.is_empty() {
                    self.open_text(&item_id, out);
                    out.push(Ok(ModelStreamPart::TextDelta { id: item_id, delta }));
                }
            }
            StreamEvent::FunctionCallArgumentsDelta { item_id, delta } => {
                if let Some(call) = self.calls.get_mut(&item_id)
                    && !delta.is_empty()
                {
                    call.arguments.push_str(&delta);
                    out.push(Ok(ModelStreamPart::ToolInputDelta { id: call.call_id.clone(), delta }));
                }
            }
            StreamEvent::ReasoningSummaryTextDelta { item_id, summary_index, delta } => {
                let id = format!("{item_id}:{summary_index}");
                if !self.open_reasoning.contains(&id) {
                    self.open_reasoning.insert(id.clone());
                    out.push(Ok(ModelStreamPart::ReasoningStart { id: id.clone() }));
                }
                if !delta.is_empty() {
                    out.push(Ok(ModelStreamPart::ReasoningDelta { id, delta }));
                }
            }
            StreamEvent::Completed { response } | StreamEvent::Incomplete { response } => self.finish(&response, out),
            StreamEvent::Failed { response } => {
                let error = response.error.unwrap_or_default();
                let message = error.message.unwrap_or_else(|| "the response failed".to_owned());
                self.fail(error_from_event(error.code.as_deref(), message), out);
            }
            StreamEvent::Error { code, message, error } => {
                let nested = error.unwrap_or_default();
                let code = code.or(nested.code);
                let message = message.or(nested.message).unwrap_or_default();
                self.fail(error_from_event(code.as_deref(), message), out);
            }
            StreamEvent::Created { .. } | StreamEvent::Other => {}
        }
    }

    fn open_text(&mut self, id: &str, out: &mut Parts) {
        if !self.open_texts.contains(id) {
            self.open_texts.insert(id.to_owned());
            out.push(Ok(ModelStreamPart::TextStart { id: id.to_owned() }));
        }
    }

    fn item_added(&mut self, item: OutputItem, out: &mut Parts) {
        match item {
            OutputItem::Message { id, .. } => self.open_text(&id, out),
            OutputItem::FunctionCall { id, call_id, name, arguments } => {
                out.push(Ok(ModelStreamPart::ToolInputStart {
                    id: call_id.clone(),
                    tool_name: name.clone(),
                    provider_executed: None,
                }));
                if !arguments.is_empty() {
                    out.push(Ok(ModelStreamPart::ToolInputDelta { id: call_id.clone(), delta: arguments.clone() }));
                }
                let key = id.clone().unwrap_or_else(|| call_id.clone());
                self.calls.insert(key, PendingCall { item_id: id, call_id, name, arguments });
            }
            OutputItem::Reasoning { .. }
            | OutputItem::McpApprovalRequest { .. }
            | OutputItem::McpCall { .. }
            | OutputItem::Other => {}
        }
    }

    fn item_done(&mut self, item: OutputItem, out: &mut Parts) {
        match item {
            OutputItem::Message { id, content } => {
                if !self.open_texts.contains(&id) {
                    // A message that arrived whole: emit its text at once.
                    let text: String = content
                        .iter()
                        .map(|part| match part {
                            OutputContent::OutputText { text } => text.as_str(),
                            OutputContent::Refusal { refusal } => refusal.as_str(),
                            OutputContent::Other => "",
                        })
                        .collect();
                    self.open_text(&id, out);
                    if !text.is_empty() {
                        out.push(Ok(ModelStreamPart::TextDelta { id: id.clone(), delta: text }));
                    }
                }
                self.open_texts.remove(&id);
                out.push(Ok(ModelStreamPart::TextEnd { id }));
            }
            OutputItem::Reasoning { id, .. } => {
                let prefix = format!("{id}:");
                let ended: Vec<String> =
                    self.open_reasoning.iter().filter(|open| open.starts_with(&prefix)).cloned().collect();
                for id in ended {
                    self.open_reasoning.remove(&id);
                    out.push(Ok(ModelStreamPart::ReasoningEnd { id }));
                }
            }
            OutputItem::FunctionCall { id, call_id, name, arguments } => {
                let key = id.clone().unwrap_or_else(|| call_id.clone());
                if self.calls.remove(&key).is_none() {
                    out.push(Ok(ModelStreamPart::ToolInputStart {
                        id: call_id.clone(),
                        tool_name: name.clone(),
                        provider_executed: None,
                    }));
                }
                out.push(Ok(ModelStreamPart::ToolInputEnd { id: call_id.clone() }));
                out.push(Ok(ModelStreamPart::ToolCall(function_call(id.as_deref(), &call_id, &name, &arguments))));
                self.pending_calls = true;
            }
            OutputItem::McpApprovalRequest { id, name, arguments, .. } => {
                let tool_call_id = (self.ids)();
                let call = approval_request_call(&id, &name, &arguments, tool_call_id.clone(), &mut self.aliases);
                out.push(Ok(ModelStreamPart::ToolCall(call)));
                out.push(Ok(ModelStreamPart::ToolApprovalRequest { approval_id: id, tool_call_id }));
                self.pending_calls = true;
            }
            OutputItem::McpCall { id, server_label, name, arguments, output, error, approval_request_id } => {
                let item = McpCallItem {
                    id: &id,
                    server_label: &server_label,
                    name: &name,
                    arguments: &arguments,
                    output: output.as_ref(),
                    error: error.as_ref(),
                    approval_request_id: approval_request_id.as_deref(),
                };
                let (call, result) = mcp_call(item, &self.aliases);
                out.push(Ok(ModelStreamPart::ToolCall(call)));
                out.push(Ok(ModelStreamPart::ToolResult(result)));
            }
            OutputItem::Other => {}
        }
    }

    fn finish(&mut self, response: &ResponseSummary, out: &mut Parts) {
        for id in std::mem::take(&mut self.open_texts) {
            out.push(Ok(ModelStreamPart::TextEnd { id }));
        }
        for id in std::mem::take(&mut self.open_reasoning) {
            out.push(Ok(ModelStreamPart::ReasoningEnd { id }));
        }
        out.push(Ok(ModelStreamPart::Finish {
            finish_reason: finish_reason(response, self.pending_calls),
            usage: usage_of(response.usage.as_ref()),
            provider_metadata: response_metadata(response),
        }));
        self.done = true;
    }

    /// Emits function calls in progress whose arguments are complete JSON, then the error.
    fn fail(&mut self, error: ModelError, out: &mut Parts) {
        let mut calls: Vec<(String, PendingCall)> = std::mem::take(&mut self.calls).into_iter().collect();
        calls.sort_by(|(a, _), (b, _)| a.cmp(b));
        for (_, call) in calls {
            if serde_json::from_str::<serde_json::Value>(&call.arguments).is_ok() {
                out.push(Ok(ModelStreamPart::ToolInputEnd { id: call.call_id.clone() }));
                let call: ModelToolCall =
                    function_call(call.item_id.as_deref(), &call.call_id, &call.name, &call.arguments);
                out.push(Ok(ModelStreamPart::ToolCall(call)));
            }
        }
        out.push(Err(error));
        self.done = true;
    }
}

impl StreamDecoder for ResponsesDecoder {
    const UNFINISHED: &'static str = "the stream ended before the response completed";

    fn decode(&mut self, event: SseEvent, out: &mut Parts) {
        let data = event.data.trim();
        if self.done || data.is_empty() || data == "[DONE]" {
            return;
        }
        match serde_json::from_str::<StreamEvent>(data) {
            Ok(event) => self.event(event, out),
            Err(error) => self.fail(
                ModelError::InvalidResponse { message: format!("a Responses API event is not valid: {error}") },
                out,
            ),
        }
    }

    fn salvage(&mut self, error: ModelError, out: &mut Parts) {
        self.fail(error, out);
    }

    fn is_done(&self) -> bool {
        self.done
    }
}
