//! Test support shared by toolgate's crates (a dev-dependency only).
//!
//! [`node_or_skip`] decides whether a test that needs Node.js runs, and
//! [`install_once`] installs pinned npm packages once per directory, however
//! many test processes start at the same time. [`smtp::SmtpSink`] is an SMTP
//! server on loopback (aiosmtpd) that keeps every message, and
//! [`webhook::WebhookReceiver`] a scripted webhook receiver that verifies
//! toolgate's signatures.

pub mod smtp;
pub mod webhook;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// How long to wait for another test process's install.
const INSTALL_LOCK_TIMEOUT: Duration = Duration::from_secs(600);
/// A lock older than this was left behind by a killed process.
const STALE_LOCK_AGE: Duration = Duration::from_secs(900);

/// True when `node` and `npm` run. Otherwise prints a loud note that `what`
/// is skipped and returns false, or panics when `TOOLGATE_TEST_REQUIRE_NODE=1`.
pub fn node_or_skip(what: &str) -> bool {
    if runs("node") && runs("npm") {
        return true;
    }
    assert_ne!(
        std::env::var("TOOLGATE_TEST_REQUIRE_NODE").as_deref(),
        Ok("1"),
        "TOOLGATE_TEST_REQUIRE_NODE=1 but `node`/`npm` are not on PATH ({what} needs them): install Node.js 20+"
    );
    eprintln!(
        "\n=== SKIPPED: `node`/`npm` are not on PATH, so {what} cannot run; \
         set TOOLGATE_TEST_REQUIRE_NODE=1 to make this a failure ===\n"
    );
    false
}

/// True when `program --version` runs and succeeds.
pub fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Runs `install` unless `installed()` holds, once across processes: a
/// directory made with `create_dir` (atomic) inside `dir` is the mutex, and
/// `installed` is asked again once it is held.
pub fn install_once(dir: &Path, installed: impl Fn() -> bool, install: impl FnOnce()) {
    if installed() {
        return;
    }
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let _guard = acquire_lock(&dir.join(".install-lock"));
    if !installed() {
        install();
    }
}

/// Runs `npm ARGS` in `dir` and panics with its output when it fails.
pub fn npm(dir: &Path, args: &[&str]) {
    let started = Instant::now();
    eprintln!("note: running `npm {}` in {}", args.join(" "), dir.display());
    let output = Command::new("npm")
        .args(args)
        .args(["--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run npm in {} (is it on PATH?): {e}", dir.display()));
    assert!(
        output.status.success(),
        "`npm {}` in {} failed ({}):\n{}{}",
        args.join(" "),
        dir.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("note: `npm {}` took {:.1?}", args.join(" "), started.elapsed());
}

/// Removes the lock directory when dropped, also on panic.
struct LockGuard(PathBuf);

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn acquire_lock(lock: &Path) -> LockGuard {
    let deadline = Instant::now() + INSTALL_LOCK_TIMEOUT;
    loop {
        match std::fs::create_dir(lock) {
            Ok(()) => return LockGuard(lock.to_path_buf()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let age = std::fs::metadata(lock)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| SystemTime::now().duration_since(t).ok());
                if age.is_some_and(|age| age > STALE_LOCK_AGE) {
                    let _ = std::fs::remove_dir(lock);
                    continue;
                }
                assert!(
                    Instant::now() < deadline,
                    "timed out waiting for another test's install; if none is running, remove {}",
                    lock.display()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("cannot create the install lock {}: {e}", lock.display()),
        }
    }
}
