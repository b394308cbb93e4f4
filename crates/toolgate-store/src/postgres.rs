//! The Postgres backend.
//!
//! Write transactions run at READ COMMITTED (set explicitly, whatever the
//! server's default): a conditional `UPDATE … WHERE state = $2 … RETURNING`
//! that waited for another transaction's row lock re-checks its condition on
//! the row that transaction committed, so of two processes racing for one
//! approval only the first moves it; the other sees the winner's row.
//!
//! Audit appends take a transaction-scoped advisory lock first, held until
//! commit: `seq` values then become visible in order, so a reader following
//! the log with `after_seq` never skips an event committed late.

// The shared operations, compiled here with `Db` = this backend (see ops.rs).
#[allow(clippy::duplicate_mod)]
#[path = "ops.rs"]
mod ops;

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgConnection, PgPool, Postgres, Transaction};
use toolgate::ledger::StoreError;

use crate::OpenError;
use crate::sql::{self, RecordRow, db_error};

type Db = Postgres;

/// Connections per store.
const MAX_CONNECTIONS: u32 = 16;
/// How long an operation waits for a free connection (or a new one).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// The advisory lock key that orders audit appends ("toolgate" in ASCII).
const AUDIT_LOCK_KEY: i64 = 0x746f_6f6c_6761_7465;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// The connection pool of one database.
pub(crate) struct Backend {
    pool: PgPool,
}

impl Backend {
    /// Connects and migrates; `shown` is the URL with any password redacted.
    pub(crate) async fn open(url: &str, shown: &str) -> Result<Self, OpenError> {
        let connect_error = |source: sqlx::Error| OpenError::Connect {
            backend: "postgres",
            target: shown.to_owned(),
            source: Box::new(source),
        };
        let options = PgConnectOptions::from_str(url).map_err(connect_error)?.application_name("toolgate");
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await
            .map_err(connect_error)?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|source| OpenError::Migrate { backend: "postgres", source: Box::new(source) })?;
        Ok(Self { pool })
    }

    /// A READ COMMITTED transaction.
    async fn write(&self) -> Result<Transaction<'static, Db>, StoreError> {
        self.pool.begin_with("BEGIN ISOLATION LEVEL READ COMMITTED").await.map_err(db_error)
    }

    fn writer(&self) -> &PgPool {
        &self.pool
    }

    fn reader(&self) -> &PgPool {
        &self.pool
    }

    /// The rows with these ids, in one query.
    async fn select_records(&self, ids: &[String]) -> Result<Vec<RecordRow>, StoreError> {
        const SELECT: &str = concat!("SELECT ", sql::record_columns!(), " FROM approvals WHERE approval_id = ANY($1)");
        sqlx::query_as::<_, RecordRow>(SELECT).bind(ids).fetch_all(&self.pool).await.map_err(db_error)
    }

    async fn select_records_for_calls(
        &self,
        conversation_id: &str,
        calls: &[String],
    ) -> Result<Vec<RecordRow>, StoreError> {
        const SELECT: &str = concat!(
            "SELECT ",
            sql::record_columns!(),
            " FROM approvals WHERE conversation_id = $1 AND tool_call_id = ANY($2)"
        );
        sqlx::query_as::<_, RecordRow>(SELECT)
            .bind(conversation_id)
            .bind(calls)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)
    }

    /// Closes the pool.
    pub(crate) async fn close(&self) {
        self.pool.close().await;
    }
}

/// Orders audit appends across transactions until this one ends.
async fn lock_log(conn: &mut PgConnection) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(AUDIT_LOCK_KEY)
        .execute(&mut *conn)
        .await
        .map(drop)
        .map_err(db_error)
}
