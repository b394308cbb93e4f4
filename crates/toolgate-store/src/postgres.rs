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
//!
//! [`Backend`] is the store's [`SqlBackend`] on Postgres; the shared
//! operations (`ops.rs`) run their queries here through `db.rs`'s
//! [`Connection`] (a pooled connection, or one in a transaction) and
//! [`Reader`] (the pool), implemented below over sqlx.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgArguments, PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, PgConnection, PgPool, Postgres};
use toolgate::ledger::{StoreError, Transition};

use crate::backend::{Fused, SqlBackend, WriteFn};
use crate::db::{self, Arg, Connection, Reader, Row};
use crate::sql::{self, LeaseWrite, RecordRow, VotesWrite, db_error};
use crate::{OpenError, StoreSync};

/// The query parameter of the store URL that sets how many connections a
/// store keeps (the name pgx's pools use); toolgate removes it before the
/// URL reaches the driver.
pub(crate) const POOL_PARAM: &str = "pool_max_conns";
/// The most connections `pool_max_conns` may ask for.
const MAX_POOL: u32 = 1000;
/// How long an operation waits for a free connection (or a new one).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// The advisory lock key that orders audit appends ("toolgate" in ASCII).
const AUDIT_LOCK_KEY: i64 = 0x746f_6f6c_6761_7465;
/// Begins a READ COMMITTED transaction and takes the log's advisory lock
/// ([`AUDIT_LOCK_KEY`], in decimal) until commit, in one simple query (the
/// guarded appends of history terms).
const BEGIN_LOG_LOCKED: &str =
    "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock(8390047142196114533)::text";

/// The condition of a guarded append written as one statement on its own
/// (`SqlBackend::CURRENT_UNDER_LOCK`): it takes the log's advisory lock, then
/// (a `CASE` orders the two) holds only when the sequence of `seq` has drawn
/// nothing beyond the newest event the statement's snapshot sees. An append
/// that committed while it waited for the lock drew one, so the statement
/// appends nothing and the caller checks again in a transaction that took the
/// lock first; so does one that rolled back, which is only a wasted try.
const CURRENT_UNDER_LOCK: &str = "CASE WHEN (SELECT pg_advisory_xact_lock(8390047142196114533)::text) IS NULL \
     THEN false ELSE (SELECT pg_sequence_last_value(pg_get_serial_sequence('audit_events', 'seq')::regclass)) \
     <= (SELECT COALESCE(max(seq), 0) FROM audit_events) END";

/// Takes the audit chain's sealing lock until commit (the key is "tg-chain" in ASCII).
const LOCK_CHAIN: &str = "SELECT pg_advisory_xact_lock(8387722735977064814)::text";

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// Marks a conversation due (see `sql::mark_due_sql!`), drawing its
/// generation from the sequence `continuation_generations`.
const MARK_DUE: &str = sql::mark_due_sql!("nextval('continuation_generations')");

/// Marks a conversation due and claims it (see `sql::mark_and_claim_sql!`).
const MARK_AND_CLAIM: &str = sql::mark_and_claim_sql!("nextval('continuation_generations')");

/// The connection pool of one database.
pub(crate) struct Backend {
    pool: PgPool,
}

impl Backend {
    /// Connects and migrates; `shown` is the URL with any password redacted.
    pub(crate) async fn open(url: &str, shown: &str, sync: StoreSync) -> Result<Self, OpenError> {
        let connect_error = |source: sqlx::Error| OpenError::Connect {
            backend: "postgres",
            target: shown.to_owned(),
            source: Box::new(source),
        };
        let (url, connections) = pool_settings(url, shown)?;
        let options = PgConnectOptions::from_str(&url)
            .map_err(connect_error)?
            .application_name("toolgate")
            // Statements outside a transaction (single-statement writes)
            // run at READ COMMITTED too, whatever the server's default.
            .options([("default_transaction_isolation", "read committed")]);
        let options = match sync {
            StoreSync::Normal => options,
            StoreSync::Full => options.options([("synchronous_commit", "on")]),
        };
        let pool = PgPoolOptions::new()
            .max_connections(connections)
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

    /// Closes the pool.
    pub(crate) async fn close(&self) {
        self.pool.close().await;
    }
}

/// The default pool: two connections per core of this machine, from 4 to 16.
/// More backends than the database's cores only queue for them, at the cost
/// of context switches: on two cores, 16 connections served 13% fewer round
/// trips than 4, with a p99 a third higher (see docs/src/benchmarks.md).
fn default_pool_size() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    u32::try_from(cores.saturating_mul(2)).unwrap_or(u32::MAX).clamp(4, 16)
}

/// The URL without [`POOL_PARAM`], and the pool size it names (else
/// [`default_pool_size`]). `shown` is the URL with its password redacted.
fn pool_settings(url: &str, shown: &str) -> Result<(String, u32), OpenError> {
    let invalid = |detail: String| OpenError::InvalidOption { target: shown.to_owned(), detail };
    let Ok(mut parsed) = url::Url::parse(url) else {
        // Not a URL this parser reads: the driver reports what is wrong with it.
        return Ok((url.to_owned(), default_pool_size()));
    };
    let mut asked = Vec::new();
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter_map(|(key, value)| {
            if key == POOL_PARAM {
                asked.push(value.into_owned());
                return None;
            }
            Some((key.into_owned(), value.into_owned()))
        })
        .collect();
    let size = match asked.as_slice() {
        [] => return Ok((url.to_owned(), default_pool_size())),
        [size] => size,
        _ => return Err(invalid(format!("`{POOL_PARAM}` is given {} times", asked.len()))),
    };
    let size = size.parse::<u32>().ok().filter(|size| (1..=MAX_POOL).contains(size)).ok_or_else(|| {
        invalid(format!("`{POOL_PARAM}` must be a number of connections from 1 to {MAX_POOL}, not `{size}`"))
    })?;
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    Ok((parsed.into(), size))
}

impl SqlBackend for Backend {
    type Conn = PgConnection;
    type Reader = PgPool;

    const MARK_DUE: &'static str = MARK_DUE;
    const CURRENT_UNDER_LOCK: &'static str = CURRENT_UNDER_LOCK;
    const CONVERSATION_KEY: &'static str = "(COALESCE(owner || chr(31), '') || conversation_id)";
    const LOCK_CHAIN: Option<&'static str> = Some(LOCK_CHAIN);
    const MARK_AND_CLAIM: &'static str = MARK_AND_CLAIM;
    /// A sequence draws a generation within the one statement that uses it.
    const GENERATION_NEEDS_TRANSACTION: bool = false;

    fn newest_migration() -> i64 {
        MIGRATOR.iter().map(|migration| migration.version).max().unwrap_or_default()
    }

    /// Runs `run` over `data` in a READ COMMITTED transaction of its own.
    async fn write<D, R>(&self, data: D, run: WriteFn<PgConnection, D, R>) -> Result<R, StoreError>
    where
        D: Send + Sync + 'static,
        R: Send + 'static,
    {
        self.transaction("BEGIN ISOLATION LEVEL READ COMMITTED", data, run).await
    }

    /// [`write`](SqlBackend::write) with the log's advisory lock taken by the
    /// `BEGIN`'s own round trip ([`BEGIN_LOG_LOCKED`]).
    async fn write_log_locked<D, R>(&self, data: D, run: WriteFn<PgConnection, D, R>) -> Result<R, StoreError>
    where
        D: Send + Sync + 'static,
        R: Send + 'static,
    {
        self.transaction(BEGIN_LOG_LOCKED, data, run).await
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

    /// Runs a fused text's `run`: on Postgres it is one statement (a
    /// data-modifying CTE), atomic on its own.
    async fn write_fused<T, R>(&self, data: Fused<T>, run: WriteFn<PgConnection, Fused<T>, R>) -> Result<R, StoreError>
    where
        T: Send + Sync + 'static,
        R: Send + 'static,
    {
        self.write_statement(data, run).await
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

    /// One statement for one approval, its viewers and its events: the viewers
    /// and events are inserted only when the approval was (its id was not
    /// taken), and the statement's value counts the approvals inserted.
    /// Parameters: the approval's (see [`sql::INSERT_RECORD`]), then the
    /// viewers', then the events'.
    fn fused_issue_sql(events: usize, viewers: usize) -> Option<String> {
        if events > sql::EVENTS_PER_INSERT || viewers > sql::VIEWERS_PER_INSERT || viewers == 0 {
            return None;
        }
        let viewed = format!(
            ", viewed AS (INSERT INTO approval_viewers ({}) SELECT viewer.* FROM inserted, (VALUES {}) AS viewer)",
            sql::VIEWER_INSERT_COLUMNS,
            sql::record_viewer_rows(viewers, sql::RECORD_PARAMS + 1)
        );
        let logged = if events == 0 {
            String::new()
        } else {
            format!(
                ", logged AS (INSERT INTO audit_events ({}) SELECT * FROM (VALUES {}) AS event \
                 WHERE {} AND EXISTS (SELECT 1 FROM inserted))",
                sql::EVENT_INSERT_COLUMNS,
                sql::event_rows(events, sql::RECORD_PARAMS + viewers + 1),
                log_locked()
            )
        };
        Some(format!(
            "WITH inserted AS ({} RETURNING 1){viewed}{logged} SELECT count(*) FROM inserted",
            sql::INSERT_RECORD
        ))
    }

    /// One statement for a transition and its own events: a statement is atomic
    /// on its own, so the pair needs no transaction (no `BEGIN` and `COMMIT`
    /// round trips). The update's row, when it moved, selects the events
    /// (none when it did not). Parameters: the transition's (see
    /// [`sql::transition_sql`]), then the events'. A transition that marks its
    /// conversation due is never fused (ops.rs).
    fn fused_transition_sql(transition: &Transition) -> Option<String> {
        if transition.events.len() > sql::EVENTS_PER_INSERT {
            return None;
        }
        let (lease, votes) = (LeaseWrite::of(transition), VotesWrite::of(transition));
        let update = sql::transition_sql(transition.guard, lease, votes);
        if transition.events.is_empty() {
            return Some(update.to_owned());
        }
        let first = sql::transition_params(transition.guard, lease, votes) + 1;
        Some(format!(
            "WITH moved AS ({update}), logged AS (INSERT INTO audit_events ({}) SELECT event.* FROM moved, \
             (VALUES {}) AS event WHERE {}) SELECT {} FROM moved",
            sql::EVENT_INSERT_COLUMNS,
            sql::event_rows(transition.events.len(), first),
            log_locked(),
            sql::record_columns!()
        ))
    }
}

impl Backend {
    /// Runs `run` over `data` in a transaction that `begin` (a simple query)
    /// opens: committed when it succeeds, rolled back when it fails.
    async fn transaction<D, R>(
        &self,
        begin: &'static str,
        data: D,
        run: WriteFn<PgConnection, D, R>,
    ) -> Result<R, StoreError>
    where
        D: Send + Sync + 'static,
        R: Send + 'static,
    {
        let mut transaction = self.pool.begin_with(begin).await.map_err(db_error)?;
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
}

/// A one-time filter that takes the log's advisory lock.
fn log_locked() -> String {
    format!("(SELECT pg_advisory_xact_lock({AUDIT_LOCK_KEY})::text) IS NOT NULL")
}

impl Connection for PgConnection {
    async fn execute(&mut self, query: db::Query<'_>) -> Result<u64, StoreError> {
        Ok(untyped(query).execute(self).await.map_err(db_error)?.rows_affected())
    }

    async fn fetch_all<O: Row>(&mut self, query: db::Query<'_>) -> Result<Vec<O>, StoreError> {
        typed::<O>(query).fetch_all(self).await.map_err(db_error)
    }

    async fn fetch_optional<O: Row>(&mut self, query: db::Query<'_>) -> Result<Option<O>, StoreError> {
        typed::<O>(query).fetch_optional(self).await.map_err(db_error)
    }
}

impl Reader for PgPool {
    async fn fetch_all<O: Row>(&self, query: db::Query<'_>) -> Result<Vec<O>, StoreError> {
        typed::<O>(query).fetch_all(self).await.map_err(db_error)
    }

    async fn fetch_optional<O: Row>(&self, query: db::Query<'_>) -> Result<Option<O>, StoreError> {
        typed::<O>(query).fetch_optional(self).await.map_err(db_error)
    }
}

/// A query of the shared operations as sqlx runs it, each argument bound
/// with its type (`&str` or `String`, `i64`, or their `None`).
fn untyped(query: db::Query<'_>) -> sqlx::query::Query<'_, Postgres, PgArguments> {
    let (text, args) = query.into_parts();
    args.into_iter().fold(sqlx::query(AssertSqlSafe(text)), |query, arg| match arg {
        Arg::Text(text) => query.bind(text),
        Arg::Int(int) => query.bind(int),
    })
}

/// [`untyped`], its rows decoded as `O`.
fn typed<O: Row>(query: db::Query<'_>) -> sqlx::query::QueryAs<'_, Postgres, O, PgArguments> {
    let (text, args) = query.into_parts();
    args.into_iter().fold(sqlx::query_as(AssertSqlSafe(text)), |query, arg| match arg {
        Arg::Text(text) => query.bind(text),
        Arg::Int(int) => query.bind(int),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_lock_is_the_log_lock() {
        let lock = format!("; SELECT pg_advisory_xact_lock({AUDIT_LOCK_KEY})::text");
        assert!(BEGIN_LOG_LOCKED.ends_with(&lock), "{BEGIN_LOG_LOCKED}");
        let lock = format!("(SELECT pg_advisory_xact_lock({AUDIT_LOCK_KEY})::text)");
        assert!(CURRENT_UNDER_LOCK.starts_with(&format!("CASE WHEN {lock} IS NULL")), "{CURRENT_UNDER_LOCK}");
    }

    fn settings(url: &str) -> Result<(String, u32), OpenError> {
        pool_settings(url, "shown")
    }

    #[test]
    fn the_pool_size_comes_from_the_url_and_leaves_it() {
        let plain = "postgres://alice:secret@db:5432/ledger?sslmode=require";
        assert_eq!(settings(plain).unwrap(), (plain.to_owned(), default_pool_size()));
        assert!((4..=16).contains(&default_pool_size()));
        assert_eq!(
            settings("postgres://alice:secret@db/ledger?pool_max_conns=3&sslmode=require").unwrap(),
            ("postgres://alice:secret@db/ledger?sslmode=require".to_owned(), 3)
        );
        assert_eq!(
            settings("postgresql://db/ledger?pool_max_conns=40").unwrap(),
            ("postgresql://db/ledger".into(), 40)
        );
        let socket = "postgres:///ledger?host=/run/postgresql&pool_max_conns=2";
        assert_eq!(settings(socket).unwrap(), ("postgres:///ledger?host=%2Frun%2Fpostgresql".into(), 2));
        for (url, named) in [
            ("postgres://db/l?pool_max_conns=0", "not `0`"),
            ("postgres://db/l?pool_max_conns=many", "not `many`"),
            ("postgres://db/l?pool_max_conns=1001", "from 1 to 1000"),
            ("postgres://db/l?pool_max_conns=2&pool_max_conns=3", "given 2 times"),
        ] {
            let error = settings(url).unwrap_err();
            assert!(matches!(&error, OpenError::InvalidOption { target, .. } if target == "shown"), "{error:?}");
            assert!(error.to_string().contains(named), "{url}: {error}");
        }
    }
}
