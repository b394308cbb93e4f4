//! Benchmarks of one approval continuation turn.
//!
//! The history has N messages: filler turns (user question, assistant text +
//! `get_weather` call, tool result), then a user message, an assistant
//! message with a `delete_file` call and its approval request, and a tool
//! message approving it. One continuation prepares the request (normalize,
//! collect and check the approvals, check the prompt), pre-resolves the
//! approval (runs `delete_file`), and runs one scripted model step that
//! answers with text and finishes with `stop`.
//!
//! - `continuation/generate_text/N` and `continuation/stream_text/N` (the
//!   stream is drained with `finish`) time that whole turn.
//! - `build_prompt/N` times `toolgate::prompt::build_prompt` alone, on the
//!   same history with the approved call's result in place (what the step's
//!   prompt is built from).
//!
//! Throughput is N elements (messages), so time per message can be compared
//! across sizes.

use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use toolgate::model::ScriptPart;
use toolgate::protocol::{
    AssistantPart, TextPart, ToolApprovalRequestPart, ToolApprovalResponsePart, ToolCallPart, ToolPart, ToolResultPart,
};
use toolgate::{
    ModelMessage, RecordingModel, ScriptedModel, TextRequest, ToolResultOutput, Toolkit, generate_text, stream_text,
};

const SIZES: [usize; 3] = [10, 100, 1000];
const APPROVAL_ID: &str = "apr_bench";
const DELETE_CALL_ID: &str = "delete-1";

fn call(tool_call_id: &str, tool_name: &str, input: serde_json::Value) -> ToolCallPart {
    ToolCallPart {
        tool_call_id: tool_call_id.to_owned(),
        tool_name: tool_name.to_owned(),
        input,
        provider_executed: None,
        provider_options: None,
    }
}

fn result(tool_call_id: &str, tool_name: &str, output: serde_json::Value) -> ToolResultPart {
    ToolResultPart {
        tool_call_id: tool_call_id.to_owned(),
        tool_name: tool_name.to_owned(),
        output: ToolResultOutput::json(output),
        provider_options: None,
    }
}

/// Exactly `size` messages (at least 3): filler, then the approved `delete_file` call.
fn history(size: usize) -> Vec<ModelMessage> {
    assert!(size >= 3, "the approval tail alone is 3 messages");
    let filler = size - 3;
    let mut messages = Vec::with_capacity(size);
    for turn in 0..filler / 3 {
        let id = format!("weather-{turn}");
        let city = format!("City {turn}");
        messages.push(ModelMessage::user(format!("What is the weather in {city}?")));
        messages.push(ModelMessage::assistant(vec![
            AssistantPart::Text(TextPart::new("Let me check.")),
            AssistantPart::ToolCall(call(&id, "get_weather", json!({"city": city}))),
        ]));
        messages.push(ModelMessage::tool(vec![ToolPart::ToolResult(result(
            &id,
            "get_weather",
            json!({"city": city, "temperatureC": 21, "condition": "sunny"}),
        ))]));
    }
    // Pad to the exact size with a user question and a text-only answer.
    if filler % 3 == 2 {
        messages.push(ModelMessage::user("Thanks."));
    }
    if filler % 3 >= 1 {
        messages.push(ModelMessage::assistant(vec![AssistantPart::Text(TextPart::new("You're welcome."))]));
    }
    messages.push(ModelMessage::user("Delete notes.txt"));
    messages.push(ModelMessage::assistant(vec![
        AssistantPart::Text(TextPart::new("I will delete it once you approve.")),
        AssistantPart::ToolCall(call(DELETE_CALL_ID, "delete_file", json!({"path": "notes.txt"}))),
        AssistantPart::ToolApprovalRequest(ToolApprovalRequestPart {
            approval_id: APPROVAL_ID.to_owned(),
            tool_call_id: DELETE_CALL_ID.to_owned(),
            signature: None,
        }),
    ]));
    messages.push(ModelMessage::tool(vec![ToolPart::ToolApprovalResponse(ToolApprovalResponsePart {
        approval_id: APPROVAL_ID.to_owned(),
        approved: true,
        reason: None,
        provider_executed: None,
        edited_input: None,
    })]));
    assert_eq!(messages.len(), size);
    messages
}

/// The same history once the approved call has run: its result sits beside the answer.
fn resolved_history(size: usize) -> Vec<ModelMessage> {
    let mut messages = history(size);
    if let Some(ModelMessage::Tool(tool)) = messages.last_mut() {
        tool.content.push(ToolPart::ToolResult(result(DELETE_CALL_ID, "delete_file", json!({"deleted": "notes.txt"}))));
    }
    messages
}

/// A model whose every turn is text and `stop` (the last turn repeats, so one turn is enough).
fn model() -> ScriptedModel {
    ScriptedModel::new(vec![vec![ScriptPart::Text { text: "Deleted notes.txt.".into() }]]).expect("one turn")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().expect("a tokio runtime")
}

/// One continuation turn per iteration.
///
/// The request is built in the untimed setup (its history clone is the
/// caller's cost, not the engine's) and the result is returned from the
/// routine, so criterion drops it outside the timing. `ScriptedModel` keeps
/// nothing per request, so one model serves every iteration; what stays
/// timed besides the engine is its own small work, counting the assistant
/// messages of the prompt.
fn continuation(c: &mut Criterion) {
    let runtime = runtime();
    let toolkit = toolgate::demo::toolkit();
    let mut group = c.benchmark_group("continuation");
    for size in SIZES {
        let history = history(size);
        let model = model();
        let setup = || TextRequest::new(history.clone()).toolkit(Toolkit::clone(&toolkit));
        sanity_check(&runtime, setup());
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::new("generate_text", size), &size, |b, _| {
            b.to_async(&runtime).iter_batched(
                setup,
                |request| async { generate_text(&model, request).await.expect("the continuation succeeds") },
                BatchSize::SmallInput,
            )
        });
        group.bench_with_input(BenchmarkId::new("stream_text", size), &size, |b, _| {
            b.to_async(&runtime).iter_batched(
                setup,
                |request| async {
                    let stream = stream_text(&model, request).await.expect("the history is valid");
                    stream.finish().await.expect("the continuation succeeds")
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

/// Makes sure the benchmark measures what it claims: the approved call runs
/// in pre-resolution and the model is called once.
fn sanity_check(runtime: &tokio::runtime::Runtime, request: TextRequest) {
    let model = RecordingModel::new(model());
    let result = runtime.block_on(generate_text(&model, request)).expect("the continuation succeeds");
    assert_eq!(result.preresolved.len(), 1);
    assert_eq!(result.preresolved[0].output, ToolResultOutput::json(json!({"deleted": "notes.txt"})));
    assert_eq!(result.steps.len(), 1);
    assert_eq!(result.text(), "Deleted notes.txt.");
    assert_eq!(model.requests().len(), 1);
}

fn prompt(c: &mut Criterion) {
    let mut group = c.benchmark_group("build_prompt");
    for size in SIZES {
        let history = resolved_history(size);
        toolgate::prompt::build_prompt(&history).expect("every call has a result");
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &history, |b, history| {
            b.iter(|| toolgate::prompt::build_prompt(std::hint::black_box(history)))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = continuation, prompt
}
criterion_main!(benches);
