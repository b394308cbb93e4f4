//! The engine's stages of one approval continuation, each on its own, so a
//! regression in one stage shows on its own.
//!
//! The history has N model messages like a real chat, in exchanges of four
//! (user, assistant with a tool call, tool, assistant text) taking turns: a
//! weather question answered with an automatic `get_weather` call, a
//! deletion approved (call, approval request, approval response, result), a
//! deletion denied (the response with a reason, an `execution-denied`
//! result); padded to N with short user and assistant texts; then the last
//! request (three messages): a `delete_file` call, its approval request
//! (signed as `toolgate serve` signs them) and an approving response. The
//! server's engine settings are used: the demo tools and an approval signer.
//!
//! - `floor/N`: the serde_json floor of the history's JSON (parse into a
//!   `serde_json::Value`, serialize back): what any JSON server does with it,
//!   measured beside the stages because its own time per message grows once
//!   the history leaves the caches.
//! - `parse/N`: `toolgate::protocol::parse_messages_str` of the history's JSON.
//! - `prepare/approved/N`: what `stream_text` does before it returns, nothing
//!   run yet: normalize the approvals, collect the answers, resolve them
//!   (signature, schema and policy of the approved call) and check the prompt
//!   the plan leads to. `prepare/settled/N` is the same history with the call's
//!   result already in place (nothing to resolve): the difference is the cost
//!   of resolving one approved call, the rest is the linear passes.
//! - `prompt/N`: `toolgate::prompt::into_prompt` of the history once the
//!   approved call has its result, as the engine builds a step's prompt: the
//!   history moved in (its copy is made untimed).
//! - `turn/N`: the whole continuation with `generate_text` (prepare, run the
//!   approved call, one scripted model step answering "Done."), for reference.
//!
//! The UI side (UI message parsing, conversion, stream encoding) is in
//! `crates/toolgate-bench/benches/ui.rs`. Throughput is N elements
//! (messages), so time per message can be compared across sizes.
//!
//! `cargo bench -p toolgate --bench stages` (`-- --quick` for a smoke run).

use std::time::Duration;

/// The allocator of the `toolgate` binary, so the stages cost what they cost there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolgate::approval::{ApprovalSigner, HeldCalls, SignedCall};
use toolgate::model::ScriptPart;
use toolgate::protocol::parse_messages_str;
use toolgate::{ModelMessage, ScriptedModel, TextRequest, ToolResultOutput, Toolkit, generate_text, stream_text};

const SIZES: [usize; 4] = [10, 100, 1000, 10000];
const SECRET: &str = "toolgate-bench-stages";
/// Messages in one exchange: a user turn, a tool call, its result (and answer), the assistant's text.
const EXCHANGE: usize = 4;
const TAIL: usize = 3;
const LAST_CALL: &str = "call_last_delete";

fn signer() -> ApprovalSigner {
    ApprovalSigner::new(SECRET).expect("a secret")
}

/// Issues a signed approval id as the server does.
fn approval(signer: &ApprovalSigner, nonce: usize, call: &str, input: &Value) -> String {
    let signed = SignedCall { tool_call_id: call, tool_name: "delete_file", input };
    signer.issue(&format!("{nonce:032x}"), signed, &HeldCalls::none()).expect("a canonical input").approval_id
}

fn user(text: String) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}]})
}

fn assistant_text(text: String) -> Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": text}]})
}

/// A gated call with its approval request.
fn gated(text: String, call: &str, input: &Value, approval_id: &str) -> Value {
    json!({"role": "assistant", "content": [
        {"type": "text", "text": text},
        {"type": "tool-call", "toolCallId": call, "toolName": "delete_file", "input": input},
        {"type": "tool-approval-request", "approvalId": approval_id, "toolCallId": call}]})
}

fn result(call: &str, tool: &str, output: Value) -> Value {
    json!({"type": "tool-result", "toolCallId": call, "toolName": tool, "output": output})
}

/// The history's JSON (AI SDK `ModelMessage[]`): exactly `size` messages; `settled` adds the last call's result.
fn history_json(size: usize, settled: bool) -> String {
    assert!(size >= TAIL, "the approval tail alone is {TAIL} messages");
    let signer = signer();
    let mut messages = Vec::with_capacity(size);
    let filler = size - TAIL;
    let mut exchange = 0;
    while filler - messages.len() >= EXCHANGE {
        let round = exchange / 3;
        match exchange % 3 {
            0 => {
                let city = format!("City {round}");
                let weather = format!("call_weather_{round}");
                messages.push(user(format!("What is the weather in {city}?")));
                messages.push(json!({"role": "assistant", "content": [
                    {"type": "text", "text": format!("Let me check the weather in {city}.")},
                    {"type": "tool-call", "toolCallId": weather, "toolName": "get_weather", "input": {"city": city}}]}));
                let forecast = json!({"city": city, "temperatureC": 21, "condition": "sunny"});
                messages.push(json!({"role": "tool", "content": [
                    result(&weather, "get_weather", json!({"type": "json", "value": forecast}))]}));
                messages.push(assistant_text(format!("It is 21 °C and sunny in {city}.")));
            }
            kind => {
                let approved = kind == 1;
                let path = format!("{}-{round}.txt", if approved { "report" } else { "draft" });
                let call = format!("call_delete_{exchange}");
                let input = json!({"path": path});
                let id = approval(&signer, messages.len(), &call, &input);
                messages.push(user(format!("Please delete {path}.")));
                messages.push(gated(format!("I will delete {path} once you approve."), &call, &input, &id));
                let (response, output, answer) = if approved {
                    let response = json!({"type": "tool-approval-response", "approvalId": id, "approved": true});
                    (response, json!({"type": "json", "value": {"deleted": path}}), format!("Deleted {path}."))
                } else {
                    let reason = "I still need it.";
                    let response = json!({"type": "tool-approval-response", "approvalId": id, "approved": false,
                                          "reason": reason});
                    let answer = format!("All right, I kept {path}.");
                    (response, json!({"type": "execution-denied", "reason": reason}), answer)
                };
                messages.push(json!({"role": "tool", "content": [response, result(&call, "delete_file", output)]}));
                messages.push(assistant_text(answer));
            }
        }
        exchange += 1;
    }
    for pad in 0..filler - messages.len() {
        messages.push(if pad % 2 == 0 { user("Thanks.".into()) } else { assistant_text("You're welcome.".into()) });
    }
    let input = json!({"path": "notes.txt"});
    let id = approval(&signer, messages.len(), LAST_CALL, &input);
    messages.push(user("Delete notes.txt.".into()));
    messages.push(gated("I will delete notes.txt once you approve.".into(), LAST_CALL, &input, &id));
    let mut tool = vec![json!({"type": "tool-approval-response", "approvalId": id, "approved": true})];
    if settled {
        tool.push(result(LAST_CALL, "delete_file", json!({"type": "json", "value": {"deleted": "notes.txt"}})));
    }
    messages.push(json!({"role": "tool", "content": tool}));
    assert_eq!(messages.len(), size);
    serde_json::to_string(&messages).expect("JSON")
}

fn history(size: usize, settled: bool) -> Vec<ModelMessage> {
    parse_messages_str(&history_json(size, settled)).expect("a valid history")
}

/// A model whose every turn is text and `stop`.
fn model() -> ScriptedModel {
    ScriptedModel::new(vec![vec![ScriptPart::Text { text: "Done.".into() }]]).expect("one turn")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().expect("a tokio runtime")
}

/// The server's engine settings over `messages`.
fn request(messages: Vec<ModelMessage>, toolkit: &Toolkit) -> TextRequest {
    TextRequest::new(messages).toolkit(Toolkit::clone(toolkit)).approval_signer(signer())
}

/// Makes sure the benchmarks measure what they claim: the signed approval
/// verifies, the call runs before the model step, and the settled history
/// has nothing left to resolve.
fn sanity_check(runtime: &tokio::runtime::Runtime, size: usize, toolkit: &Toolkit) {
    let result = runtime.block_on(generate_text(&model(), request(history(size, false), toolkit))).expect("a turn");
    assert_eq!(result.preresolved.len(), 1);
    assert_eq!(result.preresolved[0].output, ToolResultOutput::json(json!({"deleted": "notes.txt"})));
    assert_eq!(result.text(), "Done.");
    let settled = runtime.block_on(generate_text(&model(), request(history(size, true), toolkit))).expect("a turn");
    assert!(settled.preresolved.is_empty());
    toolgate::prompt::into_prompt(history(size, true)).expect("every call has a result");
}

fn stages(c: &mut Criterion) {
    let runtime = runtime();
    let toolkit = toolgate::demo::toolkit();
    let model = model();
    for size in SIZES {
        sanity_check(&runtime, size, &toolkit);
    }

    let mut group = c.benchmark_group("floor");
    for size in SIZES {
        let json = history_json(size, false);
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &json, |b, json| {
            b.iter(|| {
                let value: Value = serde_json::from_str(std::hint::black_box(json)).expect("JSON");
                serde_json::to_vec(&value).expect("serializable")
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("parse");
    for size in SIZES {
        let json = history_json(size, false);
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &json, |b, json| {
            b.iter(|| parse_messages_str(std::hint::black_box(json)).expect("a valid history"))
        });
    }
    group.finish();

    // The request (and its history clone) is built untimed; the stream, never
    // polled, is returned so criterion drops it outside the timing.
    let mut group = c.benchmark_group("prepare");
    for size in SIZES {
        group.throughput(Throughput::Elements(size as u64));
        for (name, settled) in [("approved", false), ("settled", true)] {
            let history = history(size, settled);
            group.bench_with_input(BenchmarkId::new(name, size), &history, |b, history| {
                b.to_async(&runtime).iter_batched(
                    || request(history.clone(), &toolkit),
                    |request| async { stream_text(&model, request).await.expect("a valid history") },
                    BatchSize::SmallInput,
                )
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("prompt");
    for size in SIZES {
        let history = history(size, true);
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &history, |b, history| {
            b.iter_batched(
                || history.clone(),
                |history| toolgate::prompt::into_prompt(history).expect("a prompt"),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();

    let mut group = c.benchmark_group("turn");
    for size in SIZES {
        let history = history(size, false);
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &history, |b, history| {
            b.to_async(&runtime).iter_batched(
                || request(history.clone(), &toolkit),
                |request| async { generate_text(&model, request).await.expect("the continuation succeeds") },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = stages
}
criterion_main!(benches);
