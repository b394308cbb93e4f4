//! Measures the local model on this machine: prompt evaluation, generation speed (tokens/s) and time to
//! the first tool call.
//!
//! `cargo run --release -p toolgate-local --example bench [-- MODEL.gguf]` (default: the pulled default model).

use std::time::{Duration, Instant};

use futures::StreamExt;
use toolgate::protocol::{ModelRequest, ModelStreamPart};
use toolgate::{LanguageModel, ModelMessage, ToolChoice};
use toolgate_local::{LocalModel, pull};

const RUNS: usize = 3;

async fn timed(model: &LocalModel, request: ModelRequest) -> (Duration, Option<Duration>, Option<Duration>, u64, u64) {
    let start = Instant::now();
    let mut stream = model.stream(request).await.expect("the stream opens");
    let (mut first_part, mut tool_call, mut usage) = (None, None, Default::default());
    while let Some(part) = stream.next().await {
        let part = part.expect("no model error");
        first_part.get_or_insert_with(|| start.elapsed());
        match part {
            ModelStreamPart::ToolCall(_) => tool_call = Some(start.elapsed()),
            ModelStreamPart::Finish { usage: done, .. } => usage = done,
            _ => {}
        }
    }
    let usage: toolgate::Usage = usage;
    (start.elapsed(), first_part, tool_call, usage.input_tokens.unwrap_or(0), usage.output_tokens.unwrap_or(0))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let path = std::env::args().nth(1).map(Into::into).unwrap_or_else(pull::default_model_path);
    let load = Instant::now();
    let model = LocalModel::load(&path).unwrap_or_else(|error| panic!("{error}; {}", pull::missing_model_help()));
    println!("model: {} (loaded in {:.2?})", path.display(), load.elapsed());
    println!(
        "cores: {}, TOOLGATE_LOCAL_THREADS={:?} (default: all cores but one)",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::env::var("TOOLGATE_LOCAL_THREADS").ok()
    );
    let tools = toolgate::demo::toolkit().specs();
    let ask = |text: &str, choice: ToolChoice, max: u32| ModelRequest {
        prompt: vec![ModelMessage::user(text)].into(),
        tools: tools.clone(),
        tool_choice: choice,
        max_output_tokens: Some(max),
        ..ModelRequest::default()
    };

    // Text generation: clear the cache between runs by changing the prompt's first message.
    let mut speeds = Vec::new();
    let mut prompt_speeds = Vec::new();
    for run in 0..RUNS {
        let request = ModelRequest {
            prompt: vec![
                ModelMessage::System(toolgate::protocol::SystemMessage {
                    content: format!("Run {run}. You are a helpful assistant."),
                    provider_options: None,
                }),
                ModelMessage::user("Write a short story about a lighthouse keeper."),
            ]
            .into(),
            tool_choice: ToolChoice::None,
            max_output_tokens: Some(128),
            ..ModelRequest::default()
        };
        let (total, first, _, input, output) = timed(&model, request).await;
        let first = first.unwrap_or(total);
        prompt_speeds.push(input as f64 / first.as_secs_f64());
        speeds.push((output.saturating_sub(1)) as f64 / (total - first).as_secs_f64());
        println!(
            "text run {run}: {input} prompt tokens, {output} output tokens, first token {first:.2?}, total {total:.2?}"
        );
    }
    println!(
        "generation: {:.1} tokens/s (median of {RUNS}); prompt evaluation incl. first token: {:.0} tokens/s",
        median(speeds),
        median(prompt_speeds)
    );

    // Forced, then `auto` as in the web demo (call score, tool chosen by name, then the arguments). Run 0
    // evaluates the whole prompt; later runs reuse its cached prefix.
    let forced = ToolChoice::Tool { tool_name: "delete_file".into() };
    for (label, choice, prompt) in [
        ("forced delete_file", forced, "Please delete the file notes"),
        ("tool_choice auto", ToolChoice::Auto, "Delete the file notes"),
    ] {
        let mut calls = Vec::new();
        for run in 0..RUNS {
            let request = ask(&format!("{prompt}-{run}.txt"), choice.clone(), 64);
            let (total, _, call, input, output) = timed(&model, request).await;
            let call = call.unwrap_or_else(|| panic!("{label}: a tool call"));
            calls.push(call.as_secs_f64());
            println!(
                "{label} run {run}: {input} prompt tokens, {output} output tokens, tool call after {call:.2?} (total {total:.2?})"
            );
        }
        println!("time to first tool call ({label}): {:.2} s (median of {RUNS}, run 0 cold)", median(calls));
    }
}
