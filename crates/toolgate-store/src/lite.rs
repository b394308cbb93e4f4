//! The SQLite driver: rusqlite connections behind a small query API with
//! sqlx's shape (`query`, `query_as`, `bind`, `execute`, `fetch_*`). `sqlite.rs` runs the shared operations' queries (`db.rs`) on
//! it, and the writer (`batch.rs`) and the checkpointer (`checkpoint.rs`)
//! their own.
//!
//! Why not sqlx here: sqlx runs each SQLite connection on a thread of its
//! own, so every statement, and every row it returns, is a hand-off between
//! threads; that cost three times what the statements themselves cost (see
//! the book's benchmarks). Here a statement runs on the thread that asks:
//! - writes run on the one writing connection (`batch.rs`): on the caller's
//!   thread when the writer is idle, else on the writer thread, which
//!   commits what was queued together (one hand-off per group of writes, not
//!   per statement);
//! - reads run on the calling task's thread, on one of a few read
//!   connections ([`Readers`]); a WAL reader never waits for the writer, so a
//!   read blocks its thread for as long as its statement runs, no longer.
//!
//! The contract of the API:
//! - a query's text may hold several statements separated by `;` (outside
//!   quotes); they run in order, each prepared once per connection and kept
//!   in its statement cache;
//! - parameters are written `$N` (numbered from 1, as on Postgres) and bound
//!   by number in every statement of the text, so statements may share them;
//! - `fetch_*` returns the rows of every statement of the text, in order;
//!   `execute` steps every statement to its end and reports the rows that
//!   the text's `INSERT`, `UPDATE` and `DELETE` statements changed;
//! - the work is done on the thread that polls the future, when it first
//!   polls it; a read then spends a unit of tokio's cooperative budget, so a
//!   task that reads in a loop still lets the others on its thread run. A
//!   query on the writer's connection never yields: an operation of several
//!   statements completes in the poll that starts it (see `batch.rs`).

use std::borrow::Cow;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::types::{ToSqlOutput, Value};
use rusqlite::{OpenFlags, ToSql};
use toolgate::ledger::StoreError;

use crate::StoreSync;

/// How many prepared statements a connection keeps (the texts differ by the
/// number of events and viewers they insert).
const STATEMENT_CACHE: usize = 256;

/// One connection to the store's file.
pub(crate) struct Conn(rusqlite::Connection);

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("path", &self.0.path()).finish()
    }
}

impl Conn {
    /// Opens `path` (creating it when missing) in WAL mode with `sync`.
    pub(crate) fn open(path: &Path, sync: StoreSync, busy_timeout: Duration) -> rusqlite::Result<Self> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = rusqlite::Connection::open_with_flags(path, flags)?;
        connection.busy_timeout(busy_timeout)?;
        let synchronous = match sync {
            StoreSync::Normal => "NORMAL",
            StoreSync::Full => "FULL",
        };
        // Checkpoints run on a thread of their own (see checkpoint.rs).
        connection.execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous}; PRAGMA foreign_keys = ON; \
             PRAGMA wal_autocheckpoint = 0;"
        ))?;
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(Self(connection))
    }

    /// A connection to a private in-memory database (for tests).
    #[cfg(test)]
    pub(crate) fn memory() -> rusqlite::Result<Self> {
        rusqlite::Connection::open_in_memory().map(Self)
    }
}

/// The read connections: a read takes one that is free, or waits for one.
pub(crate) struct Readers {
    connections: Box<[Mutex<Option<rusqlite::Connection>>]>,
    next: AtomicUsize,
}

impl std::fmt::Debug for Readers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readers").field("connections", &self.connections.len()).finish()
    }
}

impl Readers {
    /// A pool of these connections.
    pub(crate) fn new(connections: Vec<Conn>) -> Self {
        let connections = connections.into_iter().map(|Conn(connection)| Mutex::new(Some(connection))).collect();
        Self { connections, next: AtomicUsize::new(0) }
    }

    /// Closes every connection; later reads fail as unavailable.
    pub(crate) fn close(&self) {
        for slot in &self.connections {
            drop(slot.lock().unwrap_or_else(PoisonError::into_inner).take());
        }
    }

    /// Runs `read` on a free connection (the next one round the pool when
    /// none is free).
    fn with<R>(&self, read: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<R>) -> rusqlite::Result<R> {
        let count = self.connections.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let free = (0..count).find_map(|step| self.connections[(start + step) % count].try_lock().ok());
        let slot = match free {
            Some(slot) => slot,
            None => self.connections[start % count].lock().unwrap_or_else(PoisonError::into_inner),
        };
        match slot.as_ref() {
            Some(connection) => read(connection),
            None => Err(closed()),
        }
    }
}

/// A read after [`Readers::close`]: SQLite's own answer to a closed connection, with what happened.
fn closed() -> rusqlite::Error {
    let misuse = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISUSE);
    rusqlite::Error::SqliteFailure(misuse, Some("the approval store is closed".into()))
}

/// Where a query runs: the writer's connection, or the read connections.
pub(crate) trait Executor {
    /// Whether a query here spends tokio's cooperative budget (and so may
    /// yield once it has run).
    const COOPERATIVE: bool;

    /// Runs `run` on a connection.
    fn run<R>(self, run: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<R>) -> rusqlite::Result<R>;
}

impl Executor for &mut Conn {
    const COOPERATIVE: bool = false;

    fn run<R>(self, run: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<R>) -> rusqlite::Result<R> {
        run(&self.0)
    }
}

impl Executor for &Readers {
    const COOPERATIVE: bool = true;

    fn run<R>(self, run: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<R>) -> rusqlite::Result<R> {
        self.with(run)
    }
}

/// After a query on `E`: lets the task's thread run others when the task has
/// used its budget (reads only).
async fn after_query<E: Executor>() {
    if E::COOPERATIVE {
        tokio::task::coop::consume_budget().await;
    }
}

/// A query text that is ours (fixed, or built from fixed parts), as sqlx's
/// `AssertSqlSafe` says.
pub(crate) struct AssertSqlSafe<T>(pub(crate) T);

/// A query's text.
pub(crate) trait SqlText {
    /// The text.
    fn into_text(self) -> Cow<'static, str>;
}

impl SqlText for &'static str {
    fn into_text(self) -> Cow<'static, str> {
        Cow::Borrowed(self)
    }
}

impl SqlText for AssertSqlSafe<String> {
    fn into_text(self) -> Cow<'static, str> {
        Cow::Owned(self.0)
    }
}

impl SqlText for Cow<'static, str> {
    fn into_text(self) -> Cow<'static, str> {
        self
    }
}

impl SqlText for AssertSqlSafe<&'static str> {
    fn into_text(self) -> Cow<'static, str> {
        Cow::Borrowed(self.0)
    }
}

/// A value bound to a parameter, borrowed for the query's lifetime where it can be.
pub(crate) trait Bind<'q> {
    /// The value as SQLite takes it.
    fn output(self) -> rusqlite::Result<ToSqlOutput<'q>>;
}

impl<'q, T: ToSql + ?Sized> Bind<'q> for &'q T {
    fn output(self) -> rusqlite::Result<ToSqlOutput<'q>> {
        self.to_sql()
    }
}

impl<'q, T: Bind<'q>> Bind<'q> for Option<T> {
    fn output(self) -> rusqlite::Result<ToSqlOutput<'q>> {
        self.map_or(Ok(ToSqlOutput::Owned(Value::Null)), Bind::output)
    }
}

macro_rules! bind_owned {
    ($($type:ty),*) => {$(
        impl<'q> Bind<'q> for $type {
            fn output(self) -> rusqlite::Result<ToSqlOutput<'q>> {
                Ok(ToSqlOutput::Owned(self.into()))
            }
        }
    )*};
}

bind_owned!(i64, i32, u32, bool, String);

/// What `execute` did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    changed: u64,
}

impl Done {
    /// The rows the text's `INSERT`, `UPDATE` and `DELETE` statements changed.
    pub(crate) fn rows_affected(&self) -> u64 {
        self.changed
    }
}

/// A query: its text and the values bound so far.
pub(crate) struct Query<'q> {
    text: Cow<'static, str>,
    values: Vec<ToSqlOutput<'q>>,
    error: Option<rusqlite::Error>,
}

/// A query without rows to decode (sqlx's `query`).
pub(crate) fn query<'q>(text: impl SqlText) -> Query<'q> {
    Query { text: text.into_text(), values: Vec::new(), error: None }
}

impl<'q> Query<'q> {
    /// Binds the next parameter (`$1`, then `$2`, …).
    pub(crate) fn bind(mut self, value: impl Bind<'q>) -> Self {
        match value.output() {
            Ok(value) => self.values.push(value),
            Err(error) => {
                self.values.push(ToSqlOutput::Owned(Value::Null));
                self.error.get_or_insert(error);
            }
        }
        self
    }

    /// Runs every statement of the text to its end.
    pub(crate) async fn execute<E: Executor>(self, on: E) -> rusqlite::Result<Done> {
        let done = self.run(on, |_| Ok(())).map(|changed| Done { changed });
        after_query::<E>().await;
        done
    }

    /// Runs the text, handing every row to `row`; the rows changed.
    fn run(
        self,
        on: impl Executor,
        mut row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<()>,
    ) -> rusqlite::Result<u64> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let values = self.values;
        on.run(|connection| {
            let before = connection.total_changes();
            for text in statements(&self.text) {
                let mut statement = connection.prepare_cached(text)?;
                bind_all(&mut statement, &values)?;
                let mut rows = statement.raw_query();
                while let Some(next) = rows.next()? {
                    row(next)?;
                }
            }
            Ok(connection.total_changes().saturating_sub(before))
        })
    }
}

/// Binds each parameter of `statement` by its number (`$N`, or `?N`; a bare
/// `?` takes its position).
fn bind_all(statement: &mut rusqlite::Statement<'_>, values: &[ToSqlOutput<'_>]) -> rusqlite::Result<()> {
    for index in 1..=statement.parameter_count() {
        let number = match statement.parameter_name(index) {
            Some(name) => name
                .strip_prefix(['$', '?'])
                .and_then(|digits| digits.parse::<usize>().ok())
                .ok_or_else(|| rusqlite::Error::InvalidParameterName(name.to_owned()))?,
            None => index,
        };
        let value = number
            .checked_sub(1)
            .and_then(|at| values.get(at))
            .ok_or(rusqlite::Error::InvalidParameterCount(number, values.len()))?;
        statement.raw_bind_parameter(index, value)?;
    }
    Ok(())
}

/// The statements of a text: split at each `;` outside quotes, blank ones
/// left out (walked as the query runs, nothing allocated).
fn statements(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let text = rest?;
        let mut quote: Option<char> = None;
        let end = text.char_indices().find_map(|(at, char)| {
            match (quote, char) {
                (Some(open), _) if char == open => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"' | '`') => quote = Some(char),
                (None, ';') => return Some(at),
                (None, _) => {}
            }
            None
        });
        rest = end.map(|at| &text[at + 1..]);
        Some(text[..end.unwrap_or(text.len())].trim())
    })
    .filter(|piece| !piece.is_empty())
}

/// Runs `body` on a thread of its own named `name`, over a one-thread tokio
/// runtime (with timers): the store's writer and checkpointer.
pub(crate) fn spawn_thread<F>(name: &str, body: F) -> std::io::Result<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    std::thread::Builder::new().name(name.into()).spawn(move || runtime.block_on(body))?;
    Ok(())
}

/// A row type decoded from a SQLite row by column names (sqlx's `FromRow`).
pub(crate) trait FromLiteRow: Sized {
    /// Decodes `row`.
    fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self>;
}

/// Implements [`FromLiteRow`] for a struct whose fields are its columns.
macro_rules! from_lite_row {
    ($row:ident { $($field:ident),* $(,)? }) => {
        impl $crate::lite::FromLiteRow for $row {
            fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
                Ok(Self { $($field: row.get(stringify!($field))?),* })
            }
        }
    };
}
pub(crate) use from_lite_row;

macro_rules! tuple_rows {
    ($(($($type:ident $at:tt),*)),*) => {$(
        impl<$($type: rusqlite::types::FromSql),*> FromLiteRow for ($($type,)*) {
            fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
                Ok(($(row.get::<_, $type>($at)?,)*))
            }
        }
    )*};
}

tuple_rows!((A 0), (A 0, B 1), (A 0, B 1, C 2));

/// A query whose rows decode as `O` (sqlx's `query_as`).
pub(crate) struct QueryAs<'q, O> {
    query: Query<'q>,
    row: PhantomData<fn() -> O>,
}

/// A query whose rows decode as `O`.
pub(crate) fn query_as<'q, O: FromLiteRow>(text: impl SqlText) -> QueryAs<'q, O> {
    QueryAs { query: query(text), row: PhantomData }
}

impl<'q, O: FromLiteRow> QueryAs<'q, O> {
    /// Binds the next parameter.
    pub(crate) fn bind(self, value: impl Bind<'q>) -> Self {
        Self { query: self.query.bind(value), row: PhantomData }
    }

    /// Every row of every statement.
    pub(crate) async fn fetch_all<E: Executor>(self, on: E) -> rusqlite::Result<Vec<O>> {
        let mut rows = Vec::new();
        let run = self.query.run(on, |row| {
            rows.push(O::from_row(row)?);
            Ok(())
        });
        after_query::<E>().await;
        run.map(|_| rows)
    }

    /// The first row, if any (every statement still runs to its end).
    pub(crate) async fn fetch_optional<E: Executor>(self, on: E) -> rusqlite::Result<Option<O>> {
        let mut first = None;
        let run = self.query.run(on, |row| {
            if first.is_none() {
                first = Some(O::from_row(row)?);
            }
            Ok(())
        });
        after_query::<E>().await;
        run.map(|_| first)
    }

    /// The first row, which must be there.
    pub(crate) async fn fetch_one(self, on: impl Executor) -> rusqlite::Result<O> {
        self.fetch_optional(on).await?.ok_or(rusqlite::Error::QueryReturnedNoRows)
    }
}

/// A query whose rows are one value each (sqlx's `query_scalar`; the
/// store's own queries read through `db.rs`, the tests here).
#[cfg(test)]
pub(crate) struct QueryScalar<'q, O> {
    inner: QueryAs<'q, (O,)>,
}

/// A query whose rows are one `O` each.
#[cfg(test)]
pub(crate) fn query_scalar<'q, O: rusqlite::types::FromSql>(text: impl SqlText) -> QueryScalar<'q, O> {
    QueryScalar { inner: query_as(text) }
}

#[cfg(test)]
impl<'q, O: rusqlite::types::FromSql> QueryScalar<'q, O> {
    /// Binds the next parameter.
    pub(crate) fn bind(self, value: impl Bind<'q>) -> Self {
        Self { inner: self.inner.bind(value) }
    }

    /// Every row's value.
    pub(crate) async fn fetch_all(self, on: impl Executor) -> rusqlite::Result<Vec<O>> {
        Ok(self.inner.fetch_all(on).await?.into_iter().map(|(value,)| value).collect())
    }

    /// The first row's value, if any.
    pub(crate) async fn fetch_optional(self, on: impl Executor) -> rusqlite::Result<Option<O>> {
        Ok(self.inner.fetch_optional(on).await?.map(|(value,)| value))
    }

    /// The first row's value, which must be there.
    pub(crate) async fn fetch_one(self, on: impl Executor) -> rusqlite::Result<O> {
        Ok(self.inner.fetch_one(on).await?.0)
    }
}

/// Maps a driver error: undecodable values are corrupt, the rest unavailable.
pub(crate) fn db_error(error: rusqlite::Error) -> StoreError {
    match error {
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::Utf8Error(..) => StoreError::Corrupt(error.to_string()),
        error => StoreError::Unavailable(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_split_outside_quotes() {
        let pieces: Vec<&str> = statements("BEGIN; SELECT ';' AS \"a;b\"; ; COMMIT").collect();
        assert_eq!(pieces, ["BEGIN", "SELECT ';' AS \"a;b\"", "COMMIT"]);
        assert_eq!(statements(" SELECT 1 ").collect::<Vec<_>>(), ["SELECT 1"]);
        assert_eq!(statements("SELECT 1;").collect::<Vec<_>>(), ["SELECT 1"]);
        assert_eq!(statements(" ; ").count(), 0);
    }

    #[tokio::test]
    async fn parameters_bind_by_number_across_statements() {
        let mut conn = Conn::memory().unwrap();
        query("CREATE TABLE t (a INTEGER, b TEXT)").execute(&mut conn).await.unwrap();
        let text = "INSERT INTO t (b, a) VALUES ($2, $1); INSERT INTO t (a, b) SELECT $1 + 1, $2 WHERE changes() = 1";
        let done = query(text).bind(7_i64).bind("x").execute(&mut conn).await.unwrap();
        assert_eq!(done.rows_affected(), 2);
        let rows: Vec<(i64, String)> = query_as("SELECT a, b FROM t ORDER BY a").fetch_all(&mut conn).await.unwrap();
        assert_eq!(rows, [(7, "x".to_owned()), (8, "x".to_owned())]);
        let missing = query("SELECT $2").bind(1_i64).execute(&mut conn).await;
        assert!(matches!(missing, Err(rusqlite::Error::InvalidParameterCount(2, 1))), "{missing:?}");
        let none: Option<i64> =
            query_scalar("SELECT a FROM t WHERE a > $1").bind(100_i64).fetch_optional(&mut conn).await.unwrap();
        assert_eq!(none, None);
    }

    #[tokio::test]
    async fn a_closed_pool_refuses_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let readers = Readers::new(vec![Conn::open(&path, StoreSync::Normal, Duration::from_secs(1)).unwrap()]);
        assert_eq!(query_scalar::<i64>("SELECT 1").fetch_one(&readers).await.unwrap(), 1);
        readers.close();
        let refused = query_scalar::<i64>("SELECT 1").fetch_one(&readers).await.map_err(db_error);
        assert!(matches!(refused, Err(StoreError::Unavailable(ref why)) if why.contains("closed")), "{refused:?}");
    }
}
