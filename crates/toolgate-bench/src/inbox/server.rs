//! `toolgate serve` as the bench runs it: on a free loopback port, with the
//! filled store, the tokens file and the groups, a scripted model; its log in
//! a file; stopped by its PID (`SIGTERM`, then `SIGKILL` after 10 s) when
//! [`Server::stop`] is called or the handle is dropped.

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::process::Process;

/// What the server is started with.
#[derive(Debug, Clone)]
pub struct ServeOptions<'a> {
    /// The `toolgate` binary.
    pub toolgate: &'a Path,
    /// The `--store` value.
    pub store: &'a str,
    /// The `--data-dir` (its approval secret is passed, so nothing else is kept there).
    pub data_dir: &'a Path,
    /// The `--tokens-file`.
    pub tokens: &'a Path,
    /// The `--config` (the `[groups]`).
    pub config: &'a Path,
    /// The scripted model file (`--model script:FILE`).
    pub script: &'a Path,
    /// Where its output goes.
    pub log: &'a Path,
    /// More `toolgate serve` flags (e.g. `--no-receipts`).
    pub flags: &'a [String],
}

/// A running `toolgate serve`.
#[derive(Debug)]
pub struct Server {
    child: Option<Child>,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its process, for its memory and CPU time.
    pub process: Process,
    log: PathBuf,
}

impl Server {
    /// Starts it and waits (up to 60 s) for its `toolgate serving on http://ADDR` line.
    pub fn start(options: &ServeOptions<'_>) -> anyhow::Result<Self> {
        let log = File::create(options.log).with_context(|| format!("cannot create {}", options.log.display()))?;
        let secret = format!("inbox-bench-{}", std::process::id());
        // The serving line is needed to learn the port, whatever TOOLGATE_LOG says.
        let filter = std::env::var("TOOLGATE_LOG").unwrap_or_else(|_| "info".into());
        let child = Command::new(options.toolgate)
            .args(["serve", "--addr", "127.0.0.1:0", "--tools", "demo", "--store", options.store])
            .arg("--model")
            .arg(format!("script:{}", options.script.display()))
            .arg("--data-dir")
            .arg(options.data_dir)
            .arg("--tokens-file")
            .arg(options.tokens)
            .arg("--config")
            .arg(options.config)
            .args(["--approval-secret", &secret])
            .args(options.flags)
            .env("TOOLGATE_LOG", format!("{filter},toolgate_server::launch=info"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", options.toolgate.display()))?;
        let process = Process { pid: child.id() };
        let mut server =
            Self { child: Some(child), addr: SocketAddr::from(([127, 0, 0, 1], 0)), process, log: options.log.into() };
        server.addr = server.wait_for_address()?;
        Ok(server)
    }

    /// The address from the log's serving line, once it is there.
    fn wait_for_address(&mut self) -> anyhow::Result<SocketAddr> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(rest) = text.split("serving on http://").nth(1) {
                let addr = rest.split_whitespace().next().unwrap_or_default();
                return addr.parse().with_context(|| format!("toolgate serves on `{addr}`?"));
            }
            if let Some(status) = self.child.as_mut().and_then(|child| child.try_wait().ok().flatten()) {
                bail!("toolgate serve exited ({status}) before it listened:\n{}", self.log_tail(20));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("toolgate serve did not listen within 60 s:\n{}", self.log_tail(20))
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// How many log lines at WARN or ERROR it wrote.
    pub fn warnings(&self) -> usize {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().filter(|line| line.contains(" WARN ") || line.contains(" ERROR ")).count()
    }

    /// Stops it by its PID: `SIGTERM`, then `SIGKILL` if it is still there after 10 s.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        let pid = child.id().to_string();
        // `kill` the command: this crate forbids the unsafe a libc call would need.
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("inbox_bench: toolgate serve (pid {pid}) ignored SIGTERM for 10 s; killing it");
        child.kill()?;
        child.wait()?;
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Err(error) = self.stop() {
            eprintln!("inbox_bench: cannot stop toolgate serve: {error:#}");
        }
    }
}

/// The process's CPU time so far (user and system, from `/proc/PID/stat`).
pub fn cpu_time(process: Process) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", process.pid))?;
    // The fields after the command name (which may hold spaces) start at state, the third field.
    let rest = stat.rsplit_once(')').map(|(_, rest)| rest).context("an unexpected /proc/PID/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks =
        |index: usize| -> anyhow::Result<u64> { Ok(fields.get(index).context("a short /proc/PID/stat")?.parse()?) };
    // utime and stime are fields 14 and 15: 12 and 13 counted from state.
    let total = ticks(11)? + ticks(12)?;
    Ok(Duration::from_millis(total * 1000 / clock_ticks()))
}

/// The machine's CPU time so far, busy and in all (every core, from the
/// first line of `/proc/stat`; idle and I/O wait are not busy): what every
/// process together used, the database server's included.
pub fn machine_cpu() -> anyhow::Result<(Duration, Duration)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat.lines().next().context("an empty /proc/stat")?;
    let ticks: Vec<u64> = line.split_whitespace().skip(1).map(str::parse).collect::<Result<_, _>>()?;
    anyhow::ensure!(ticks.len() >= 5, "an unexpected /proc/stat: {line}");
    let total: u64 = ticks.iter().sum();
    let idle = ticks[3] + ticks[4];
    let millis = |ticks: u64| Duration::from_millis(ticks * 1000 / clock_ticks());
    Ok((millis(total - idle), millis(total)))
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 when it cannot be asked).
fn clock_ticks() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .filter(|&ticks| ticks > 0)
        .unwrap_or(100)
}
