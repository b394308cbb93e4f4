//! When to try a failed delivery again, and when to stop.
//!
//! [`backoff`] doubles from [`BACKOFF_BASE`] per attempt up to [`BACKOFF_CAP`]
//! and applies "equal jitter" (half the step fixed, half random), so a burst
//! of failures spreads out while no retry comes sooner than half its step. A
//! receiver's `Retry-After` (parsed by [`parse_retry_after`], capped at
//! [`MAX_RETRY_AFTER`]) wins when it asks for longer. The worker stops
//! retrying an event [`GIVE_UP_AFTER`] after its first attempt.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The step before the second attempt.
pub const BACKOFF_BASE: Duration = Duration::from_secs(2);
/// The largest step.
pub const BACKOFF_CAP: Duration = Duration::from_secs(60 * 60);
/// The longest `Retry-After` honoured.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);
/// How long after its first attempt the worker gives up on a delivery.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The wait before attempt `attempt + 1`, where `attempt` (from 1) is the
/// attempt that just failed; `retry_after` is the receiver's request, if any.
pub fn backoff(attempt: u32, retry_after: Option<Duration>) -> Duration {
    let doublings = attempt.saturating_sub(1).min(31);
    let step = BACKOFF_BASE.saturating_mul(1 << doublings).min(BACKOFF_CAP);
    let half = step / 2;
    let jittered = half + half.mul_f64(fastrand::f64());
    match retry_after {
        Some(asked) => jittered.max(asked.min(MAX_RETRY_AFTER)),
        None => jittered,
    }
}

/// Parses a `Retry-After` value, delay-seconds or an HTTP-date, into a wait
/// from `now_unix_secs`, capped at [`MAX_RETRY_AFTER`]. A date in the past is
/// no wait; an unreadable value is `None`.
pub fn parse_retry_after(value: &str, now_unix_secs: i64) -> Option<Duration> {
    let value = value.trim();
    let wait = if let Ok(secs) = value.parse::<u64>() {
        Duration::from_secs(secs)
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        let now = UNIX_EPOCH + Duration::from_secs(u64::try_from(now_unix_secs).unwrap_or(0));
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// Seconds since the Unix epoch by the system clock.
pub fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_double_from_two_seconds_with_equal_jitter_and_cap_at_an_hour() {
        for _ in 0..200 {
            for (attempt, step) in
                [(0, 2), (1, 2), (2, 4), (3, 8), (10, 1024), (12, 3600), (40, 3600), (u32::MAX, 3600)]
            {
                let wait = backoff(attempt, None);
                let step = Duration::from_secs(step);
                assert!(
                    wait >= step / 2 && wait <= step,
                    "attempt {attempt}: {wait:?} outside [{:?}, {step:?}]",
                    step / 2
                );
            }
        }
    }

    #[test]
    fn jitter_varies() {
        let waits: std::collections::HashSet<_> = (0..50).map(|_| backoff(8, None)).collect();
        assert!(waits.len() > 10, "{waits:?}");
    }

    #[test]
    fn retry_after_wins_when_longer() {
        assert_eq!(backoff(1, Some(Duration::from_secs(7))), Duration::from_secs(7));
        assert!(backoff(12, Some(Duration::from_secs(7))) >= Duration::from_secs(1800));
        assert_eq!(backoff(1, Some(Duration::from_secs(10 * 86_400))), MAX_RETRY_AFTER);
    }

    #[test]
    fn retry_after_parses_seconds_and_http_dates() {
        let now = 1_445_412_480; // Wed, 21 Oct 2015 07:28:00 GMT
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after(" 120 ", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("999999999", now), Some(MAX_RETRY_AFTER));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
    }
}
