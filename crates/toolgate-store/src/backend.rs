//! What a SQL backend gives the shared operations (`ops.rs`, `outbox_ops.rs`):
//! [`SqlBackend`], implemented once by SQLite (`sqlite.rs`) and once by
//! Postgres (`postgres.rs`).
//!
//! A backend brings its connections (run through the query API of `db.rs`),
//! the ways it writes (in a transaction, a statement on its own, a fused
//! text), the reads it does its own way, and the texts that differ between
//! the two databases. Everything else, every other query text included, is
//! the operations', written once.

use std::future::Future;
use std::pin::Pin;

use toolgate::ledger::{StoreError, Transition};

use crate::db::{Connection, Reader};
use crate::sql::RecordRow;

/// A write operation's future, borrowing its connection and data.
pub(crate) type WriteFuture<'c, R> = Pin<Box<dyn Future<Output = Result<R, StoreError>> + Send + 'c>>;

/// A write operation: statements over a connection (in a transaction, or a
/// statement on its own, as the backend's method that runs it says), given
/// the operation's data.
pub(crate) type WriteFn<C, D, R> = for<'c> fn(&'c mut C, &'c D) -> WriteFuture<'c, R>;

/// A SQL backend: the ledger on one database.
///
/// The contract, beyond each item's own:
/// - every write goes through [`write`](Self::write),
///   [`write_statement`](Self::write_statement) or
///   [`write_fused`](Self::write_fused), and an operation's writes commit
///   together or not at all (its error rolls them back);
/// - a transaction holds the write lock it needs: on SQLite the database's
///   (`BEGIN IMMEDIATE`), on Postgres the rows' (READ COMMITTED, where a
///   conditional update that waited re-checks its condition);
/// - audit appends ([`insert_events_sql`](Self::insert_events_sql)) are
///   serialised with other appends until commit, so `seq` grows in commit
///   order.
pub(crate) trait SqlBackend: Send + Sync + 'static {
    /// A write connection.
    type Conn: Connection + 'static;
    /// The read connections.
    type Reader: Reader;

    /// Marks a conversation due (see `sql::mark_due_sql!`), drawing the
    /// backend's next generation. Parameter: the conversation.
    const MARK_DUE: &'static str;
    /// Marks a conversation due and claims it (see
    /// `sql::mark_and_claim_sql!`); its rows are `(generation, claimed)`.
    const MARK_AND_CLAIM: &'static str;
    /// Whether drawing a generation and using it are two statements (a
    /// counter row on SQLite), so [`Self::MARK_AND_CLAIM`] needs a
    /// transaction; a sequence (Postgres) draws it within the one statement.
    const GENERATION_NEEDS_TRANSACTION: bool;
    /// What a guarded append written as one statement on its own (no
    /// transaction) must also check, in its `WHERE`, for its other checks to
    /// see every append before it: on Postgres, that it takes the log's
    /// append lock and that no `seq` was drawn after the newest its snapshot
    /// sees (the snapshot is taken before the lock, so an append committed
    /// while it waited would be missed); an empty text on SQLite, whose
    /// statement takes the write lock before it reads.
    const CURRENT_UNDER_LOCK: &'static str;
    /// An audit event's conversation key ([`toolgate::ledger::conversation_key`]
    /// of its `owner` and `conversation_id`) as an expression, written as the
    /// index `audit_events_calls_key` (migration 0014) writes it, so a history
    /// read of one conversation is one range of that index.
    const CONVERSATION_KEY: &'static str;
    /// A statement that takes the audit chain's sealing lock until commit
    /// (Postgres's advisory lock; none on SQLite), so two replicas sealing at
    /// once extend the chain one after the other (`seal_ops.rs`).
    const LOCK_CHAIN: Option<&'static str>;

    /// The newest schema migration this build carries (the store is ready
    /// only at it: [`toolgate::ledger::AuditStore::ready`]).
    fn newest_migration() -> i64;

    /// The read connections (a read sees the last committed state).
    fn reader(&self) -> &Self::Reader;

    /// Runs `run` over `data` as [`write`](Self::write) does, in a
    /// transaction that holds the audit log's append lock from its start, so
    /// no event is appended between its reads and its own appends (SQLite's
    /// write transaction holds the database's lock; Postgres takes the
    /// advisory lock of every append with its `BEGIN`, in one round trip).
    fn write_log_locked<D, R>(
        &self,
        data: D,
        run: WriteFn<Self::Conn, D, R>,
    ) -> impl Future<Output = Result<R, StoreError>> + Send
    where
        D: Send + Sync + 'static,
        R: Send + 'static;

    /// Runs `run` over `data` in a transaction that holds the write lock it
    /// needs (on SQLite shared with the writes queued with it, see `batch.rs`).
    fn write<D, R>(
        &self,
        data: D,
        run: WriteFn<Self::Conn, D, R>,
    ) -> impl Future<Output = Result<R, StoreError>> + Send
    where
        D: Send + Sync + 'static,
        R: Send + 'static;

    /// Runs `run`, which runs one statement, atomic on its own (no `BEGIN`
    /// and `COMMIT` round trips when nothing shares its transaction).
    fn write_statement<D, R>(
        &self,
        data: D,
        run: WriteFn<Self::Conn, D, R>,
    ) -> impl Future<Output = Result<R, StoreError>> + Send
    where
        D: Send + Sync + 'static,
        R: Send + 'static;

    /// Runs `run` over the text of [`fused_issue_sql`](Self::fused_issue_sql)
    /// or [`fused_transition_sql`](Self::fused_transition_sql): one statement
    /// on Postgres, several in a transaction on SQLite (which may tell the
    /// text to bring its own, see [`Fused::bring_own_transaction`]).
    fn write_fused<T, R>(
        &self,
        data: Fused<T>,
        run: WriteFn<Self::Conn, Fused<T>, R>,
    ) -> impl Future<Output = Result<R, StoreError>> + Send
    where
        T: Send + Sync + 'static,
        R: Send + 'static;

    /// The approvals with these ids, in any order (unknown ids left out).
    fn select_records(&self, ids: &[String]) -> impl Future<Output = Result<Vec<RecordRow>, StoreError>> + Send;

    /// The approvals of these calls of one conversation, in any order.
    fn select_records_for_calls(
        &self,
        conversation_id: &str,
        calls: &[String],
    ) -> impl Future<Output = Result<Vec<RecordRow>, StoreError>> + Send;

    /// Appends `count` events (parameters: each event's, see
    /// `sql::EVENT_PARAMS`), serialised with other appends until commit.
    fn insert_events_sql(count: usize) -> String;

    /// One approval, its viewers and its events in one round trip, when the
    /// backend has a text for them; its rows add up to the approvals inserted
    /// (0 when the id was taken, and then nothing else is written).
    /// Parameters: the approval's (see `sql::INSERT_RECORD`), the viewers', the events'.
    fn fused_issue_sql(events: usize, viewers: usize) -> Option<String>;

    /// A transition and its own events in one round trip, when the backend
    /// has a text for them; its rows are the update's (the record, when it
    /// moved), and the events are written only then. Parameters: the
    /// transition's (see `sql::transition_sql`), then the events'.
    fn fused_transition_sql(transition: &Transition) -> Option<String>;
}

/// A fused operation's data: what it writes, the text of `fused_issue_sql`
/// or `fused_transition_sql` that writes it, and whether that text brings its
/// own transaction (on SQLite, an operation alone in its batch opens and
/// commits it in the same text: one round trip, not three).
pub(crate) struct Fused<T> {
    pub(crate) item: T,
    text: String,
    own_transaction: bool,
}

impl<T> Fused<T> {
    /// `item`, to be written by `text`.
    pub(crate) fn new(item: T, text: String) -> Self {
        Self { item, text, own_transaction: false }
    }

    /// Makes the operation open and commit its own transaction (SQLite: on
    /// Postgres a fused text is one statement).
    pub(crate) fn bring_own_transaction(&mut self) {
        self.own_transaction = true;
    }

    /// The text to run.
    pub(crate) fn sql(&self) -> String {
        self.sql_of(&self.text)
    }

    /// Another fused text of the same operation, as it runs.
    pub(crate) fn sql_of(&self, text: &str) -> String {
        if self.own_transaction { format!("BEGIN IMMEDIATE; {text}; COMMIT") } else { text.to_owned() }
    }
}
