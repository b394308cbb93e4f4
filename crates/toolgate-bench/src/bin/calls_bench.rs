//! `calls_bench`: the call-gating API under load. Starts `toolgate serve`
//! (SQLite, a rule allowing `read_file`, `[calls] default = "ask"`) and
//! measures:
//!
//! 1. `POST /api/calls` for an allowed call (a new one each time: a record
//!    written, the rules only, nobody asked) at N connections, beside the
//!    stateless chat round trip (`POST /api/chat` on a `--store none`
//!    server, one scripted model step) in the same run;
//! 2. many calls long-polling at once (`GET /api/calls/{id}?wait=60s`, one
//!    connection each): the server's RSS and CPU while they wait, and the
//!    time from each deciding vote (`POST /api/approvals/{id}`) to its
//!    waiting client's answer.
//!
//! Prints one markdown table to stdout, progress to stderr.
//! `scripts/bench-calls.sh` builds the binaries and runs it.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use hyper::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate_bench::inbox::client::Client;
use toolgate_bench::inbox::server::{ServeOptions, Server, cpu_time};
use toolgate_bench::inbox::table::{HEADER, Latencies, Row, mib};
use toolgate_bench::process::machine_summary;

/// The allocator of the `toolgate` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The agent's bearer token.
const TOKEN: &str = "calls-bench-agent-token";

/// The call-gating API under load (see the module docs).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The `toolgate` binary (a release build).
    #[arg(long)]
    toolgate: PathBuf,
    /// Connections of the allowed-call and chat load.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Timed requests of each kind (allowed calls, chat round trips).
    #[arg(long, default_value_t = 20_000)]
    requests: usize,
    /// Untimed requests of each kind first.
    #[arg(long, default_value_t = 1_000)]
    warmup: usize,
    /// Calls long-polling at once.
    #[arg(long, default_value_t = 10_000)]
    waiters: usize,
    /// How long they are held before the votes (RSS and CPU are measured over it).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    hold: Duration,
    /// Deciding votes, each answering one waiting client.
    #[arg(long, default_value_t = 500)]
    votes: usize,
    /// A vote lands this often.
    #[arg(long, default_value = "20ms", value_parser = humantime::parse_duration)]
    vote_every: Duration,
    /// Keep the files here (default: a temporary directory, removed at the end).
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("calls_bench: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("calls_bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes the tokens file, the config and the script into `work`.
fn write_files(work: &Path) -> anyhow::Result<()> {
    let tokens = BTreeMap::from([(TOKEN, "agent")]);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(work.join("tokens.json"))?;
    file.write_all(serde_json::to_string(&tokens)?.as_bytes())?;
    let config = "[[rule]]\nname = \"reads\"\naction = \"allow\"\ntool = \"read_file\"\n\n[calls]\ndefault = \"ask\"\n";
    std::fs::write(work.join("toolgate.toml"), config)?;
    std::fs::write(work.join("script.json"), r#"{"turns": [[{"type": "text", "text": "Done."}]]}"#)?;
    Ok(())
}

/// `toolgate serve` on `store` with the bench's files, its data in `work/NAME`.
fn serve(args: &Args, work: &Path, name: &str, store: &str) -> anyhow::Result<Server> {
    let data_dir = work.join(name);
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&data_dir)?;
    let log = work.join(format!("{name}.log"));
    let options = ServeOptions {
        toolgate: &args.toolgate,
        store,
        data_dir: &data_dir,
        tokens: &work.join("tokens.json"),
        config: &work.join("toolgate.toml"),
        script: &work.join("script.json"),
        log: &log,
        flags: &[],
    };
    let server = Server::start(&options)?;
    std::fs::write(work.join(format!("{name}.pid")), server.process.pid.to_string())?;
    eprintln!("calls_bench: toolgate serve --store {store} on {} (pid {})", server.addr, server.process.pid);
    Ok(server)
}

/// The whole bench.
async fn run(args: Args) -> anyhow::Result<()> {
    let temp = tempfile::Builder::new().prefix("calls-bench.").tempdir()?;
    let work = args.work_dir.clone().unwrap_or_else(|| temp.path().to_owned());
    std::fs::create_dir_all(&work)?;
    write_files(&work)?;
    let summary = machine_summary();
    let mut rows = Vec::new();

    let chat_server = serve(&args, &work, "stateless", "none")?;
    let chat = |n: usize| {
        let body = json!({"id": format!("chat-{n}"), "messages": [{"id": "u1", "role": "user",
            "parts": [{"type": "text", "text": "hello"}]}]});
        (Method::POST, "/api/chat".to_owned(), body, 200)
    };
    let (chat_latencies, chat_rate) = load(&args, &chat_server, chat).await?;
    drop(chat_server);
    rows.push(Row::latency(
        format!("POST /api/chat, stateless round trip, c={}", args.connections),
        chat_latencies,
        None,
    ));
    rows.push(Row::value("  its rate", format!("{chat_rate:.0} req/s"), ""));

    let server = serve(&args, &work, "calls", "sqlite")?;
    let allowed = |n: usize| {
        let body = json!({"tool": "read_file", "input": {"path": format!("file-{n}.txt")}});
        (Method::POST, "/api/calls".to_owned(), body, 200)
    };
    let (latencies, rate) = load(&args, &server, allowed).await?;
    rows.push(Row::latency(
        format!("POST /api/calls, allowed (a new record each), c={}", args.connections),
        latencies,
        Some(Duration::from_millis(1)),
    ));
    rows.push(Row::value("  its rate", format!("{rate:.0} req/s"), ""));
    rows.extend(long_polls(&args, &server).await?);
    drop(server);

    println!("calls_bench on {summary}");
    println!();
    println!("{HEADER}");
    for row in &rows {
        println!("{}", row.markdown("sqlite"));
    }
    Ok(())
}

/// A request of the load: method, path, body, the status it must answer.
type Request = (Method, String, Value, u16);

/// `args.warmup` then `args.requests` requests made by `make(n)` over
/// `args.connections` keep-alive connections; the timed latencies and rate.
async fn load(
    args: &Args,
    server: &Server,
    make: impl Fn(usize) -> Request + Send + Sync + Copy + 'static,
) -> anyhow::Result<(Latencies, f64)> {
    let run = |offset: usize, count: usize| async move {
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        let started = Instant::now();
        for _ in 0..args.connections {
            let (next, addr) = (next.clone(), server.addr);
            tasks.push(tokio::spawn(async move {
                let mut client = Client::new(addr, TOKEN)?;
                let mut latencies = Vec::new();
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n >= count {
                        return anyhow::Ok(latencies);
                    }
                    let (method, path, body, status) = make(offset + n);
                    let answer = client.send(method, &path, Some(body)).await?;
                    if answer.status.as_u16() != status {
                        bail!("{path}: HTTP {}: {}", answer.status, String::from_utf8_lossy(&answer.body));
                    }
                    latencies.push(answer.elapsed);
                }
            }));
        }
        let mut all = Vec::with_capacity(count);
        for task in tasks {
            all.extend(task.await??);
        }
        anyhow::Ok((all, started.elapsed()))
    };
    run(0, args.warmup).await?;
    let (latencies, took) = run(args.warmup, args.requests).await?;
    let rate = latencies.len() as f64 / took.as_secs_f64();
    Ok((Latencies::new(latencies), rate))
}

/// When each waiting client got its answer, by call id.
type Arrivals = Arc<Mutex<BTreeMap<String, Instant>>>;

/// `args.waiters` pending calls, each long-polled on its own connection;
/// the server's RSS and CPU while they wait, and each deciding vote's time
/// to its waiting client.
async fn long_polls(args: &Args, server: &Server) -> anyhow::Result<Vec<Row>> {
    eprintln!("calls_bench: {} pending calls", args.waiters);
    let mut calls = Vec::with_capacity(args.waiters);
    let mut client = Client::new(server.addr, TOKEN)?;
    for n in 0..args.waiters {
        let body = json!({"tool": "send_email", "input": {"to": format!("user-{n}@example.com")}});
        let answer = client.send(Method::POST, "/api/calls", Some(body)).await?;
        if answer.status.as_u16() != 202 {
            bail!("a pending call: HTTP {}: {}", answer.status, String::from_utf8_lossy(&answer.body));
        }
        let body: Value = serde_json::from_slice(&answer.body)?;
        let id = |key: &str| body[key].as_str().map(str::to_owned).context("an id in the 202");
        calls.push((id("callId")?, id("approvalId")?));
    }
    let rss_before = server.process.status_bytes("VmRSS")?;
    eprintln!("calls_bench: {} long polls", calls.len());
    let arrivals: Arrivals = Arc::default();
    for chunk in calls.chunks(500) {
        for (call, _) in chunk {
            tokio::spawn(poll(server.addr, call.clone(), arrivals.clone()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (cpu_start, wall_start) = (cpu_time(server.process)?, Instant::now());
    tokio::time::sleep(args.hold).await;
    let idle_cpu = (cpu_time(server.process)? - cpu_start).as_secs_f64() / wall_start.elapsed().as_secs_f64();
    let rss_held = server.process.status_bytes("VmRSS")?;
    let early = arrivals.lock().map(|arrived| arrived.len()).unwrap_or(0);
    eprintln!("calls_bench: {} votes", args.votes.min(calls.len()));
    let mut sent = Vec::new();
    for (call, approval) in calls.iter().take(args.votes) {
        let at = Instant::now();
        let answer = client.approve(approval).await?;
        if !answer.status.is_success() {
            bail!("a vote: HTTP {}: {}", answer.status, String::from_utf8_lossy(&answer.body));
        }
        sent.push((call.clone(), at));
        tokio::time::sleep(args.vote_every).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let arrived = arrivals.lock().map(|arrived| arrived.clone()).unwrap_or_default();
    let latencies: Vec<Duration> =
        sent.iter().filter_map(|(call, at)| arrived.get(call).map(|answered| answered.duration_since(*at))).collect();
    let answered = latencies.len();
    Ok(vec![
        Row::value(format!("{} pending calls: server RSS before the polls", calls.len()), mib(rss_before), ""),
        Row::value(
            format!("{} long polls held {:?}: server RSS", calls.len(), args.hold),
            mib(rss_held),
            format!("< 200 MiB: {}", if rss_held < 200 * 1024 * 1024 { "met" } else { "**missed**" }),
        ),
        Row::value(
            "  server CPU while they wait",
            format!("{:.1} % of a core", idle_cpu * 100.0),
            format!("near zero; answered early: {early}"),
        ),
        Row::latency(
            format!("deciding vote → its waiting client ({answered} of {})", sent.len()),
            Latencies::new(latencies),
            Some(Duration::from_millis(50)),
        ),
    ])
}

/// One long poll: `GET /api/calls/{id}?wait=60s` on a connection of its own;
/// notes when the answer's first bytes arrive.
async fn poll(addr: std::net::SocketAddr, call: String, arrivals: Arrivals) {
    let request = format!(
        "GET /api/calls/{call}?wait=60s HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {TOKEN}\r\nconnection: close\r\n\r\n"
    );
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        eprintln!("calls_bench: cannot connect a long poll");
        return;
    };
    let _ = stream.set_nodelay(true);
    if stream.write_all(request.as_bytes()).await.is_err() {
        return;
    }
    let mut buffer = [0_u8; 4096];
    if let Ok(read) = stream.read(&mut buffer).await
        && read > 0
    {
        let at = Instant::now();
        if let Ok(mut arrived) = arrivals.lock() {
            arrived.insert(call, at);
        }
    }
}
