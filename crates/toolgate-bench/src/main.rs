//! `toolgate-bench`: drives `toolgate serve` and a stock AI SDK server that are
//! already running on loopback (see `scripts/bench-vs-ai-sdk.sh`) and prints
//! one markdown table. Progress goes to stderr, the table to stdout.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use toolgate::approval::ApprovalSigner;
use toolgate_bench::bodies::{ContinuationBody, continuation_body};
use toolgate_bench::floor::serde_floor;
use toolgate_bench::load::{self, Limits, Target, Workload, excerpt};
use toolgate_bench::process::{Process, machine_summary};
use toolgate_bench::report::{self, Measured, Report, RoundTripRow, Row};
use toolgate_bench::sse;

/// The allocator of the `toolgate` binary: the serde_json floor is measured
/// with the allocator the server runs on, so the ratio to it is the engine's
/// own work, not an allocator's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CHAT_PATH: &str = "/api/chat";

/// Benchmarks toolgate serve against the Vercel AI SDK with the same approval-continuation bodies.
#[derive(Debug, Parser)]
#[command(version, about, args_override_self = true)]
struct Args {
    /// toolgate serve with `--store none` (http://127.0.0.1:PORT).
    #[arg(long)]
    toolgate: Option<String>,
    /// Its process id, for the peak RSS.
    #[arg(long)]
    toolgate_pid: Option<u32>,
    /// The `--approval-secret` toolgate serve runs with: the bench signs every approval with it.
    #[arg(long, env = "TOOLGATE_BENCH_SECRET")]
    secret: Option<String>,
    /// The AI SDK server (e2e/bench-ai-sdk) (http://127.0.0.1:PORT).
    #[arg(long)]
    ai_sdk: Option<String>,
    /// Its process id (node's), for the peak RSS.
    #[arg(long)]
    ai_sdk_pid: Option<u32>,
    /// toolgate serve with a durable store and a script that asks for approval first: measures the round trip.
    #[arg(long)]
    toolgate_stored: Option<String>,
    /// Its process id, for the peak RSS.
    #[arg(long)]
    toolgate_stored_pid: Option<u32>,
    /// The store name shown for `--toolgate-stored`.
    #[arg(long, default_value = "sqlite")]
    stored_label: String,
    /// History sizes (UI messages per body). Given twice, the last wins.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = "10,100,1000,10000")]
    sizes: Vec<usize>,
    /// Connection counts. Given twice, the last wins.
    #[arg(long, value_delimiter = ',', action = clap::ArgAction::Set, default_value = "1,16")]
    connections: Vec<usize>,
    /// Longest timed run per cell (no request starts after it; those in flight complete).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "8s")]
    duration: Duration,
    /// Most requests per cell (whichever of this and --duration comes first).
    #[arg(long, default_value_t = 50_000)]
    max_requests: usize,
    /// Warm-up per server and body on one connection before the cells (after the one checked request).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    warmup: Duration,
    /// Time spent on each serde_json floor measurement.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    floor_time: Duration,
    /// The longest a request may take.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10m")]
    timeout: Duration,
    /// `GET /healthz` on toolgate for this long at the most connections, to show the load generator's ceiling (0s: skip).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2s")]
    ceiling: Duration,
    /// Threads of the load generator (it shares the machine with the servers).
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    /// Also write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write each body to DIR/continuation-N.json and exit.
    #[arg(long)]
    dump_bodies: Option<PathBuf>,
    /// Instead of the table: load toolgate for this long with the first of --sizes at the most --connections,
    /// sampling its RSS every --soak-slice, and print how the RSS moved after the first minute.
    #[arg(long, value_parser = humantime::parse_duration)]
    soak: Option<Duration>,
    /// With --soak: load the stored round trip of --toolgate-stored (fresh conversations, first turn and approved
    /// continuation) instead of --toolgate's continuation body.
    #[arg(long, requires = "soak")]
    soak_stored: bool,
    /// The time between two RSS samples of --soak.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "20s")]
    soak_slice: Duration,
}

/// A server under test.
struct Server {
    name: &'static str,
    target: Target,
    process: Option<Process>,
}

impl Server {
    fn new(name: &'static str, url: Option<&str>, pid: Option<u32>) -> anyhow::Result<Option<Self>> {
        let Some(url) = url else { return Ok(None) };
        let process = pid.map(|pid| Process { pid });
        if let Some(process) = process
            && !process.is_alive()
        {
            bail!("{name}: no process {}", process.pid);
        }
        Ok(Some(Self { name, target: Target::parse(url)?, process }))
    }

    /// Runs one timed cell; the peak RSS is the one during this cell when Linux lets the bench reset it.
    async fn measure(&self, workload: Workload, limits: Limits, peak_reset: &mut bool) -> anyhow::Result<Measured> {
        if let Some(process) = self.process {
            *peak_reset &= process.reset_peak();
        }
        let outcome = load::run(self.target, workload, limits).await.with_context(|| self.name.to_owned())?;
        let peak = match self.process {
            Some(process) => Some(process.peak_rss().with_context(|| format!("{}: peak RSS", self.name))?),
            None => None,
        };
        let measured = Measured::new(&outcome, peak);
        eprintln!(
            "  {:<16} c={:<3} {:>7} requests  {:>9} req/s  p50 {:>9}  p99 {:>9}  peak RSS {}",
            self.name,
            limits.connections,
            outcome.requests,
            report::rate(measured.throughput),
            report::latency(measured.p50),
            report::latency(measured.p99),
            report::mib(measured.peak_rss),
        );
        Ok(measured)
    }

    /// Checks, once, that the server runs the approved call of `body` and answers.
    async fn check_continuation(&self, body: &ContinuationBody, timeout: Duration) -> anyhow::Result<()> {
        let (status, response) = load::post_once(self.target, CHAT_PATH, body.json.clone(), timeout)
            .await
            .with_context(|| format!("{}: the check request for N = {}", self.name, body.messages))?;
        if !status.is_success() {
            bail!("{}: N = {}: HTTP {status}: {}", self.name, body.messages, excerpt(&response));
        }
        sse::check_continuation(&String::from_utf8_lossy(&response)).map_err(|error| {
            anyhow::anyhow!("{}: N = {}: {error}; the response: {}", self.name, body.messages, excerpt(&response))
        })
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads.max(1))
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("toolgate-bench: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("toolgate-bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(!args.sizes.is_empty() && !args.connections.is_empty(), "--sizes and --connections are not empty");
    anyhow::ensure!(args.connections.iter().all(|&c| c > 0), "--connections are at least 1");
    let toolgate = Server::new("toolgate", args.toolgate.as_deref(), args.toolgate_pid)?;
    let ai_sdk = Server::new("AI SDK", args.ai_sdk.as_deref(), args.ai_sdk_pid)?;
    let stored = Server::new("toolgate stored", args.toolgate_stored.as_deref(), args.toolgate_stored_pid)?;
    let secret = match (&args.secret, &toolgate) {
        (Some(secret), _) => secret.clone(),
        (None, Some(_)) => {
            bail!("--secret (the --approval-secret toolgate serve runs with) is required with --toolgate")
        }
        // Nobody checks the signatures then; any secret makes well-formed bodies.
        (None, None) => "toolgate-bench".to_owned(),
    };
    let signer = ApprovalSigner::new(&secret).context("--secret")?;

    if let Some(dir) = &args.dump_bodies {
        std::fs::create_dir_all(dir)?;
        for &n in &args.sizes {
            let body = continuation_body(n, &format!("bench-{n}"), &signer)?;
            let path = dir.join(format!("continuation-{n}.json"));
            std::fs::write(&path, &body.json)?;
            eprintln!("wrote {} ({})", path.display(), report::size(body.json.len()));
        }
        return Ok(());
    }
    if toolgate.is_none() && ai_sdk.is_none() && stored.is_none() {
        bail!("nothing to measure: give --toolgate, --ai-sdk and/or --toolgate-stored");
    }
    if let Some(total) = args.soak {
        return soak(&args, total, toolgate.as_ref(), stored.as_ref(), &signer).await;
    }

    let machine = machine_summary();
    eprintln!("machine: {machine}");
    let limits = |connections| Limits {
        connections,
        duration: args.duration,
        max_requests: args.max_requests,
        timeout: args.timeout,
    };
    let mut peak_reset = true;
    let mut rows = Vec::new();
    for &n in &args.sizes {
        let body = continuation_body(n, &format!("bench-{n}"), &signer)?;
        let floor = serde_floor(&body.json, args.floor_time, 5)?;
        eprintln!(
            "N = {n}: body {}, serde floor {}",
            report::size(body.json.len()),
            report::latency(floor.as_secs_f64())
        );
        let servers: Vec<&Server> = toolgate.iter().chain(ai_sdk.iter()).collect();
        for server in &servers {
            server.check_continuation(&body, args.timeout).await?;
            let workload = Workload::Post { path: CHAT_PATH.into(), body: body.json.clone() };
            let warmup =
                Limits { connections: 1, duration: args.warmup, max_requests: usize::MAX, timeout: args.timeout };
            load::run(server.target, workload, warmup).await.with_context(|| format!("{}: warm-up", server.name))?;
        }
        for &connections in &args.connections {
            let mut measured = [None, None];
            for (slot, server) in [&toolgate, &ai_sdk].into_iter().enumerate() {
                if let Some(server) = server {
                    let workload = Workload::Post { path: CHAT_PATH.into(), body: body.json.clone() };
                    measured[slot] = Some(server.measure(workload, limits(connections), &mut peak_reset).await?);
                }
            }
            let [toolgate, ai_sdk] = measured;
            rows.push(Row {
                messages: n,
                connections,
                body_bytes: body.json.len(),
                serde_floor: floor.as_secs_f64(),
                toolgate,
                ai_sdk,
            });
        }
    }

    let mut round_trips = Vec::new();
    if let Some(server) = &stored {
        let prefix = |what: &str| chat_prefix(&format!("bench-{what}"));
        eprintln!("round trip with --store {}", args.stored_label);
        let check = Limits { connections: 1, duration: args.timeout, max_requests: 2, timeout: args.timeout };
        let workload = Workload::RoundTrip { path: CHAT_PATH.into(), chat_prefix: prefix("check") };
        load::run(server.target, workload, check)
            .await
            .with_context(|| format!("{}: the check round trip", server.name))?;
        let warmup = Limits { connections: 1, duration: args.warmup, max_requests: usize::MAX, timeout: args.timeout };
        let workload = Workload::RoundTrip { path: CHAT_PATH.into(), chat_prefix: prefix("warmup") };
        load::run(server.target, workload, warmup).await.with_context(|| format!("{}: warm-up", server.name))?;
        for &connections in &args.connections {
            let workload =
                Workload::RoundTrip { path: CHAT_PATH.into(), chat_prefix: prefix(&connections.to_string()) };
            let toolgate = server.measure(workload, limits(connections), &mut peak_reset).await?;
            round_trips.push(RoundTripRow { store: args.stored_label.clone(), connections, toolgate });
        }
    }

    let mut ceiling = None;
    if let Some(server) = toolgate.as_ref().filter(|_| !args.ceiling.is_zero()) {
        let connections = args.connections.iter().copied().max().unwrap_or(1);
        eprintln!("load generator ceiling: GET /healthz");
        let limits = Limits { duration: args.ceiling, ..limits(connections) };
        let measured = server.measure(Workload::Get { path: "/healthz".into() }, limits, &mut peak_reset).await?;
        ceiling = Some((connections, measured));
    }

    let report = Report { machine, rows, round_trips, ceiling, peak_reset };
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?).with_context(|| format!("{}", path.display()))?;
    }
    println!("{}", report.markdown());
    Ok(())
}

/// `--soak`: one workload for `total`, the server's RSS sampled between slices; prints the samples and the verdict.
async fn soak(
    args: &Args,
    total: Duration,
    toolgate: Option<&Server>,
    stored: Option<&Server>,
    signer: &ApprovalSigner,
) -> anyhow::Result<()> {
    let connections = args.connections.iter().copied().max().unwrap_or(1);
    let (server, workload, what) = if args.soak_stored {
        let Some(server) = stored else { bail!("--soak-stored needs --toolgate-stored") };
        let workload = Workload::RoundTrip { path: CHAT_PATH.into(), chat_prefix: chat_prefix("soak") };
        (server, workload, format!("the round trip with --store {}", args.stored_label))
    } else {
        let Some(server) = toolgate else { bail!("--soak needs --toolgate (or --soak-stored)") };
        let n = args.sizes[0];
        let body = continuation_body(n, &format!("bench-{n}"), signer)?;
        server.check_continuation(&body, args.timeout).await?;
        let what = format!("N = {n} ({})", report::size(body.json.len()));
        (server, Workload::Post { path: CHAT_PATH.into(), body: body.json }, what)
    };
    let Some(process) = server.process else { bail!("--soak needs the pid of the server it loads") };
    eprintln!(
        "soak: {what}, c = {connections}, {} in slices of {}",
        humantime::format_duration(total),
        humantime::format_duration(args.soak_slice)
    );
    let plan = toolgate_bench::soak::Plan {
        total,
        slice: args.soak_slice,
        warmup: Duration::from_secs(60).min(total / 2),
        connections,
        timeout: args.timeout,
    };
    let soak = toolgate_bench::soak::run(server.target, process, workload, plan).await?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&soak)?).with_context(|| format!("{}", path.display()))?;
    }
    println!(
        "Sustained load: {what}, c = {connections}, {}; {}\n",
        humantime::format_duration(total),
        machine_summary()
    );
    println!("{}", soak.markdown());
    Ok(())
}

/// Chat ids no other run against the same store uses: `what`, this process and the time.
fn chat_prefix(what: &str) -> String {
    let run = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("{what}-{}-{run}", std::process::id())
}
