//! `receipts_bench`: what signed receipts and the audit chain cost.
//!
//! 1. Verification: writes an export of `--events` events (approvals of four
//!    events each, issued, voted, approved, executed, with a receipt for the
//!    decision and one for the outcome, a checkpoint every 10,000 events),
//!    sealed as a store seals them, then times its offline check: with
//!    `--toolgate PATH`, `toolgate audit verify --file --keys` run as a
//!    process; else the same verifier in process.
//! 2. The stored round trip: an approval issued, approved and run
//!    (`generate_text` twice, a new conversation each time) on SQLite, without
//!    receipts and with them (the store signing, and a sealer chaining every
//!    second and signing a checkpoint every minute, as the server's worker
//!    does), in alternating blocks of the same run. Prints markdown tables.
//!
//! `--http` times the round trip over HTTP instead (no export): two release
//! `toolgate serve --store sqlite` (`--toolgate`, default the binary beside
//! this bench), one signing receipts with its receipts worker sealing (the
//! default), one with `--no-receipts`, the approval round trip of
//! `toolgate_bench::stored` in alternating blocks of `--requests / --blocks`.

use std::io::{BufRead, BufWriter, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use serde_json::json;
use toolgate::approval::lifecycle::{ApprovalState, Decision, Vote};
use toolgate::ledger::{ApprovalRecord, AuditEvent, AuditKind, LedgerConfig, LedgerStore, RecordedDecision};
use toolgate::protocol::ModelMessage;
use toolgate::receipt::{
    EventLine, GENESIS, Jwks, LogLine, ReceiptKey, ReceiptStore, Verifier, chain, seal_events, sign_checkpoint,
};
use toolgate::{ScriptedModel, TextRequest, Tool, ToolError, Toolkit, generate_text};
use toolgate_store::{SqlStore, StoreSpec};

/// The allocator of the `toolgate` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Times verification of a large export and the stored round trip with and without receipts.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Events in the export to verify (0: skip).
    #[arg(long, default_value_t = 1_000_000)]
    events: usize,
    /// Time this `toolgate` binary's `audit verify --file` instead of the verifier in process.
    #[arg(long)]
    toolgate: Option<std::path::PathBuf>,
    /// Timed round trips per variant (0: skip).
    #[arg(long, default_value_t = 2_000)]
    requests: usize,
    /// Leave the receipts out of the export (the chain and its checkpoints only).
    #[arg(long)]
    without_receipts: bool,
    /// Alternating blocks the round trips are split into.
    #[arg(long, default_value_t = 4)]
    blocks: usize,
    /// The round trip over HTTP against two release servers, with receipts and with `--no-receipts`.
    #[arg(long)]
    http: bool,
    /// Write the export (`log.jsonl`) and its keys (`keys.json`) here and keep them
    /// (for timing `toolgate audit verify --file` by hand); reused when there already.
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.http {
        return http(&args).await;
    }
    let dir = tempfile::tempdir()?;
    if args.events > 0 {
        verification(&args, args.dir.as_deref().unwrap_or(dir.path()))?;
    }
    if args.requests > 0 {
        round_trips(&args, dir.path()).await?;
    }
    Ok(())
}

fn verification(args: &Args, dir: &std::path::Path) -> anyhow::Result<()> {
    let key = ReceiptKey::from_secret([7; 32]);
    let (log, keys) = (dir.join("log.jsonl"), dir.join("keys.json"));
    std::fs::write(&keys, serde_json::to_string(&Jwks { keys: vec![key.public().clone()] })?)?;
    let started = Instant::now();
    let receipts = if args.dir.is_some() && log.exists() {
        count_receipts(&log)?
    } else {
        write_export(&log, args.events, &key, !args.without_receipts)?
    };
    let written = started.elapsed();
    let size = std::fs::metadata(&log)?.len();
    let started = Instant::now();
    let summary = match &args.toolgate {
        Some(binary) => {
            let output = std::process::Command::new(binary)
                .args(["audit", "verify", "--file"])
                .arg(&log)
                .arg("--keys")
                .arg(&keys)
                .output()
                .context("run toolgate")?;
            anyhow::ensure!(output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
            String::from_utf8_lossy(&output.stdout).trim().to_owned()
        }
        None => {
            let mut verifier = Verifier::new(serde_json::from_str(&std::fs::read_to_string(&keys)?)?);
            let mut lines = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(&log)?).lines();
            loop {
                let chunk: Vec<String> = lines.by_ref().take(8192).collect::<Result<_, _>>()?;
                if chunk.is_empty() {
                    break;
                }
                verifier.texts(&chunk)?;
            }
            format!("{:?}", verifier.finish()?)
        }
    };
    let verified = started.elapsed();
    println!("| events | receipts | export size | written in | verified in | events/s |");
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {} | {receipts} | {:.0} MiB | {:.1} s | {:.2} s | {:.0} |",
        args.events,
        size as f64 / (1024.0 * 1024.0),
        written.as_secs_f64(),
        verified.as_secs_f64(),
        args.events as f64 / verified.as_secs_f64()
    );
    println!("\n{summary}\n");
    Ok(())
}

/// The receipts in an export written before.
fn count_receipts(path: &std::path::Path) -> anyhow::Result<usize> {
    let mut receipts = 0;
    for line in std::io::BufReader::new(std::fs::File::open(path)?).lines() {
        let line = line?;
        if !line.starts_with("{\"type\":") {
            break; // The events, after the signed records.
        }
        receipts += usize::from(line.starts_with("{\"type\":\"receipt\""));
    }
    Ok(receipts)
}

/// Writes an export of `events` sealed events (signed records first); the receipts written.
fn write_export(path: &std::path::Path, events: usize, key: &ReceiptKey, with_receipts: bool) -> anyhow::Result<usize> {
    // Signed records and events go to two files as they are made; the export is the first, then the second.
    let (signed_path, events_path) = (path.with_extension("signed"), path.with_extension("events"));
    let mut signed = BufWriter::new(std::fs::File::create(&signed_path)?);
    let mut lines = BufWriter::new(std::fs::File::create(&events_path)?);
    let mut head = GENESIS;
    let mut seq = 0i64;
    let mut receipts = 0;
    while (seq as usize) < events {
        let mut batch = Vec::new();
        let mut records = std::collections::HashMap::new();
        for _ in 0..1000 {
            let id = format!("apr_{}", seq / 4 + 1);
            let input = json!({"amount": seq, "to": "carol", "memo": "invoice 2026-11"});
            records.insert(id.clone(), record(&id, &input, seq));
            for (kind, principal, data) in [
                (AuditKind::Issued, "alice", json!({"toolName": "transfer", "input": input, "expiresAt": seq + 9})),
                (AuditKind::Voted, "bob", json!({"decision": "approve"})),
                (AuditKind::Approved, "bob", json!({})),
                (
                    AuditKind::Executed,
                    "bob",
                    json!({"toolName": "transfer", "result": {"type": "json", "value": {"ok": true}}}),
                ),
            ] {
                seq += 1;
                batch.push(event(seq, kind, &id, principal, data));
            }
        }
        let sealed = seal_events(head, &batch, &records, &Default::default(), key, seq)?;
        head = chain::decode(&sealed.links.last().context("a batch")?.hash).context("a hash")?;
        for (event, link) in batch.into_iter().zip(sealed.links) {
            if link.seq % 10_000 == 0 {
                let checkpoint = sign_checkpoint(&link, link.seq as u64, key, link.seq)?;
                writeln!(signed, "{}", LogLine::Signed(checkpoint).to_json())?;
            }
            writeln!(lines, "{}", LogLine::Event(EventLine { link, event: serde_json::to_value(event)? }).to_json())?;
        }
        if !with_receipts {
            continue;
        }
        receipts += sealed.receipts.len();
        for (_, _, receipt) in sealed.receipts {
            writeln!(signed, "{}", LogLine::Signed(receipt).to_json())?;
        }
    }
    signed.flush()?;
    lines.flush()?;
    drop((signed, lines));
    let mut out = std::fs::File::create(path)?;
    for part in [&signed_path, &events_path] {
        std::io::copy(&mut std::fs::File::open(part)?, &mut out)?;
        std::fs::remove_file(part)?;
    }
    Ok(receipts)
}

fn record(id: &str, input: &serde_json::Value, at: i64) -> ApprovalRecord {
    let approve = Decision::Approve { edited_input: None };
    ApprovalRecord {
        approval_id: id.into(),
        conversation_id: "alice\u{1f}chat-1".into(),
        owner: Some("alice".into()),
        client: None,
        tool_call_id: format!("call-{id}"),
        tool_name: "transfer".into(),
        input: input.clone(),
        input_digest: toolgate::approval::input_digest(input).unwrap_or_default(),
        issued_at: at,
        expires_at: at + 9,
        state: ApprovalState::Executed,
        decision: Some(RecordedDecision::new(approve.clone(), Some("bob".into()), at + 1)),
        output: serde_json::from_value(json!({"type": "json", "value": {"ok": true}})).ok(),
        lease: None,
        updated_at: at + 3,
        routing: None,
        votes: vec![Vote { principal: Some("bob".into()), decision: approve, reason: None, at: at + 1 }],
        reason: Some("rule `payments` matched tool `transfer`".into()),
        supersedes: None,
        superseded_by: None,
        origin: Default::default(),
        input_schema: None,
        lineage: Vec::new(),
    }
}

fn event(seq: i64, kind: AuditKind, id: &str, principal: &str, data: serde_json::Value) -> AuditEvent {
    AuditEvent {
        seq,
        at: 1_764_412_800_000 + seq,
        kind,
        approval_id: id.into(),
        tool_call_id: format!("call-{id}"),
        conversation_id: "chat-1".into(),
        owner: Some("alice".into()),
        principal: Some(principal.into()),
        data,
    }
}

/// `--http`: the approval round trip over HTTP, with receipts and without, in alternating blocks.
async fn http(args: &Args) -> anyhow::Result<()> {
    use toolgate_bench::stored::{self, Kind, Plan, Variant};
    let toolgate = match &args.toolgate {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("toolgate"),
    };
    anyhow::ensure!(toolgate.exists(), "no {} (build it: cargo build --release -p toolgate-cli)", toolgate.display());
    let variant = |name: &str, flags: &[&str]| Variant {
        name: name.into(),
        kind: Kind::Approval,
        config: String::new(),
        flags: flags.iter().map(|flag| (*flag).to_owned()).collect(),
    };
    let variants = [variant("without-receipts", &["--no-receipts"]), variant("with-receipts", &[])];
    let block = args.requests / args.blocks.max(1);
    let plan =
        Plan { toolgate, store: "sqlite".into(), blocks: args.blocks, block, warmup: block.min(100), principals: 100 };
    println!("{}\n", toolgate_bench::process::machine_summary());
    let started = stored::utc_now();
    let comparison = stored::compare(&plan, &variants).await?;
    println!("approval round trip over HTTP on SQLite, started {started}, one connection per server\n");
    println!("{}", stored::table(&comparison, &[(1, 0)]));
    Ok(())
}

/// The round trip without and with receipts, in alternating blocks.
async fn round_trips(args: &Args, dir: &std::path::Path) -> anyhow::Result<()> {
    let (mut plain, mut signed) = (Vec::new(), Vec::new());
    let per_block = args.requests / args.blocks.max(1);
    for block in 0..args.blocks.max(1) {
        for with_receipts in [false, true] {
            let path = dir.join(format!("round-trip-{block}-{with_receipts}.db"));
            let store = SqlStore::open(&StoreSpec::Sqlite(path)).await?;
            let timed = if with_receipts {
                let store = Arc::new(store.sign_with(ReceiptKey::from_secret([8; 32])).await?);
                let sealer = tokio::spawn(seal_loop(store.clone()));
                let timed = measure(store.clone(), per_block).await?;
                sealer.abort();
                timed
            } else {
                measure(Arc::new(store), per_block).await?
            };
            if with_receipts { signed.extend(timed) } else { plain.extend(timed) }
        }
    }
    plain.sort();
    signed.sort();
    println!("| round trip (SQLite) | round trips | p50 | p99 | mean |");
    println!("|---|---:|---:|---:|---:|");
    println!("{}", row("without receipts", &plain));
    println!("{}", row("with receipts", &signed));
    let mean = |sorted: &[Duration]| sorted.iter().sum::<Duration>().as_secs_f64() / sorted.len().max(1) as f64;
    println!("\nwith / without (mean): {:.3}", mean(&signed) / mean(&plain));
    Ok(())
}

/// What the server's receipts worker does: chain every second, a checkpoint every minute.
async fn seal_loop(store: Arc<SqlStore>) {
    let mut ticks = 0u64;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        while store.seal(2000).await.unwrap_or(0) == 2000 {}
        ticks += 1;
        if ticks.is_multiple_of(60) {
            let _ = store.checkpoint(ticks as i64).await;
        }
    }
}

/// The latencies of `count` approval round trips (issued, approved, run), after 50 untimed.
async fn measure(store: Arc<dyn LedgerStore>, count: usize) -> anyhow::Result<Vec<Duration>> {
    let toolkit = Toolkit::new(vec![
        Tool::function::<serde_json::Value>("transfer")
            .needs_approval(true)
            .handler(|_input: serde_json::Value, _context| async { Ok::<_, ToolError>(json!({"ok": true})) }),
    ])?;
    let config = LedgerConfig::new(store);
    let mut timed = Vec::with_capacity(count);
    for index in 0..count + 50 {
        let model = ScriptedModel::from_json(&SCRIPT.to_string())?;
        let ledger = config.conversation(format!("c{index}")).principal("alice");
        let started = Instant::now();
        let mut history = vec![ModelMessage::user("pay carol")];
        let asked =
            generate_text(&model, TextRequest::new(history.clone()).toolkit(toolkit.clone()).ledger(ledger.clone()))
                .await?;
        let approval = asked.approval_requests().first().context("an approval request")?.approval_id.clone();
        history.extend(asked.response_messages);
        history.push(serde_json::from_value(json!({"role": "tool", "content": [
            {"type": "tool-approval-response", "approvalId": approval, "approved": true}]}))?);
        generate_text(&model, TextRequest::new(history).toolkit(toolkit.clone()).ledger(ledger)).await?;
        if index >= 50 {
            timed.push(started.elapsed());
        }
    }
    Ok(timed)
}

/// The model: asks for a transfer, then answers.
static SCRIPT: std::sync::LazyLock<serde_json::Value> = std::sync::LazyLock::new(|| {
    json!({"turns": [
        [{"type": "tool-call", "toolCallId": "t", "toolName": "transfer", "input": {"amount": 50, "to": "carol"}},
         {"type": "finish", "finishReason": "tool-calls"}],
        [{"type": "text", "text": "Paid."}, {"type": "finish", "finishReason": "stop"}]
    ]})
});

fn row(name: &str, sorted: &[Duration]) -> String {
    let at = |q: f64| sorted[((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1))];
    let mean = sorted.iter().sum::<Duration>() / u32::try_from(sorted.len()).unwrap_or(u32::MAX).max(1);
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1000.0);
    format!("| {name} | {} | {} | {} | {} |", sorted.len(), ms(at(0.5)), ms(at(0.99)), ms(mean))
}
