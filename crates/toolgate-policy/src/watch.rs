//! Reloading a policy file when it changes: [`watch_file`].
//!
//! The watcher watches the file's parent directory (not the file), so an
//! editor that saves by writing a new file and renaming it over the old one
//! is seen, and filters events by the file's name. Events are debounced: a
//! reload runs once no event came for [`DEBOUNCE`] (at most [`MAX_DELAY`]
//! after the first). A reload reads the file and parses it with the caller's
//! function; on success it replaces the handle's policy and logs at info, on
//! failure (unreadable, deleted, invalid) it keeps the previous policy and
//! logs at error: a broken file never turns the policy into allow-all.
//!
//! The watcher does not load the file when it starts: load it once yourself
//! (and fail loudly there), then watch. Replacing the parent directory
//! itself, or swapping a symlinked parent (Kubernetes ConfigMap volumes), is
//! not followed.

use std::ffi::OsString;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecursiveMode, Watcher as _};

use crate::compile::Policy;
use crate::handle::PolicyHandle;

/// How long the file must be quiet before a reload.
pub const DEBOUNCE: Duration = Duration::from_millis(150);

/// The longest a reload waits for the file to be quiet.
pub const MAX_DELAY: Duration = Duration::from_secs(1);

/// Why watching could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The path has no file name (e.g. `/` or `..`).
    #[error("{0} does not name a file")]
    NoFileName(PathBuf),
    /// The file watcher could not be set up on the directory.
    #[error("cannot watch {path}: {source}")]
    Notify {
        /// The directory.
        path: PathBuf,
        /// notify's error.
        #[source]
        source: notify::Error,
    },
    /// The watch thread could not be started.
    #[error("cannot start the policy watch thread: {0}")]
    Spawn(#[source] std::io::Error),
}

/// What the watcher has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchStatus {
    /// Successful reloads.
    pub reloads: u64,
    /// Reloads that kept the previous policy (unreadable or invalid file).
    pub failures: u64,
    /// The last failure's message, cleared by a successful reload.
    pub last_error: Option<String>,
}

enum Message {
    Event(notify::Result<Event>),
    Stop,
}

/// A running file watcher; dropping it stops watching.
pub struct Watcher {
    path: PathBuf,
    notify: Option<notify::RecommendedWatcher>,
    sender: mpsc::Sender<Message>,
    thread: Option<JoinHandle<()>>,
    status: Arc<Mutex<WatchStatus>>,
}

impl Watcher {
    /// The watched file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reload counts and the last error.
    pub fn status(&self) -> WatchStatus {
        self.status.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").field("path", &self.path).field("status", &self.status()).finish()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        drop(self.notify.take());
        let _ = self.sender.send(Message::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Watches `path` and replaces `handle`'s policy with `parse(text)` each time
/// the file changes (module docs). For a file of rules only, pass
/// [`Policy::from_toml_str`]; a program whose file holds more can parse the
/// whole file and build the policy with [`Policy::from_rules`].
pub fn watch_file<E, F>(path: impl Into<PathBuf>, handle: PolicyHandle, parse: F) -> Result<Watcher, WatchError>
where
    E: Display,
    F: Fn(&str) -> Result<Policy, E> + Send + 'static,
{
    let path = path.into();
    let Some(file_name) = path.file_name().map(OsString::from) else {
        return Err(WatchError::NoFileName(path));
    };
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (sender, receiver) = mpsc::channel();
    let events = sender.clone();
    let mut notify = notify::recommended_watcher(move |event| {
        let _ = events.send(Message::Event(event));
    })
    .map_err(|source| WatchError::Notify { path: directory.clone(), source })?;
    notify
        .watch(&directory, RecursiveMode::NonRecursive)
        .map_err(|source| WatchError::Notify { path: directory.clone(), source })?;
    let status = Arc::new(Mutex::new(WatchStatus::default()));
    let reloader = Reloader { path: path.clone(), file_name, handle, parse, status: Arc::clone(&status) };
    let thread = std::thread::Builder::new()
        .name("toolgate-policy-watch".into())
        .spawn(move || reloader.run(&receiver))
        .map_err(WatchError::Spawn)?;
    Ok(Watcher { path, notify: Some(notify), sender, thread: Some(thread), status })
}

struct Reloader<F> {
    path: PathBuf,
    file_name: OsString,
    handle: PolicyHandle,
    parse: F,
    status: Arc<Mutex<WatchStatus>>,
}

impl<E: Display, F: Fn(&str) -> Result<Policy, E>> Reloader<F> {
    fn run(&self, receiver: &mpsc::Receiver<Message>) {
        loop {
            match receiver.recv() {
                Ok(Message::Event(Ok(event))) if self.concerns(&event) => {}
                Ok(Message::Event(Ok(_))) => continue,
                Ok(Message::Event(Err(error))) => {
                    tracing::warn!(path = %self.path.display(), %error, "policy file watcher error");
                    continue;
                }
                Ok(Message::Stop) | Err(_) => return,
            }
            let deadline = Instant::now() + MAX_DELAY;
            loop {
                let wait = DEBOUNCE.min(deadline.saturating_duration_since(Instant::now()));
                match receiver.recv_timeout(wait) {
                    Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                    Ok(Message::Event(_)) if Instant::now() < deadline => {}
                    Ok(Message::Event(_)) | Err(RecvTimeoutError::Timeout) => break,
                }
            }
            self.reload();
        }
    }

    /// Whether the event may have changed the file's content.
    fn concerns(&self, event: &Event) -> bool {
        if event.need_rescan() {
            return true;
        }
        let changes = match event.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
            EventKind::Access(_) => false,
            _ => true,
        };
        changes && event.paths.iter().any(|path| path.file_name() == Some(self.file_name.as_os_str()))
    }

    fn reload(&self) {
        let path = self.path.display();
        let outcome = std::fs::read_to_string(&self.path)
            .map_err(|e| format!("cannot read the policy file: {e}"))
            .and_then(|text| (self.parse)(&text).map_err(|e| e.to_string()));
        let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        match outcome {
            Ok(policy) => {
                let rules = policy.rules().len();
                self.handle.replace(policy);
                status.reloads += 1;
                status.last_error = None;
                tracing::info!(path = %path, rules, "policy reloaded");
            }
            Err(error) => {
                status.failures += 1;
                tracing::error!(path = %path, %error, "policy not reloaded; keeping the previous policy");
                status.last_error = Some(error);
            }
        }
    }
}
