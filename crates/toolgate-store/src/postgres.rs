//! The Postgres backend.
//!
//! Write transactions run at READ COMMITTED (set explicitly, whatever the
//! server's default): a conditional `UPDATE … WHERE state = $2 … RETURNING`
//! that waited for another transaction's row lock re-checks its condition on
//! the row that transaction committed, so of two processes racing for one
//! approval only the first moves it; the other sees the winner's row.
//!
//! Audit appends take a transaction-scoped advisory lock first (in the
//! insert statement itself), held until commit: `seq` values then become
//! visible in order, so a reader following the log with `after_seq` never
//! skips an event committed late.

// The shared operations, compiled here with `Db` = this backend (see ops.rs).
#[allow(clippy::duplicate_mod)]
#[path = "ops.rs"]
mod ops;

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgConnection, PgPool, Postgres};
use toolgate::ledger::{StoreError, Transition};

use crate::OpenError;
use crate::batch::WriteFn;
use crate::sql::{self, LeaseWrite, RecordRow, db_error};

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
        let options = PgConnectOptions::from_str(url)
            .map_err(connect_error)?
            .application_name("toolgate")
            // Statements outside a transaction (single-statement writes)
            // run at READ COMMITTED too, whatever the server's default.
            .options([("default_transaction_isolation", "read committed")]);
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // No ping on every acquire (a round trip per operation): a
            // connection the server dropped fails the one operation that
            // finds it (which fails closed) and is then replaced.
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .map_err(connect_error)?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|source| OpenError::Migrate { backend: "postgres", source: Box::new(source) })?;
        Ok(Self { pool })
    }

    /// Runs `run` over `data` in a READ COMMITTED transaction of its own.
    async fn write<D, R>(&self, data: D, run: WriteFn<PgConnection, D, R>) -> Result<R, StoreError>
    where
        D: Send + Sync + 'static,
        R: Send + 'static,
    {
        let mut transaction = self.pool.begin_with("BEGIN ISOLATION LEVEL READ COMMITTED").await.map_err(db_error)?;
        match run(&mut transaction, &data).await {
            Ok(result) => {
                transaction.commit().await.map_err(db_error)?;
                Ok(result)
            }
            Err(error) => {
                let _ = transaction.rollback().await;
                Err(error)
            }
        }
    }

    /// Runs one statement's `run` on a pooled connection: one statement is
    /// atomic on its own, without the round trips of a transaction.
    async fn write_statement<D, R>(&self, data: D, run: WriteFn<PgConnection, D, R>) -> Result<R, StoreError>
    where
        D: Send + Sync + 'static,
        R: Send + 'static,
    {
        let mut connection = self.pool.acquire().await.map_err(db_error)?;
        run(&mut connection, &data).await
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

/// Appends `count` events after taking the log's advisory lock: a one-time
/// filter the planner evaluates before the first row, so before any row
/// draws its `seq`.
fn insert_events_sql(count: usize) -> String {
    format!(
        "INSERT INTO audit_events ({}) SELECT * FROM (VALUES {}) AS event WHERE {}",
        sql::EVENT_INSERT_COLUMNS,
        sql::event_rows(count, 1),
        log_locked()
    )
}

/// A one-time filter that takes the log's advisory lock.
fn log_locked() -> String {
    format!("(SELECT pg_advisory_xact_lock({AUDIT_LOCK_KEY})::text) IS NOT NULL")
}

/// One statement for one approval and its events: the events are inserted
/// only when the approval was (its id was not taken), and the statement's
/// value counts the approvals inserted. Parameters: the approval's (see
/// [`sql::INSERT_RECORD`]), then the events'.
fn fused_issue_sql(events: usize) -> Option<String> {
    if events > sql::EVENTS_PER_INSERT {
        return None;
    }
    let logged = if events == 0 {
        String::new()
    } else {
        format!(
            ", logged AS (INSERT INTO audit_events ({}) SELECT * FROM (VALUES {}) AS event \
             WHERE {} AND EXISTS (SELECT 1 FROM inserted))",
            sql::EVENT_INSERT_COLUMNS,
            sql::event_rows(events, sql::RECORD_PARAMS + 1),
            log_locked()
        )
    };
    Some(format!("WITH inserted AS ({} RETURNING 1){logged} SELECT count(*) FROM inserted", sql::INSERT_RECORD))
}

/// One statement for a transition and its own events: a statement is atomic
/// on its own, so the pair needs no transaction (no `BEGIN` and `COMMIT`
/// round trips). The update's row, when it moved, selects the events
/// (none when it did not). Parameters: the transition's (see
/// [`sql::transition_sql`]), then the events'.
fn fused_transition_sql(transition: &Transition) -> Option<String> {
    if transition.events.len() > sql::EVENTS_PER_INSERT {
        return None;
    }
    let lease = LeaseWrite::of(transition);
    let update = sql::transition_sql(transition.guard, lease);
    if transition.events.is_empty() {
        return Some(update.to_owned());
    }
    let first = sql::transition_params(transition.guard, lease) + 1;
    Some(format!(
        "WITH moved AS ({update}), logged AS (INSERT INTO audit_events ({}) SELECT event.* FROM moved, \
         (VALUES {}) AS event WHERE {}) SELECT {} FROM moved",
        sql::EVENT_INSERT_COLUMNS,
        sql::event_rows(transition.events.len(), first),
        log_locked(),
        sql::record_columns!()
    ))
}
