//! Restart delays for a server whose connection ended.
//!
//! After a connection ends (the process died, the HTTP session closed), the
//! server is reconnected in the background after 0.5s, then 1s, 2s, 4s, …
//! doubling up to 30s between attempts, for as long as the
//! [`McpTools`](crate::McpTools) lives. A connection that stayed up for at
//! least [`STABLE_AFTER`] starts the next series from 0.5s again, so a server
//! that crashes right after every start does not restart in a tight loop.
//! While a server is down its tools stay listed and their calls fail at once
//! with [`CallError::ServerDown`](crate::CallError::ServerDown).

use std::time::Duration;

/// The first restart delay.
pub const INITIAL_RESTART_DELAY: Duration = Duration::from_millis(500);
/// The longest restart delay.
pub const MAX_RESTART_DELAY: Duration = Duration::from_secs(30);
/// A connection up at least this long resets the delays.
pub const STABLE_AFTER: Duration = Duration::from_secs(30);

/// Exponential restart delays (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Backoff {
    pub(crate) fn new() -> Self {
        Self { next: INITIAL_RESTART_DELAY }
    }

    /// The delay before the next attempt; doubles each time up to the cap.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(MAX_RESTART_DELAY);
        delay
    }

    /// Starts over from the first delay.
    pub(crate) fn reset(&mut self) {
        self.next = INITIAL_RESTART_DELAY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_reset() {
        let mut backoff = Backoff::new();
        let delays: Vec<u64> = (0..9).map(|_| backoff.next_delay().as_millis() as u64).collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), INITIAL_RESTART_DELAY);
    }
}
