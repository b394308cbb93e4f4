//! `inbox_bench`: the inbox at scale. Fills a store with pending approvals
//! routed to groups of approvers (through `ApprovalStore::issue`), starts
//! `toolgate serve` on it, and measures, as the approvers use it:
//! `GET /api/approvals?state=pending&limit=50`, first and deciding votes
//! through `POST /api/approvals/{id}`, and many open
//! `GET /api/approvals/stream` connections (the server's RSS before, while
//! held with votes landing, and after). Prints one markdown table to stdout,
//! progress to stderr. `scripts/bench-inbox.sh` runs it on SQLite and Postgres.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use toolgate_bench::inbox::client::{Answer, Client};
use toolgate_bench::inbox::fill::{fill, token, write_config, write_script, write_tokens};
use toolgate_bench::inbox::layout::Layout;
use toolgate_bench::inbox::server::{ServeOptions, Server, cpu_time, machine_cpu};
use toolgate_bench::inbox::streams;
use toolgate_bench::inbox::table::{HEADER, Latencies, Row, mib, ms};
use toolgate_bench::process::{Process, machine_summary};
use toolgate_store::{SqlStore, StoreSpec};

/// The allocator of the `toolgate` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The list request measured.
const LIST_PATH: &str = "/api/approvals?state=pending&limit=50";
/// The listing each inbox stream reads on every look (`MAX_LIMIT`).
const STREAM_LIST_PATH: &str = "/api/approvals?state=pending&limit=500";
/// The listing's target p99.
const LIST_TARGET: Duration = Duration::from_millis(20);
/// A vote's target p99.
const VOTE_TARGET: Duration = Duration::from_millis(10);
/// The newest approvals, kept for the votes that land while the streams are held.
const RESERVED: usize = 2_000;

/// The inbox at scale: fills a store, serves it with `toolgate serve`, measures the inbox API.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The store: `sqlite` (a fresh file in the work directory), `sqlite:PATH` or a `postgres://` URL.
    #[arg(long, default_value = "sqlite")]
    store: String,
    /// The `toolgate` binary (a release build).
    #[arg(long)]
    toolgate: PathBuf,
    /// Pending approvals to fill.
    #[arg(long, default_value_t = 100_000)]
    approvals: usize,
    /// Conversations they are spread over.
    #[arg(long, default_value_t = 10_000)]
    conversations: usize,
    /// Approvers (in groups of --group-size).
    #[arg(long, default_value_t = 50)]
    approvers: usize,
    /// Approvers per group.
    #[arg(long, default_value_t = 5)]
    group_size: usize,
    /// Approvals an approval needs.
    #[arg(long, default_value_t = 2)]
    quorum: u32,
    /// Requesters (conversation owners).
    #[arg(long, default_value_t = 100)]
    requesters: usize,
    /// Approvals per `issue` call while filling.
    #[arg(long, default_value_t = 2_000)]
    batch: usize,
    /// Untimed requests of each kind first.
    #[arg(long, default_value_t = 100)]
    warmup: usize,
    /// Timed listings.
    #[arg(long, default_value_t = 1_000)]
    list_requests: usize,
    /// Timed votes of each kind (first and deciding).
    #[arg(long, default_value_t = 500)]
    votes: usize,
    /// Inbox streams to open (0: none).
    #[arg(long, default_value_t = 1_000)]
    streams: usize,
    /// Streams opened at once.
    #[arg(long, default_value_t = 32)]
    open_parallel: usize,
    /// How long the streams are held open.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    hold: Duration,
    /// The server's RSS is sampled this often while they are held.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    sample_every: Duration,
    /// A vote lands this often while they are held.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    vote_every: Duration,
    /// Keep the files here (default: a temporary directory, removed at the end).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// The store's name in the table (default: sqlite or postgres).
    #[arg(long)]
    label: Option<String>,
    /// On Postgres, measure right after the fill, before the planner has statistics of the new rows (by
    /// default the bench runs `ANALYZE` first, as autovacuum does soon after a bulk load).
    #[arg(long)]
    no_analyze: bool,
    /// Print only the table's rows (to append them to another run's table).
    #[arg(long)]
    rows_only: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("inbox_bench: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("inbox_bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The whole bench: fill, serve, measure, print.
async fn run(args: Args) -> anyhow::Result<()> {
    let temp = tempfile::Builder::new().prefix("inbox-bench.").tempdir()?;
    let work = args.work_dir.clone().unwrap_or_else(|| temp.path().to_owned());
    let data_dir = work.join("data");
    // Readable by its owner only, as the server wants its data directory.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let spec = StoreSpec::parse(&args.store, &data_dir)?;
    let (store_arg, label) = match &spec {
        StoreSpec::Sqlite(path) => (format!("sqlite:{}", path.display()), "sqlite"),
        StoreSpec::Postgres(url) => (url.clone(), "postgres"),
        _ => bail!("--store must be a SQLite file or a Postgres URL: the server and the bench share it"),
    };
    let label = args.label.clone().unwrap_or_else(|| label.to_owned());
    let layout = layout(&args);
    layout.check()?;
    let summary = machine_summary();

    eprintln!("inbox_bench: filling {spec} with {} approvals", layout.approvals);
    let store = SqlStore::open(&spec).await?;
    let filled = fill(&store, &layout, args.batch).await;
    store.close().await;
    let filled = filled?;
    let analyzed = match &spec {
        StoreSpec::Postgres(url) if !args.no_analyze => format!("; `ANALYZE` {}", ms(analyze(url).await?)),
        StoreSpec::Postgres(_) => "; not analyzed (--no-analyze)".to_owned(),
        _ => String::new(),
    };
    let mut rows = vec![Row::value(
        format!("fill: {} pending approvals, {} conversations", layout.approvals, layout.conversations),
        format!(
            "{:.1} s ({:.0} approvals/s){analyzed}",
            filled.as_secs_f64(),
            layout.approvals as f64 / filled.as_secs_f64()
        ),
        "",
    )];

    let files = ["tokens.json", "toolgate.toml", "script.json", "toolgate.log"].map(|name| work.join(name));
    write_tokens(&layout, &files[0])?;
    write_config(&layout, &files[1])?;
    write_script(&files[2])?;
    let options = ServeOptions {
        toolgate: &args.toolgate,
        store: &store_arg,
        data_dir: &data_dir,
        tokens: &files[0],
        config: &files[1],
        script: &files[2],
        log: &files[3],
        flags: &[],
    };
    let mut server = Server::start(&options)?;
    eprintln!("inbox_bench: toolgate serve on {} (pid {})", server.addr, server.process.pid);
    // For a script that must stop it should this process be killed first.
    std::fs::write(work.join("toolgate.pid"), server.process.pid.to_string())?;
    let measured = measure(&args, &layout, &server).await;
    let warnings = server.warnings();
    if measured.is_err() {
        eprintln!("inbox_bench: the server's last log lines:\n{}", server.log_tail(20));
    }
    server.stop()?;
    rows.extend(measured?);
    if warnings > 0 {
        eprintln!("inbox_bench: the server logged {warnings} warnings or errors (see {})", files[3].display());
    }
    print_table(&args, &label, &summary, &rows);
    Ok(())
}

/// Runs `ANALYZE` on the Postgres database at `url`: the planner's statistics
/// of the filled tables, as autovacuum gathers them soon after a bulk load.
async fn analyze(url: &str) -> anyhow::Result<Duration> {
    use sqlx::Connection as _;
    let started = Instant::now();
    let mut connection = sqlx::postgres::PgConnection::connect(url).await.context("connecting to run ANALYZE")?;
    sqlx::raw_sql("ANALYZE").execute(&mut connection).await.context("ANALYZE")?;
    connection.close().await?;
    Ok(started.elapsed())
}

/// The data set the arguments describe.
fn layout(args: &Args) -> Layout {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Layout {
        approvals: args.approvals,
        conversations: args.conversations,
        approvers: args.approvers,
        group_size: args.group_size,
        quorum: args.quorum,
        requesters: args.requesters,
        run: format!("{:x}", now.as_millis() % 0xFF_FFFF),
        now: i64::try_from(now.as_millis()).unwrap_or(i64::MAX),
    }
}

/// Every measurement against the running server.
async fn measure(args: &Args, layout: &Layout, server: &Server) -> anyhow::Result<Vec<Row>> {
    let mut clients = (0..layout.approvers)
        .map(|i| Client::new(server.addr, &token(layout, &Layout::approver(i))))
        .collect::<anyhow::Result<Vec<Client>>>()?;
    let mut rows = measure_list(args, &mut clients).await?;
    rows.extend(measure_votes(args, layout, &mut clients).await?);
    if args.streams > 0 {
        rows.extend(measure_streams(args, layout, server, &mut clients).await?);
    }
    Ok(rows)
}

/// `GET /api/approvals?state=pending&limit=50`: as one approver, then as
/// each approver in turn; and the listing of 500 an inbox stream reads.
async fn measure_list(args: &Args, clients: &mut [Client]) -> anyhow::Result<Vec<Row>> {
    eprintln!("inbox_bench: {} listings as one approver, then as each in turn", args.list_requests);
    let one = Listing { path: LIST_PATH, items: 50, rotate: false, requests: args.list_requests };
    let all = Listing { rotate: true, ..one };
    let stream = Listing { path: STREAM_LIST_PATH, items: 500, rotate: false, requests: args.list_requests / 10 };
    let mut rows = Vec::new();
    for (listing, metric, target) in [
        (one, format!("`GET {LIST_PATH}`, one approver"), Some(LIST_TARGET)),
        (all, format!("`GET {LIST_PATH}`, {} approvers in turn", clients.len()), Some(LIST_TARGET)),
        (stream, format!("`GET {STREAM_LIST_PATH}` (what each inbox stream reads per look)"), None),
    ] {
        let (latencies, items, size) = listing.run(clients, args.warmup.min(listing.requests)).await?;
        let value = format!("{items} items, {:.1} KiB", size as f64 / 1024.0);
        rows.push(Row { value, ..Row::latency(metric, latencies, target) });
    }
    Ok(rows)
}

/// Listings of one kind.
#[derive(Debug, Clone, Copy)]
struct Listing {
    path: &'static str,
    /// Approvals each may hold at most (the limit).
    items: usize,
    /// As each approver in turn (else as the first).
    rotate: bool,
    /// Timed requests.
    requests: usize,
}

impl Listing {
    /// `warmup` untimed requests, then the timed ones: their latencies, and
    /// the last one's approvals and body size.
    async fn run(&self, clients: &mut [Client], warmup: usize) -> anyhow::Result<(Latencies, usize, usize)> {
        let mut latencies = Vec::with_capacity(self.requests);
        let (mut items, mut size) = (0, 0);
        for i in 0..warmup + self.requests {
            let count = clients.len();
            let answer = clients[if self.rotate { i % count } else { 0 }].get(self.path).await?;
            let listed = answer.json()?["approvals"].as_array().map_or(0, Vec::len);
            anyhow::ensure!(
                (1..=self.items).contains(&listed),
                "the listing holds {listed} approvals, not 1 to {}",
                self.items
            );
            if i >= warmup {
                latencies.push(answer.elapsed);
                (items, size) = (listed, answer.body.len());
            }
        }
        Ok((Latencies::new(latencies), items, size))
    }
}

/// Votes on approvals spread over all but the newest: first votes
/// (pending → pending), then the rest, the last of which decides
/// (pending → approved).
async fn measure_votes(args: &Args, layout: &Layout, clients: &mut [Client]) -> anyhow::Result<Vec<Row>> {
    let count = args.warmup + args.votes;
    anyhow::ensure!(layout.approvals > RESERVED + count, "--approvals must exceed {}", RESERVED + count);
    let span = layout.approvals - RESERVED;
    let numbers: Vec<usize> = (0..count).map(|k| k * span / count).collect();
    eprintln!("inbox_bench: {} first votes, then {} deciding votes", args.votes, args.votes);
    let mut first = Vec::with_capacity(args.votes);
    let mut deciding = Vec::with_capacity(args.votes);
    for vote in 0..layout.quorum as usize {
        let decides = vote + 1 == layout.quorum as usize;
        for (k, &n) in numbers.iter().enumerate() {
            let voter = layout.members(layout.group_of(n))[vote];
            let answer = clients[voter].approve(&layout.approval_id(n)).await?;
            check_vote(&answer, decides, vote + 1)?;
            if k >= args.warmup {
                match vote {
                    0 => first.push(answer.elapsed),
                    _ if decides => deciding.push(answer.elapsed),
                    _ => {}
                }
            }
        }
    }
    Ok(vec![
        Row::latency(
            "`POST /api/approvals/{id}`, first vote (pending → pending)",
            Latencies::new(first),
            Some(VOTE_TARGET),
        ),
        Row::latency(
            "`POST /api/approvals/{id}`, deciding vote (pending → approved)",
            Latencies::new(deciding),
            Some(VOTE_TARGET),
        ),
    ])
}

/// Fails unless the vote answered 200 with the state and vote count expected.
fn check_vote(answer: &Answer, decides: bool, votes: usize) -> anyhow::Result<()> {
    let item = answer.json()?;
    let expected = if decides { "approved" } else { "pending" };
    let counted = item["votes"].as_array().map_or(0, Vec::len);
    if item["state"] != expected || counted != votes {
        bail!("a vote answered state {} with {counted} votes, expected {expected} with {votes}", item["state"]);
    }
    Ok(())
}

/// The server's resident set size now.
fn rss(process: Process) -> anyhow::Result<u64> {
    process.status_bytes("VmRSS")
}

/// Prints the machine, the table's header (unless --rows-only) and the rows.
fn print_table(args: &Args, label: &str, summary: &str, rows: &[Row]) {
    if !args.rows_only {
        println!("{summary}");
        println!();
        println!("{HEADER}");
    }
    for row in rows {
        println!("{}", row.markdown(label));
    }
}

/// Opens the streams, holds them while votes land, closes them; the
/// server's RSS and CPU time throughout.
async fn measure_streams(
    args: &Args,
    layout: &Layout,
    server: &Server,
    clients: &mut [Client],
) -> anyhow::Result<Vec<Row>> {
    let process = server.process;
    let tokens: Vec<String> = (0..layout.approvers).map(|i| token(layout, &Layout::approver(i))).collect();
    let before = rss(process)?;
    eprintln!("inbox_bench: opening {} inbox streams (RSS {})", args.streams, mib(before));
    let started = Instant::now();
    let open = streams::open(server.addr, &tokens, args.streams, args.open_parallel).await?;
    let opened_in = started.elapsed();
    let opened = rss(process)?;
    let per_stream = opened.saturating_sub(before) as f64 / args.streams as f64 / 1024.0;
    let mut rows = vec![
        Row {
            value: format!(
                "{} open in {:.1} s ({} failed{}); first events: {} approvals, {}",
                open.len(),
                opened_in.as_secs_f64(),
                open.failed,
                open.first_failure.as_deref().map(|error| format!(": {error}")).unwrap_or_default(),
                open.first_events,
                mib(open.first_bytes)
            ),
            ..Row::latency(
                "`GET /api/approvals/stream`: open and read the first event",
                Latencies::new(open.first_event.clone()),
                None,
            )
        },
        Row::value("server RSS before the streams", mib(before), ""),
        Row::value(
            format!("server RSS with {} streams open", args.streams),
            format!("{} (+{}, {per_stream:.0} KiB per stream)", mib(opened), mib(opened.saturating_sub(before))),
            "",
        ),
    ];
    let hold = hold(args, layout, process, &open, clients).await?;
    open.close().await;
    // Let the server notice the closed connections and drop what they held.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = rss(process)?;
    tokio::time::sleep(Duration::from_secs(12)).await;
    let later = rss(process)?;
    eprintln!("inbox_bench: streams closed; RSS {} after 3 s, {} after 15 s", mib(after), mib(later));
    rows.extend(hold);
    rows.push(Row::value("server RSS 3 s and 15 s after closing them", format!("{}, {}", mib(after), mib(later)), ""));
    Ok(rows)
}

/// Holds the streams for `--hold`, a vote landing every `--vote-every` (on
/// the newest approvals, which every stream of their group shows) and the
/// RSS sampled every `--sample-every` (by a task of its own, so a slow vote
/// does not delay a sample).
async fn hold(
    args: &Args,
    layout: &Layout,
    process: Process,
    open: &streams::OpenStreams,
    clients: &mut [Client],
) -> anyhow::Result<Vec<Row>> {
    eprintln!("inbox_bench: holding {} streams for {:?}, a vote every {:?}", open.len(), args.hold, args.vote_every);
    let received = (open.received.events.load(Ordering::Relaxed), open.received.bytes.load(Ordering::Relaxed));
    let cpu_before = (cpu_time(process)?, machine_cpu()?);
    let started = Instant::now();
    let samples = Arc::new(Mutex::new(vec![rss(process)?]));
    let sampler = tokio::spawn(sample_rss(process, args.sample_every, Arc::clone(&samples)));
    let votes = hold_votes(args, layout, open.len(), clients, started).await;
    // Let the last vote's events arrive before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    sampler.abort();
    let mut samples = samples.lock().map(|samples| samples.clone()).unwrap_or_default();
    samples.push(rss(process)?);
    let held = started.elapsed();
    let machine = machine_cpu()?;
    let cpu = Cpu {
        server: cpu_time(process)?.saturating_sub(cpu_before.0),
        busy: machine.0.saturating_sub(cpu_before.1.0),
        total: machine.1.saturating_sub(cpu_before.1.1),
    };
    let events = open.received.events.load(Ordering::Relaxed) - received.0;
    let bytes = open.received.bytes.load(Ordering::Relaxed) - received.1;
    let ended = open.received.ended.load(Ordering::Relaxed);
    if ended > 0 {
        bail!("{ended} streams ended while held");
    }
    eprintln!(
        "inbox_bench: RSS samples while held: {}",
        samples.iter().map(|&s| mib(s)).collect::<Vec<_>>().join(", ")
    );
    Ok(hold_rows(open.len(), &samples, held, cpu, votes, (events, bytes)))
}

/// Appends the RSS to `samples` every `every`, until aborted.
async fn sample_rss(process: Process, every: Duration, samples: Arc<Mutex<Vec<u64>>>) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        ticks.tick().await;
        if let (Ok(rss), Ok(mut samples)) = (rss(process), samples.lock()) {
            samples.push(rss);
        }
    }
}

/// CPU time used while the streams were held.
#[derive(Debug, Clone, Copy)]
struct Cpu {
    /// By the server.
    server: Duration,
    /// By the machine (every process), and its capacity (every core).
    busy: Duration,
    total: Duration,
}

/// The votes cast while the streams are held.
#[derive(Debug, Default)]
struct HoldVotes {
    latencies: Vec<Duration>,
    /// Events the streams should send for them.
    expected_events: usize,
    failed: usize,
    first_failure: Option<String>,
}

/// Votes on the newest approvals, one every `--vote-every`, until `--hold`
/// has passed since `started`: each approval gets its quorum of votes, in
/// turn; a failed vote (an overloaded server) is counted, and the next
/// approval is voted on.
async fn hold_votes(
    args: &Args,
    layout: &Layout,
    streams: usize,
    clients: &mut [Client],
    started: Instant,
) -> HoldVotes {
    let mut votes = HoldVotes::default();
    let quorum = layout.quorum as usize;
    let (mut approval, mut vote) = (0, 0);
    while started.elapsed() < args.hold {
        let tick = Instant::now();
        let n = layout.approvals - 1 - approval;
        let group = layout.group_of(n);
        let decides = vote + 1 == quorum;
        let voter = layout.members(group)[vote];
        let cast = async {
            let answer = clients[voter].approve(&layout.approval_id(n)).await?;
            check_vote(&answer, decides, vote + 1)?;
            anyhow::Ok(answer.elapsed)
        };
        match cast.await {
            Ok(elapsed) => {
                votes.latencies.push(elapsed);
                // Each stream of the group's approvers sends the change; a decided one
                // leaves the window, and the next older pending approval enters it.
                let of_group: usize =
                    layout.members(group).iter().map(|&i| streams_of(i, layout.approvers, streams)).sum();
                votes.expected_events += of_group * if decides { 2 } else { 1 };
                vote += 1;
            }
            Err(error) => {
                votes.failed += 1;
                votes.first_failure.get_or_insert_with(|| format!("{error:#}"));
                vote = quorum;
            }
        }
        if vote == quorum {
            (approval, vote) = (approval + 1, 0);
        }
        let left = args.hold.saturating_sub(started.elapsed());
        tokio::time::sleep(args.vote_every.saturating_sub(tick.elapsed()).min(left)).await;
    }
    votes
}

/// How many of `streams` streams, opened round-robin over `approvers`, approver `i` holds.
fn streams_of(i: usize, approvers: usize, streams: usize) -> usize {
    streams / approvers + usize::from(i < streams % approvers)
}

/// The rows of the hold: RSS samples, CPU time, the votes and what the streams received.
fn hold_rows(
    streams: usize,
    samples: &[u64],
    held: Duration,
    cpu: Cpu,
    votes: HoldVotes,
    (events, bytes): (u64, u64),
) -> Vec<Row> {
    let first = samples.first().copied().unwrap_or_default();
    let last = samples.last().copied().unwrap_or_default();
    let (low, high) =
        (samples.iter().min().copied().unwrap_or_default(), samples.iter().max().copied().unwrap_or_default());
    // Peaks, not single samples: the allocator returns memory in steps.
    let (early, late) = samples.split_at(samples.len() / 2);
    let peak = |half: &[u64]| half.iter().max().copied().unwrap_or_default() as f64;
    let growth = peak(late) - peak(early);
    let flat = growth <= peak(early) * 0.05;
    let failed = match &votes.first_failure {
        Some(error) => format!("; {} votes failed: {error}", votes.failed),
        None => String::new(),
    };
    vec![
        Row::value(
            format!(
                "server RSS while {streams} streams are held {:.0} s ({} samples)",
                held.as_secs_f64(),
                samples.len()
            ),
            format!(
                "{} → {} (min {}, max {}; peak of the 2nd half vs the 1st: {:+.1} MiB)",
                mib(first),
                mib(last),
                mib(low),
                mib(high),
                growth / (1024.0 * 1024.0)
            ),
            format!("flat (peak ≤ +5%): {}", if flat { "met" } else { "**missed**" }),
        ),
        Row::value(
            format!("server CPU while {streams} streams are held"),
            format!(
                "{:.1} s in {:.1} s ({:.2} cores); the machine was {:.0}% busy",
                cpu.server.as_secs_f64(),
                held.as_secs_f64(),
                cpu.server.as_secs_f64() / held.as_secs_f64(),
                100.0 * cpu.busy.as_secs_f64() / cpu.total.as_secs_f64().max(f64::MIN_POSITIVE)
            ),
            "",
        ),
        Row {
            value: format!(
                "{events} events ({}) reached the streams; {} expected from {} votes{failed}",
                mib(bytes),
                votes.expected_events,
                votes.latencies.len(),
            ),
            ..Row::latency(
                format!("`POST /api/approvals/{{id}}` while {streams} streams are held"),
                Latencies::new(votes.latencies),
                None,
            )
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_spread_round_robin() {
        assert_eq!((0..50).map(|i| streams_of(i, 50, 1_000)).sum::<usize>(), 1_000);
        assert_eq!(streams_of(0, 50, 1_010), 21);
        assert_eq!(streams_of(10, 50, 1_010), 20);
    }
}
