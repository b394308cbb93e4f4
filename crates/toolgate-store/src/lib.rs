//! Durable storage for toolgate's approval ledger on SQLite and Postgres.
//!
//! [`SqlStore`] implements every role of [`toolgate::ledger::LedgerStore`] with the
//! semantics of [`toolgate::ledger::MemoryStore`], durably:
//! - every method is atomic: all of its writes commit, or none;
//! - a transition is one conditional `UPDATE approvals … WHERE approval_id = $1
//!   AND state = $2 AND <guard> RETURNING …`, never a read followed by a
//!   write, so of many answers racing for one approval, in one process or
//!   several, exactly one moves it and the others get the winner's record;
//! - the audit log is append-only; `seq` grows in commit order;
//! - sticky decisions are listed in one query (live, and global or scoped to
//!   the conversation or principal asked), oldest first by `created_at`, then
//!   in the order they were saved; a revocation is one `DELETE … RETURNING`;
//!   a conversation and its decisions are read together in one statement
//!   (`conversation_with_decisions`);
//! - votes are counted on the votes read: a vote is a conditional update on
//!   `vote_count` (`Guard::Votes`), so of votes racing on one approval each
//!   is counted or read again, and exactly one decides;
//! - every approval lists the keys of who may see it in `approval_viewers`
//!   (written with it, removed with it), and an inbox listing walks one
//!   key's rows newest first on their primary key, reading only as many as
//!   it shows;
//! - a transition with `Update::continuation` marks its conversation due in
//!   `continuations` in the transaction that moves it, with a generation no
//!   mark ever had (a Postgres sequence; a one-row counter on SQLite); claims,
//!   finishes and the due listing are conditional statements
//!   (`UPDATE … RETURNING`, `DELETE … RETURNING`, an upsert), never a read
//!   followed by a write.
//!
//! On SQLite (rusqlite; sqlx runs the migrations) every write transaction
//! takes the write lock up front (`BEGIN IMMEDIATE`) through a single writer
//! connection: a write runs at once on its caller's thread when the writer
//! is idle, and otherwise the writer thread commits the writes queued
//! together in one transaction (each still atomic, and answered only once
//! committed); reads run on the caller's thread over read connections of
//! their own. On Postgres (sqlx) write
//! transactions run at READ COMMITTED, where a conditional update that waited
//! for a row lock re-checks its condition on the committed row.
//!
//! [`StoreSpec`] names a store (`none`, `memory`, `sqlite:PATH`,
//! `postgres://…`, where `?pool_max_conns=N` sets the pool: two connections
//! per core of this machine, from 4 to 16, by default); [`open_store`] opens it. Opening a SQL store creates
//! the SQLite file if missing and runs the embedded migrations.
//!
//! Inside, each operation is written once, in `ops.rs` (and `outbox_ops.rs`
//! for timers, the outbox and links), over the `SqlBackend` trait of
//! `backend.rs` and the query API of `db.rs` (sqlx's shape). `sqlite.rs`
//! implements both on rusqlite (through `lite.rs`; group commit in
//! `batch.rs`, checkpoints in `checkpoint.rs`), `postgres.rs` on sqlx. The
//! query texts both databases share are in `sql.rs` and `outbox_sql.rs`.

mod backend;
mod batch;
mod chain;
mod checkpoint;
mod db;
mod history_ops;
mod lite;
mod ops;
mod outbox_ops;
mod outbox_sql;
mod postgres;
mod private;
mod seal_ops;
mod spec;
mod sql;
mod sqlite;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use toolgate::approval::lifecycle::TimerAdvance;
use toolgate::ledger::{
    ApprovalQuery, ApprovalRecord, ApprovalStore, AttemptEnd, AuditEvent, AuditQuery, AuditStore, ContinuationClaim,
    ContinuationStore, ConversationRead, ConversationStore, DecisionQuery, Delivery, InboxStore, LedgerStore,
    LinkStore, MemoryStore, Millis, Outbound, OutboxQuery, OutboxStore, Pruned, StoreError, StoreFuture,
    StoredConversation, StoredDecision, Transition, TransitionOutcome,
};

use ops::Operations;
pub use spec::{ACCEPTED_FORMS, DEFAULT_SQLITE_FILE, StoreSpec, StoreSync, redact_url};

/// A boxed error from the database driver.
pub type DriverError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a store could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The store spec is not one of the accepted forms.
    #[error("invalid approval store `{text}`: expected {ACCEPTED_FORMS}", ACCEPTED_FORMS = spec::ACCEPTED_FORMS)]
    InvalidSpec {
        /// The text as given.
        text: String,
    },
    /// A toolgate option in the store URL is invalid (such as `pool_max_conns`).
    #[error("invalid option in the approval store URL {target}: {detail}")]
    InvalidOption {
        /// The URL with its password redacted.
        target: String,
        /// What is wrong.
        detail: String,
    },
    /// [`SqlStore::open`] was given `none` or `memory`.
    #[error("`{spec}` is not a SQL store: SqlStore opens sqlite and postgres stores")]
    NotSql {
        /// The spec given.
        spec: String,
    },
    /// The directory of the SQLite file could not be created.
    #[error("cannot create the data directory {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The SQLite file could not be created (with its private mode).
    #[error("cannot create the store file {}: {source}", path.display())]
    CreateFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The database could not be opened or reached.
    #[error("cannot connect to the {backend} approval store at {target}: {source}")]
    Connect {
        /// `sqlite` or `postgres`.
        backend: &'static str,
        /// The file, or the URL with its password redacted.
        target: String,
        /// The driver's error.
        source: DriverError,
    },
    /// The schema could not be brought up to date.
    #[error("cannot migrate the {backend} approval store: {source}")]
    Migrate {
        /// `sqlite` or `postgres`.
        backend: &'static str,
        /// The migrator's error.
        source: DriverError,
    },
}

/// A [`LedgerStore`] on SQLite or Postgres (see the crate docs).
pub struct SqlStore {
    backend: Backend,
    shown: String,
    /// The key receipts, checkpoints and prunes are signed with, when set
    /// ([`SqlStore::sign_with`]); without one the store seals nothing and
    /// prunes without a signed record.
    signer: Option<Arc<toolgate::receipt::ReceiptKey>>,
}

/// The operations (ops.rs) on the backend the spec named.
enum Backend {
    Sqlite(Operations<sqlite::Backend>),
    Postgres(Operations<postgres::Backend>),
}

/// Runs the same operation on whichever backend the store has.
macro_rules! on_backend {
    ($store:expr, $backend:ident => $call:expr) => {
        match &$store.backend {
            Backend::Sqlite($backend) => $call.await,
            Backend::Postgres($backend) => $call.await,
        }
    };
}

impl SqlStore {
    /// Opens a SQLite or Postgres store and migrates its schema.
    pub async fn open(spec: &StoreSpec) -> Result<Self, OpenError> {
        Self::open_synced(spec, StoreSync::default()).await
    }

    /// [`Self::open`] with commits as durable as `sync` says.
    pub async fn open_synced(spec: &StoreSpec, sync: StoreSync) -> Result<Self, OpenError> {
        let backend = match spec {
            StoreSpec::Sqlite(path) => Backend::Sqlite(Operations::new(sqlite::Backend::open(path, sync).await?)),
            StoreSpec::Postgres(url) => {
                Backend::Postgres(Operations::new(postgres::Backend::open(url, &redact_url(url), sync).await?))
            }
            StoreSpec::None | StoreSpec::Memory => return Err(OpenError::NotSql { spec: spec.to_string() }),
        };
        Ok(Self { backend, shown: spec.to_string(), signer: None })
    }

    /// Signs with `key` from now on (its public half is registered in the
    /// store's key set): [`toolgate::receipt::ReceiptStore`]'s sealing and
    /// checkpoints, and prunes with a signed record.
    pub async fn sign_with(mut self, key: toolgate::receipt::ReceiptKey) -> Result<Self, StoreError> {
        let now = toolgate::ledger::Clock::now(&toolgate::ledger::SystemClock);
        on_backend!(self, backend => backend.register_key(&key, now))?;
        self.signer = Some(Arc::new(key));
        Ok(self)
    }

    fn signer(&self) -> Result<&toolgate::receipt::ReceiptKey, StoreError> {
        self.signer.as_deref().ok_or_else(|| StoreError::Unavailable("this store has no receipt key".into()))
    }

    /// Closes the connections; operations after this fail as unavailable.
    pub async fn close(&self) {
        on_backend!(self, backend => backend.backend().close());
    }
}

impl fmt::Debug for SqlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlStore").field("store", &self.shown).finish_non_exhaustive()
    }
}

impl ApprovalStore for SqlStore {
    fn issue<'a>(&'a self, records: &'a [ApprovalRecord], events: &'a [AuditEvent]) -> StoreFuture<'a, ()> {
        Box::pin(async move { on_backend!(self, backend => backend.issue(records, events)) })
    }

    fn approvals<'a>(&'a self, approval_ids: &'a [String]) -> StoreFuture<'a, Vec<ApprovalRecord>> {
        Box::pin(async move { on_backend!(self, backend => backend.approvals(approval_ids)) })
    }

    fn approvals_for_calls<'a>(
        &'a self,
        conversation_id: &'a str,
        tool_call_ids: &'a [String],
    ) -> StoreFuture<'a, Vec<ApprovalRecord>> {
        Box::pin(
            async move { on_backend!(self, backend => backend.approvals_for_calls(conversation_id, tool_call_ids)) },
        )
    }

    fn apply<'a>(
        &'a self,
        transitions: &'a [Transition],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, Vec<TransitionOutcome>> {
        Box::pin(async move { on_backend!(self, backend => backend.apply(transitions, events)) })
    }

    fn append<'a>(&'a self, events: &'a [AuditEvent]) -> StoreFuture<'a, ()> {
        Box::pin(async move { on_backend!(self, backend => backend.append(events)) })
    }

    fn renew_leases<'a>(&'a self, executor: &'a str, until: Millis) -> StoreFuture<'a, u64> {
        Box::pin(async move { on_backend!(self, backend => backend.renew_leases(executor, until)) })
    }

    fn due_timers(&self, now: Millis, limit: usize) -> StoreFuture<'_, Vec<ApprovalRecord>> {
        Box::pin(async move { on_backend!(self, backend => backend.due_timers(now, limit)) })
    }

    fn advance_timer<'a>(&'a self, advance: &'a TimerAdvance) -> StoreFuture<'a, bool> {
        Box::pin(async move { on_backend!(self, backend => backend.advance_timer(advance)) })
    }
}

impl AuditStore for SqlStore {
    fn audit<'a>(&'a self, query: &'a AuditQuery) -> StoreFuture<'a, Vec<AuditEvent>> {
        Box::pin(async move { on_backend!(self, backend => backend.audit(query)) })
    }

    fn prune(&self, before: Millis) -> StoreFuture<'_, Pruned> {
        let now = toolgate::ledger::Clock::now(&toolgate::ledger::SystemClock);
        let signed = self.signer.as_deref().map(|key| (key, now));
        Box::pin(async move { on_backend!(self, backend => backend.prune(before, signed)) })
    }

    fn ready(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move { on_backend!(self, backend => backend.ready()) })
    }
}

impl toolgate::ledger::HistoryStore for SqlStore {
    fn history<'a>(
        &'a self,
        query: &'a toolgate::ledger::HistoryQuery,
    ) -> StoreFuture<'a, toolgate::ledger::HistoryRead> {
        Box::pin(async move { on_backend!(self, backend => backend.history(query)) })
    }

    fn append_if<'a>(
        &'a self,
        guards: &'a [toolgate::ledger::HistoryGuard],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move { on_backend!(self, backend => backend.append_if(guards, events)) })
    }

    fn issue_if<'a>(
        &'a self,
        guards: &'a [toolgate::ledger::HistoryGuard],
        records: &'a [ApprovalRecord],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move { on_backend!(self, backend => backend.issue_if(guards, records, events)) })
    }

    fn apply_if<'a>(
        &'a self,
        guards: &'a [toolgate::ledger::HistoryGuard],
        transitions: &'a [Transition],
    ) -> StoreFuture<'a, Option<Vec<TransitionOutcome>>> {
        Box::pin(async move { on_backend!(self, backend => backend.apply_if(guards, transitions)) })
    }
}

impl ConversationStore for SqlStore {
    fn conversation<'a>(&'a self, conversation_id: &'a str) -> StoreFuture<'a, Option<StoredConversation>> {
        Box::pin(async move { on_backend!(self, backend => backend.conversation(conversation_id)) })
    }

    fn save_conversation<'a>(
        &'a self,
        conversation_id: &'a str,
        owner: Option<&'a str>,
        messages: &'a serde_json::Value,
        expected_version: Option<i64>,
        at: Millis,
    ) -> StoreFuture<'a, Option<i64>> {
        Box::pin(async move {
            on_backend!(self, backend => backend.save_conversation(conversation_id, owner, messages, expected_version, at))
        })
    }

    fn save_decision<'a>(&'a self, decision: &'a StoredDecision) -> StoreFuture<'a, ()> {
        Box::pin(async move { on_backend!(self, backend => backend.save_decision(decision)) })
    }

    fn decisions<'a>(&'a self, query: &'a DecisionQuery) -> StoreFuture<'a, Vec<StoredDecision>> {
        Box::pin(async move { on_backend!(self, backend => backend.decisions(query)) })
    }

    fn revoke_decision<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredDecision>> {
        Box::pin(async move { on_backend!(self, backend => backend.revoke_decision(id)) })
    }

    fn decisions_by<'a>(&'a self, author: Option<&'a str>, now: Millis) -> StoreFuture<'a, Vec<StoredDecision>> {
        Box::pin(async move { on_backend!(self, backend => backend.decisions_by(author, now)) })
    }

    fn use_decision<'a>(
        &'a self,
        id: &'a str,
        now: Millis,
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, Option<StoredDecision>> {
        Box::pin(async move { on_backend!(self, backend => backend.use_decision(id, now, events)) })
    }

    fn use_decision_issuing<'a>(
        &'a self,
        id: &'a str,
        now: Millis,
        records: &'a [ApprovalRecord],
        events: &'a [AuditEvent],
    ) -> StoreFuture<'a, Option<StoredDecision>> {
        Box::pin(async move { on_backend!(self, backend => backend.use_decision_issuing(id, now, records, events)) })
    }

    fn conversation_with_decisions<'a>(
        &'a self,
        conversation_id: &'a str,
        query: &'a DecisionQuery,
    ) -> StoreFuture<'a, ConversationRead> {
        Box::pin(
            async move { on_backend!(self, backend => backend.conversation_with_decisions(conversation_id, query)) },
        )
    }
}

impl InboxStore for SqlStore {
    fn list_approvals<'a>(&'a self, query: &'a ApprovalQuery) -> StoreFuture<'a, Vec<ApprovalRecord>> {
        Box::pin(async move { on_backend!(self, backend => backend.list_approvals(query)) })
    }

    fn count_pending(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move { on_backend!(self, backend => backend.count(sql::COUNT_PENDING)) })
    }
}

impl ContinuationStore for SqlStore {
    fn claim_continuation<'a>(
        &'a self,
        conversation_id: &'a str,
        executor: &'a str,
        until: Millis,
        now: Millis,
        create: bool,
    ) -> StoreFuture<'a, Option<ContinuationClaim>> {
        Box::pin(async move {
            on_backend!(self, backend => backend.claim_continuation(conversation_id, executor, until, now, create))
        })
    }

    fn finish_continuation<'a>(&'a self, claim: &'a ContinuationClaim, executor: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { on_backend!(self, backend => backend.finish_continuation(claim, executor)) })
    }

    fn due_continuations(&self, now: Millis, limit: usize) -> StoreFuture<'_, Vec<String>> {
        Box::pin(async move { on_backend!(self, backend => backend.due_continuations(now, limit)) })
    }
}

impl OutboxStore for SqlStore {
    fn notify_cursor(&self) -> StoreFuture<'_, i64> {
        Box::pin(async move { on_backend!(self, backend => backend.notify_cursor()) })
    }

    fn enqueue<'a>(&'a self, deliveries: &'a [Outbound], from: i64, to: i64) -> StoreFuture<'a, bool> {
        Box::pin(async move { on_backend!(self, backend => backend.enqueue(deliveries, from, to)) })
    }

    fn claim_deliveries<'a>(
        &'a self,
        executor: &'a str,
        now: Millis,
        until: Millis,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Delivery>> {
        Box::pin(async move { on_backend!(self, backend => backend.claim_deliveries(executor, now, until, limit)) })
    }

    fn finish_attempt<'a>(&'a self, end: &'a AttemptEnd) -> StoreFuture<'a, bool> {
        Box::pin(async move { on_backend!(self, backend => backend.finish_attempt(end)) })
    }

    fn deliveries<'a>(&'a self, query: &'a OutboxQuery) -> StoreFuture<'a, Vec<Delivery>> {
        Box::pin(async move { on_backend!(self, backend => backend.deliveries(query)) })
    }

    fn count_pending_deliveries(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move { on_backend!(self, backend => backend.count(outbox_sql::COUNT_PENDING_DELIVERIES)) })
    }
}

impl LinkStore for SqlStore {
    fn consume_link<'a>(&'a self, link_id: &'a str, at: Millis, expires_at: Millis) -> StoreFuture<'a, bool> {
        Box::pin(async move { on_backend!(self, backend => backend.consume_link(link_id, at, expires_at)) })
    }

    fn release_link<'a>(&'a self, link_id: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move { on_backend!(self, backend => backend.release_link(link_id)) })
    }

    fn link_used<'a>(&'a self, link_id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { on_backend!(self, backend => backend.link_used(link_id)) })
    }
}

impl toolgate::receipt::ReceiptStore for SqlStore {
    fn seal(&self, limit: usize) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let key = self.signer()?;
            let now = toolgate::ledger::Clock::now(&toolgate::ledger::SystemClock);
            on_backend!(self, backend => backend.seal(key, limit, now))
        })
    }

    fn checkpoint(&self, at: Millis) -> StoreFuture<'_, Option<toolgate::receipt::Checkpoint>> {
        Box::pin(async move {
            let key = self.signer()?;
            on_backend!(self, backend => backend.checkpoint(key, at))
        })
    }

    fn receipt<'a>(&'a self, approval_id: &'a str) -> StoreFuture<'a, Option<toolgate::receipt::Signed>> {
        Box::pin(async move { on_backend!(self, backend => backend.receipt(approval_id)) })
    }

    fn receipt_at(&self, seq: i64) -> StoreFuture<'_, Option<toolgate::receipt::Signed>> {
        Box::pin(async move { on_backend!(self, backend => backend.receipt_at(seq)) })
    }

    fn receipt_keys(&self) -> StoreFuture<'_, toolgate::receipt::Jwks> {
        Box::pin(async move { on_backend!(self, backend => backend.receipt_keys()) })
    }

    fn signed_records(&self, after_seq: i64) -> StoreFuture<'_, Vec<toolgate::receipt::Signed>> {
        Box::pin(async move { on_backend!(self, backend => backend.signed_records(after_seq)) })
    }

    fn chained_events(&self, after_seq: i64, limit: usize) -> StoreFuture<'_, Vec<toolgate::receipt::EventLine>> {
        Box::pin(async move { on_backend!(self, backend => backend.chained_events(after_seq, limit)) })
    }

    fn checkpoint_before(&self, since: Millis) -> StoreFuture<'_, Option<toolgate::receipt::Checkpoint>> {
        Box::pin(async move { on_backend!(self, backend => backend.checkpoint_before(since)) })
    }
}

/// Opens the store a spec names: `None` for [`StoreSpec::None`], a
/// [`MemoryStore`] for [`StoreSpec::Memory`], else a migrated [`SqlStore`].
pub async fn open_store(spec: &StoreSpec) -> Result<Option<Arc<dyn LedgerStore>>, OpenError> {
    open_store_synced(spec, StoreSync::default()).await
}

/// [`open_store`] with a SQL store's commits as durable as `sync` says.
pub async fn open_store_synced(spec: &StoreSpec, sync: StoreSync) -> Result<Option<Arc<dyn LedgerStore>>, OpenError> {
    Ok(match spec {
        StoreSpec::None => None,
        StoreSpec::Memory => Some(Arc::new(MemoryStore::new())),
        StoreSpec::Sqlite(_) | StoreSpec::Postgres(_) => Some(Arc::new(SqlStore::open_synced(spec, sync).await?)),
    })
}
