//! Runs tool calls concurrently, within a limit, streaming their outputs.
//!
//! Each call runs as a future on the reader's task (no spawning): at most
//! `concurrency` at once. Preliminary outputs are emitted as they are
//! reported, each call's final output as it completes; a handler error or
//! panic becomes a `tool-error`, never a failed turn. Outcomes come back in
//! the order of the calls.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolgate_protocol::{ModelMessage, StreamPart, ToolCallPart, ToolResultOutput, ToolResultPart};

use super::stream::Emitter;
use crate::tool::{PreliminarySink, Tool, ToolContext, ToolError};

/// A call ready to run.
pub(crate) struct ToolRun {
    pub call: ToolCallPart,
    pub tool: Tool,
    pub messages: Arc<[ModelMessage]>,
}

/// How a call ended.
pub(crate) struct ToolOutcome {
    pub call: ToolCallPart,
    pub output: Result<Value, ToolError>,
    pub dynamic: bool,
}

impl ToolOutcome {
    /// The tool result as the history stores it.
    pub(crate) fn to_result_part(&self) -> ToolResultPart {
        let output = match &self.output {
            Ok(value) => ToolResultOutput::from_value(value.clone()),
            Err(error) => error.to_output(),
        };
        result_part(&self.call, output)
    }

    /// The stream part announcing the outcome.
    pub(crate) fn to_stream_part(&self) -> StreamPart {
        let dynamic = self.dynamic.then_some(true);
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

/// Runs `runs` with at most `concurrency` at once; see the module docs.
pub(crate) async fn execute_all(
    runs: Vec<ToolRun>,
    concurrency: usize,
    cancellation: &CancellationToken,
    out: &Emitter,
) -> Vec<ToolOutcome> {
    let total = runs.len();
    let (preliminary_sender, mut preliminary) = mpsc::unbounded_channel::<(usize, Value)>();
    let calls: Vec<(ToolCallPart, bool)> = runs.iter().map(|run| (run.call.clone(), run.tool.is_dynamic())).collect();
    let mut queue = runs.into_iter().enumerate();
    let mut running = FuturesUnordered::new();
    let mut outcomes: Vec<Option<ToolOutcome>> = (0..total).map(|_| None).collect();

    let start = |index: usize, run: ToolRun| {
        let sender = preliminary_sender.clone();
        let sink: PreliminarySink = Arc::new(move |value| {
            // The receiver lives as long as this function; a failed send cannot happen while it matters.
            let _ = sender.send((index, value));
        });
        let context = ToolContext::new(run.call.tool_call_id.clone(), run.messages)
            .with_cancellation(cancellation.child_token())
            .with_preliminary(sink);
        tracing::debug!(tool = run.tool.name(), tool_call_id = %run.call.tool_call_id, "running tool");
        async move {
            let output = run.tool.run(run.call.input.clone(), context).await;
            (index, output)
        }
    };
    for (index, run) in queue.by_ref().take(concurrency) {
        running.push(start(index, run));
    }

    while !running.is_empty() {
        tokio::select! {
            Some((index, value)) = preliminary.recv() => {
                let (call, dynamic) = &calls[index];
                out.emit(result_stream_part(call, value, Some(true), dynamic.then_some(true))).await;
            }
            Some((index, output)) = running.next() => {
                while let Ok((early, value)) = preliminary.try_recv() {
                    let (call, dynamic) = &calls[early];
                    out.emit(result_stream_part(call, value, Some(true), dynamic.then_some(true))).await;
                }
                let (call, dynamic) = calls[index].clone();
                let outcome = ToolOutcome { call, output, dynamic };
                out.emit(outcome.to_stream_part()).await;
                outcomes[index] = Some(outcome);
                if let Some((next, run)) = queue.next() {
                    running.push(start(next, run));
                }
            }
        }
    }
    outcomes.into_iter().flatten().collect()
}
