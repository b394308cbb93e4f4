//! The UI side of one approval continuation, stage by stage, on the bodies
//! `toolgate-bench` sends to the servers (histories of N UI messages ending in
//! an approved `delete_file`, approvals signed; see `toolgate_bench::bodies`).
//!
//! - `ui_floor/N`: the serde_json floor of the body (parse into a `Value`,
//!   serialize back), the reference `toolgate-bench` divides by.
//! - `ui_parse/N`: `ChatRequest::from_json` of the body (UI messages, strict).
//! - `ui_convert/N`: `into_model_messages` of those UI messages (as the
//!   stateless server converts them: moving, not copying; the copy to move
//!   from is made untimed).
//! - `ui_encode`: a whole continuation response (the pre-resolved output,
//!   one text step, finish) through `UiStreamEncoder::encode` and `sse_frame`;
//!   the parts come from one real engine run, so they are what the server encodes.
//! - `ui_turn/N`: the server's work for one request without HTTP: parse,
//!   convert, the engine's `stream_text` (signed approvals, demo tools, a
//!   scripted model answering "Done.") drained, every part encoded and framed.
//!
//! The engine's own stages (parse of model messages, prepare, prompt) are in
//! `crates/toolgate/benches/stages.rs`. Throughput is N elements (messages),
//! so time per message can be compared across sizes.
//!
//! `cargo bench -p toolgate-bench --bench ui` (`-- --quick` for a smoke run).

use std::time::Duration;

/// The allocator of the `toolgate` binary, so the stages cost what they cost there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use toolgate::approval::ApprovalSigner;
use toolgate::model::ScriptPart;
use toolgate::protocol::StreamPart;
use toolgate::{ModelMessage, ScriptedModel, TextRequest, Toolkit, stream_text};
use toolgate_bench::bodies::continuation_body;
use toolgate_bench::floor::round_trip;
use toolgate_ui::{
    ChatRequest, EncoderOptions, SSE_DONE, UiStreamEncoder, convert_to_model_messages, into_model_messages, sse_frame,
};

const SIZES: [usize; 4] = [10, 100, 1000, 10000];
const SECRET: &str = "toolgate-bench-ui";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().expect("a tokio runtime")
}

fn signer() -> ApprovalSigner {
    ApprovalSigner::new(SECRET).expect("a secret")
}

fn model() -> ScriptedModel {
    ScriptedModel::new(vec![vec![ScriptPart::Text { text: "Done.".into() }]]).expect("one turn")
}

fn body(size: usize) -> Vec<u8> {
    continuation_body(size, "bench", &signer()).expect("a body").json.to_vec()
}

fn engine_request(messages: Vec<ModelMessage>, toolkit: &Toolkit) -> TextRequest {
    TextRequest::new(messages).toolkit(Toolkit::clone(toolkit)).approval_signer(signer())
}

/// Every frame of the response, as the server writes them.
fn encode(parts: &[StreamPart], message_id: &str) -> Vec<String> {
    let mut encoder =
        UiStreamEncoder::new(EncoderOptions { message_id: message_id.to_owned(), signature_field: false });
    let mut frames: Vec<String> =
        parts.iter().flat_map(|part| encoder.encode(part)).map(|chunk| sse_frame(&chunk)).collect();
    frames.push(SSE_DONE.to_owned());
    frames
}

/// One request as the server handles it, minus HTTP: the frames of the response.
async fn turn(body: &[u8], model: &ScriptedModel, toolkit: &Toolkit) -> Vec<String> {
    let request = ChatRequest::from_json(body).expect("a chat request");
    let message_id = request.continued_message_id().unwrap_or("m").to_owned();
    let messages = into_model_messages(request.messages).expect("convertible");
    let stream = stream_text(model, engine_request(messages, toolkit)).await.expect("a valid history");
    let parts: Vec<StreamPart> = stream.collect().await;
    encode(&parts, &message_id)
}

/// Makes sure the benchmark measures what it claims: the signed approval verifies and the call runs.
fn sanity_check(runtime: &tokio::runtime::Runtime, body: &[u8], toolkit: &Toolkit) {
    let frames = runtime.block_on(turn(body, &model(), toolkit));
    let response = frames.concat();
    toolgate_bench::sse::check_continuation(&response).unwrap_or_else(|error| panic!("{error}: {response}"));
}

fn ui(c: &mut Criterion) {
    let runtime = runtime();
    let toolkit = toolgate::demo::toolkit();
    let model = model();

    let mut group = c.benchmark_group("ui_floor");
    for size in SIZES {
        let body = body(size);
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &body, |b, body| {
            b.iter(|| round_trip(std::hint::black_box(body)).expect("JSON"))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("ui_parse");
    for size in SIZES {
        let body = body(size);
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &body, |b, body| {
            b.iter(|| ChatRequest::from_json(std::hint::black_box(body)).expect("a chat request"))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("ui_convert");
    for size in SIZES {
        let request = ChatRequest::from_json(&body(size)).expect("a chat request");
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &request.messages, |b, messages| {
            b.iter_batched(
                || messages.clone(),
                |messages| into_model_messages(messages).expect("convertible"),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();

    let mut group = c.benchmark_group("ui_encode");
    let parts: Vec<StreamPart> = runtime.block_on(async {
        let request = ChatRequest::from_json(&body(10)).expect("a chat request");
        let messages = convert_to_model_messages(&request.messages).expect("convertible");
        stream_text(&model, engine_request(messages, &toolkit)).await.expect("a valid history").collect().await
    });
    assert!(parts.len() >= 6, "a continuation response has the output, a text step and finish: {parts:?}");
    group.throughput(Throughput::Elements(parts.len() as u64));
    group.bench_function("continuation_response", |b| b.iter(|| encode(std::hint::black_box(&parts), "msg")));
    group.finish();

    let mut group = c.benchmark_group("ui_turn");
    for size in SIZES {
        let body = body(size);
        sanity_check(&runtime, &body, &toolkit);
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &body, |b, body| {
            b.to_async(&runtime).iter_batched(|| (), |()| turn(body, &model, &toolkit), BatchSize::SmallInput)
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = ui
}
criterion_main!(benches);
