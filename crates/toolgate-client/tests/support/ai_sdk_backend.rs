//! A stock Vercel AI SDK v6 backend (`e2e/ai-sdk-backend/server.mjs`), run as a
//! child process on a loopback port, so tests can prove the client against
//! someone else's server rather than toolgate's own.
//!
//! Needs `node` (and `npm` the first time, to install the pinned packages).
//! Without `node` the tests skip loudly, unless `TOOLGATE_TEST_REQUIRE_NODE=1`
//! makes that a failure.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// How long the server may take to print `listening <port>`.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);

/// A running AI SDK backend; killed when dropped.
pub struct AiSdkBackend {
    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub base_url: String,
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl AiSdkBackend {
    /// Starts the backend, installing its npm packages first if needed.
    ///
    /// Returns `None` (after a loud note) when `node` is not on `PATH`; panics
    /// instead when `TOOLGATE_TEST_REQUIRE_NODE=1`, and whenever installing or
    /// starting fails.
    pub fn start() -> Option<AiSdkBackend> {
        if !toolgate_testkit::node_or_skip("the stock AI SDK backend (e2e/ai-sdk-backend)") {
            return None;
        }
        let dir = backend_dir();
        toolgate_testkit::install_once(&dir, || installed(&dir), || toolgate_testkit::npm(&dir, &["ci"]));
        Some(spawn(&dir))
    }

    /// `POST` target for chat requests: `<base_url>/api/chat`.
    pub fn chat_url(&self) -> String {
        format!("{}/api/chat", self.base_url)
    }

    /// Every tool execution so far, as `{"tool": name, "input": {...}}`.
    pub async fn executions(&self) -> Vec<serde_json::Value> {
        reqwest::get(format!("{}/executions", self.base_url))
            .await
            .and_then(reqwest::Response::error_for_status)
            .expect("GET /executions answers")
            .json()
            .await
            .expect("GET /executions is a JSON array")
    }

    /// Forgets the executions recorded so far.
    pub async fn reset(&self) {
        reqwest::Client::new()
            .post(format!("{}/reset", self.base_url))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .expect("POST /reset answers");
    }

    /// What the server has written to stderr so far (SDK errors land here).
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for AiSdkBackend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `<repo>/e2e/ai-sdk-backend`, found from this crate's manifest directory.
fn backend_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join("e2e/ai-sdk-backend");
    assert!(dir.join("server.mjs").is_file(), "no server.mjs in {}", dir.display());
    dir
}

fn installed(dir: &Path) -> bool {
    ["ai", "zod"].iter().all(|pkg| dir.join("node_modules").join(pkg).join("package.json").is_file())
}

/// Spawns `node server.mjs` with `PORT=0` and waits for its `listening <port>` line.
fn spawn(dir: &Path) -> AiSdkBackend {
    let mut child = Command::new("node")
        .arg("server.mjs")
        .current_dir(dir)
        .env("PORT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn `node server.mjs` in {}: {e}", dir.display()));

    // Drain stderr for the whole life of the server so its pipe never fills.
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut err_pipe = child.stderr.take().expect("piped stderr");
    let err_buf = Arc::clone(&stderr);
    let err_reader = std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = err_pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            if let Ok(mut buf) = err_buf.lock() {
                buf.push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        }
    });

    // Find the port line, then keep draining stdout.
    let (port_tx, port_rx) = mpsc::channel();
    let out_pipe = child.stdout.take().expect("piped stdout");
    std::thread::spawn(move || {
        let mut port_tx = Some(port_tx);
        for line in BufReader::new(out_pipe).lines() {
            let Ok(line) = line else { break };
            if let Some(port) = line.trim().strip_prefix("listening ")
                && let Some(tx) = port_tx.take()
            {
                let _ = tx.send(port.trim().to_owned());
            }
        }
    });

    match port_rx.recv_timeout(STARTUP_TIMEOUT) {
        Ok(port) if port.parse::<u16>().is_ok_and(|p| p != 0) => {
            AiSdkBackend { base_url: format!("http://127.0.0.1:{port}"), child, stderr }
        }
        outcome => {
            let _ = child.kill();
            let status = child.wait();
            let _ = err_reader.join();
            let stderr = stderr.lock().map(|s| s.clone()).unwrap_or_default();
            panic!(
                "the AI SDK backend in {} did not report `listening <port>` within {:?} \
                 (got {outcome:?}, exit {status:?}); its stderr:\n{stderr}",
                dir.display(),
                STARTUP_TIMEOUT
            );
        }
    }
}
