//! The results and the markdown table they print as.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::load::Outcome;

/// One server under one load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    /// Requests completed in the timed run.
    pub requests: usize,
    /// Requests per second.
    pub throughput: f64,
    /// Median latency, in seconds.
    pub p50: f64,
    /// 99th percentile latency, in seconds.
    pub p99: f64,
    /// The server's peak RSS during the run, in bytes, when its PID is known.
    pub peak_rss: Option<u64>,
}

impl Measured {
    /// The figures of `outcome`, with the peak RSS if known.
    pub fn new(outcome: &Outcome, peak_rss: Option<u64>) -> Self {
        Self {
            requests: outcome.requests,
            throughput: outcome.throughput(),
            p50: outcome.percentile(0.50).as_secs_f64(),
            p99: outcome.percentile(0.99).as_secs_f64(),
            peak_rss,
        }
    }
}

/// One approval-continuation body at one number of connections.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// UI messages in the history.
    pub messages: usize,
    /// Connections.
    pub connections: usize,
    /// Body size in bytes.
    pub body_bytes: usize,
    /// The serde_json floor of the body (parse into `Value` and serialize back, median), in seconds.
    pub serde_floor: f64,
    /// `toolgate serve --store none`.
    pub toolgate: Option<Measured>,
    /// The Vercel AI SDK server.
    pub ai_sdk: Option<Measured>,
}

impl Row {
    /// toolgate's throughput over the AI SDK's.
    pub fn speedup(&self) -> Option<f64> {
        Some(self.toolgate.as_ref()?.throughput / self.ai_sdk.as_ref()?.throughput)
    }

    /// toolgate's time per request (1 / throughput) over the serde floor.
    pub fn over_floor(&self) -> Option<f64> {
        let toolgate = self.toolgate.as_ref()?;
        Some(1.0 / toolgate.throughput / self.serde_floor)
    }
}

/// The approval round trip with a durable store at one number of connections.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundTripRow {
    /// The store (`sqlite`).
    pub store: String,
    /// Connections.
    pub connections: usize,
    /// toolgate.
    pub toolgate: Measured,
}

/// Everything one run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The machine and its load when the run started.
    pub machine: String,
    /// The continuation rows.
    pub rows: Vec<Row>,
    /// The round trips with a store.
    pub round_trips: Vec<RoundTripRow>,
    /// `GET /healthz` on toolgate at the most connections: what the load generator can do.
    pub ceiling: Option<(usize, Measured)>,
    /// False when Linux refused to reset a peak RSS between cells (then each is the peak so far).
    pub peak_reset: bool,
}

/// `1,234` for large counts, one decimal below 100.
pub fn rate(value: f64) -> String {
    if value < 100.0 {
        return format!("{value:.1}");
    }
    count(value.round() as usize)
}

/// `1,234`.
pub fn count(value: usize) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A latency: µs below 1 ms, ms below 1 s, else s; three significant digits.
pub fn latency(seconds: f64) -> String {
    let time = Duration::from_secs_f64(seconds.max(0.0));
    if time < Duration::from_millis(1) {
        format!("{:.0} µs", seconds * 1e6)
    } else if time < Duration::from_millis(10) {
        format!("{:.2} ms", seconds * 1e3)
    } else if time < Duration::from_millis(100) {
        format!("{:.1} ms", seconds * 1e3)
    } else if time < Duration::from_secs(1) {
        format!("{:.0} ms", seconds * 1e3)
    } else {
        format!("{seconds:.2} s")
    }
}

/// A body size in decimal units.
pub fn size(bytes: usize) -> String {
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.0} KB", bytes as f64 / 1e3),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    }
}

/// A resident set size in MiB.
pub fn mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "—".into(), |bytes| format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0)))
}

fn ratio(value: Option<f64>) -> String {
    match value {
        Some(value) if value >= 10.0 => format!("{value:.0}×"),
        Some(value) => format!("{value:.1}×"),
        None => "—".into(),
    }
}

fn cells(measured: Option<&Measured>) -> String {
    match measured {
        Some(m) => format!("{} | {} | {} | {}", rate(m.throughput), latency(m.p50), latency(m.p99), mib(m.peak_rss)),
        None => "— | — | — | —".into(),
    }
}

impl Report {
    /// The markdown table with its legend.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "Machine: {}", self.machine);
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "| N msgs | body | serde floor | c | toolgate req/s | p50 | p99 | peak RSS | AI SDK req/s | p50 | p99 | peak RSS | toolgate ÷ AI SDK | toolgate time/req ÷ floor |"
        );
        let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for row in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                count(row.messages),
                size(row.body_bytes),
                latency(row.serde_floor),
                row.connections,
                cells(row.toolgate.as_ref()),
                cells(row.ai_sdk.as_ref()),
                ratio(row.speedup()),
                ratio(row.over_floor()),
            );
        }
        for row in &self.round_trips {
            let _ = writeln!(
                out,
                "| round trip, `--store {}` ² | — | — | {} | {} | — | — | — | — | — | — |",
                row.store,
                row.connections,
                cells(Some(&row.toolgate)),
            );
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "`POST /api/chat` approval continuation: a history of N UI messages, the last an approved `delete_file` that \
             both servers run before one scripted model step (\"Done.\", stop). Same bytes to both servers. toolgate: \
             `toolgate serve --store none` (signed approvals). AI SDK: `ai@6` `streamText` + UI message stream on Node. \
             serde floor: `serde_json` parse of the body into `Value` and serialize back (median, this process). \
             time/req = 1 / (req/s): the mean latency at c = 1, the wall time per request with every core busy at c > 1."
        );
        if !self.round_trips.is_empty() {
            let _ = writeln!(
                out,
                "² toolgate with a durable store: the history must be one the server produced, so each conversation is \
                 fresh and makes two requests, the first turn (the server issues an approval request) and the approved \
                 continuation (the call runs, then one model step); req/s, p50 and p99 count both."
            );
        }
        if let Some((connections, ceiling)) = &self.ceiling {
            let _ = writeln!(
                out,
                "Load generator ceiling: `GET /healthz` on toolgate at c = {connections}: {} req/s, p50 {}, p99 {}.",
                rate(ceiling.throughput),
                latency(ceiling.p50),
                latency(ceiling.p99)
            );
        }
        if !self.peak_reset {
            let _ =
                writeln!(out, "Peak RSS could not be reset between cells: each is the peak since the server started.");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(rate(1.94), "1.9");
        assert_eq!(rate(1698.4), "1,698");
        assert_eq!(rate(59000.0), "59,000");
        assert_eq!(rate(1234567.0), "1,234,567");
        assert_eq!(count(10_000), "10,000");
        assert_eq!(latency(0.000_42), "420 µs");
        assert_eq!(latency(0.0021), "2.10 ms");
        assert_eq!(latency(0.037), "37.0 ms");
        assert_eq!(latency(0.512), "512 ms");
        assert_eq!(latency(2.5), "2.50 s");
        assert_eq!(size(3_100), "3 KB");
        assert_eq!(size(3_712_000), "3.7 MB");
        assert_eq!(mib(Some(100 * 1024 * 1024)), "100 MiB");
    }

    #[test]
    fn a_row_has_every_column() {
        let measured = Measured { requests: 10, throughput: 100.0, p50: 0.01, p99: 0.02, peak_rss: Some(1 << 20) };
        let row = Row {
            messages: 10,
            connections: 1,
            body_bytes: 3000,
            serde_floor: 0.001,
            toolgate: Some(measured.clone()),
            ai_sdk: Some(Measured { throughput: 10.0, ..measured }),
        };
        assert_eq!(row.speedup(), Some(10.0));
        assert!((row.over_floor().unwrap() - 10.0).abs() < 1e-9);
        let report =
            Report { machine: "m".into(), rows: vec![row], round_trips: Vec::new(), ceiling: None, peak_reset: true };
        let table = report.markdown();
        let line = table.lines().find(|line| line.starts_with("| 10 |")).unwrap();
        let header = table.lines().find(|line| line.starts_with("| N msgs")).unwrap();
        assert_eq!(line.matches('|').count(), header.matches('|').count(), "{line}");
    }
}
