//! Chat Completions chunks → model stream parts.
//!
//! Contract:
//! - Text deltas become `text-start`/`text-delta`/`text-end` (ids `text-N`);
//!   `reasoning_content`/`reasoning` deltas become reasoning parts (`reasoning-N`).
//! - Tool call fragments are keyed by `index` (whatever number it starts at).
//!   The first non-empty id and name of an index win; empty or repeated ids
//!   and names later are ignored and names are never concatenated. A call
//!   without an id gets a generated one. `tool-input-start` is emitted once
//!   the name is known, `tool-input-delta` for each non-empty argument
//!   fragment, and `tool-input-end` plus the complete `tool-call` (arguments
//!   text as sent) when the response finishes, in index order. A different
//!   non-empty id at an index whose arguments are already complete JSON
//!   starts a new call (servers that put every call at index 0).
//! - Only choice 0 is followed. The finish reason maps `stop`, `length`,
//!   `tool_calls`/`function_call`, `content_filter`; anything else is `other`.
//!   Usage comes from whichever chunk carries it (normally the usage-only
//!   chunk before `[DONE]`).
//! - `[DONE]`, or the end of the body after a finish reason, finishes the
//!   response. A body that ends or breaks off before that first emits every
//!   call whose arguments are complete JSON (so an approval can still be
//!   asked for), then [`ModelError::StreamInterrupted`]. An `error` object in
//!   a chunk is a typed error; a chunk that is not JSON is
//!   [`ModelError::InvalidResponse`].

use std::collections::HashMap;

use toolgate_http::error::error_from_event;
use toolgate_http::{Parts, SseEvent, StreamDecoder};
use toolgate_model::ModelError;
use toolgate_protocol::{FinishReason, ModelStreamPart, ModelToolCall, Usage};

use super::wire::{ChatChunk, ChatUsage, ToolCallDelta};
use crate::config::IdGenerator;

/// Decoder state for one streamed completion.
pub struct ChatDecoder {
    ids: IdGenerator,
    text: Option<String>,
    reasoning: Option<String>,
    blocks: usize,
    /// Calls in arrival order, with their index.
    calls: Vec<(u32, CallState)>,
    /// The position in `calls` of the call each index currently continues.
    current: HashMap<u32, usize>,
    finish_reason: Option<FinishReason>,
    usage: Usage,
    done: bool,
}

#[derive(Default)]
struct CallState {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
    started: bool,
}

impl ChatDecoder {
    /// A decoder that names id-less calls with `ids`.
    pub fn new(ids: IdGenerator) -> Self {
        Self {
            ids,
            text: None,
            reasoning: None,
            blocks: 0,
            calls: Vec::new(),
            current: HashMap::new(),
            finish_reason: None,
            usage: Usage::default(),
            done: false,
        }
    }

    /// Handles one parsed chunk.
    pub fn chunk(&mut self, chunk: ChatChunk, out: &mut Parts) {
        if let Some(error) = chunk.error {
            let message = error.get("message").and_then(|m| m.as_str()).unwrap_or_default().to_owned();
            let code = error.get("code").or_else(|| error.get("type")).and_then(|c| c.as_str());
            let error = error_from_event(code, if message.is_empty() { error.to_string() } else { message });
            self.salvage(error, out);
            return;
        }
        if let Some(usage) = chunk.usage {
            self.usage = usage_of(&usage);
        }
        let Some(choice) = chunk.choices.into_iter().find(|choice| choice.index.unwrap_or(0) == 0) else { return };
        if let Some(delta) = choice.delta {
            if let Some(reasoning) = delta.reasoning_content.or(delta.reasoning).filter(|text| !text.is_empty()) {
                self.close_text(out);
                let id = self.reasoning.get_or_insert_with(|| {
                    self.blocks += 1;
                    let id = format!("reasoning-{}", self.blocks - 1);
                    out.push(Ok(ModelStreamPart::ReasoningStart { id: id.clone() }));
                    id
                });
                out.push(Ok(ModelStreamPart::ReasoningDelta { id: id.clone(), delta: reasoning }));
            }
            if let Some(text) = delta.content.filter(|text| !text.is_empty()) {
                self.close_reasoning(out);
                let id = self.text.get_or_insert_with(|| {
                    self.blocks += 1;
                    let id = format!("text-{}", self.blocks - 1);
                    out.push(Ok(ModelStreamPart::TextStart { id: id.clone() }));
                    id
                });
                out.push(Ok(ModelStreamPart::TextDelta { id: id.clone(), delta: text }));
            }
            for (position, fragment) in delta.tool_calls.into_iter().enumerate() {
                self.close_text(out);
                self.close_reasoning(out);
                self.tool_fragment(position, fragment, out);
            }
        }
        if let Some(reason) = choice.finish_reason {
            self.finish_reason = Some(finish_reason(&reason));
        }
    }

    fn tool_fragment(&mut self, position: usize, fragment: ToolCallDelta, out: &mut Parts) {
        let index = fragment.index.unwrap_or(position as u32);
        let ids = &self.ids;
        let fresh_id = fragment.id.filter(|id| !id.is_empty());
        let position = match self.current.get(&index) {
            // A new id at an index whose call is already complete JSON is a new call
            // (servers that put every call at index 0).
            Some(&position)
                if fresh_id.is_some()
                    && self.calls[position].1.id.is_some()
                    && self.calls[position].1.id != fresh_id
                    && serde_json::from_str::<serde_json::Value>(&self.calls[position].1.arguments).is_ok() =>
            {
                None
            }
            other => other.copied(),
        };
        let position = position.unwrap_or_else(|| {
            self.calls.push((index, CallState::default()));
            self.current.insert(index, self.calls.len() - 1);
            self.calls.len() - 1
        });
        let call = &mut self.calls[position].1;
        if call.id.is_none() {
            call.id = fresh_id;
        }
        let function = fragment.function.unwrap_or_default();
        if call.name.is_none() {
            call.name = function.name.filter(|name| !name.is_empty());
        }
        if let Some(arguments) = function.arguments.filter(|arguments| !arguments.is_empty()) {
            call.arguments.push_str(&arguments);
            if call.started {
                let id = call.id.clone().unwrap_or_default();
                out.push(Ok(ModelStreamPart::ToolInputDelta { id, delta: arguments }));
                return;
            }
        }
        if !call.started && call.name.is_some() {
            call.started = true;
            let id = call.id.get_or_insert_with(|| format!("call_{}", ids())).clone();
            let tool_name = call.name.clone().unwrap_or_default();
            out.push(Ok(ModelStreamPart::ToolInputStart { id: id.clone(), tool_name, provider_executed: None }));
            if !call.arguments.is_empty() {
                out.push(Ok(ModelStreamPart::ToolInputDelta { id, delta: call.arguments.clone() }));
            }
        }
    }

    fn close_text(&mut self, out: &mut Parts) {
        if let Some(id) = self.text.take() {
            out.push(Ok(ModelStreamPart::TextEnd { id }));
        }
    }

    fn close_reasoning(&mut self, out: &mut Parts) {
        if let Some(id) = self.reasoning.take() {
            out.push(Ok(ModelStreamPart::ReasoningEnd { id }));
        }
    }

    /// Ends open blocks and emits the calls (all of them, or only those
    /// whose arguments are complete JSON).
    fn flush_calls(&mut self, complete_only: bool, out: &mut Parts) {
        self.close_text(out);
        self.close_reasoning(out);
        self.current.clear();
        let mut calls = std::mem::take(&mut self.calls);
        calls.sort_by_key(|(index, _)| *index);
        for (_, call) in calls {
            if complete_only && serde_json::from_str::<serde_json::Value>(&call.arguments).is_err() {
                continue;
            }
            let tool_call_id = call.id.unwrap_or_else(|| format!("call_{}", (self.ids)()));
            let tool_name = call.name.unwrap_or_default();
            if !call.started {
                out.push(Ok(ModelStreamPart::ToolInputStart {
                    id: tool_call_id.clone(),
                    tool_name: tool_name.clone(),
                    provider_executed: None,
                }));
            }
            out.push(Ok(ModelStreamPart::ToolInputEnd { id: tool_call_id.clone() }));
            out.push(Ok(ModelStreamPart::ToolCall(ModelToolCall {
                tool_call_id,
                tool_name,
                input: call.arguments,
                provider_executed: None,
                provider_metadata: None,
            })));
        }
    }

    fn finish(&mut self, out: &mut Parts) {
        self.flush_calls(false, out);
        out.push(Ok(ModelStreamPart::Finish {
            finish_reason: self.finish_reason.unwrap_or(FinishReason::Other),
            usage: self.usage,
            provider_metadata: None,
        }));
        self.done = true;
    }
}

impl StreamDecoder for ChatDecoder {
    const UNFINISHED: &'static str = "the stream ended before the model finished";

    fn decode(&mut self, event: SseEvent, out: &mut Parts) {
        if self.done {
            return;
        }
        let data = event.data.trim();
        if data.is_empty() {
            return;
        }
        if data == "[DONE]" {
            self.finish(out);
            return;
        }
        match serde_json::from_str::<ChatChunk>(data) {
            Ok(chunk) => self.chunk(chunk, out),
            Err(error) => self.salvage(
                ModelError::InvalidResponse { message: format!("a Chat Completions chunk is not valid: {error}") },
                out,
            ),
        }
    }

    fn salvage(&mut self, error: ModelError, out: &mut Parts) {
        self.flush_calls(true, out);
        out.push(Err(error));
        self.done = true;
    }

    fn finish_on_end(&mut self, out: &mut Parts) -> bool {
        let finished = self.finish_reason.is_some();
        if finished {
            self.finish(out);
        }
        finished
    }

    fn is_done(&self) -> bool {
        self.done
    }
}

/// Maps a Chat Completions finish reason.
pub fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// Maps Chat Completions usage.
pub fn usage_of(usage: &ChatUsage) -> Usage {
    Usage {
        input_tokens: usage.prompt_tokens,
        output_tokens: usage.completion_tokens,
        total_tokens: usage.total_tokens,
        reasoning_tokens: usage.completion_tokens_details.as_ref().and_then(|details| details.reasoning_tokens),
        cached_input_tokens: usage.prompt_tokens_details.as_ref().and_then(|details| details.cached_tokens),
    }
}
