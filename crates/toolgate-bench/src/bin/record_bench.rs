//! `record_bench`: what putting every call on record costs an allowed call.
//!
//! Runs one engine round trip after another in process (`generate_text`: the
//! model calls `get_weather`, which its policy lets run, then answers), each
//! in a conversation of its own, and times them: without a ledger (no store
//! work at all, which is also what an allowed call cost with a ledger before
//! calls were recorded), and with a ledger on each store given (the one store
//! write this adds: the call's `executed` event). Prints a markdown table.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use serde_json::json;
use toolgate::ledger::{LedgerConfig, LedgerStore};
use toolgate::protocol::ModelMessage;
use toolgate::{ScriptedModel, TextRequest, Tool, ToolError, Toolkit, generate_text};
use toolgate_store::{StoreSpec, open_store};

/// The allocator of the `toolgate` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Times an allowed call's round trip without a ledger and with each store.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Stores to measure besides none: `memory`, `sqlite` (a fresh file), a `postgres://` URL.
    #[arg(long = "store", default_values_t = ["memory".to_owned(), "sqlite".to_owned()])]
    stores: Vec<String>,
    /// Timed round trips per store.
    #[arg(long, default_value_t = 5_000)]
    requests: usize,
    /// Untimed round trips first.
    #[arg(long, default_value_t = 500)]
    warmup: usize,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    println!("| store | round trips | p50 | p99 | mean |");
    println!("|---|---:|---:|---:|---:|");
    let none = measure(None, &args).await?;
    println!("{}", row("none", &none));
    for text in &args.stores {
        let spec = StoreSpec::parse(text, dir.path()).with_context(|| format!("store `{text}`"))?;
        let store = open_store(&spec).await?.context("`none` is measured already")?;
        let timed = measure(Some(store), &args).await?;
        println!("{}", row(spec_name(&spec), &timed));
    }
    Ok(())
}

fn spec_name(spec: &StoreSpec) -> &'static str {
    match spec {
        StoreSpec::Memory => "memory",
        StoreSpec::Sqlite(_) => "sqlite",
        StoreSpec::Postgres(_) => "postgres",
        _ => "other",
    }
}

/// The sorted latencies of `args.requests` round trips (after the warm-up).
async fn measure(store: Option<Arc<dyn LedgerStore>>, args: &Args) -> anyhow::Result<Vec<Duration>> {
    let model = model()?;
    let toolkit = Toolkit::new(vec![weather()])?;
    let config = store.map(LedgerConfig::new);
    let mut timed = Vec::with_capacity(args.requests);
    for index in 0..args.warmup + args.requests {
        let mut request = TextRequest::new(vec![ModelMessage::user("weather?")]).toolkit(toolkit.clone());
        if let Some(config) = &config {
            request = request.ledger(config.conversation(format!("c{index}")).principal("alice"));
        }
        let started = Instant::now();
        generate_text(&model, request).await?;
        if index >= args.warmup {
            timed.push(started.elapsed());
        }
    }
    timed.sort();
    Ok(timed)
}

fn model() -> anyhow::Result<ScriptedModel> {
    let turns = json!({"turns": [
        [{"type": "tool-call", "toolCallId": "w", "toolName": "get_weather", "input": {"city": "Oslo"}},
         {"type": "finish", "finishReason": "tool-calls"}],
        [{"type": "text", "text": "Sunny."}, {"type": "finish", "finishReason": "stop"}]
    ]});
    Ok(ScriptedModel::from_json(&turns.to_string())?)
}

fn weather() -> Tool {
    Tool::function::<serde_json::Value>("get_weather")
        .handler(|_input: serde_json::Value, _context| async { Ok::<_, ToolError>(json!({"temperatureC": 21})) })
}

fn row(name: &str, sorted: &[Duration]) -> String {
    let at = |q: f64| sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)];
    let mean = sorted.iter().sum::<Duration>() / u32::try_from(sorted.len()).unwrap_or(u32::MAX).max(1);
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1000.0);
    format!("| {name} | {} | {} | {} | {} |", sorted.len(), ms(at(0.5)), ms(at(0.99)), ms(mean))
}
