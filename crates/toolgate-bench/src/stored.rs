//! The stored round trip over HTTP, two (or more) server configurations
//! compared in alternating blocks of one run: `history_bench --http` (no rule
//! against one history rule) and `receipts_bench --http` (receipts against
//! `--no-receipts`).
//!
//! Each [`Variant`] is a release `toolgate serve --tools demo` with a data
//! directory of its own, a scripted model, a tokens file of `principals`
//! principals, and its own config text and flags. On SQLite each has a fresh
//! file; with a Postgres URL they share that database (each round trip has a
//! fresh conversation, and the rules compared never match).
//!
//! The round trips ([`Kind`]) are those of [`crate::subagents`]: one
//! keep-alive connection per server, one request at a time, the two `POST
//! /api/chat` of an approval timed together (the client's copy of the
//! assistant message read between them, untimed); a call that runs without
//! approval is one `POST /api/chat`. Each round trip is a fresh conversation
//! of the next principal in turn (the bearer token switched on the same
//! connection), so a history rule reads a principal's day as it grows, not
//! one principal's whole run. Blocks of `block` round trips go to each variant
//! in turn, the order reversed every other block, after a warm-up; the load
//! average is read after each block.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Map, Value, json};

use crate::inbox::client::Client;
use crate::inbox::server::{ServeOptions, Server};
use crate::load::excerpt;
use crate::subagents::{ANSWER, check_answered};

/// Which round trip a variant's model makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// `transfer_money` of 5: the demo tool runs it without asking; one `POST /api/chat`.
    Allowed,
    /// `transfer_money` of 5,000: asked, approved, run; two `POST /api/chat`.
    Approval,
}

/// One server configuration of a comparison.
#[derive(Debug, Clone)]
pub struct Variant {
    /// Its name in the tables (also its files' prefix: letters, digits and `-`).
    pub name: String,
    /// The round trip it is timed on.
    pub kind: Kind,
    /// Its `--config` file's text.
    pub config: String,
    /// More `toolgate serve` flags.
    pub flags: Vec<String>,
}

/// How a comparison runs.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The `toolgate` binary.
    pub toolgate: PathBuf,
    /// `sqlite` (a fresh file per server) or a `postgres://` URL (shared).
    pub store: String,
    /// Blocks per variant.
    pub blocks: usize,
    /// Round trips per block.
    pub block: usize,
    /// Untimed round trips per variant first.
    pub warmup: usize,
    /// Principals the round trips rotate over.
    pub principals: usize,
}

/// The sorted times of one variant.
#[derive(Debug, Clone)]
pub struct Timed {
    /// The variant's name.
    pub name: String,
    /// Its round trips' times, sorted.
    pub sorted: Vec<Duration>,
}

impl Timed {
    /// The `q` quantile (nearest rank).
    pub fn quantile(&self, q: f64) -> Duration {
        let index = ((self.sorted.len() as f64 - 1.0) * q).round() as usize;
        self.sorted.get(index).copied().unwrap_or_default()
    }

    /// The mean.
    pub fn mean(&self) -> Duration {
        let count = u32::try_from(self.sorted.len()).unwrap_or(u32::MAX).max(1);
        self.sorted.iter().sum::<Duration>() / count
    }
}

/// What a comparison measured.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// One per variant, in the order given.
    pub timed: Vec<Timed>,
    /// The 1-minute load average after each block.
    pub loads: Vec<f64>,
}

fn token(index: usize) -> String {
    format!("stored-bench-token-{index:04}")
}

/// The scripted model: `transfer_money` of `amount`, then [`ANSWER`].
fn script(kind: Kind) -> Value {
    let amount = match kind {
        Kind::Allowed => 5,
        Kind::Approval => 5000,
    };
    json!({"turns": [
        [{"type": "tool-call", "toolCallId": "call-1", "toolName": "transfer_money",
          "input": {"amount": amount, "to": "bob"}}],
        [{"type": "text", "text": ANSWER}]
    ]})
}

fn private_file(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.write_all(text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}

/// Starts the variant's server under `work`.
fn serve(plan: &Plan, work: &Path, variant: &Variant) -> anyhow::Result<Server> {
    let tokens = work.join("tokens.json");
    let map: Map<String, Value> = (0..plan.principals).map(|i| (token(i), json!(format!("user-{i:04}")))).collect();
    private_file(&tokens, &Value::Object(map).to_string())?;
    let data_dir = work.join(&variant.name);
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&data_dir)?;
    let config = work.join(format!("{}.toml", variant.name));
    std::fs::write(&config, &variant.config)?;
    let script_path = work.join(format!("{}.json", variant.name));
    std::fs::write(&script_path, script(variant.kind).to_string())?;
    let store = match plan.store.as_str() {
        "sqlite" => format!("sqlite://{}", data_dir.join("toolgate.db").display()),
        url => url.to_owned(),
    };
    let log = work.join(format!("{}.log", variant.name));
    let options = ServeOptions {
        toolgate: &plan.toolgate,
        store: &store,
        data_dir: &data_dir,
        tokens: &tokens,
        config: &config,
        script: &script_path,
        log: &log,
        flags: &variant.flags,
    };
    Server::start(&options)
}

/// One call that runs without approval: its `POST /api/chat`.
async fn allowed(client: &mut Client, chat_id: &str) -> anyhow::Result<Duration> {
    let user = json!({"id": format!("{chat_id}-u"), "role": "user", "parts": [{"type": "text", "text": "pay bob"}]});
    let body = json!({"id": chat_id, "trigger": "submit-message", "messages": [user]});
    let done = client.send(hyper::Method::POST, "/api/chat", Some(body)).await?;
    anyhow::ensure!(done.status == hyper::StatusCode::OK, "HTTP {}: {}", done.status, excerpt(&done.body));
    let text = String::from_utf8_lossy(&done.body);
    anyhow::ensure!(
        text.contains("\"tool-output-available\""),
        "{chat_id}: the call did not run: {}",
        excerpt(&done.body)
    );
    check_answered(&text).with_context(|| chat_id.to_owned())?;
    Ok(done.elapsed)
}

/// One round trip of `kind` on a fresh conversation of principal `who`.
async fn round_trip(client: &mut Client, kind: Kind, chat_id: &str, who: usize) -> anyhow::Result<Duration> {
    client.set_token(&token(who))?;
    match kind {
        Kind::Allowed => allowed(client, chat_id).await,
        Kind::Approval => crate::subagents::round_trip(client, chat_id).await,
    }
}

/// The time now in UTC, as `date -u` prints it (for the report's header).
pub fn utc_now() -> String {
    let out = std::process::Command::new("date").args(["-u", "+%Y-%m-%d %H:%M:%S UTC"]).output();
    out.map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned()).unwrap_or_default()
}

fn load_average() -> f64 {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().next().and_then(|first| first.parse().ok()).unwrap_or(f64::NAN)
}

/// Runs the comparison; the servers' WARN and ERROR lines go to stderr at the end.
pub async fn compare(plan: &Plan, variants: &[Variant]) -> anyhow::Result<Comparison> {
    let work = tempfile::Builder::new().prefix("stored-bench.").tempdir()?;
    let mut servers = Vec::new();
    for variant in variants {
        let server = serve(plan, work.path(), variant)?;
        eprintln!("stored: {} on {} (pid {})", variant.name, server.addr, server.process.pid);
        servers.push(server);
    }
    let mut clients: Vec<Client> = servers.iter().map(|s| Client::new(s.addr, &token(0))).collect::<Result<_, _>>()?;
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    let mut loads = Vec::new();
    let run = std::process::id();
    let mut turn = 0;
    let mut last = vec![0; variants.len()];
    for block in 0..=plan.blocks {
        let mut order: Vec<usize> = (0..variants.len()).collect();
        if block % 2 == 1 {
            order.reverse();
        }
        // Block 0 is the warm-up, untimed.
        let size = if block == 0 { plan.warmup } else { plan.block };
        for &slot in &order {
            for _ in 0..size {
                turn += 1;
                let chat = format!("stored-{run}-{slot}-{turn}");
                let who = turn % plan.principals.max(1);
                let elapsed = round_trip(&mut clients[slot], variants[slot].kind, &chat, who)
                    .await
                    .map_err(|error| anyhow::anyhow!("{error:#}\nthe server's log:\n{}", servers[slot].log_tail(20)))?;
                if block > 0 {
                    times[slot].push(elapsed);
                }
                last[slot] = turn;
            }
        }
        if block > 0 {
            loads.push(load_average());
            eprintln!("stored: block {block} of {} done, load {:.2}", plan.blocks, loads[loads.len() - 1]);
        }
    }
    for (slot, (server, variant)) in servers.iter().zip(variants).enumerate() {
        let kinds = audit_kinds(&mut clients[slot], &format!("stored-{run}-{slot}-{}", last[slot])).await?;
        eprintln!("stored: {}: the last conversation's audit events: {}", variant.name, kinds.join(", "));
        if server.warnings() > 0 {
            eprintln!("stored: {} logged {} warnings:\n{}", variant.name, server.warnings(), server.log_tail(10));
        }
    }
    let timed = variants
        .iter()
        .zip(times)
        .map(|(variant, mut sorted)| {
            sorted.sort();
            Timed { name: variant.name.clone(), sorted }
        })
        .collect();
    Ok(Comparison { timed, loads })
}

/// The kinds of a conversation's audit events, oldest first (its principal's token still set).
async fn audit_kinds(client: &mut Client, chat_id: &str) -> anyhow::Result<Vec<String>> {
    let answer = client.get(&format!("/api/audit?conversation={chat_id}")).await?;
    anyhow::ensure!(answer.status == hyper::StatusCode::OK, "HTTP {} reading the audit", answer.status);
    let lines = String::from_utf8_lossy(&answer.body).lines().map(str::to_owned).collect::<Vec<_>>();
    lines
        .iter()
        .map(|line| Ok(serde_json::from_str::<Value>(line)?["kind"].as_str().unwrap_or("?").to_owned()))
        .collect()
}

fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1000.0)
}

/// The markdown table: each variant, and its p50, p99 and mean against `base`'s (`pairs`: (variant, base) indexes).
pub fn table(comparison: &Comparison, pairs: &[(usize, usize)]) -> String {
    let mut out = String::from("| round trip | round trips | p50 | p99 | mean | p50 / p99 / mean against |\n");
    out.push_str("|---|---:|---:|---:|---:|---|\n");
    for (index, timed) in comparison.timed.iter().enumerate() {
        let against = match pairs.iter().find(|(variant, _)| *variant == index) {
            Some((_, base)) => {
                let base = &comparison.timed[*base];
                let ratio =
                    |a: Duration, b: Duration| format!("{:+.1}%", (a.as_secs_f64() / b.as_secs_f64() - 1.0) * 100.0);
                format!(
                    "{} / {} / {} ({})",
                    ratio(timed.quantile(0.5), base.quantile(0.5)),
                    ratio(timed.quantile(0.99), base.quantile(0.99)),
                    ratio(timed.mean(), base.mean()),
                    base.name
                )
            }
            None => String::new(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {against} |\n",
            timed.name,
            timed.sorted.len(),
            ms(timed.quantile(0.5)),
            ms(timed.quantile(0.99)),
            ms(timed.mean()),
        ));
    }
    let (low, high) = comparison.loads.iter().fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
    if !comparison.loads.is_empty() {
        out.push_str(&format!("\nload average (1 min) after each block: {low:.2} to {high:.2}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_call_the_transfer_below_and_above_the_demo_threshold() {
        assert_eq!(script(Kind::Allowed)["turns"][0][0]["input"]["amount"], 5);
        assert_eq!(script(Kind::Approval)["turns"][0][0]["input"]["amount"], 5000);
        assert_eq!(script(Kind::Approval)["turns"][1][0]["text"], ANSWER);
    }

    #[test]
    fn the_table_compares_each_variant_with_its_base() {
        let timed = |name: &str, ms: u64| Timed { name: name.into(), sorted: vec![Duration::from_millis(ms); 10] };
        let comparison = Comparison { timed: vec![timed("a", 10), timed("b", 11)], loads: vec![1.5, 2.5] };
        let text = table(&comparison, &[(1, 0)]);
        assert!(
            text.contains("| b | 10 | 11.000 ms | 11.000 ms | 11.000 ms | +10.0% / +10.0% / +10.0% (a) |"),
            "{text}"
        );
        assert!(text.contains("1.50 to 2.50"), "{text}");
    }
}
