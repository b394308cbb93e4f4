//! The query API of the shared operations (`ops.rs`, `outbox_ops.rs`):
//! queries built here, once, and run by a backend's connections.
//!
//! The shape is sqlx's, cut to what the operations use: [`query`],
//! [`query_as`] and [`query_scalar`] take a text (a `&'static str`, or
//! [`AssertSqlSafe`] around a text built from fixed parts), `bind` takes the
//! parameters in order (`$1`, `$2`, …), `execute` runs it on a write
//! connection ([`Connection`]: in the transaction `SqlBackend::write` opened,
//! or a statement on its own), and `fetch_all` or `fetch_optional` on an
//! [`Executor`]: `&mut` a write connection or `&` the read pool ([`Reader`]).
//!
//! The contract a backend implements, for [`Connection`] and [`Reader`] alike:
//! - a query's text may hold several statements separated by `;` only where
//!   the backend's own texts put them (SQLite's fused texts and continuation
//!   marks); the shared texts are one statement each;
//! - each argument is bound with its SQL type ([`Arg`]: text or 64-bit
//!   integer, either of them possibly `NULL`), as sqlx binds `&str`,
//!   `String`, `i64` and their `Option`s;
//! - `execute` reports the rows the text changed, `fetch_all` returns every
//!   row (running the whole text), `fetch_optional` the first, decoded as a
//!   [`Row`];
//! - driver errors come back as [`StoreError`] (undecodable values as
//!   `Corrupt`, the rest as `Unavailable`).
//!
//! SQLite's implementation is in `sqlite.rs` (over `lite.rs`, on rusqlite),
//! Postgres's in `postgres.rs` (over sqlx). The operations' bounds stay
//! plain (`B: SqlBackend`, `C: Connection`, `O: Row`): the drivers' own
//! bounds, sqlx's higher-ranked `FromRow` among them, are stated once, in
//! [`Row`], and each backend implements [`Connection`] and [`Reader`] on its
//! own connection types.

use std::borrow::Cow;
use std::future::Future;
use std::marker::PhantomData;

use sqlx::postgres::PgRow;
use toolgate::ledger::StoreError;

pub(crate) use crate::lite::AssertSqlSafe;
use crate::lite::{FromLiteRow, SqlText};

/// A row type the operations read: decoded by both drivers (the row types
/// of `sql.rs` and `outbox_sql.rs` by column name, tuples by position).
pub(crate) trait Row: FromLiteRow + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin + 'static {}

impl<T> Row for T where T: FromLiteRow + for<'r> sqlx::FromRow<'r, PgRow> + Send + Unpin + 'static {}

/// A bound argument with its SQL type.
#[derive(Debug)]
pub(crate) enum Arg<'q> {
    /// Text (`&str` or `String` in sqlx's terms), or a `NULL` text.
    Text(Option<Cow<'q, str>>),
    /// A 64-bit integer (`i64`), or a `NULL` one.
    Int(Option<i64>),
}

/// A value that binds to a parameter.
pub(crate) trait Bind<'q> {
    /// `NULL` of this value's type (what `None` binds).
    const NULL: Arg<'static>;

    /// The argument.
    fn arg(self) -> Arg<'q>;
}

impl<'q> Bind<'q> for &'q str {
    const NULL: Arg<'static> = Arg::Text(None);

    fn arg(self) -> Arg<'q> {
        Arg::Text(Some(Cow::Borrowed(self)))
    }
}

impl<'q> Bind<'q> for &'q String {
    const NULL: Arg<'static> = Arg::Text(None);

    fn arg(self) -> Arg<'q> {
        Arg::Text(Some(Cow::Borrowed(self)))
    }
}

impl<'q> Bind<'q> for String {
    const NULL: Arg<'static> = Arg::Text(None);

    fn arg(self) -> Arg<'q> {
        Arg::Text(Some(Cow::Owned(self)))
    }
}

impl<'q> Bind<'q> for i64 {
    const NULL: Arg<'static> = Arg::Int(None);

    fn arg(self) -> Arg<'q> {
        Arg::Int(Some(self))
    }
}

impl<'q> Bind<'q> for &'q i64 {
    const NULL: Arg<'static> = Arg::Int(None);

    fn arg(self) -> Arg<'q> {
        Arg::Int(Some(*self))
    }
}

impl<'q, T: Bind<'q>> Bind<'q> for Option<T> {
    const NULL: Arg<'static> = T::NULL;

    fn arg(self) -> Arg<'q> {
        self.map_or(T::NULL, Bind::arg)
    }
}

impl<'q, T> Bind<'q> for &'q Option<T>
where
    &'q T: Bind<'q>,
{
    const NULL: Arg<'static> = <&'q T>::NULL;

    fn arg(self) -> Arg<'q> {
        self.as_ref().arg()
    }
}

/// A write connection of one backend (in a transaction, or a statement on its own).
pub(crate) trait Connection: Send {
    /// Runs the text to its end; the rows it changed.
    fn execute(&mut self, query: Query<'_>) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Every row the text returns.
    fn fetch_all<O: Row>(&mut self, query: Query<'_>) -> impl Future<Output = Result<Vec<O>, StoreError>> + Send;

    /// The first row the text returns, if any.
    fn fetch_optional<O: Row>(
        &mut self,
        query: Query<'_>,
    ) -> impl Future<Output = Result<Option<O>, StoreError>> + Send;
}

/// The read connections of one backend (each read sees the last committed state).
pub(crate) trait Reader: Sync {
    /// Every row the text returns.
    fn fetch_all<O: Row>(&self, query: Query<'_>) -> impl Future<Output = Result<Vec<O>, StoreError>> + Send;

    /// The first row the text returns, if any.
    fn fetch_optional<O: Row>(&self, query: Query<'_>) -> impl Future<Output = Result<Option<O>, StoreError>> + Send;
}

/// Where a query that reads rows runs: `&mut` a [`Connection`] or `&` a
/// [`Reader`] (as sqlx's executors).
pub(crate) trait Executor: Send {
    /// See [`Connection::fetch_all`].
    fn fetch_all<O: Row>(self, query: Query<'_>) -> impl Future<Output = Result<Vec<O>, StoreError>> + Send;

    /// See [`Connection::fetch_optional`].
    fn fetch_optional<O: Row>(self, query: Query<'_>) -> impl Future<Output = Result<Option<O>, StoreError>> + Send;
}

impl<C: Connection> Executor for &mut C {
    fn fetch_all<O: Row>(self, query: Query<'_>) -> impl Future<Output = Result<Vec<O>, StoreError>> + Send {
        Connection::fetch_all(self, query)
    }

    fn fetch_optional<O: Row>(self, query: Query<'_>) -> impl Future<Output = Result<Option<O>, StoreError>> + Send {
        Connection::fetch_optional(self, query)
    }
}

impl<R: Reader> Executor for &R {
    fn fetch_all<O: Row>(self, query: Query<'_>) -> impl Future<Output = Result<Vec<O>, StoreError>> + Send {
        Reader::fetch_all(self, query)
    }

    fn fetch_optional<O: Row>(self, query: Query<'_>) -> impl Future<Output = Result<Option<O>, StoreError>> + Send {
        Reader::fetch_optional(self, query)
    }
}

/// A query: its text and the arguments bound so far.
#[derive(Debug)]
pub(crate) struct Query<'q> {
    text: Cow<'static, str>,
    args: Vec<Arg<'q>>,
}

/// A query without rows to decode (sqlx's `query`).
pub(crate) fn query<'q>(text: impl SqlText) -> Query<'q> {
    Query { text: text.into_text(), args: Vec::new() }
}

impl<'q> Query<'q> {
    /// Binds the next parameter (`$1`, then `$2`, …).
    pub(crate) fn bind(mut self, value: impl Bind<'q>) -> Self {
        self.args.push(value.arg());
        self
    }

    /// Runs the text to its end on a write connection; the rows it changed.
    pub(crate) fn execute<C: Connection>(self, on: &mut C) -> impl Future<Output = Result<u64, StoreError>> + Send {
        on.execute(self)
    }

    /// The text and the arguments, for a backend to run.
    pub(crate) fn into_parts(self) -> (Cow<'static, str>, Vec<Arg<'q>>) {
        (self.text, self.args)
    }
}

/// A query whose rows decode as `O` (sqlx's `query_as`).
pub(crate) struct QueryAs<'q, O> {
    query: Query<'q>,
    row: PhantomData<fn() -> O>,
}

/// A query whose rows decode as `O`.
pub(crate) fn query_as<'q, O: Row>(text: impl SqlText) -> QueryAs<'q, O> {
    QueryAs { query: query(text), row: PhantomData }
}

impl<'q, O: Row> QueryAs<'q, O> {
    /// Binds the next parameter.
    pub(crate) fn bind(self, value: impl Bind<'q>) -> Self {
        Self { query: self.query.bind(value), row: PhantomData }
    }

    /// Every row.
    pub(crate) fn fetch_all(self, on: impl Executor) -> impl Future<Output = Result<Vec<O>, StoreError>> + Send {
        on.fetch_all(self.query)
    }

    /// The first row, if any.
    pub(crate) fn fetch_optional(
        self,
        on: impl Executor,
    ) -> impl Future<Output = Result<Option<O>, StoreError>> + Send {
        on.fetch_optional(self.query)
    }
}

/// A query whose rows are one value each (sqlx's `query_scalar`).
pub(crate) struct QueryScalar<'q, O> {
    inner: QueryAs<'q, (O,)>,
}

/// A query whose rows are one `O` each.
pub(crate) fn query_scalar<'q, O>(text: impl SqlText) -> QueryScalar<'q, O>
where
    (O,): Row,
{
    QueryScalar { inner: query_as(text) }
}

impl<'q, O> QueryScalar<'q, O>
where
    (O,): Row,
{
    /// Binds the next parameter.
    pub(crate) fn bind(self, value: impl Bind<'q>) -> Self {
        Self { inner: self.inner.bind(value) }
    }

    /// Every row's value.
    pub(crate) async fn fetch_all(self, on: impl Executor) -> Result<Vec<O>, StoreError> {
        Ok(self.inner.fetch_all(on).await?.into_iter().map(|(value,)| value).collect())
    }

    /// The first row's value, if any.
    pub(crate) async fn fetch_optional(self, on: impl Executor) -> Result<Option<O>, StoreError> {
        Ok(self.inner.fetch_optional(on).await?.map(|(value,)| value))
    }
}
