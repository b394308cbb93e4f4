//! The serde_json floor of a body: parsing it into a `serde_json::Value` and
//! serializing it back, the least any JSON server does with it.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Runs the floor for at least `min_iterations` and until `budget` is spent; the median time of one.
pub fn serde_floor(body: &[u8], budget: Duration, min_iterations: usize) -> anyhow::Result<Duration> {
    let mut times = Vec::new();
    let started = Instant::now();
    while times.len() < min_iterations.max(1) || started.elapsed() < budget {
        let one = Instant::now();
        black_box(round_trip(black_box(body))?);
        times.push(one.elapsed());
    }
    times.sort_unstable();
    Ok(times[times.len() / 2])
}

/// The floor's work, once: `body` parsed into a `Value` and serialized back.
pub fn round_trip(body: &[u8]) -> serde_json::Result<Vec<u8>> {
    let value: serde_json::Value = serde_json::from_slice(body)?;
    serde_json::to_vec(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_measured_and_invalid_json_fails() {
        let floor = serde_floor(br#"{"messages": [1, 2, 3]}"#, Duration::ZERO, 3).unwrap();
        assert!(floor > Duration::ZERO);
        assert!(serde_floor(b"{", Duration::ZERO, 1).is_err());
    }
}
