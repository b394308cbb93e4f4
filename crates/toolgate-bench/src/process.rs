//! What Linux tells about the servers and the machine: peak RSS from
//! `/proc/PID/status`, reset between cells through `/proc/PID/clear_refs`.

use std::path::PathBuf;

/// A server process whose memory the bench reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    /// Its id.
    pub pid: u32,
}

impl Process {
    fn path(&self, file: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/{file}", self.pid))
    }

    /// A field of `/proc/PID/status` in bytes (`VmHWM`, `VmRSS`).
    pub fn status_bytes(&self, field: &str) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(self.path("status"))
            .map_err(|error| anyhow::anyhow!("cannot read /proc/{}/status: {error}", self.pid))?;
        parse_status_kb(&status, field)
            .map(|kb| kb * 1024)
            .ok_or_else(|| anyhow::anyhow!("no {field} in /proc/{}/status", self.pid))
    }

    /// The peak resident set size since the process started or [`Process::reset_peak`].
    pub fn peak_rss(&self) -> anyhow::Result<u64> {
        self.status_bytes("VmHWM")
    }

    /// Resets the peak RSS to the current RSS (`echo 5 > /proc/PID/clear_refs`); false if Linux refused.
    pub fn reset_peak(&self) -> bool {
        std::fs::write(self.path("clear_refs"), "5").is_ok()
    }

    /// True while the process exists.
    pub fn is_alive(&self) -> bool {
        self.path("status").exists()
    }
}

/// The value in kB of `field` in the text of `/proc/PID/status`.
pub fn parse_status_kb(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// One line about the machine: CPU model, cores, memory and the load average now.
pub fn machine_summary() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name").and_then(|rest| rest.split_once(':')))
                .map(|(_, name)| name.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| parse_status_kb(&info, "MemTotal"))
        .map(|kb| format!("{:.0} GiB", kb as f64 / (1024.0 * 1024.0)))
        .unwrap_or_else(|| "? GiB".into());
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| text.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    format!("{cpu}, {cores} cores, {memory} RAM; load average at start: {load}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_in_kb() {
        let status = "Name:\ttoolgate\nVmPeak:\t  200 kB\nVmHWM:\t   12345 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_status_kb(status, "VmHWM"), Some(12345));
        assert_eq!(parse_status_kb(status, "VmRSS"), Some(1000));
        assert_eq!(parse_status_kb(status, "VmSwap"), None);
    }

    #[test]
    fn this_process_has_a_peak_rss() {
        let me = Process { pid: std::process::id() };
        assert!(me.is_alive());
        assert!(me.peak_rss().unwrap() > 0);
    }
}
