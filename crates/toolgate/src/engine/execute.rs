//! Runs tool calls concurrently, within a limit, streaming their outputs.
//!
//! Each call runs as a future on the reader's task (no spawning): at most
//! `concurrency` at once. Preliminary outputs are emitted as they are
//! reported; final outputs (and the parts of calls decided without running,
//! such as denials) are emitted in the order of the calls, a call's as soon
//! as it and every call before it are done. A handler error or panic becomes
//! a `tool-error`, never a failed turn. Outcomes come back in call order.
//!
//! Each run is inside an `execute_tool` span of target [`SPAN_TARGET`] (the
//! OpenTelemetry GenAI conventions' tool execution span; whoever installs the
//! subscriber decides whether it is recorded). The call's input and output
//! are recorded on it only when a subscriber enables [`CONTENT_TARGET`].

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolgate_protocol::{StreamPart, ToolCallPart, ToolResultOutput, ToolResultPart};

use tracing::Instrument;

use super::stream::Emitter;
use crate::tool::{Nesting, PreliminarySink, SharedMessages, Tool, ToolContext, ToolError};

/// The target of the spans the engine opens for tracing (`execute_tool`):
/// a subscriber exporting traces enables it, one writing logs leaves it out.
pub const SPAN_TARGET: &str = "toolgate::otel";

/// The target a subscriber enables to have tool inputs and outputs recorded
/// on the spans (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`):
/// they may hold secrets, so they are left out unless it does.
pub const CONTENT_TARGET: &str = "toolgate::otel::content";

/// A call ready to run.
pub(crate) struct ToolRun {
    pub call: ToolCallPart,
    pub tool: Tool,
    pub messages: SharedMessages,
    /// What an agent tool needs of this engine call (see `super::agent`).
    pub nesting: Option<Nesting>,
}

/// One call of a batch, in call order: to run, or already decided (its stream part).
pub(crate) enum Work {
    Run(ToolRun),
    Decided(StreamPart),
}

/// How a call ended.
pub(crate) struct ToolOutcome {
    pub call: ToolCallPart,
    pub output: Result<Value, ToolError>,
    /// The tool that ran (it maps its output to what the model reads).
    pub tool: Tool,
}

impl ToolOutcome {
    /// The tool result as the history stores it.
    pub(crate) fn to_result_part(&self) -> ToolResultPart {
        let output = match &self.output {
            Ok(value) => self.tool.model_output(value),
            Err(error) => error.to_output(),
        };
        result_part(&self.call, output)
    }

    /// The approval requests of a sub-agent that paused instead of ending (see `super::agent`).
    pub(crate) fn paused(&self) -> Option<&[super::ApprovalRequest]> {
        self.output.as_ref().err().and_then(ToolError::paused_requests)
    }

    /// The stream part announcing the outcome: for a paused sub-agent, a
    /// preliminary result saying what it waits for (its approval requests
    /// are announced with the step's; see `super::nested`).
    pub(crate) fn to_stream_part(&self) -> StreamPart {
        if let Some(requests) = self.paused() {
            return super::nested::waiting_part(&self.call, requests);
        }
        let dynamic = self.tool.is_dynamic().then_some(true);
        match &self.output {
            Ok(output) => result_stream_part(&self.call, output.clone(), None, dynamic),
            Err(error) => StreamPart::ToolError {
                tool_call_id: self.call.tool_call_id.clone(),
                tool_name: self.call.tool_name.clone(),
                input: self.call.input.clone(),
                error: error.to_value(),
                provider_executed: None,
                dynamic,
            },
        }
    }
}

/// The stream part of an outcome read back from the ledger, as if the call had just ended so.
pub(crate) fn stored_part(call: &ToolCallPart, output: &ToolResultOutput) -> StreamPart {
    let error = |error: Value| error_part(call, error);
    match output {
        ToolResultOutput::ErrorText { value, .. } => error(Value::String(value.clone())),
        ToolResultOutput::ErrorJson { value, .. } => error(value.clone()),
        ToolResultOutput::ExecutionDenied { reason, .. } => StreamPart::ToolOutputDenied {
            tool_call_id: call.tool_call_id.clone(),
            tool_name: call.tool_name.clone(),
            provider_executed: None,
            reason: reason.clone(),
        },
        ToolResultOutput::Text { value, .. } => result_stream_part(call, Value::String(value.clone()), None, None),
        ToolResultOutput::Json { value, .. } => result_stream_part(call, value.clone(), None, None),
        ToolResultOutput::Content { value, .. } => {
            result_stream_part(call, serde_json::to_value(value).unwrap_or_default(), None, None)
        }
    }
}

/// The `tool-error` part of a call of a local tool.
pub(crate) fn error_part(call: &ToolCallPart, error: Value) -> StreamPart {
    StreamPart::ToolError {
        tool_call_id: call.tool_call_id.clone(),
        tool_name: call.tool_name.clone(),
        input: call.input.clone(),
        error,
        provider_executed: None,
        dynamic: None,
    }
}

/// A tool result part for a call.
pub(crate) fn result_part(call: &ToolCallPart, output: ToolResultOutput) -> ToolResultPart {
    ToolResultPart {
        tool_call_id: call.tool_call_id.clone(),
        tool_name: call.tool_name.clone(),
        output,
        provider_options: None,
    }
}

fn result_stream_part(
    call: &ToolCallPart,
    output: Value,
    preliminary: Option<bool>,
    dynamic: Option<bool>,
) -> StreamPart {
    StreamPart::ToolResult {
        tool_call_id: call.tool_call_id.clone(),
        tool_name: call.tool_name.clone(),
        input: call.input.clone(),
        output,
        provider_executed: None,
        preliminary,
        dynamic,
    }
}

/// Runs the calls of `work` with at most `concurrency` at once and emits
/// every final part in call order; see the module docs. Returns the outcomes
/// of the runs, in call order.
pub(crate) async fn execute_all(
    work: Vec<Work>,
    concurrency: usize,
    cancellation: &CancellationToken,
    out: &Emitter,
) -> Vec<ToolOutcome> {
    let total = work.len();
    let (preliminary_sender, mut preliminary) = mpsc::unbounded_channel::<(usize, Value)>();
    let mut calls: Vec<Option<(ToolCallPart, Tool)>> = Vec::with_capacity(total);
    let mut finals: Vec<Option<StreamPart>> = Vec::with_capacity(total);
    let mut runs = Vec::new();
    for (index, item) in work.into_iter().enumerate() {
        match item {
            Work::Run(run) => {
                calls.push(Some((run.call.clone(), run.tool.clone())));
                finals.push(None);
                runs.push((index, run));
            }
            Work::Decided(part) => {
                calls.push(None);
                finals.push(Some(part));
            }
        }
    }
    let mut queue = runs.into_iter();
    let mut running = FuturesUnordered::new();
    let mut outcomes: Vec<Option<ToolOutcome>> = (0..total).map(|_| None).collect();
    let mut emitted = 0;

    let start = |index: usize, run: ToolRun| {
        let sender = preliminary_sender.clone();
        let sink: PreliminarySink = Arc::new(move |value| {
            // The receiver lives as long as this function; a failed send cannot happen while it matters.
            let _ = sender.send((index, value));
        });
        let context = ToolContext::new(run.call.tool_call_id.clone(), run.messages)
            .with_cancellation(cancellation.child_token())
            .with_preliminary(sink)
            .with_nesting(run.nesting);
        tracing::debug!(tool = run.tool.name(), tool_call_id = %run.call.tool_call_id, "running tool");
        let span = tool_span(&run.call, &run.tool);
        let recorded = span.clone();
        async move {
            let output = run.tool.run(run.call.input.clone(), context).await;
            record_output(&recorded, &output);
            (index, output)
        }
        .instrument(span)
    };
    for (index, run) in queue.by_ref().take(concurrency) {
        running.push(start(index, run));
    }
    emit_ready(&mut finals, &mut emitted, out).await;

    let preliminary_part = |index: usize, value: Value| {
        calls[index]
            .as_ref()
            .map(|(call, tool)| result_stream_part(call, value, Some(true), tool.is_dynamic().then_some(true)))
    };
    while !running.is_empty() {
        tokio::select! {
            Some((index, value)) = preliminary.recv() => {
                if let Some(part) = preliminary_part(index, value) {
                    out.emit(part).await;
                }
            }
            Some((index, output)) = running.next() => {
                while let Ok((early, value)) = preliminary.try_recv() {
                    if let Some(part) = preliminary_part(early, value) {
                        out.emit(part).await;
                    }
                }
                if let Some((call, tool)) = calls[index].clone() {
                    let outcome = ToolOutcome { call, output, tool };
                    finals[index] = Some(outcome.to_stream_part());
                    outcomes[index] = Some(outcome);
                }
                if let Some((next, run)) = queue.next() {
                    running.push(start(next, run));
                }
                emit_ready(&mut finals, &mut emitted, out).await;
            }
        }
    }
    outcomes.into_iter().flatten().collect()
}

/// The `execute_tool {tool}` span of a run (disabled, and free, when no
/// subscriber wants [`SPAN_TARGET`]), with the input when content is recorded.
fn tool_span(call: &ToolCallPart, tool: &Tool) -> tracing::Span {
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "execute_tool",
        otel.name = format!("execute_tool {}", tool.name()),
        otel.kind = "internal",
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool.name(),
        gen_ai.tool.call.id = call.tool_call_id.as_str(),
        gen_ai.tool.type = if tool.is_dynamic() { "extension" } else { "function" },
        gen_ai.tool.call.arguments = tracing::field::Empty,
        gen_ai.tool.call.result = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    if !span.is_disabled() && tracing::enabled!(target: CONTENT_TARGET, tracing::Level::INFO) {
        span.record("gen_ai.tool.call.arguments", call.input.to_string());
    }
    span
}

/// Records how a run ended on its span: an error's type, and the output
/// when content is recorded.
fn record_output(span: &tracing::Span, output: &Result<Value, ToolError>) {
    if span.is_disabled() {
        return;
    }
    let content = tracing::enabled!(target: CONTENT_TARGET, tracing::Level::INFO);
    match output {
        Ok(value) if content => {
            span.record("gen_ai.tool.call.result", value.to_string());
        }
        Ok(_) => {}
        Err(error) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", "tool_error");
            if content {
                span.record("gen_ai.tool.call.result", error.to_value().to_string());
            }
        }
    }
}

/// Emits the final parts that are ready, in order, up to the first that is not.
async fn emit_ready(finals: &mut [Option<StreamPart>], emitted: &mut usize, out: &Emitter) {
    while let Some(part) = finals.get_mut(*emitted).and_then(Option::take) {
        out.emit(part).await;
        *emitted += 1;
    }
}
