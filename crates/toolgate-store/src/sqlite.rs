//! The SQLite backend: one file in WAL mode, on rusqlite (`lite.rs`).
//!
//! Writes go through one connection: on the caller's thread when it is
//! idle, else through a writer thread that commits the operations queued
//! together in one transaction (group commit, see `batch.rs`). Every write
//! transaction starts with `BEGIN IMMEDIATE`: in this process writers take
//! the connection in turn (without busy retries);
//! against other processes the write lock is taken before anything is read,
//! so a transaction never fails upgrading a read lock (`SQLITE_BUSY`) half
//! way. Reads run on the calling thread over a few read connections of their
//! own and see the last committed state (WAL readers do not block the
//! writer). The migrations are sqlx's, run once at open over a connection
//! that is then closed.
//!
//! [`Backend`] is the store's [`SqlBackend`] on SQLite; the shared operations
//! (`ops.rs`) run their queries here through `db.rs`'s [`Connection`] (the
//! writing connection, `lite::Conn`) and [`Reader`] (`lite::Readers`),
//! implemented below over `lite.rs`.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::types::ToSqlOutput;
use sqlx::ConnectOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use toolgate::ledger::{StoreError, Transition};

use crate::backend::{Fused, SqlBackend, WriteFn};
use crate::batch::BatchWriter;
use crate::checkpoint::{Checkpointer, LogGuard, WriteLock};
use crate::db::{self, Arg, Connection, Reader, Row};
use crate::lite::{self, Conn, Readers, db_error};
use crate::sql::{self, LeaseWrite, RecordRow, VotesWrite};
use crate::{DriverError, OpenError, StoreSync};

/// How many ids one `IN (…)` list holds.
const IDS_PER_QUERY: usize = 500;
/// How long a writer waits for another process's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// The fewest read connections (reads run on the calling thread: one per
/// core lets every runtime thread read at once, within these bounds).
const MIN_READERS: usize = 4;
/// The most read connections (each keeps a page cache of its own).
const MAX_READERS: usize = 16;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// Draws the next continuation generation: the one-row counter
/// `continuation_generations` counts up, in the write transaction (so
/// generations are never drawn twice, even for marks since deleted).
macro_rules! next_generation {
    () => {
        "UPDATE continuation_generations SET last = last + 1 WHERE id = 1; "
    };
}

/// The generation [`next_generation!`] drew.
macro_rules! drawn_generation {
    () => {
        "(SELECT last FROM continuation_generations WHERE id = 1)"
    };
}

/// Marks a conversation due (see `sql::mark_due_sql!`).
const MARK_DUE: &str = concat!(next_generation!(), sql::mark_due_sql!(drawn_generation!()));

/// Marks a conversation due and claims it (see `sql::mark_and_claim_sql!`).
const MARK_AND_CLAIM: &str = concat!(next_generation!(), sql::mark_and_claim_sql!(drawn_generation!()));

/// How the migrating connection (sqlx's) is set up.
fn connect_options(path: &Path, sync: StoreSync) -> SqliteConnectOptions {
    let synchronous = match sync {
        StoreSync::Normal => SqliteSynchronous::Normal,
        StoreSync::Full => SqliteSynchronous::Full,
    };
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(synchronous)
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true)
        // Checkpoints run on a task of their own (see checkpoint.rs).
        .pragma("wal_autocheckpoint", "0")
}

/// The writer and checkpoint threads and the read connections of one SQLite file.
#[derive(Debug)]
pub(crate) struct Backend {
    writer: BatchWriter,
    checkpointer: Checkpointer,
    reader: Readers,
}

impl Backend {
    /// Opens (creating it and its directory, private, if missing) and migrates the file.
    pub(crate) async fn open(path: &Path, sync: StoreSync) -> Result<Self, OpenError> {
        let private = path.to_path_buf();
        tokio::task::spawn_blocking(move || crate::private::prepare(&private)).await.map_err(|error| {
            OpenError::CreateFile { path: path.to_path_buf(), source: std::io::Error::other(error) }
        })??;
        let connect_error =
            |source: DriverError| OpenError::Connect { backend: "sqlite", target: path.display().to_string(), source };
        let mut migrating =
            connect_options(path, sync).connect().await.map_err(|error| connect_error(Box::new(error)))?;
        MIGRATOR
            .run(&mut migrating)
            .await
            .map_err(|source| OpenError::Migrate { backend: "sqlite", source: Box::new(source) })?;
        drop(migrating);
        let open = |_| Conn::open(path, sync, BUSY_TIMEOUT).map_err(|error| connect_error(Box::new(error)));
        let readers = std::thread::available_parallelism().map_or(MIN_READERS, usize::from);
        let reader = Readers::new((0..readers.clamp(MIN_READERS, MAX_READERS)).map(open).collect::<Result<_, _>>()?);
        let writing: WriteLock = Arc::new(tokio::sync::Mutex::new(Some(open(0)?)));
        let checkpointer =
            Checkpointer::start(open(0)?, Arc::clone(&writing)).map_err(|error| connect_error(Box::new(error)))?;
        // Writes may run on their callers' threads only when a commit does not wait for the disk.
        let inline = sync == StoreSync::Normal;
        let writer = BatchWriter::start(writing, checkpointer.commits(), LogGuard::new(path), inline)
            .map_err(|error| connect_error(Box::new(error)))?;
        Ok(Self { writer, checkpointer, reader })
    }

    /// Closes the read connections, the checkpoint thread and, after the
    /// writes already queued, the writer (the last connection to close
    /// checkpoints the whole log).
    pub(crate) async fn close(&self) {
        self.reader.close();
        self.checkpointer.close().await;
        self.writer.close().await;
    }
}

impl SqlBackend for Backend {
    type Conn = Conn;
    type Reader = Readers;

    const MARK_DUE: &'static str = MARK_DUE;
    const CURRENT_UNDER_LOCK: &'static str = "";
    const CONVERSATION_KEY: &'static str = "COALESCE(owner || char(31), '') || conversation_id";
    const LOCK_CHAIN: Option<&'static str> = None;
    const MARK_AND_CLAIM: &'static str = MARK_AND_CLAIM;
    /// Drawing a generation and using it are two statements: they need a transaction.
    const GENERATION_NEEDS_TRANSACTION: bool = true;

    fn newest_migration() -> i64 {
        MIGRATOR.iter().map(|migration| migration.version).max().unwrap_or_default()
    }

    /// [`write`](SqlBackend::write): its transaction holds the database's
    /// write lock, which orders every append.
    async fn write_log_locked<D, R>(&self, data: D, run: WriteFn<Conn, D, R>) -> Result<R, StoreError>
    where
        D: Send + Sync + 'static,
        R: Send + 'static,
    {
        self.writer.write(data, run).await
    }

    /// Runs `run` over `data` in a transaction holding the write lock
    /// (shared with the operations queued with it).
    async fn write<D, R>(&self, data: D, run: WriteFn<Conn, D, R>) -> Result<R, StoreError>
    where
        D: Send + Sync + 'static,
        R: Send + 'static,
    {
        self.writer.write(data, run).await
    }

    /// Runs one statement's `run`, queued like every write: alone in its
    /// batch it runs without `BEGIN` and `COMMIT` (one statement is atomic on
    /// its own, and takes the write lock before it reads).
    async fn write_statement<D, R>(&self, data: D, run: WriteFn<Conn, D, R>) -> Result<R, StoreError>
    where
        D: Send + Sync + 'static,
        R: Send + 'static,
    {
        self.writer.write_statement(data, run).await
    }

    /// Runs a fused text's `run`: on SQLite several statements, in a
    /// transaction (shared with the operations queued with it, or, alone,
    /// opened and committed by the text itself).
    async fn write_fused<T, R>(&self, data: Fused<T>, run: WriteFn<Conn, Fused<T>, R>) -> Result<R, StoreError>
    where
        T: Send + Sync + 'static,
        R: Send + 'static,
    {
        self.writer.write_self_contained(data, run, Fused::bring_own_transaction).await
    }

    fn reader(&self) -> &Readers {
        &self.reader
    }

    /// The rows with these ids, an `IN` list of at most [`IDS_PER_QUERY`] at a time.
    async fn select_records(&self, ids: &[String]) -> Result<Vec<RecordRow>, StoreError> {
        let mut rows = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(IDS_PER_QUERY) {
            let params: Vec<String> = (1..=chunk.len()).map(|n| format!("${n}")).collect();
            let text = format!(
                "SELECT {} FROM approvals WHERE approval_id IN ({})",
                sql::record_columns!(),
                params.join(", ")
            );
            let mut select = lite::query_as::<RecordRow>(lite::AssertSqlSafe(text));
            for id in chunk {
                select = select.bind(id);
            }
            rows.extend(select.fetch_all(&self.reader).await.map_err(db_error)?);
        }
        Ok(rows)
    }

    /// The rows of these calls of one conversation, an `IN` list of at most [`IDS_PER_QUERY`] at a time.
    async fn select_records_for_calls(
        &self,
        conversation_id: &str,
        calls: &[String],
    ) -> Result<Vec<RecordRow>, StoreError> {
        let mut rows = Vec::with_capacity(calls.len());
        for chunk in calls.chunks(IDS_PER_QUERY) {
            let params: Vec<String> = (2..=chunk.len() + 1).map(|n| format!("${n}")).collect();
            let text = format!(
                "SELECT {} FROM approvals WHERE conversation_id = $1 AND tool_call_id IN ({})",
                sql::record_columns!(),
                params.join(", ")
            );
            let mut select = lite::query_as::<RecordRow>(lite::AssertSqlSafe(text)).bind(conversation_id);
            for call in chunk {
                select = select.bind(call);
            }
            rows.extend(select.fetch_all(&self.reader).await.map_err(db_error)?);
        }
        Ok(rows)
    }

    /// Appends `count` events; appends are already serialised (the transaction
    /// holds the write lock).
    fn insert_events_sql(count: usize) -> String {
        format!("INSERT INTO audit_events ({}) VALUES {}", sql::EVENT_INSERT_COLUMNS, sql::event_rows(count, 1))
    }

    /// A transition and its own events in one round trip to the connection's
    /// thread: the update, then the events' insert, which adds them only when
    /// the update moved the record (`changes()` counts the rows the last
    /// `INSERT`, `UPDATE` or `DELETE` changed). The writer runs it inside its
    /// transaction, so the two statements commit together. Parameters: the
    /// transition's (see [`sql::transition_sql`]), then the events'. A
    /// transition that marks its conversation due is never fused (ops.rs).
    fn fused_transition_sql(transition: &Transition) -> Option<String> {
        let count = transition.events.len();
        if count > sql::EVENTS_PER_INSERT {
            return None;
        }
        let (lease, votes) = (LeaseWrite::of(transition), VotesWrite::of(transition));
        let update = sql::transition_sql(transition.guard, lease, votes);
        if count == 0 {
            return Some(update.to_owned());
        }
        let first = sql::transition_params(transition.guard, lease, votes) + 1;
        Some(format!("{update}; {}", events_if_changed_sql(count, first, 1)))
    }

    /// An approval, its viewers and its events in one round trip, as
    /// [`Self::fused_transition_sql`]: the insert returns one row when it inserted the
    /// approval (none when its id was taken), and the viewers follow only then,
    /// and the events only after all `viewers` rows were. Parameters: the
    /// approval's (see [`sql::INSERT_RECORD`]), then the viewers', then the events'.
    fn fused_issue_sql(events: usize, viewers: usize) -> Option<String> {
        if events > sql::EVENTS_PER_INSERT || viewers > sql::VIEWERS_PER_INSERT || viewers == 0 {
            return None;
        }
        let insert = format!("{} RETURNING 1", sql::INSERT_RECORD);
        let viewed = format!(
            "INSERT INTO approval_viewers ({}) SELECT * FROM (VALUES {}) WHERE changes() = 1",
            sql::VIEWER_INSERT_COLUMNS,
            sql::record_viewer_rows(viewers, sql::RECORD_PARAMS + 1)
        );
        if events == 0 {
            return Some(format!("{insert}; {viewed}"));
        }
        let logged = events_if_changed_sql(events, sql::RECORD_PARAMS + viewers + 1, viewers);
        Some(format!("{insert}; {viewed}; {logged}"))
    }
}

/// Inserts `count` events, parameters from `$first`, when the statement
/// before changed `changed` rows.
fn events_if_changed_sql(count: usize, first: usize, changed: usize) -> String {
    format!(
        "INSERT INTO audit_events ({}) SELECT * FROM (VALUES {}) WHERE changes() = {changed}",
        sql::EVENT_INSERT_COLUMNS,
        sql::event_rows(count, first)
    )
}

impl Connection for Conn {
    async fn execute(&mut self, query: db::Query<'_>) -> Result<u64, StoreError> {
        let (text, args) = query.into_parts();
        let query = args.into_iter().fold(lite::query(text), lite::Query::bind);
        Ok(query.execute(self).await.map_err(db_error)?.rows_affected())
    }

    async fn fetch_all<O: Row>(&mut self, query: db::Query<'_>) -> Result<Vec<O>, StoreError> {
        typed::<O>(query).fetch_all(self).await.map_err(db_error)
    }

    async fn fetch_optional<O: Row>(&mut self, query: db::Query<'_>) -> Result<Option<O>, StoreError> {
        typed::<O>(query).fetch_optional(self).await.map_err(db_error)
    }
}

impl Reader for Readers {
    async fn fetch_all<O: Row>(&self, query: db::Query<'_>) -> Result<Vec<O>, StoreError> {
        typed::<O>(query).fetch_all(self).await.map_err(db_error)
    }

    async fn fetch_optional<O: Row>(&self, query: db::Query<'_>) -> Result<Option<O>, StoreError> {
        typed::<O>(query).fetch_optional(self).await.map_err(db_error)
    }
}

/// A query of the shared operations as lite.rs runs it, its rows decoded as `O`.
fn typed<O: Row>(query: db::Query<'_>) -> lite::QueryAs<'_, O> {
    let (text, args) = query.into_parts();
    args.into_iter().fold(lite::query_as(text), lite::QueryAs::bind)
}

/// An argument as rusqlite binds it: what lite.rs binds for `&str`, `String`,
/// `i64` and `None`.
impl<'q> lite::Bind<'q> for Arg<'q> {
    fn output(self) -> rusqlite::Result<ToSqlOutput<'q>> {
        match self {
            Arg::Text(Some(Cow::Borrowed(text))) => lite::Bind::output(text),
            Arg::Text(Some(Cow::Owned(text))) => lite::Bind::output(text),
            Arg::Int(Some(int)) => lite::Bind::output(int),
            Arg::Text(None) | Arg::Int(None) => lite::Bind::output(None::<i64>),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn synchronous(sync: StoreSync) -> i64 {
        let dir = tempfile::tempdir().unwrap();
        let mut connection = Conn::open(&dir.path().join("s.db"), sync, BUSY_TIMEOUT).unwrap();
        lite::query_scalar("PRAGMA synchronous").fetch_one(&mut connection).await.unwrap()
    }

    #[tokio::test]
    async fn the_shared_queries_bind_each_argument_with_its_type() {
        let mut conn = Conn::memory().unwrap();
        let absent: Option<String> = None;
        let owner = Some("alice".to_owned());
        let (types, joined, nulls): (String, String, String) =
            db::query_as("SELECT typeof($1) || typeof($2) || typeof($3) || typeof($4) || typeof($5), $1 || $2 || $3 || $5, coalesce($4, 'null')")
                .bind("a")
                .bind(String::from("b"))
                .bind(7_i64)
                .bind(&absent)
                .bind(&owner)
                .fetch_optional(&mut conn)
                .await
                .unwrap()
                .unwrap();
        assert_eq!((types.as_str(), joined.as_str(), nulls.as_str()), ("texttextintegernulltext", "ab7alice", "null"));
        assert_eq!(db::query("CREATE TABLE t (v INTEGER)").execute(&mut conn).await.unwrap(), 0);
        let inserted = db::query("INSERT INTO t (v) VALUES ($1), ($2)").bind(1_i64).bind(None::<i64>);
        assert_eq!(inserted.execute(&mut conn).await.unwrap(), 2);
        let values: Vec<Option<i64>> =
            db::query_scalar("SELECT v FROM t ORDER BY v").fetch_all(&mut conn).await.unwrap();
        assert_eq!(values, [None, Some(1)]);
    }

    #[tokio::test]
    async fn full_sync_syncs_every_commit() {
        // 1 = NORMAL, 2 = FULL (https://sqlite.org/pragma.html#pragma_synchronous).
        assert_eq!(synchronous(StoreSync::Normal).await, 1);
        assert_eq!(synchronous(StoreSync::Full).await, 2);
    }
}
