//! When and how long to wait before trying a request again.

use std::time::Duration;

/// Retry policy for failures before the first byte of a successful response
/// (HTTP 429, HTTP 5xx, connection errors).
///
/// The wait before retry `n` (0-based) is `initial_backoff * 2^n`, capped at
/// `max_backoff`, and with `jitter` drawn uniformly from its upper half. A
/// `retry-after` (or `retry-after-ms`) header from the provider replaces the
/// computed wait; if it asks for more than `max_retry_after`, the request is
/// not retried and the error carries the requested wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = never retry).
    pub max_retries: u32,
    /// The first wait.
    pub initial_backoff: Duration,
    /// The longest computed wait.
    pub max_backoff: Duration,
    /// The longest `retry-after` that is honoured.
    pub max_retry_after: Duration,
    /// Randomize waits to spread retries of concurrent clients.
    pub jitter: bool,
}

impl Default for RetryPolicy {
    /// Two retries, starting at 500 ms, at most 8 s, honouring `retry-after` up to 60 s.
    fn default() -> Self {
        Self {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// Never retry.
    pub fn none() -> Self {
        Self { max_retries: 0, ..Self::default() }
    }

    /// `max_retries` retries with a fixed tiny wait and no jitter (for tests).
    pub fn immediate(max_retries: u32) -> Self {
        Self {
            max_retries,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(1),
            max_retry_after: Duration::from_millis(50),
            jitter: false,
        }
    }

    /// The computed wait before retry `retry` (0-based), ignoring `retry-after`.
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.min(16));
        let delay = self.initial_backoff.saturating_mul(factor).min(self.max_backoff);
        if self.jitter && !delay.is_zero() {
            let half = delay / 2;
            half + half.mul_f64(fastrand::f64())
        } else {
            delay
        }
    }

    /// The wait before retry `retry` given the provider's `retry-after`, or
    /// `None` when the provider asks for longer than `max_retry_after`.
    pub fn wait(&self, retry: u32, retry_after: Option<Duration>) -> Option<Duration> {
        match retry_after {
            Some(requested) if requested > self.max_retry_after => None,
            Some(requested) => Some(requested),
            None => Some(self.backoff(retry)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_jitter_stays_in_the_upper_half() {
        let policy = RetryPolicy { jitter: false, ..RetryPolicy::default() };
        let waits: Vec<u64> = (0..6).map(|n| policy.backoff(n).as_millis() as u64).collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 8000]);
        let jittered = RetryPolicy::default();
        for _ in 0..100 {
            let wait = jittered.backoff(1);
            assert!(wait >= Duration::from_millis(500) && wait <= Duration::from_millis(1000), "{wait:?}");
        }
    }

    #[test]
    fn retry_after_replaces_the_backoff_unless_too_long() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.wait(0, Some(Duration::from_secs(3))), Some(Duration::from_secs(3)));
        assert_eq!(policy.wait(0, Some(Duration::from_secs(120))), None);
    }
}
