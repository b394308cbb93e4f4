//! WAL checkpoints on SQLite, off the write path.
//!
//! SQLite's default copies the write-ahead log back into the database file
//! on the commit that fills it past 1000 pages, with an `fsync`, holding up
//! that commit and every write queued behind it. The store turns that off
//! (`wal_autocheckpoint = 0`) and checkpoints here instead, on a connection
//! of its own: after writes commit, at most once per [`INTERVAL`], a
//! `PASSIVE` checkpoint (it never blocks the writer). Should the log still
//! hold more than [`TRUNCATE_FRAMES`] frames afterwards (readers kept it
//! from being copied), one `TRUNCATE` checkpoint waits for them and resets
//! the file, so the log stays bounded under any load.

use std::sync::Arc;
use std::time::Duration;

use sqlx::{Connection, SqliteConnection};
use tokio::sync::{Notify, oneshot};

/// The least time between two checkpoints.
const INTERVAL: Duration = Duration::from_millis(1000);
/// Log frames (pages) left after a passive checkpoint that make the next one truncate.
const TRUNCATE_FRAMES: i64 = 16_384;

/// The handle to the checkpoint task.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    commits: Arc<Notify>,
    stop: std::sync::Mutex<Option<oneshot::Sender<oneshot::Sender<()>>>>,
}

impl Checkpointer {
    /// Starts checkpointing over `connection` (on the current tokio runtime).
    pub(crate) fn start(connection: SqliteConnection) -> Self {
        let commits = Arc::new(Notify::new());
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(checkpoint_loop(connection, Arc::clone(&commits), stopped));
        Self { commits, stop: std::sync::Mutex::new(Some(stop)) }
    }

    /// What the writer notifies after each commit.
    pub(crate) fn commits(&self) -> Arc<Notify> {
        Arc::clone(&self.commits)
    }

    /// Stops the task and closes its connection.
    pub(crate) async fn close(&self) {
        let stop = self.stop.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(stop) = stop {
            let (done, closed) = oneshot::channel();
            if stop.send(done).is_ok() {
                let _ = closed.await;
            }
        }
    }
}

async fn checkpoint_loop(
    mut connection: SqliteConnection,
    commits: Arc<Notify>,
    mut stop: oneshot::Receiver<oneshot::Sender<()>>,
) {
    loop {
        tokio::select! {
            done = &mut stop => return finish(connection, done.ok()).await,
            () = commits.notified() => {}
        }
        checkpoint(&mut connection).await;
        tokio::select! {
            done = &mut stop => return finish(connection, done.ok()).await,
            () = tokio::time::sleep(INTERVAL) => {}
        }
    }
}

async fn finish(connection: SqliteConnection, done: Option<oneshot::Sender<()>>) {
    let _ = connection.close().await;
    if let Some(done) = done {
        let _ = done.send(());
    }
}

/// One passive checkpoint, and a truncating one when the log stayed long.
async fn checkpoint(connection: &mut SqliteConnection) {
    // Rows: (busy, frames in the log, frames checkpointed).
    match sqlx::query_as::<_, (i64, i64, i64)>("PRAGMA wal_checkpoint(PASSIVE)").fetch_one(&mut *connection).await {
        Ok((_, log, copied)) if log - copied > TRUNCATE_FRAMES => {
            if let Err(error) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut *connection).await {
                tracing::warn!(%error, "SQLite checkpoint (truncate) failed");
            }
        }
        Ok(_) => {}
        // The next commit tries again; the log only grows meanwhile.
        Err(error) => tracing::warn!(%error, "SQLite checkpoint failed"),
    }
}
