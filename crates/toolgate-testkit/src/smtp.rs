//! An SMTP server on loopback that keeps what it receives.
//!
//! [`SmtpSink::start`] runs `python3 smtp_sink.py` (aiosmtpd) on a free port of
//! 127.0.0.1 with a fresh directory; every message the server accepts lands
//! there as one JSON file, read back as [`ReceivedMail`]. The child is killed
//! when the sink is dropped, and exits by itself when the test process ends
//! (its standard input closes). A missing `python3` or aiosmtpd is a panic
//! that says how to install them, never a skip.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Deserialize;

/// How long the sink may take to print its port.
const START_TIMEOUT: Duration = Duration::from_secs(20);

const SETUP_HINT: &str = "run `bash scripts/setup-local-model.sh --packages-only` to install python3 and aiosmtpd";

/// One message the sink accepted.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReceivedMail {
    /// The envelope sender (`MAIL FROM`).
    pub from: String,
    /// The envelope recipients (`RCPT TO`).
    pub to: Vec<String>,
    /// The raw message as received.
    pub data: String,
    /// The decoded `Subject`.
    #[serde(default)]
    pub subject: String,
    /// The message's headers, decoded, in order.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The decoded text/plain body, if any.
    #[serde(default)]
    pub text: Option<String>,
    /// The decoded text/html body, if any.
    #[serde(default)]
    pub html: Option<String>,
}

impl ReceivedMail {
    /// The first header called `name` (case-insensitive), decoded.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A running SMTP sink; stops when dropped.
pub struct SmtpSink {
    child: Child,
    // Held so the child's standard input stays open until the sink is dropped.
    _stdin: Option<ChildStdin>,
    port: u16,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for SmtpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpSink").field("port", &self.port).field("dir", &self.dir.path()).finish()
    }
}

/// The sink script, next to this crate's manifest.
pub fn smtp_sink_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("smtp_sink.py")
}

impl SmtpSink {
    /// Starts a sink on a free port of 127.0.0.1. Panics (saying how to
    /// install them) when `python3` or aiosmtpd is missing.
    pub fn start() -> SmtpSink {
        let dir = tempfile::tempdir().expect("cannot create a temporary directory for the SMTP sink");
        let stderr_path = dir.path().join("sink.stderr");
        let mail_dir = dir.path().join("mail");
        let stderr = std::fs::File::create(&stderr_path).expect("cannot create the SMTP sink's stderr file");
        let mut child = Command::new("python3")
            .arg(smtp_sink_script())
            .arg(&mail_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run python3 for the SMTP sink ({e}): {SETUP_HINT}"));
        let stdout = child.stdout.take().expect("stdout is piped");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = sender.send(line);
        });
        let line = receiver.recv_timeout(START_TIMEOUT).unwrap_or_default();
        let Ok(port) = line.trim().parse::<u16>() else {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            panic!("the SMTP sink did not start (stdout {line:?}):\n{stderr}\n{SETUP_HINT}");
        };
        let stdin = child.stdin.take();
        SmtpSink { child, _stdin: stdin, port, dir }
    }

    /// The port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The messages received so far, in arrival order.
    pub fn received(&self) -> Vec<ReceivedMail> {
        let Ok(entries) = std::fs::read_dir(self.dir.path().join("mail")) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        files.sort();
        files
            .iter()
            .map(|path| {
                let text =
                    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad sink record {}: {e}", path.display()))
            })
            .collect()
    }

    /// Waits until at least `n` messages arrived and returns them all;
    /// panics after `timeout`. Async, so the code under test keeps running on
    /// a single-threaded runtime.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<ReceivedMail> {
        let deadline = Instant::now() + timeout;
        loop {
            let mails = self.received();
            if mails.len() >= n {
                return mails;
            }
            assert!(
                Instant::now() < deadline,
                "the SMTP sink received {} of {n} messages within {timeout:?}: {mails:#?}",
                mails.len()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
