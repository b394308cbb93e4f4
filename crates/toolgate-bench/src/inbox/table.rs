//! Latency summaries and the markdown table `inbox_bench` prints.

use std::fmt::Write as _;
use std::time::Duration;

use crate::load::percentile;

/// The table's header.
pub const HEADER: &str =
    "| store | metric | n | p50 | p99 | max | value | target |\n|---|---|---:|---:|---:|---:|---|---|";

/// Latencies of one kind of request.
#[derive(Debug, Clone, PartialEq)]
pub struct Latencies {
    sorted: Vec<Duration>,
}

impl Latencies {
    /// Summarises `latencies` (any order).
    pub fn new(mut latencies: Vec<Duration>) -> Self {
        latencies.sort_unstable();
        Self { sorted: latencies }
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// The `p` quantile (nearest rank).
    pub fn at(&self, p: f64) -> Duration {
        percentile(&self.sorted, p)
    }

    /// The largest.
    pub fn max(&self) -> Duration {
        self.sorted.last().copied().unwrap_or_default()
    }
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// What was measured.
    pub metric: String,
    /// Latencies, when the row has them.
    pub latencies: Option<Latencies>,
    /// A value (memory, time, counts), when the row has one.
    pub value: String,
    /// The target and whether it was met, e.g. `p99 < 20 ms: met`.
    pub target: String,
}

impl Row {
    /// A latency row, checked against a p99 target when one is given.
    pub fn latency(metric: impl Into<String>, latencies: Latencies, p99_target: Option<Duration>) -> Self {
        let target = match p99_target {
            Some(target) => {
                let verdict = if latencies.at(0.99) < target { "met" } else { "**missed**" };
                format!("p99 < {}: {verdict}", ms(target))
            }
            None => String::new(),
        };
        Self { metric: metric.into(), latencies: Some(latencies), value: String::new(), target }
    }

    /// A value row.
    pub fn value(metric: impl Into<String>, value: impl Into<String>, target: impl Into<String>) -> Self {
        Self { metric: metric.into(), latencies: None, value: value.into(), target: target.into() }
    }

    /// The row in markdown, for `store`.
    pub fn markdown(&self, store: &str) -> String {
        let mut line = format!("| {store} | {} | ", self.metric);
        match &self.latencies {
            Some(latencies) => {
                let _ = write!(
                    line,
                    "{} | {} | {} | {} |",
                    latencies.len(),
                    ms(latencies.at(0.50)),
                    ms(latencies.at(0.99)),
                    ms(latencies.max())
                );
            }
            None => line.push_str(" | | | |"),
        }
        let _ = write!(line, " {} | {} |", self.value, self.target);
        line
    }
}

/// A duration in milliseconds, `1.23 ms`.
pub fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

/// Bytes in MiB, `123.4 MiB`.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_render_latencies_and_targets() {
        let latencies = Latencies::new((1..=100).rev().map(Duration::from_millis).collect());
        assert_eq!(latencies.at(0.5), Duration::from_millis(50));
        assert_eq!(latencies.at(0.99), Duration::from_millis(99));
        let row = Row::latency("GET", latencies, Some(Duration::from_millis(20)));
        assert_eq!(
            row.markdown("sqlite"),
            "| sqlite | GET | 100 | 50.00 ms | 99.00 ms | 100.00 ms |  | p99 < 20.00 ms: **missed** |"
        );
        let row = Row::value("RSS", mib(3 << 20), "");
        assert_eq!(row.markdown("postgres"), "| postgres | RSS |  | | | | 3.0 MiB |  |");
    }
}
