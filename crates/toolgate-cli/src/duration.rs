//! Durations given on the command line (`50s`, `10m`, `1h 30m`), read by `humantime`.

use std::time::Duration;

/// A duration such as `50s` or `10m`, any length.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|error| format!("`{text}` is not a duration: {error}"))
}
