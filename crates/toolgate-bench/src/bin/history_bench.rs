//! `history_bench`: rules with history terms against a full store.
//!
//! Fills a store with `--events` `executed` calls of `transfer_money` spread
//! over `--principals` principals and the last `--days` days (through
//! `ApprovalStore::append`, as the engine records them), then times a rule
//! evaluation with a history term (`StoredGate::decide` on a fresh gate each
//! time, as a request does): a `count` and a `sum` over the caller's last
//! 24 hours, and a `count` over one of their conversations' last 24 hours,
//! for random principals. Then times an engine round trip of an
//! allowed call (in process, the model scripted) on that store with one
//! history rule and without. Prints markdown tables. On Postgres the bench
//! runs `ANALYZE` after the fill (as autovacuum would soon after a bulk load).
//!
//! `--http` times the stored round trip over HTTP instead (no fill): four
//! release `toolgate serve` (`--store`: a fresh SQLite file each, or one
//! shared Postgres URL), a call of `transfer_money` that runs without
//! approval and one that is approved, each with no rule and with one
//! history rule (`count` over the caller's last 24 hours, a limit never
//! reached, so the rule is evaluated and guards the call's `allowed` event
//! but never fires), in alternating blocks (`toolgate_bench::stored`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use serde_json::json;
use toolgate::approval::lifecycle::direct::{self, DirectCall};
use toolgate::ledger::{LedgerConfig, LedgerStore, conversation_key};
use toolgate::protocol::ModelMessage;
use toolgate::tool::GateCall;
use toolgate::{ScriptedModel, TextRequest, Tool, ToolError, Toolkit, generate_text};
use toolgate_bench::process::machine_summary;
use toolgate_bench::stored::{self, Kind, Plan, Variant};
use toolgate_policy::{Policy, StoredGate, now_ms};
use toolgate_store::{StoreSpec, open_store};

/// The allocator of the `toolgate` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DAY: i64 = 24 * 60 * 60 * 1000;

/// Rules with history terms against a full store.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The store: `sqlite` (a fresh file) or a `postgres://` URL (an empty database).
    #[arg(long, default_value = "sqlite")]
    store: String,
    /// Recorded calls to fill.
    #[arg(long, default_value_t = 1_000_000)]
    events: usize,
    /// Principals they are spread over.
    #[arg(long, default_value_t = 100_000)]
    principals: usize,
    /// Days they are spread over (the rules look at the last one).
    #[arg(long, default_value_t = 30)]
    days: i64,
    /// Timed evaluations of each rule.
    #[arg(long, default_value_t = 2_000)]
    evaluations: usize,
    /// Timed round trips with and without the rule.
    #[arg(long, default_value_t = 2_000)]
    round_trips: usize,
    /// Over HTTP: the stored round trips against release servers, with and without the rule (no fill).
    #[arg(long)]
    http: bool,
    /// With `--http`: the `toolgate` binary (default: the one beside this bench).
    #[arg(long)]
    toolgate: Option<std::path::PathBuf>,
    /// With `--http`: alternating blocks per server.
    #[arg(long, default_value_t = 10)]
    blocks: usize,
    /// With `--http`: round trips per block.
    #[arg(long, default_value_t = 200)]
    block: usize,
    /// With `--http`: principals the round trips rotate over.
    #[arg(long, default_value_t = 100)]
    http_principals: usize,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.http {
        return http(&args).await;
    }
    let dir = tempfile::tempdir()?;
    let spec = StoreSpec::parse(&args.store, dir.path()).context("--store")?;
    let store = open_store(&spec).await?.context("the store keeps no history")?;
    let filled = Instant::now();
    fill(&store, &args).await?;
    eprintln!("filled {} events in {:.1} s", args.events, filled.elapsed().as_secs_f64());
    if let StoreSpec::Postgres(url) = &spec {
        eprintln!("ANALYZE took {:.1} s", analyze(url).await?.as_secs_f64());
    }
    println!("{}\n", machine_summary());

    println!("| store | rule | evaluations | p50 | p99 | max |");
    println!("|---|---|---:|---:|---:|---:|");
    for (name, term) in [
        ("count", "count = { gte = 100 }"),
        ("sum", "sum = { path = \"/amount\", plus_this_call = true, gt = 1000000 }"),
        ("count, conversation", "scope = \"conversation\", count = { gte = 100 }"),
    ] {
        let policy = Arc::new(Policy::from_toml_str(&rule(term))?);
        let timed = evaluate(&store, &policy, &args).await;
        println!("{}", row(&spec, name, &timed));
    }

    println!();
    println!("| store | round trip | round trips | p50 | p99 | mean |");
    println!("|---|---|---:|---:|---:|---:|");
    for (name, rules) in [("no rule", String::new()), ("one count rule", rule("count = { gte = 100 }"))] {
        let policy = Arc::new(Policy::from_toml_str(&rules)?);
        let timed = round_trips(&store, &policy, &args).await?;
        println!("{}", row(&spec, name, &timed));
    }
    Ok(())
}

/// `--http`: the four servers, the round trips alternated, one table.
async fn http(args: &Args) -> anyhow::Result<()> {
    let toolgate = match &args.toolgate {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("toolgate"),
    };
    anyhow::ensure!(toolgate.exists(), "no {} (build it: cargo build --release -p toolgate-cli)", toolgate.display());
    let rule = "[[rule]]\nname = \"daily-limit\"\naction = \"deny\"\ntool = \"transfer_money\"\n\
                history = { window = \"24h\", scope = \"principal\", count = { gte = 1000000000 } }\n";
    let variant =
        |name: &str, kind, config: &str| Variant { name: name.into(), kind, config: config.into(), flags: vec![] };
    let variants = [
        variant("allowed-no-rule", Kind::Allowed, ""),
        variant("allowed-count-rule", Kind::Allowed, rule),
        variant("approval-no-rule", Kind::Approval, ""),
        variant("approval-count-rule", Kind::Approval, rule),
    ];
    let plan = Plan {
        toolgate,
        store: args.store.clone(),
        blocks: args.blocks,
        block: args.block,
        warmup: args.block.min(100),
        principals: args.http_principals,
    };
    println!("{}\n", machine_summary());
    let started = stored::utc_now();
    let comparison = stored::compare(&plan, &variants).await?;
    let store = if args.store.starts_with("postgres") { "postgres" } else { "sqlite" };
    println!("stored round trip over HTTP on {store}, started {started}, one connection per server\n");
    println!("{}", stored::table(&comparison, &[(1, 0), (3, 2)]));
    Ok(())
}

/// Runs `ANALYZE` on the Postgres database at `url`, as autovacuum does soon after a bulk load.
async fn analyze(url: &str) -> anyhow::Result<Duration> {
    use sqlx::Connection as _;
    let started = Instant::now();
    let mut connection = sqlx::postgres::PgConnection::connect(url).await.context("connecting to run ANALYZE")?;
    sqlx::raw_sql("ANALYZE").execute(&mut connection).await.context("ANALYZE")?;
    connection.close().await?;
    Ok(started.elapsed())
}

fn rule(term: &str) -> String {
    format!(
        "[[rule]]\nname = \"limit\"\naction = \"deny\"\ntool = \"transfer_money\"\n\
         history = {{ window = \"24h\", {term} }}\n"
    )
}

fn principal(index: usize) -> String {
    format!("user-{index:06}")
}

/// Appends the calls in batches, oldest first, evenly over the days.
async fn fill(store: &Arc<dyn LedgerStore>, args: &Args) -> anyhow::Result<()> {
    let config = LedgerConfig::new(Arc::clone(store));
    let now = now_ms();
    let span = args.days * DAY;
    let step = (span / args.events.max(1) as i64).max(1);
    let mut batch = Vec::with_capacity(5_000);
    for index in 0..args.events {
        let who = principal(index * 7_919 % args.principals);
        let ledger = config.owned(Some(&who), &format!("chat-{}", index % 1_000)).principal(&who);
        let input = json!({"amount": (index % 500) + 1, "to": format!("payee-{}", index % 50)});
        let call = DirectCall { tool_call_id: "c", tool_name: "transfer_money", input: &input };
        let at = now - span + step * index as i64;
        batch.push(direct::ran(&ledger, call, Ok(&json!({"ok": true})), at));
        if batch.len() == batch.capacity() {
            store.append(&batch).await?;
            batch.clear();
        }
    }
    store.append(&batch).await?;
    Ok(())
}

/// The sorted times of `evaluations` decisions for random principals.
async fn evaluate(store: &Arc<dyn LedgerStore>, policy: &Arc<Policy>, args: &Args) -> Vec<Duration> {
    let input = json!({"amount": 10, "to": "payee-1"});
    let mut timed = Vec::with_capacity(args.evaluations);
    for index in 0..args.evaluations + 100 {
        let who = principal(index * 104_729 % args.principals);
        // One of the fill's conversation ids, as this principal's conversation (its key).
        let chat = conversation_key(Some(&who), &format!("chat-{}", index % 1_000));
        let gate =
            StoredGate::new(Arc::clone(policy), Arc::clone(store), Some(chat.clone()), Some(who.clone()), now_ms())
                .with_history(Arc::clone(store), Arc::default());
        let call = GateCall {
            tool_name: "transfer_money",
            input: &input,
            tool_call_id: "now",
            conversation_id: Some(&chat),
            principal: Some(&who),
            groups: &[],
        };
        let started = Instant::now();
        std::hint::black_box(gate.decide(&call).await);
        if index >= 100 {
            timed.push(started.elapsed());
        }
    }
    timed.sort();
    timed
}

/// The sorted times of engine round trips of an allowed call, gated by `policy`, recorded in `store`.
async fn round_trips(store: &Arc<dyn LedgerStore>, policy: &Arc<Policy>, args: &Args) -> anyhow::Result<Vec<Duration>> {
    let turns = json!({"turns": [
        [{"type": "tool-call", "toolCallId": "t", "toolName": "transfer_money", "input": {"amount": 5, "to": "bob"}},
         {"type": "finish", "finishReason": "tool-calls"}],
        [{"type": "text", "text": "Sent."}, {"type": "finish", "finishReason": "stop"}]
    ]});
    let model = ScriptedModel::from_json(&turns.to_string())?;
    let transfer = Tool::function::<serde_json::Value>("transfer_money")
        .handler(|_input: serde_json::Value, _| async { Ok::<_, ToolError>(json!({"sent": true})) });
    let toolkit = Toolkit::new(vec![transfer])?;
    let config = LedgerConfig::new(Arc::clone(store));
    let mut timed = Vec::with_capacity(args.round_trips);
    for index in 0..args.round_trips + 100 {
        let who = principal(index * 104_729 % args.principals);
        let chat = format!("bench-{index}");
        let ledger = config.owned(Some(&who), &chat).principal(&who);
        let gate = StoredGate::new(
            Arc::clone(policy),
            Arc::clone(store),
            Some(ledger.conversation_id.clone()),
            Some(who.clone()),
            now_ms(),
        )
        .with_history(Arc::clone(store), Arc::default());
        let request = TextRequest::new(vec![ModelMessage::user("pay bob")])
            .toolkit(toolkit.clone())
            .gate(Arc::new(gate))
            .conversation_id(&ledger.conversation_id)
            .principal(&who)
            .ledger(ledger);
        let started = Instant::now();
        generate_text(&model, request).await?;
        if index >= 100 {
            timed.push(started.elapsed());
        }
    }
    timed.sort();
    Ok(timed)
}

fn row(spec: &StoreSpec, name: &str, sorted: &[Duration]) -> String {
    let store = match spec {
        StoreSpec::Postgres(_) => "postgres",
        _ => "sqlite",
    };
    let at = |q: f64| sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)];
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1000.0);
    let mean = sorted.iter().sum::<Duration>() / u32::try_from(sorted.len()).unwrap_or(u32::MAX).max(1);
    let last = sorted.last().copied().unwrap_or_default();
    let tail = if name.contains("round") || name.contains("rule") { ms(mean) } else { ms(last) };
    format!("| {store} | {name} | {} | {} | {} | {tail} |", sorted.len(), ms(at(0.5)), ms(at(0.99)))
}
