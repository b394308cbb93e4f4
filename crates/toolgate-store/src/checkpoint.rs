//! WAL checkpoints on SQLite, off the write path, with the log kept bounded.
//!
//! SQLite's default copies the write-ahead log back into the database file
//! on the commit that fills it past 1000 pages, with an `fsync`, holding up
//! that commit and every write queued behind it. The store turns that off
//! (`wal_autocheckpoint = 0`) and checkpoints here instead, on a connection
//! and a thread of its own.
//!
//! The contract: the `-wal` file stays under about [`LIMIT_FRAMES`] pages
//! plus what one [`INTERVAL`] of writes adds, under any load, and shrinks to
//! nothing once writes pause for [`IDLE`].
//!
//! - After writes commit, at most once per [`INTERVAL`], a `PASSIVE`
//!   checkpoint copies what it can without blocking anyone. When the log it
//!   found was past half of [`LIMIT_FRAMES`], the next one waits only
//!   [`BUSY_INTERVAL`]: under heavy writes each checkpoint then has less to
//!   copy, and the log is started over well before the writer's hard limit
//!   (at 200 ms between checkpoints, 16 connections on two cores wrote more
//!   than that limit between two of them, and every writer waited while the
//!   writer cut the file; see `docs/src/benchmarks.md`).
//! - A passive checkpoint never lets the log start over. SQLite only writes
//!   the log from its start again when a writer finds it fully copied *and*
//!   no reader holding a snapshot in it; under steady traffic some reader
//!   always is, so the log is appended to forever (the defect this module
//!   once had: it acted only when frames were left uncopied, which a passive
//!   checkpoint under load almost never leaves). So whenever the log holds
//!   more than [`LIMIT_FRAMES`] frames, copied or not, a `RESTART`
//!   checkpoint follows: it takes the write lock, waits (the busy timeout)
//!   for the readers of older snapshots to finish, which takes as long as
//!   one short read, and copies the rest; the next commit then writes the
//!   log from its first frame again, over the pages already in the file. It
//!   holds this process's writing connection ([`WriteLock`]) meanwhile, so
//!   the store's own writers wait for it on that lock and go on the moment
//!   it ends, instead of meeting `SQLITE_BUSY` and sleeping in SQLite's busy
//!   handler (whose steps of up to 100 ms once set the p99 latency). Under
//!   load the file keeps its size rather than being cut to zero and grown
//!   again: cutting it (`ftruncate`, milliseconds on a busy disk) and
//!   allocating its blocks again held every writer for longer.
//! - When no write has committed for [`IDLE`], a `TRUNCATE` checkpoint does
//!   the same and cuts the file to zero bytes, so an idle server gives the
//!   disk back.
//! - Backpressure, for a machine too busy to run the checkpoint task in time:
//!   after each batch the writer looks at the file's size ([`LogGuard`]), and
//!   past [`HARD_LIMIT_BYTES`] it truncates the log itself before it takes the
//!   next write. Nothing is written meanwhile, so the checkpoint completes as
//!   soon as the readers of older snapshots finish, and the log stays under
//!   that limit plus one batch whatever the scheduling.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, oneshot};

use crate::lite::{self, Conn};

/// The store's one writing connection (`None` once closed), shared by the
/// writer and the callers that write on their own thread (see `batch.rs`);
/// held by a restarting or truncating checkpoint.
pub(crate) type WriteLock = Arc<tokio::sync::Mutex<Option<Conn>>>;

/// The least time between two checkpoints.
const INTERVAL: Duration = Duration::from_millis(50);
/// The least time between two checkpoints while the log fills fast.
const BUSY_INTERVAL: Duration = Duration::from_millis(10);
/// The frames (pages) of log past which a checkpoint restarts it (16 MiB of 4 KiB pages).
pub(crate) const LIMIT_FRAMES: i64 = 4_096;
/// The log size past which the writer truncates the log itself before writing on (32 MiB).
pub(crate) const HARD_LIMIT_BYTES: u64 = 2 * LIMIT_FRAMES as u64 * 4096;
/// How long without a commit before the log is truncated.
const IDLE: Duration = Duration::from_millis(1000);

/// The handle to the checkpoint task.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    commits: Arc<Notify>,
    stop: std::sync::Mutex<Option<oneshot::Sender<oneshot::Sender<()>>>>,
}

impl Checkpointer {
    /// Starts checkpointing over `connection`, on a thread of its own (a
    /// checkpoint blocks while it copies and syncs); the thread ends when the
    /// handle is closed or dropped.
    pub(crate) fn start(connection: Conn, writing: WriteLock) -> std::io::Result<Self> {
        let commits = Arc::new(Notify::new());
        let (stop, stopped) = oneshot::channel();
        let checkpoints = Checkpoints { connection, writing };
        let body = checkpoint_loop(checkpoints, Arc::clone(&commits), stopped);
        lite::spawn_thread("toolgate-sqlite-checkpoint", body)?;
        Ok(Self { commits, stop: std::sync::Mutex::new(Some(stop)) })
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

/// The writer's check on the log's size (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct LogGuard {
    wal: std::path::PathBuf,
}

impl LogGuard {
    /// The guard of the database file at `path` (its log is `path-wal`).
    pub(crate) fn new(path: &std::path::Path) -> Self {
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        Self { wal: wal.into() }
    }

    /// Truncates the log over the writer's `connection` when it has grown past [`HARD_LIMIT_BYTES`].
    pub(crate) async fn hold(&self, connection: &mut Conn) {
        if self.over_limit() {
            tracing::debug!("the SQLite log passed its hard limit; the writer truncates it before writing on");
            complete(connection, Mode::Truncate).await;
        }
    }

    /// Whether the log has grown past [`HARD_LIMIT_BYTES`].
    pub(crate) fn over_limit(&self) -> bool {
        // A plain stat: microseconds, cheaper than handing it to the blocking pool.
        std::fs::metadata(&self.wal).is_ok_and(|metadata| metadata.len() > HARD_LIMIT_BYTES)
    }
}

/// What woke the loop.
enum Wake {
    Commit,
    Idle,
    Stop(Option<oneshot::Sender<()>>),
}

/// The checkpoint thread's connection, and the writing connection's lock.
struct Checkpoints {
    connection: Conn,
    writing: WriteLock,
}

impl Checkpoints {
    /// One passive checkpoint, and a restarting one when the log has grown
    /// past [`LIMIT_FRAMES`]; returns how long to wait before the next one.
    async fn checkpoint(&mut self) -> Duration {
        // Rows: (busy, frames in the log, frames checkpointed).
        match lite::query_as::<(i64, i64, i64)>("PRAGMA wal_checkpoint(PASSIVE)").fetch_one(&mut self.connection).await
        {
            Ok((_, log, _)) => {
                if log > LIMIT_FRAMES {
                    self.held(Mode::Restart).await;
                }
                pause_after(log)
            }
            // The next commit tries again; the log only grows meanwhile.
            Err(error) => {
                tracing::warn!(%error, "SQLite checkpoint failed");
                INTERVAL
            }
        }
    }

    /// A checkpoint with this process's writers held back (see the module docs).
    async fn held(&mut self, mode: Mode) -> bool {
        let _writing = self.writing.lock().await;
        complete(&mut self.connection, mode).await
    }
}

async fn checkpoint_loop(
    mut checkpoints: Checkpoints,
    commits: Arc<Notify>,
    mut stop: oneshot::Receiver<oneshot::Sender<()>>,
) {
    // Whether the log may hold frames that an idle truncation should remove.
    let mut dirty = false;
    loop {
        let wake = tokio::select! {
            done = &mut stop => Wake::Stop(done.ok()),
            () = commits.notified() => Wake::Commit,
            () = tokio::time::sleep(IDLE), if dirty => Wake::Idle,
        };
        match wake {
            Wake::Stop(done) => return finish(checkpoints.connection, done).await,
            Wake::Commit => {
                dirty = true;
                let pause = checkpoints.checkpoint().await;
                tokio::select! {
                    done = &mut stop => return finish(checkpoints.connection, done.ok()).await,
                    () = tokio::time::sleep(pause) => {}
                }
            }
            Wake::Idle => dirty = !checkpoints.held(Mode::Truncate).await,
        }
    }
}

/// The wait before the next checkpoint, after one that found `log` frames in the log.
fn pause_after(log: i64) -> Duration {
    if log > LIMIT_FRAMES / 2 { BUSY_INTERVAL } else { INTERVAL }
}

async fn finish(connection: Conn, done: Option<oneshot::Sender<()>>) {
    drop(connection);
    if let Some(done) = done {
        let _ = done.send(());
    }
}

/// A checkpoint that must copy the whole log (the modes past `PASSIVE`).
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// The next commit writes the log from its start, over the file as it is.
    Restart,
    /// As [`Mode::Restart`], and the file is cut to zero bytes.
    Truncate,
}

/// A checkpoint in `mode`: true when it copied the whole log (and, for [`Mode::Truncate`], emptied the file).
async fn complete(connection: &mut Conn, mode: Mode) -> bool {
    let text = match mode {
        Mode::Restart => "PRAGMA wal_checkpoint(RESTART)",
        Mode::Truncate => "PRAGMA wal_checkpoint(TRUNCATE)",
    };
    match lite::query_as::<(i64, i64, i64)>(text).fetch_one(&mut *connection).await {
        Ok((busy, _, _)) => {
            if busy != 0 {
                tracing::debug!(?mode, "SQLite checkpoint waited out its busy timeout; the next one tries again");
            }
            busy == 0
        }
        Err(error) => {
            tracing::warn!(%error, ?mode, "SQLite checkpoint failed");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreSync;

    /// The `-wal` file's size, and the frames its log holds now (a passive checkpoint's count).
    async fn log(path: &std::path::Path, connection: &mut Conn) -> (u64, i64) {
        let (_, frames, _) = lite::query_as::<(i64, i64, i64)>("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&mut *connection)
            .await
            .unwrap();
        (std::fs::metadata(LogGuard::new(path).wal).map_or(0, |meta| meta.len()), frames)
    }

    /// Commits `rows` rows of a kilobyte each, one transaction.
    async fn write(connection: &mut Conn, rows: usize) {
        let text = format!(
            "BEGIN; INSERT INTO t (v) SELECT randomblob(1024) FROM (WITH RECURSIVE n(i) AS \
             (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows}) SELECT i FROM n); COMMIT;"
        );
        lite::query(lite::AssertSqlSafe(text)).execute(&mut *connection).await.unwrap();
    }

    #[test]
    fn checkpoints_follow_each_other_sooner_while_the_log_fills_fast() {
        assert_eq!(pause_after(0), INTERVAL);
        assert_eq!(pause_after(LIMIT_FRAMES / 2), INTERVAL);
        assert_eq!(pause_after(LIMIT_FRAMES / 2 + 1), BUSY_INTERVAL);
        assert_eq!(pause_after(LIMIT_FRAMES * 3), BUSY_INTERVAL);
    }

    #[tokio::test]
    async fn a_restart_waits_for_older_readers_then_the_log_is_written_over_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let open = || Conn::open(&path, StoreSync::Normal, Duration::from_secs(5)).unwrap();
        let (mut writer, mut checkpoints, mut reader) = (open(), open(), open());
        lite::query("CREATE TABLE t (v BLOB)").execute(&mut writer).await.unwrap();
        write(&mut writer, 500).await;
        // A reader holds a snapshot in the log while more is written, as a
        // busy server's readers always do: a passive checkpoint cannot copy
        // past it, so the log would not start over.
        let rows: i64 = lite::query_scalar("BEGIN; SELECT count(*) FROM t").fetch_one(&mut reader).await.unwrap();
        assert_eq!(rows, 500);
        write(&mut writer, 500).await;
        let (grown, frames) = log(&path, &mut checkpoints).await;
        assert!(frames > 200, "the writes are in the log: {frames} frames");
        let ends = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            futures::executor::block_on(lite::query("COMMIT").execute(&mut reader)).unwrap();
        });

        assert!(complete(&mut checkpoints, Mode::Restart).await, "it waited for the reader and copied the log");
        ends.join().unwrap();
        write(&mut writer, 5).await;
        let (size, frames) = log(&path, &mut checkpoints).await;
        assert_eq!(size, grown, "the file keeps its size and is written over");
        assert!(frames < 20, "the next commit wrote the log from its start: {frames} frames");

        assert!(complete(&mut checkpoints, Mode::Truncate).await);
        assert_eq!(log(&path, &mut checkpoints).await, (0, 0), "a truncation empties the file");
    }
}
