//! The sustained-load memory check: one body at one concurrency for a long
//! time, the server's resident set sampled between slices of the load.
//!
//! A round-trip workload starts fresh conversations in every slice (a stored
//! server's memory under a growing store).
//!
//! The verdict compares the RSS at the end of the warm-up with the RSS at the
//! end and with the highest sample after the warm-up: a server that keeps no
//! state per request stays flat once its allocator has warmed up.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::load::{self, Limits, Target, Workload};
use crate::process::Process;
use crate::report;

/// One slice of the soak.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    /// Seconds since the soak started, at the end of the slice.
    pub at_secs: f64,
    /// Requests in the slice.
    pub requests: usize,
    /// Requests per second in the slice.
    pub throughput: f64,
    /// The server's resident set after the slice, in bytes.
    pub rss: u64,
}

/// What a soak measured.
#[derive(Debug, Clone, Serialize)]
pub struct Soak {
    /// The samples, in order.
    pub samples: Vec<Sample>,
    /// How many of the first samples are the warm-up.
    pub warmup_samples: usize,
}

impl Soak {
    /// The RSS at the end of the warm-up, at the end, and the most after the warm-up.
    pub fn verdict(&self) -> Option<(u64, u64, u64)> {
        let warm = self.samples.get(self.warmup_samples.checked_sub(1)?)?.rss;
        let after = &self.samples[self.warmup_samples..];
        let last = after.last()?.rss;
        let most = after.iter().map(|sample| sample.rss).max()?;
        Some((warm, last, most))
    }

    /// A markdown table of the samples and the verdict.
    pub fn markdown(&self) -> String {
        let mut out = String::from("| time | requests | req/s | RSS |\n|---:|---:|---:|---:|\n");
        for sample in &self.samples {
            let _ = writeln!(
                out,
                "| {:.0} s | {} | {} | {} |",
                sample.at_secs,
                sample.requests,
                report::rate(sample.throughput),
                report::mib(Some(sample.rss))
            );
        }
        if let Some((warm, last, most)) = self.verdict() {
            let growth = last as f64 / warm as f64 - 1.0;
            let _ = writeln!(
                out,
                "\nRSS after the warm-up {}, at the end {} ({:+.1} %), highest after the warm-up {}.",
                report::mib(Some(warm)),
                report::mib(Some(last)),
                growth * 100.0,
                report::mib(Some(most))
            );
        }
        out
    }
}

/// How long a soak runs and how it samples.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// The whole soak.
    pub total: Duration,
    /// The load between two samples.
    pub slice: Duration,
    /// The first part, not judged.
    pub warmup: Duration,
    /// Connections.
    pub connections: usize,
    /// The longest a request may take.
    pub timeout: Duration,
}

/// Runs `workload` on `target` as `plan` says, sampling `process`'s RSS after each slice.
pub async fn run(target: Target, process: Process, workload: Workload, plan: Plan) -> anyhow::Result<Soak> {
    let Plan { total, slice, warmup, connections, timeout } = plan;
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut warmup_samples = 0;
    while started.elapsed() < total {
        let limits = Limits { connections, duration: slice, max_requests: usize::MAX, timeout };
        let outcome = load::run(target, slice_of(&workload, samples.len()), limits).await?;
        let sample = Sample {
            at_secs: started.elapsed().as_secs_f64(),
            requests: outcome.requests,
            throughput: outcome.throughput(),
            rss: process.status_bytes("VmRSS")?,
        };
        eprintln!(
            "  soak {:>5.0} s  {:>7} requests  {:>9} req/s  RSS {}",
            sample.at_secs,
            sample.requests,
            report::rate(sample.throughput),
            report::mib(Some(sample.rss))
        );
        if started.elapsed() <= warmup {
            warmup_samples += 1;
        }
        samples.push(sample);
    }
    Ok(Soak { samples, warmup_samples: warmup_samples.max(1) })
}

/// The workload of slice `index`: round trips start conversations no earlier slice used.
fn slice_of(workload: &Workload, index: usize) -> Workload {
    match workload {
        Workload::RoundTrip { path, chat_prefix } => {
            Workload::RoundTrip { path: path.clone(), chat_prefix: format!("{chat_prefix}-s{index}") }
        }
        Workload::Post { .. } | Workload::Get { .. } => workload.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slice_of_round_trips_starts_conversations_of_its_own() {
        let workload = Workload::RoundTrip { path: "/api/chat".into(), chat_prefix: "soak".into() };
        let prefixes: Vec<String> = (0..3)
            .map(|index| match slice_of(&workload, index) {
                Workload::RoundTrip { chat_prefix, .. } => chat_prefix,
                other => panic!("a round trip stays one: {other:?}"),
            })
            .collect();
        assert_eq!(prefixes, ["soak-s0", "soak-s1", "soak-s2"]);
        let post = Workload::Post { path: "/api/chat".into(), body: bytes::Bytes::from_static(b"{}") };
        assert!(matches!(slice_of(&post, 7), Workload::Post { body, .. } if body.as_ref() == b"{}"));
    }
}
