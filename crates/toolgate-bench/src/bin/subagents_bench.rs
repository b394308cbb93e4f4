//! `subagents_bench`: sub-agents in process, on a store (a fresh SQLite file
//! by default, or `--store postgres://...`).
//!
//! `--store memory` runs on the engine's in-memory store, to tell the
//! engine's share of a round trip from the database's.
//!
//! 1. **Round trip**: the root calls an agent that calls an agent that calls
//!    an agent that calls a gated tool (depth 3); the request that asks, then
//!    the request that approves and runs to the root's answer, timed together;
//!    against the flat round trip (the root calls the gated tool itself),
//!    alternated in the same run, one request at a time. Also the bytes stored
//!    for one finished tree at each depth 0 to 3 (the root's messages and each
//!    sub-run's stored state).
//! 2. **Paused trees**: `--trees` depth-2 trees asked and left paused; this
//!    process's RSS (the engine is the server's) after each tenth.
//!
//! `--http` measures the round trip over HTTP instead, as a stock AI SDK
//! client makes it (`toolgate_bench::subagents`): two release `toolgate serve
//! --store sqlite` (a flat config and one with three chained `[[agent]]`
//! tables), one keep-alive connection each, flat and depth 3 alternated, one
//! request at a time; `--runs` such runs back to back, each reported.
//!
//! Prints markdown tables to stdout, progress to stderr.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use serde_json::{Value, json};
use toolgate::ledger::{ConversationStore, LedgerConfig, LedgerStore};
use toolgate::protocol::{ToolApprovalResponsePart, ToolPart};
use toolgate::{Agent, ModelMessage, ScriptedModel, TextRequest, Tool, ToolError, Toolkit, generate_text};
use toolgate_bench::process::{Process, machine_summary};
use toolgate_store::{SqlStore, StoreSpec};

/// The allocator of the `toolgate` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Sub-agents: a depth-3 approval round trip against the flat one, and memory of paused trees.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The store: `sqlite` (a fresh file in a temporary directory), `memory` (the engine's in-memory
    /// store, for profiling the engine alone) or a `postgres://` URL.
    #[arg(long, default_value = "sqlite")]
    store: String,
    /// Round trips of each kind.
    #[arg(long, default_value_t = 300)]
    rounds: usize,
    /// Paused depth-2 trees to hold.
    #[arg(long, default_value_t = 10_000)]
    trees: usize,
    /// Over HTTP: two `toolgate serve --store sqlite` (flat, and three chained `[[agent]]` tables), one
    /// connection each; `--store` and `--trees` do not apply.
    #[arg(long)]
    http: bool,
    /// With `--http`: runs of `--rounds` round trips of each kind, back to back, on the same servers.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// With `--http`: the `toolgate` binary (default: the one beside this bench, as `cargo build --release` puts it).
    #[arg(long)]
    toolgate: Option<PathBuf>,
}

fn script(tool: &str, input: Value, done: &str) -> ScriptedModel {
    let turns = json!({"turns": [
        [{"type": "tool-call", "toolCallId": "call-1", "toolName": tool, "input": input}],
        [{"type": "text", "text": done}]
    ]});
    ScriptedModel::from_json(&turns.to_string()).expect("a valid script")
}

/// The root's model and toolkit for a tree of `depth` agents over a gated `delete_file`.
fn tree(depth: usize, runs: &Arc<AtomicUsize>) -> (ScriptedModel, Toolkit) {
    let runs = Arc::clone(runs);
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    let delete = Tool::dynamic("delete_file", schema).needs_approval(true).handler(move |input: Value, _| {
        let runs = Arc::clone(&runs);
        async move {
            runs.fetch_add(1, Ordering::Relaxed);
            Ok::<_, ToolError>(json!({"deleted": input["path"]}))
        }
    });
    let mut tools = vec![delete];
    let mut next = ("delete_file".to_owned(), json!({"path": "notes.txt"}));
    for level in (1..=depth).rev() {
        let model = script(&next.0, next.1.clone(), &format!("agent{level} done"));
        let agent =
            Agent::new(model).instructions(format!("You are agent {level}.")).toolkit(Toolkit::new(tools).unwrap());
        tools = vec![Tool::agent(format!("agent{level}"), agent)];
        next = (format!("agent{level}"), json!({"task": "go on"}));
    }
    (script(&next.0, next.1, "All tidy."), Toolkit::new(tools).unwrap())
}

fn request(history: Vec<ModelMessage>, toolkit: &Toolkit, ledger: &LedgerConfig, chat: &str) -> TextRequest {
    TextRequest::new(history).toolkit(toolkit.clone()).ledger(ledger.owned(Some("alice"), chat).principal("alice"))
}

/// Asks in `chat`; returns the history with the approval request.
async fn ask(
    model: &ScriptedModel,
    toolkit: &Toolkit,
    ledger: &LedgerConfig,
    chat: &str,
) -> anyhow::Result<(Vec<ModelMessage>, String)> {
    let mut history = vec![ModelMessage::user("tidy up")];
    let asked = generate_text(model, request(history.clone(), toolkit, ledger, chat)).await?;
    let approval_id = asked.approval_requests().first().context("no approval request")?.approval_id.clone();
    history.extend(asked.response_messages);
    Ok((history, approval_id))
}

/// One round trip; returns its time and the root's final history.
async fn round_trip(
    depth: usize,
    ledger: &LedgerConfig,
    chat: &str,
    runs: &Arc<AtomicUsize>,
) -> anyhow::Result<(Duration, Vec<ModelMessage>)> {
    let (model, toolkit) = tree(depth, runs);
    let started = Instant::now();
    let (mut history, approval_id) = ask(&model, &toolkit, ledger, chat).await?;
    history.push(ModelMessage::tool(vec![ToolPart::ToolApprovalResponse(ToolApprovalResponsePart {
        approval_id,
        approved: true,
        reason: None,
        provider_executed: None,
        edited_input: None,
    })]));
    let done = generate_text(&model, request(history.clone(), &toolkit, ledger, chat)).await?;
    let elapsed = started.elapsed();
    anyhow::ensure!(done.text() == "All tidy.", "the root did not answer: {:?}", done.text());
    history.extend(done.response_messages);
    Ok((elapsed, history))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

/// The bytes one finished tree keeps: the root's messages and each sub-run's state.
async fn stored_bytes(
    store: &dyn LedgerStore,
    history: &[ModelMessage],
    chat: &str,
    depth: usize,
) -> anyhow::Result<usize> {
    let mut bytes = serde_json::to_string(history)?.len();
    // The sub-runs' keys, as `toolgate::agent` documents them: the root's key, then each call id after U+001E.
    let mut key = toolgate::ledger::conversation_key(Some("alice"), chat);
    for _ in 0..depth {
        key.push('\u{1e}');
        key.push_str("call-1");
        let stored = ConversationStore::conversation(store, &key).await?.context("a sub-run's state")?;
        bytes += serde_json::to_string(&stored.messages)?.len();
    }
    Ok(bytes)
}

/// The p50/p99 table of one run, flat first.
fn print_round_trips(header: &str, rounds: usize, times: &mut [Vec<Duration>; 2]) {
    for list in times.iter_mut() {
        list.sort();
    }
    println!("| {header} ({rounds} each, alternated) | p50 | p99 | p50 ratio |");
    println!("|---|---:|---:|---:|");
    let flat = percentile(&times[0], 0.5);
    for (name, list) in
        [("flat: root → gated call", &times[0]), ("depth 3: root → agent → agent → agent → gated call", &times[1])]
    {
        let ratio = percentile(list, 0.5).as_secs_f64() / flat.as_secs_f64();
        println!("| {name} | {} | {} | {ratio:.2}× |", ms(percentile(list, 0.5)), ms(percentile(list, 0.99)));
    }
}

/// `--http`: the round trips over HTTP against two servers.
async fn http(args: &Args) -> anyhow::Result<()> {
    use toolgate_bench::subagents;
    let toolgate = match &args.toolgate {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("toolgate"),
    };
    anyhow::ensure!(toolgate.exists(), "no {} (build it: cargo build --release -p toolgate-cli)", toolgate.display());
    let work = tempfile::Builder::new().prefix("subagents-bench.").tempdir()?;
    let servers =
        [subagents::serve(&toolgate, work.path(), "flat", 0)?, subagents::serve(&toolgate, work.path(), "deep", 3)?];
    let mut clients = [subagents::client(&servers[0])?, subagents::client(&servers[1])?];
    for (server, name) in servers.iter().zip(["flat", "depth 3"]) {
        eprintln!(
            "subagents_bench: {name}: toolgate serve --store sqlite on {} (pid {})",
            server.addr, server.process.pid
        );
    }
    println!(
        "{}
",
        machine_summary()
    );
    let run_id = std::process::id();
    for run in 1..=args.runs {
        let mut times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        for round in 0..args.rounds {
            for (slot, client) in clients.iter_mut().enumerate() {
                let chat = format!("http-{run_id}-{run}-{slot}-{round}");
                let elapsed = subagents::round_trip(client, &chat)
                    .await
                    .map_err(|error| anyhow::anyhow!("{error:#}\nthe server's log:\n{}", servers[slot].log_tail(20)))?;
                times[slot].push(elapsed);
            }
        }
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let load: Vec<&str> = load.split_whitespace().take(3).collect();
        println!("run {run} of {}, over HTTP, load average after it: {}\n", args.runs, load.join(" "));
        print_round_trips("round trip over HTTP, one connection", args.rounds, &mut times);
        println!();
    }
    drop(servers);
    for (file, name) in [("flat.log", "flat"), ("deep.log", "depth 3")] {
        let log = std::fs::read_to_string(work.path().join(file))?;
        for line in log.lines().filter(|line| line.contains(" WARN ") || line.contains(" ERROR ")) {
            eprintln!("subagents_bench: the {name} server logged: {line}");
        }
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.http {
        return http(&args).await;
    }
    let dir = tempfile::tempdir()?;
    let spec = match args.store.as_str() {
        "sqlite" => StoreSpec::Sqlite(dir.path().join("subagents.db")),
        url => StoreSpec::Postgres(url.to_owned()),
    };
    let store: Arc<dyn LedgerStore> = match spec {
        // The engine's own reference store: what is left of the round trip without a database.
        _ if args.store == "memory" => Arc::new(toolgate::ledger::MemoryStore::new()),
        spec => Arc::new(SqlStore::open(&spec).await?),
    };
    let ledger = LedgerConfig::new(Arc::clone(&store));
    let runs = Arc::new(AtomicUsize::new(0));
    let run_id = std::process::id();
    eprintln!("subagents_bench: {} round trips of each kind on {}", args.rounds, args.store);
    let mut times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for round in 0..args.rounds {
        for (slot, depth) in [(0, 0), (1, 3)] {
            let chat = format!("rt-{run_id}-{depth}-{round}");
            times[slot].push(round_trip(depth, &ledger, &chat, &runs).await?.0);
        }
    }
    anyhow::ensure!(runs.load(Ordering::Relaxed) == 2 * args.rounds, "every approved call ran once");
    println!("{}\n", machine_summary());
    print_round_trips("round trip", args.rounds, &mut times);
    println!("\n| depth | bytes stored for one finished tree |\n|---:|---:|");
    for depth in 0..=3 {
        let chat = format!("size-{run_id}-{depth}");
        let (_, history) = round_trip(depth, &ledger, &chat, &runs).await?;
        println!("| {depth} | {} |", stored_bytes(store.as_ref(), &history, &chat, depth).await?);
    }

    eprintln!("subagents_bench: holding {} paused depth-2 trees", args.trees);
    let me = Process { pid: std::process::id() };
    let (model, toolkit) = tree(2, &runs);
    println!("\n| paused depth-2 trees in the store | this process's RSS |\n|---:|---:|");
    let step = (args.trees / 10).max(1);
    for tree_index in 0..args.trees {
        ask(&model, &toolkit, &ledger, &format!("paused-{run_id}-{tree_index}")).await?;
        if (tree_index + 1) % step == 0 {
            let rss = me.status_bytes("VmRSS")? as f64 / (1024.0 * 1024.0);
            println!("| {} | {rss:.1} MiB |", tree_index + 1);
        }
    }
    drop(dir);
    Ok(())
}
