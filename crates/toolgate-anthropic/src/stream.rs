//! Messages API events → model stream parts.
//!
//! Contract:
//! - `text` blocks → `text-start`/`text-delta`/`text-end` (id = block index);
//!   `thinking` blocks → reasoning parts (signatures are not carried).
//! - `tool_use` blocks → `tool-input-start` (id = `toolu_` id), a
//!   `tool-input-delta` per non-empty `input_json_delta`, then at
//!   `content_block_stop` `tool-input-end` and the `tool-call` with the
//!   concatenated JSON text; no fragments (or only empty ones) means the
//!   input the block started with, or `{}`.
//! - `message_delta` carries the stop reason and output usage, `message_stop`
//!   finishes. `ping` and unknown events or blocks (server tools, citations,
//!   signatures) are ignored; an `error` event is a typed error; a known
//!   event that does not decode is [`ModelError::InvalidResponse`].
//! - A body that ends or breaks off before `message_stop` (without a stop
//!   reason) first emits a tool call in progress whose input is complete
//!   JSON, then [`ModelError::StreamInterrupted`].
//! - Usage: input = uncached + cache reads + cache writes, cached = cache
//!   reads, total = input + output.

use std::collections::BTreeMap;

use serde_json::Value;
use toolgate_http::error::error_from_event;
use toolgate_http::{Parts, SseEvent, StreamDecoder};
use toolgate_model::ModelError;
use toolgate_protocol::{FinishReason, ModelStreamPart, ModelToolCall, Usage};

use crate::wire::{AnthropicUsage, ContentBlock, Delta, StreamEvent};

enum Open {
    Text(String),
    Reasoning(String),
    Tool { id: String, name: String, json: String, initial: Value },
}

/// Decoder state for one streamed message.
#[derive(Default)]
pub struct AnthropicDecoder {
    blocks: BTreeMap<u32, Open>,
    input: AnthropicUsage,
    output_tokens: Option<u64>,
    stop_reason: Option<String>,
    done: bool,
}

impl AnthropicDecoder {
    /// A fresh decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Handles one parsed event.
    pub fn event(&mut self, event: StreamEvent, out: &mut Parts) {
        match event {
            StreamEvent::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.input = usage;
                    self.output_tokens = usage.output_tokens;
                }
            }
            StreamEvent::ContentBlockStart { index, content_block } => self.start(index, content_block, out),
            StreamEvent::ContentBlockDelta { index, delta } => self.delta(index, delta, out),
            StreamEvent::ContentBlockStop { index } => self.stop(index, out),
            StreamEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(usage) = usage {
                    self.output_tokens = usage.output_tokens.or(self.output_tokens);
                    if usage.input_tokens.is_some() {
                        self.input = AnthropicUsage { output_tokens: None, ..usage };
                    }
                }
            }
            StreamEvent::MessageStop => self.finish(out),
            StreamEvent::Error { error } => {
                let message = error.message.unwrap_or_default();
                self.fail(error_from_event(error.kind.as_deref(), message), out);
            }
            StreamEvent::Ping | StreamEvent::Other => {}
        }
    }

    fn start(&mut self, index: u32, block: ContentBlock, out: &mut Parts) {
        let id = index.to_string();
        let open = match block {
            ContentBlock::Text { text } => {
                out.push(Ok(ModelStreamPart::TextStart { id: id.clone() }));
                if !text.is_empty() {
                    out.push(Ok(ModelStreamPart::TextDelta { id: id.clone(), delta: text }));
                }
                Open::Text(id)
            }
            ContentBlock::Thinking { thinking } => {
                out.push(Ok(ModelStreamPart::ReasoningStart { id: id.clone() }));
                if !thinking.is_empty() {
                    out.push(Ok(ModelStreamPart::ReasoningDelta { id: id.clone(), delta: thinking }));
                }
                Open::Reasoning(id)
            }
            ContentBlock::ToolUse { id, name, input } => {
                out.push(Ok(ModelStreamPart::ToolInputStart {
                    id: id.clone(),
                    tool_name: name.clone(),
                    provider_executed: None,
                }));
                Open::Tool { id, name, json: String::new(), initial: input }
            }
            ContentBlock::Other => return,
        };
        self.blocks.insert(index, open);
    }

    fn delta(&mut self, index: u32, delta: Delta, out: &mut Parts) {
        let part = match (self.blocks.get_mut(&index), delta) {
            (Some(Open::Text(id)), Delta::TextDelta { text }) if !text.is_empty() => {
                ModelStreamPart::TextDelta { id: id.clone(), delta: text }
            }
            (Some(Open::Reasoning(id)), Delta::ThinkingDelta { thinking }) if !thinking.is_empty() => {
                ModelStreamPart::ReasoningDelta { id: id.clone(), delta: thinking }
            }
            (Some(Open::Tool { id, json, .. }), Delta::InputJsonDelta { partial_json }) if !partial_json.is_empty() => {
                json.push_str(&partial_json);
                ModelStreamPart::ToolInputDelta { id: id.clone(), delta: partial_json }
            }
            _ => return,
        };
        out.push(Ok(part));
    }

    fn stop(&mut self, index: u32, out: &mut Parts) {
        match self.blocks.remove(&index) {
            Some(Open::Text(id)) => out.push(Ok(ModelStreamPart::TextEnd { id })),
            Some(Open::Reasoning(id)) => out.push(Ok(ModelStreamPart::ReasoningEnd { id })),
            Some(Open::Tool { id, name, json, initial }) => {
                let input = if !json.is_empty() {
                    json
                } else if initial.as_object().is_some_and(|object| !object.is_empty()) {
                    initial.to_string()
                } else {
                    "{}".to_owned()
                };
                out.push(Ok(ModelStreamPart::ToolInputEnd { id: id.clone() }));
                out.push(Ok(ModelStreamPart::ToolCall(ModelToolCall {
                    tool_call_id: id,
                    tool_name: name,
                    input,
                    provider_executed: None,
                    provider_metadata: None,
                })));
            }
            None => {}
        }
    }

    fn finish(&mut self, out: &mut Parts) {
        let open: Vec<u32> = self.blocks.keys().copied().collect();
        for index in open {
            self.stop(index, out);
        }
        out.push(Ok(ModelStreamPart::Finish {
            finish_reason: self.stop_reason.as_deref().map(finish_reason).unwrap_or(FinishReason::Other),
            usage: usage_of(self.input, self.output_tokens),
            provider_metadata: None,
        }));
        self.done = true;
    }

    /// Emits tool calls in progress whose input is complete JSON, then the error.
    fn fail(&mut self, error: ModelError, out: &mut Parts) {
        let complete: Vec<u32> = self
            .blocks
            .iter()
            .filter(|(_, open)| matches!(open, Open::Tool { json, .. } if serde_json::from_str::<Value>(json).is_ok()))
            .map(|(index, _)| *index)
            .collect();
        for index in complete {
            self.stop(index, out);
        }
        out.push(Err(error));
        self.done = true;
    }
}

impl StreamDecoder for AnthropicDecoder {
    const UNFINISHED: &'static str = "the stream ended before the message stopped";

    fn decode(&mut self, event: SseEvent, out: &mut Parts) {
        let data = event.data.trim();
        if self.done || data.is_empty() {
            return;
        }
        match serde_json::from_str::<StreamEvent>(data) {
            Ok(event) => self.event(event, out),
            Err(error) => self.fail(
                ModelError::InvalidResponse { message: format!("a Messages API event is not valid: {error}") },
                out,
            ),
        }
    }

    fn salvage(&mut self, error: ModelError, out: &mut Parts) {
        self.fail(error, out);
    }

    fn finish_on_end(&mut self, out: &mut Parts) -> bool {
        let finished = self.stop_reason.is_some();
        if finished {
            self.finish(out);
        }
        finished
    }

    fn is_done(&self) -> bool {
        self.done
    }
}

/// Maps a stop reason.
pub fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// Maps usage (see the module docs).
pub fn usage_of(input: AnthropicUsage, output_tokens: Option<u64>) -> Usage {
    let parts = [input.input_tokens, input.cache_read_input_tokens, input.cache_creation_input_tokens];
    let input_tokens = parts.iter().any(Option::is_some).then(|| parts.iter().flatten().sum::<u64>());
    let total_tokens = match (input_tokens, output_tokens) {
        (None, None) => None,
        (input, output) => Some(input.unwrap_or(0) + output.unwrap_or(0)),
    };
    Usage {
        input_tokens,
        output_tokens,
        total_tokens,
        reasoning_tokens: None,
        cached_input_tokens: input.cache_read_input_tokens,
    }
}
