//! The SQLite backend: one file in WAL mode.
//!
//! Writes go through a single-connection pool and every write transaction
//! starts with `BEGIN IMMEDIATE`: in this process writers queue on the pool
//! (fairly, without busy retries); against other processes the write lock is
//! taken before anything is read, so a transaction never fails upgrading a
//! read lock (`SQLITE_BUSY`) half way. Reads use their own small pool and see
//! the last committed state (WAL readers do not block the writer).

// The shared operations, compiled here with `Db` = this backend (see ops.rs).
#[allow(clippy::duplicate_mod)]
#[path = "ops.rs"]
mod ops;

use std::path::Path;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqliteConnection, SqlitePool, Transaction};
use toolgate::ledger::StoreError;

use crate::OpenError;
use crate::sql::{self, RecordRow, db_error};

type Db = Sqlite;

/// How many ids one `IN (…)` list holds.
const IDS_PER_QUERY: usize = 500;
/// How long a writer waits for another process's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Read connections.
const READERS: u32 = 4;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// The pools of one SQLite file.
#[derive(Debug)]
pub(crate) struct Backend {
    writer: SqlitePool,
    reader: SqlitePool,
}

impl Backend {
    /// Opens (creating it and its directory if missing) and migrates the file.
    pub(crate) async fn open(path: &Path) -> Result<Self, OpenError> {
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|source| OpenError::CreateDir { path: dir.to_path_buf(), source })?;
        }
        let connect_error = |source: sqlx::Error| OpenError::Connect {
            backend: "sqlite",
            target: path.display().to_string(),
            source: Box::new(source),
        };
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.clone())
            .await
            .map_err(connect_error)?;
        MIGRATOR
            .run(&writer)
            .await
            .map_err(|source| OpenError::Migrate { backend: "sqlite", source: Box::new(source) })?;
        let reader =
            SqlitePoolOptions::new().max_connections(READERS).connect_with(options).await.map_err(connect_error)?;
        Ok(Self { writer, reader })
    }

    /// A transaction holding the database's write lock.
    async fn write(&self) -> Result<Transaction<'static, Db>, StoreError> {
        self.writer.begin_with("BEGIN IMMEDIATE").await.map_err(db_error)
    }

    fn writer(&self) -> &SqlitePool {
        &self.writer
    }

    fn reader(&self) -> &SqlitePool {
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
            let mut select = sqlx::query_as::<_, RecordRow>(sqlx::AssertSqlSafe(text));
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
            let mut select = sqlx::query_as::<_, RecordRow>(sqlx::AssertSqlSafe(text)).bind(conversation_id);
            for call in chunk {
                select = select.bind(call);
            }
            rows.extend(select.fetch_all(&self.reader).await.map_err(db_error)?);
        }
        Ok(rows)
    }

    /// Closes both pools.
    pub(crate) async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }
}

/// Audit appends are already serialised: the transaction holds the write lock.
async fn lock_log(_conn: &mut SqliteConnection) -> Result<(), StoreError> {
    Ok(())
}
