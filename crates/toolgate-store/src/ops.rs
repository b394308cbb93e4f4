//! The store's operations, written once over [`SqlBackend`] and compiled
//! once: [`Operations`] holds a backend and runs every role's operation on
//! it (the timers, the outbox and the links are in `outbox_ops.rs`).
//!
//! The queries go through the query API of `db.rs` (sqlx's shape), run on
//! the backend's connections; what differs between the databases comes from
//! the backend (`backend.rs` says what it gives): how a write is run
//! (`write`: in a transaction holding the write lock it needs;
//! `write_statement`: one statement, atomic on its own; `write_fused`: the
//! text of `fused_issue_sql` or `fused_transition_sql`, one statement on
//! Postgres, several in a transaction on SQLite), the approvals read by id
//! (`select_records`), the audit append (`insert_events_sql`), and the
//! continuation marks (`MARK_DUE`, `MARK_AND_CLAIM`, and whether drawing a
//! generation needs a transaction: `GENERATION_NEEDS_TRANSACTION`). Every
//! other query text is `sql.rs`'s, the same on both.
//!
//! A write operation is a function of its connection and data
//! (`WriteFn`): generic over the connection (`C: Connection`) when it runs
//! shared texts only, over the backend (`B: SqlBackend`, on `B::Conn`) when
//! it runs one of the backend's texts.
//!
//! A transition that marks its conversation due to continue
//! (`Update::continuation`) runs in a transaction, never fused: the mark is
//! written after the update moved, before commit. Every other transition,
//! with or without votes, takes the fused paths.

use std::collections::HashMap;

use toolgate::ledger::{
    ApprovalQuery, ApprovalRecord, AuditEvent, AuditQuery, AuditView, ContinuationClaim, ConversationRead,
    DecisionQuery, Millis, Pruned, StoreError, StoredConversation, StoredDecision, Transition, TransitionOutcome,
};

use crate::backend::{Fused, SqlBackend, WriteFuture};
use crate::chain::{Chain, Split};
use crate::db::{self, Connection};
use crate::sql::{
    self, ConversationRow, DecisionRow, EventRow, LeaseWrite, ReadRow, RecordParams, RecordRow, VotesWrite,
};

/// The ledger's operations on backend `B` (see the module docs).
pub(crate) struct Operations<B> {
    backend: B,
}

/// Binds an approval's [`sql::RECORD_PARAMS`] parameters, in [`sql::INSERT_RECORD`]
/// order, to a query or typed query.
macro_rules! bind_record {
    ($query:expr, $record:expr, $params:expr) => {{
        let (record, params): (&ApprovalRecord, &RecordParams) = ($record, $params);
        $query
            .bind(&record.approval_id)
            .bind(&record.conversation_id)
            .bind(&record.tool_call_id)
            .bind(&record.tool_name)
            .bind(&params.input)
            .bind(&record.input_digest)
            .bind(record.issued_at)
            .bind(record.expires_at)
            .bind(record.state.as_str())
            .bind(&params.decision)
            .bind(&params.output)
            .bind(record.lease.as_ref().map(|lease| &lease.executor))
            .bind(record.lease.as_ref().map(|lease| lease.until))
            .bind(record.updated_at)
            .bind(&params.routing)
            .bind(&params.votes)
            .bind(&record.reason)
            .bind(&record.owner)
            .bind(&record.client)
            .bind(&record.supersedes)
            .bind(&record.superseded_by)
            .bind(record.origin.as_str())
            .bind(&params.input_schema)
            .bind(&params.lineage)
            .bind(params.vote_count)
            .bind(params.timer_at)
    }};
}

/// Binds an audit event's [`sql::EVENT_PARAMS`] parameters, in [`sql::EVENT_INSERT_COLUMNS`]
/// order, to a query or typed query (`?` on its data's encoding).
macro_rules! bind_event {
    ($query:expr, $event:expr) => {{
        let event: &AuditEvent = $event;
        $query
            .bind(event.at)
            .bind(event.kind.as_str())
            .bind(&event.approval_id)
            .bind(&event.tool_call_id)
            .bind(&event.conversation_id)
            .bind(&event.owner)
            .bind(&event.principal)
            .bind(sql::event_data(event)?)
    }};
}
pub(crate) use bind_event;

impl<B: SqlBackend> Operations<B> {
    /// The operations on `backend`.
    pub(crate) fn new(backend: B) -> Self {
        Self { backend }
    }

    /// The backend.
    pub(crate) fn backend(&self) -> &B {
        &self.backend
    }

    pub(crate) async fn issue(&self, records: &[ApprovalRecord], events: &[AuditEvent]) -> Result<(), StoreError> {
        if let [record] = records {
            let params = RecordParams::new(record)?;
            if let Some(text) = B::fused_issue_sql(events.len(), params.viewers.len()) {
                let item = FusedIssue { record: record.clone(), params, events: events.to_vec() };
                return self.backend.write_fused(Fused::new(item, text), fused_issue_in).await;
            }
        }
        self.backend.write((records.to_vec(), events.to_vec()), issue_in::<B>).await
    }

    pub(crate) async fn approvals(&self, approval_ids: &[String]) -> Result<Vec<ApprovalRecord>, StoreError> {
        if approval_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut found: HashMap<String, ApprovalRecord> = HashMap::new();
        for row in self.backend.select_records(approval_ids).await? {
            let record = row.into_record()?;
            found.insert(record.approval_id.clone(), record);
        }
        // As the in-memory store answers: in the order asked, unknown ids left out.
        Ok(approval_ids.iter().filter_map(|id| found.get(id).cloned()).collect())
    }

    pub(crate) async fn approvals_for_calls(
        &self,
        conversation_id: &str,
        tool_call_ids: &[String],
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        if tool_call_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self.backend.select_records_for_calls(conversation_id, tool_call_ids).await?;
        rows.into_iter().map(RecordRow::into_record).collect()
    }

    pub(crate) async fn apply(
        &self,
        transitions: &[Transition],
        events: &[AuditEvent],
    ) -> Result<Vec<TransitionOutcome>, StoreError> {
        if events.is_empty() {
            // One transition, or a pair that is one (see chain.rs), with its
            // events in one round trip (one statement on Postgres, one text
            // of several in a transaction on SQLite).
            if let [transition] = transitions
                && !transition.update.continuation
                && let Some(text) = B::fused_transition_sql(transition)
            {
                let outcome =
                    self.backend.write_fused(Fused::new(transition.clone(), text), fused_transition_in).await?;
                return Ok(vec![outcome]);
            }
            if let Some(chain) = Chain::of(transitions)
                && let Some(text) = B::fused_transition_sql(&chain.fused)
            {
                return self.backend.write_fused(Fused::new(chain, text), fused_chain_in::<B>).await;
            }
        }
        self.backend.write((transitions.to_vec(), events.to_vec()), apply_in::<B>).await
    }

    pub(crate) async fn append(&self, events: &[AuditEvent]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        self.backend.write(events.to_vec(), |conn, events| Box::pin(append_in::<B>(conn, events))).await
    }

    pub(crate) async fn renew_leases(&self, executor: &str, until: Millis) -> Result<u64, StoreError> {
        self.backend.write_statement((executor.to_owned(), until), renew_leases_in).await
    }

    /// Prunes in chunks of at most [`sql::PRUNE_CHUNK`] rows, each its own
    /// write: events first (they look at the approvals), then approvals (with
    /// their viewers, in the same transaction), then conversations.
    /// With a receipt key (`signed`: the key and the time now), events go
    /// through the audit chain's signed prune instead (`seal_ops.rs`).
    pub(crate) async fn prune(
        &self,
        before: Millis,
        signed: Option<(&toolgate::receipt::ReceiptKey, Millis)>,
    ) -> Result<Pruned, StoreError> {
        let mut removed = [0u64; 3];
        for (step, count) in removed.iter_mut().enumerate() {
            loop {
                let chunk = match (step, signed) {
                    (0, Some((key, now))) => {
                        *count += self.prune_signed(key, before, now).await?;
                        break;
                    }
                    (0, None) => self.prune_chunk(sql::PRUNE_EVENTS, before).await?,
                    (1, _) => self.backend.write(before, prune_approvals_in).await?,
                    _ => self.prune_chunk(sql::PRUNE_CONVERSATIONS, before).await?,
                };
                *count += chunk;
                if chunk < sql::PRUNE_CHUNK {
                    break;
                }
            }
        }
        self.prune_outbox(before).await?;
        let [events, approvals, conversations] = removed;
        Ok(Pruned { approvals, events, conversations })
    }

    /// One chunk of a prune statement (`sql::PRUNE_*`, `outbox_sql::PRUNE_*`)
    /// over `before`, as its own write; the rows it removed.
    pub(crate) async fn prune_chunk(&self, text: &'static str, before: Millis) -> Result<u64, StoreError> {
        self.backend.write_statement(PruneChunk { text, before }, prune_chunk_in).await
    }

    pub(crate) async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEvent>, StoreError> {
        if query.limit == Some(0) {
            return Ok(Vec::new());
        }
        let text = sql::audit_sql(query);
        let mut select = db::query_as::<EventRow>(db::AssertSqlSafe(text));
        if let Some(conversation_id) = &query.conversation_id {
            select = select.bind(conversation_id);
        }
        if let Some(since) = query.since {
            select = select.bind(since);
        }
        if let Some(after) = query.after_seq {
            select = select.bind(after);
        }
        if let AuditView::Principal(principal) = &query.view {
            select = select.bind(principal);
        }
        if let Some(limit) = query.limit {
            select = select.bind(sql::limit_param(limit));
        }
        let rows = select.fetch_all(self.backend.reader()).await?;
        rows.into_iter().map(EventRow::into_event).collect()
    }

    pub(crate) async fn conversation(&self, conversation_id: &str) -> Result<Option<StoredConversation>, StoreError> {
        let row = db::query_as::<ConversationRow>(sql::SELECT_CONVERSATION)
            .bind(conversation_id)
            .fetch_optional(self.backend.reader())
            .await?;
        row.map(ConversationRow::into_conversation).transpose()
    }

    pub(crate) async fn save_conversation(
        &self,
        conversation_id: &str,
        owner: Option<&str>,
        messages: &serde_json::Value,
        expected_version: Option<i64>,
        at: Millis,
    ) -> Result<Option<i64>, StoreError> {
        let save = ConversationSave {
            conversation_id: conversation_id.to_owned(),
            owner: owner.map(str::to_owned),
            messages: sql::messages_text(messages)?,
            expected_version,
            at,
        };
        // One conditional statement is atomic on its own.
        self.backend.write_statement(save, save_conversation_in).await
    }

    pub(crate) async fn save_decision(&self, decision: &StoredDecision) -> Result<(), StoreError> {
        let body = sql::decision_body(decision)?;
        self.backend.write_statement((decision.clone(), body), save_decision_in).await
    }

    pub(crate) async fn decisions(&self, query: &DecisionQuery) -> Result<Vec<StoredDecision>, StoreError> {
        // One statement reads one snapshot: no transaction round trips.
        let rows = db::query_as::<DecisionRow>(sql::SELECT_DECISIONS)
            .bind(query.now)
            .bind(&query.conversation_id)
            .bind(&query.principal)
            .fetch_all(self.backend.reader())
            .await?;
        rows.into_iter().map(DecisionRow::into_decision).collect()
    }

    pub(crate) async fn conversation_with_decisions(
        &self,
        conversation_id: &str,
        query: &DecisionQuery,
    ) -> Result<ConversationRead, StoreError> {
        // One statement: one round trip, one snapshot.
        let rows = db::query_as::<ReadRow>(sql::SELECT_CONVERSATION_WITH_DECISIONS)
            .bind(query.now)
            .bind(&query.conversation_id)
            .bind(&query.principal)
            .bind(conversation_id)
            .fetch_all(self.backend.reader())
            .await?;
        sql::conversation_read(rows)
    }

    pub(crate) async fn decisions_by(
        &self,
        author: Option<&str>,
        now: Millis,
    ) -> Result<Vec<StoredDecision>, StoreError> {
        let select = match author {
            Some(author) => db::query_as::<DecisionRow>(sql::SELECT_DECISIONS_BY).bind(now).bind(author.to_owned()),
            None => db::query_as::<DecisionRow>(sql::SELECT_LIVE_DECISIONS).bind(now),
        };
        let rows = select.fetch_all(self.backend.reader()).await?;
        rows.into_iter().map(DecisionRow::into_decision).collect()
    }

    pub(crate) async fn use_decision(
        &self,
        id: &str,
        now: Millis,
        events: &[AuditEvent],
    ) -> Result<Option<StoredDecision>, StoreError> {
        // The conditional UPDATE and the append in one transaction: the row's
        // lock orders concurrent uses, and a use not spent appends nothing.
        self.backend
            .write((id.to_owned(), now, events.to_vec()), |conn, data| Box::pin(use_decision_in::<B>(conn, data)))
            .await
    }

    pub(crate) async fn use_decision_issuing(
        &self,
        id: &str,
        now: Millis,
        records: &[ApprovalRecord],
        events: &[AuditEvent],
    ) -> Result<Option<StoredDecision>, StoreError> {
        // The conditional UPDATE, then the issue, in one transaction: the
        // row's lock orders concurrent uses, and an issue that finds its id
        // taken rolls the use back.
        let data = (id.to_owned(), now, records.to_vec(), events.to_vec());
        self.backend.write(data, |conn, data| Box::pin(use_decision_issuing_in::<B>(conn, data))).await
    }

    pub(crate) async fn revoke_decision(&self, id: &str) -> Result<Option<StoredDecision>, StoreError> {
        // In a transaction: a row that cannot be read back is not removed (the error rolls back).
        self.backend.write(id.to_owned(), revoke_decision_in).await
    }

    /// The inbox listing (see [`sql::list_sql`]): one statement, one snapshot.
    /// Whether the store answers and its schema is this build's (see `AuditStore::ready`).
    pub(crate) async fn ready(&self) -> Result<(), StoreError> {
        let applied = db::query_scalar::<i64>(sql::NEWEST_MIGRATION).fetch_optional(self.backend().reader()).await?;
        let (applied, newest) = (applied.unwrap_or_default(), B::newest_migration());
        if applied == newest {
            return Ok(());
        }
        Err(StoreError::Unavailable(format!(
            "the store's schema is at migration {applied}, and this build's is {newest}: run the matching toolgate"
        )))
    }

    /// The one number a `SELECT COUNT(*)` text gives.
    pub(crate) async fn count(&self, text: &'static str) -> Result<u64, StoreError> {
        let count = db::query_scalar::<i64>(text).fetch_optional(self.backend().reader()).await?;
        Ok(u64::try_from(count.unwrap_or_default()).unwrap_or_default())
    }

    pub(crate) async fn list_approvals(&self, query: &ApprovalQuery) -> Result<Vec<ApprovalRecord>, StoreError> {
        let keys: Option<Vec<&String>> = query.viewer_keys.as_ref().map(|keys| {
            let mut keys: Vec<&String> = keys.iter().collect();
            keys.sort();
            keys.dedup();
            keys
        });
        if query.limit == 0 || keys.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let text = sql::list_sql(query, keys.as_ref().map(Vec::len));
        let mut select = db::query_as::<RecordRow>(db::AssertSqlSafe(text));
        for key in keys.into_iter().flatten() {
            select = select.bind(key);
        }
        if let Some(conversation_id) = &query.conversation_id {
            select = select.bind(conversation_id);
        }
        if let Some(name) = &query.conversation_name {
            let (owner, sub_run) = (toolgate::ledger::OWNER_SEPARATOR, toolgate::ledger::SUB_RUN_SEPARATOR);
            select = select
                .bind(name)
                .bind(format!("{owner}{name}"))
                .bind(format!("{name}{sub_run}"))
                .bind(format!("{owner}{name}{sub_run}"));
        }
        let rows = select.bind(sql::limit_param(query.limit)).fetch_all(self.backend.reader()).await?;
        rows.into_iter().map(RecordRow::into_record).collect()
    }

    /// Claims a mark (see `ContinuationStore::claim_continuation`): one
    /// conditional update, or with `create` one upsert that marks and claims.
    pub(crate) async fn claim_continuation(
        &self,
        conversation_id: &str,
        executor: &str,
        until: Millis,
        now: Millis,
        create: bool,
    ) -> Result<Option<ContinuationClaim>, StoreError> {
        let ask = ClaimAsk { conversation_id: conversation_id.to_owned(), executor: executor.to_owned(), until, now };
        let generation = match (create, B::GENERATION_NEEDS_TRANSACTION) {
            (false, _) => self.backend.write_statement(ask, claim_in).await?,
            (true, true) => self.backend.write(ask, mark_and_claim_in::<B>).await?,
            (true, false) => self.backend.write_statement(ask, mark_and_claim_in::<B>).await?,
        };
        Ok(generation.map(|generation| ContinuationClaim { conversation_id: conversation_id.to_owned(), generation }))
    }

    /// Ends a claim (see `ContinuationStore::finish_continuation`): conditional
    /// statements in one transaction.
    pub(crate) async fn finish_continuation(
        &self,
        claim: &ContinuationClaim,
        executor: &str,
    ) -> Result<bool, StoreError> {
        self.backend.write((claim.clone(), executor.to_owned()), finish_continuation_in).await
    }

    /// The marks nobody holds at `now`, oldest generation first.
    pub(crate) async fn due_continuations(&self, now: Millis, limit: usize) -> Result<Vec<String>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        db::query_scalar::<String>(sql::DUE_CONTINUATIONS)
            .bind(now)
            .bind(sql::limit_param(limit))
            .fetch_all(self.backend.reader())
            .await
    }
}

/// A claim asked for: the conversation, the executor, until when, and now.
struct ClaimAsk {
    conversation_id: String,
    executor: String,
    until: Millis,
    now: Millis,
}

fn claim_in<'c, C: Connection>(conn: &'c mut C, ask: &'c ClaimAsk) -> WriteFuture<'c, Option<i64>> {
    Box::pin(async move {
        db::query_scalar::<i64>(sql::CLAIM_CONTINUATION)
            .bind(&ask.conversation_id)
            .bind(&ask.executor)
            .bind(ask.until)
            .bind(ask.now)
            .fetch_optional(conn)
            .await
    })
}

fn mark_and_claim_in<'c, B: SqlBackend>(conn: &'c mut B::Conn, ask: &'c ClaimAsk) -> WriteFuture<'c, Option<i64>> {
    Box::pin(async move {
        // On SQLite the text draws the generation first (a statement without rows).
        let rows = db::query_as::<(i64, bool)>(B::MARK_AND_CLAIM)
            .bind(&ask.conversation_id)
            .bind(&ask.executor)
            .bind(ask.until)
            .bind(ask.now)
            .fetch_all(conn)
            .await?;
        Ok(rows.into_iter().find_map(|(generation, claimed)| claimed.then_some(generation)))
    })
}

/// Deletes the mark when it is still the claim's and nobody else holds it
/// (`true`); else releases it when the executor holds it (`false`); else
/// `true` only when there is no mark at all.
fn finish_continuation_in<'c, C: Connection>(
    conn: &'c mut C,
    (claim, executor): &'c (ContinuationClaim, String),
) -> WriteFuture<'c, bool> {
    Box::pin(async move {
        let cleared = db::query_scalar::<i64>(sql::FINISH_CONTINUATION)
            .bind(&claim.conversation_id)
            .bind(claim.generation)
            .bind(executor)
            .fetch_optional(&mut *conn)
            .await?;
        if cleared.is_some() {
            return Ok(true);
        }
        let released = db::query_scalar::<i64>(sql::RELEASE_CONTINUATION)
            .bind(&claim.conversation_id)
            .bind(executor)
            .fetch_optional(&mut *conn)
            .await?;
        if released.is_some() {
            return Ok(false);
        }
        let marked = db::query_scalar::<i64>(sql::CONTINUATION_GENERATION)
            .bind(&claim.conversation_id)
            .fetch_optional(conn)
            .await?;
        Ok(marked.is_none())
    })
}

/// Marks a conversation due to continue with a new generation, keeping its holder.
async fn mark_due_in<B: SqlBackend>(conn: &mut B::Conn, conversation_id: &str) -> Result<(), StoreError> {
    db::query(B::MARK_DUE).bind(conversation_id).execute(conn).await?;
    Ok(())
}

/// A conversation to save over the version its writer read.
struct ConversationSave {
    conversation_id: String,
    owner: Option<String>,
    messages: String,
    expected_version: Option<i64>,
    at: Millis,
}

pub(crate) fn issue_in<'c, B: SqlBackend>(
    conn: &'c mut B::Conn,
    (records, events): &'c (Vec<ApprovalRecord>, Vec<AuditEvent>),
) -> WriteFuture<'c, ()> {
    Box::pin(async move {
        let mut viewers: Vec<(String, Millis, &str)> = Vec::with_capacity(records.len());
        for record in records {
            let params = RecordParams::new(record)?;
            let inserted = bind_record!(db::query(sql::INSERT_RECORD), record, &params).execute(&mut *conn).await?;
            if inserted == 0 {
                // The transaction rolls back: nothing of this call is recorded.
                return Err(StoreError::DuplicateApproval(record.approval_id.clone()));
            }
            viewers.extend(params.viewers.into_iter().map(|viewer| (viewer, record.issued_at, &*record.approval_id)));
        }
        for chunk in viewers.chunks(sql::VIEWERS_PER_INSERT) {
            let text = format!(
                "INSERT INTO approval_viewers ({}) VALUES {}",
                sql::VIEWER_INSERT_COLUMNS,
                sql::viewer_rows(chunk.len(), 1)
            );
            let mut insert = db::query(db::AssertSqlSafe(text));
            for (viewer, issued_at, approval_id) in chunk {
                insert = insert.bind(viewer).bind(*issued_at).bind(*approval_id);
            }
            insert.execute(&mut *conn).await?;
        }
        append_in::<B>(conn, events).await
    })
}

/// One approval to issue on a fused path: the record, its columns as
/// written (with its viewers), and its events.
struct FusedIssue {
    record: ApprovalRecord,
    params: RecordParams,
    events: Vec<AuditEvent>,
}

/// One approval, its viewers and its events in one statement (`text`, from
/// the backend), which inserts the viewers and events only when it inserted
/// the approval.
fn fused_issue_in<'c, C: Connection>(conn: &'c mut C, fused: &'c Fused<FusedIssue>) -> WriteFuture<'c, ()> {
    Box::pin(async move {
        let FusedIssue { record, params, events } = &fused.item;
        // Its rows add up to how many approvals it inserted (0 or 1); all of
        // them are fetched, so a text of several statements runs to its end.
        let mut insert = bind_record!(db::query_scalar::<i64>(db::AssertSqlSafe(fused.sql())), record, params);
        for viewer in &params.viewers {
            insert = insert.bind(viewer);
        }
        for event in events {
            insert = bind_event!(insert, event);
        }
        let inserted: i64 = insert.fetch_all(&mut *conn).await?.into_iter().sum();
        if inserted == 0 {
            return Err(StoreError::DuplicateApproval(record.approval_id.clone()));
        }
        Ok(())
    })
}

pub(crate) fn apply_in<'c, B: SqlBackend>(
    conn: &'c mut B::Conn,
    (transitions, events): &'c (Vec<Transition>, Vec<AuditEvent>),
) -> WriteFuture<'c, Vec<TransitionOutcome>> {
    Box::pin(async move {
        // A chain never marks a conversation due (see chain.rs).
        let outcomes = match Chain::of(transitions) {
            Some(chain) => match chain.split(transition_in(&mut *conn, &chain.fused).await?) {
                Split::Done(outcomes) => outcomes,
                Split::SecondToRun(first) => vec![*first, transition_in(&mut *conn, chain.second()).await?],
            },
            None => {
                let mut outcomes = Vec::with_capacity(transitions.len());
                for transition in transitions {
                    outcomes.push(transition_in(&mut *conn, transition).await?);
                }
                outcomes
            }
        };
        for (transition, outcome) in transitions.iter().zip(&outcomes) {
            if let (true, TransitionOutcome::Moved(record)) = (transition.update.continuation, outcome) {
                mark_due_in::<B>(&mut *conn, &record.conversation_id).await?;
            }
        }
        // Events are appended after every update, in the order the in-memory
        // store appends them, so the log lock is held only until commit.
        let mut appended: Vec<AuditEvent> = Vec::new();
        for (transition, outcome) in transitions.iter().zip(&outcomes) {
            if matches!(outcome, TransitionOutcome::Moved(_)) {
                appended.extend(transition.events.iter().cloned());
            }
        }
        appended.extend(events.iter().cloned());
        append_in::<B>(conn, &appended).await?;
        Ok(outcomes)
    })
}

fn renew_leases_in<'c, C: Connection>(
    conn: &'c mut C,
    (executor, until): &'c (String, Millis),
) -> WriteFuture<'c, u64> {
    Box::pin(async move { db::query(sql::RENEW_LEASES).bind(executor).bind(until).execute(conn).await })
}

/// One chunk of prunable approvals and their viewers; the approvals removed.
fn prune_approvals_in<'c, C: Connection>(conn: &'c mut C, before: &'c Millis) -> WriteFuture<'c, u64> {
    Box::pin(async move {
        let chunk = i64::try_from(sql::PRUNE_CHUNK).unwrap_or(i64::MAX);
        let removed: Vec<String> =
            db::query_scalar(sql::PRUNE_APPROVALS).bind(*before).bind(chunk).fetch_all(&mut *conn).await?;
        for ids in removed.chunks(sql::VIEWERS_PER_INSERT) {
            let params: Vec<String> = (1..=ids.len()).map(|n| format!("${n}")).collect();
            let text = format!("DELETE FROM approval_viewers WHERE approval_id IN ({})", params.join(", "));
            let mut delete = db::query(db::AssertSqlSafe(text));
            for id in ids {
                delete = delete.bind(id);
            }
            delete.execute(&mut *conn).await?;
        }
        Ok(u64::try_from(removed.len()).unwrap_or(u64::MAX))
    })
}

/// One chunk of a prune statement: the statement (over the time before
/// which rows go, and the chunk's size) and that time. (A struct, not a
/// tuple: the write's data then has no lifetime parameter, which rustc needs
/// to see the write's future is `Send` for every backend.)
struct PruneChunk {
    text: &'static str,
    before: Millis,
}

/// One chunk of a prune statement; the rows it removed.
fn prune_chunk_in<'c, C: Connection>(conn: &'c mut C, prune: &'c PruneChunk) -> WriteFuture<'c, u64> {
    Box::pin(async move {
        let chunk = i64::try_from(sql::PRUNE_CHUNK).unwrap_or(i64::MAX);
        db::query(prune.text).bind(prune.before).bind(chunk).execute(conn).await
    })
}

fn save_conversation_in<'c, C: Connection>(
    conn: &'c mut C,
    save: &'c ConversationSave,
) -> WriteFuture<'c, Option<i64>> {
    Box::pin(async move {
        let query = match save.expected_version {
            None => db::query(sql::CREATE_CONVERSATION)
                .bind(&save.conversation_id)
                .bind(&save.messages)
                .bind(save.at)
                .bind(&save.owner),
            Some(version) => db::query(sql::UPDATE_CONVERSATION)
                .bind(&save.conversation_id)
                .bind(&save.messages)
                .bind(save.at)
                .bind(version),
        };
        let saved = query.execute(conn).await?;
        Ok((saved == 1).then(|| save.expected_version.unwrap_or(0) + 1))
    })
}

fn save_decision_in<'c, C: Connection>(
    conn: &'c mut C,
    (decision, body): &'c (StoredDecision, String),
) -> WriteFuture<'c, ()> {
    Box::pin(async move {
        let inserted = db::query(sql::INSERT_DECISION)
            .bind(&decision.id)
            .bind(decision.scope.kind())
            .bind(decision.scope.key())
            .bind(&decision.tool_name)
            .bind(decision.created_at)
            .bind(decision.expires_at)
            .bind(body)
            .bind(decision.uses_left)
            .bind(&decision.created_by)
            .execute(conn)
            .await?;
        if inserted == 0 {
            return Err(StoreError::DuplicateDecision(decision.id.clone()));
        }
        Ok(())
    })
}

async fn use_decision_in<B: SqlBackend>(
    conn: &mut B::Conn,
    (id, now, events): &(String, Millis, Vec<AuditEvent>),
) -> Result<Option<StoredDecision>, StoreError> {
    let row = db::query_as::<DecisionRow>(sql::USE_DECISION).bind(id).bind(*now).fetch_optional(&mut *conn).await?;
    let Some(row) = row else { return Ok(None) };
    let used = row.into_decision()?;
    append_in::<B>(conn, events).await?;
    Ok(Some(used))
}

async fn use_decision_issuing_in<B: SqlBackend>(
    conn: &mut B::Conn,
    (id, now, records, events): &(String, Millis, Vec<ApprovalRecord>, Vec<AuditEvent>),
) -> Result<Option<StoredDecision>, StoreError> {
    let row = db::query_as::<DecisionRow>(sql::USE_DECISION).bind(id).bind(*now).fetch_optional(&mut *conn).await?;
    let Some(row) = row else { return Ok(None) };
    let used = row.into_decision()?;
    let issue = (records.clone(), events.clone());
    issue_in::<B>(conn, &issue).await?;
    Ok(Some(used))
}

fn revoke_decision_in<'c, C: Connection>(conn: &'c mut C, id: &'c String) -> WriteFuture<'c, Option<StoredDecision>> {
    Box::pin(async move {
        let row = db::query_as::<DecisionRow>(sql::DELETE_DECISION).bind(id).fetch_optional(conn).await?;
        row.map(DecisionRow::into_decision).transpose()
    })
}

/// A transition's JSON columns as written (the votes and their count when it writes them).
struct TransitionColumns {
    decision: Option<String>,
    output: Option<String>,
    votes: Option<(Option<String>, i64)>,
}

impl TransitionColumns {
    fn new(transition: &Transition) -> Result<Self, StoreError> {
        let votes = match &transition.update.votes {
            Some(votes) => Some((sql::votes_text(votes)?, sql::vote_count(votes))),
            None => None,
        };
        Ok(Self {
            decision: sql::json_opt(transition.update.decision.as_ref(), "a decision")?,
            output: sql::json_opt(transition.update.output.as_ref(), "an output")?,
            votes,
        })
    }
}

type RecordQuery<'q> = db::QueryAs<'q, RecordRow>;

/// Binds a transition's parameters in [`sql::transition_sql`] order.
fn bind_transition<'q>(
    mut query: RecordQuery<'q>,
    transition: &'q Transition,
    columns: &'q TransitionColumns,
) -> RecordQuery<'q> {
    query = query
        .bind(&transition.approval_id)
        .bind(transition.from.as_str())
        .bind(transition.to.as_str())
        .bind(transition.at)
        .bind(&columns.decision)
        .bind(&columns.output)
        .bind(&transition.update.superseded_by);
    for value in sql::guard_values(transition.guard).into_iter().flatten() {
        query = query.bind(value);
    }
    if let (LeaseWrite::Set, Some(set)) = (LeaseWrite::of(transition), &transition.update.lease) {
        query = query.bind(&set.executor).bind(set.until);
    }
    if let Some((votes, count)) = &columns.votes {
        query = query.bind(votes).bind(*count);
    }
    query
}

/// One conditional transition: the update, or the row as it is when it did not apply.
async fn transition_in<C: Connection>(conn: &mut C, transition: &Transition) -> Result<TransitionOutcome, StoreError> {
    let columns = TransitionColumns::new(transition)?;
    let text = sql::transition_sql(transition.guard, LeaseWrite::of(transition), VotesWrite::of(transition));
    let update = bind_transition(db::query_as::<RecordRow>(text), transition, &columns);
    let moved = update.fetch_optional(&mut *conn).await?;
    outcome(conn, transition, moved).await
}

/// A transition and its own events in one statement (`text`, from the backend).
fn fused_transition_in<'c, C: Connection>(
    conn: &'c mut C,
    fused: &'c Fused<Transition>,
) -> WriteFuture<'c, TransitionOutcome> {
    Box::pin(fused_transition(conn, &fused.item, fused.sql()))
}

/// A fused pair in one statement (`text`, from the backend); when the first
/// did not move and the second applies, the second in one more.
fn fused_chain_in<'c, B: SqlBackend>(
    conn: &'c mut B::Conn,
    fused: &'c Fused<Chain>,
) -> WriteFuture<'c, Vec<TransitionOutcome>> {
    Box::pin(async move {
        let chain = &fused.item;
        match chain.split(fused_transition(&mut *conn, &chain.fused, fused.sql()).await?) {
            Split::Done(outcomes) => Ok(outcomes),
            Split::SecondToRun(first) => {
                // The second has at most the pair's events: the backend fuses it too.
                let second = B::fused_transition_sql(chain.second()).ok_or_else(|| {
                    StoreError::Unavailable("no single statement for the second transition of a pair".into())
                })?;
                Ok(vec![*first, fused_transition(conn, chain.second(), fused.sql_of(&second)).await?])
            }
        }
    })
}

async fn fused_transition<C: Connection>(
    conn: &mut C,
    transition: &Transition,
    text: String,
) -> Result<TransitionOutcome, StoreError> {
    let columns = TransitionColumns::new(transition)?;
    let mut update = bind_transition(db::query_as::<RecordRow>(db::AssertSqlSafe(text)), transition, &columns);
    for event in &transition.events {
        update = bind_event!(update, event);
    }
    // The update's row, if it moved; all rows are fetched, so a text of
    // several statements runs to its end (only the update returns rows).
    let moved = update.fetch_all(&mut *conn).await?.into_iter().next();
    outcome(conn, transition, moved).await
}

/// The outcome of a transition whose update returned `moved`: when it did
/// not move, the record as it is now (or that there is none).
async fn outcome<C: Connection>(
    conn: &mut C,
    transition: &Transition,
    moved: Option<RecordRow>,
) -> Result<TransitionOutcome, StoreError> {
    if let Some(row) = moved {
        return Ok(TransitionOutcome::Moved(row.into_record()?));
    }
    let row =
        db::query_as::<RecordRow>(sql::SELECT_RECORD).bind(&transition.approval_id).fetch_optional(&mut *conn).await?;
    match row {
        Some(row) => Ok(TransitionOutcome::Unmoved(row.into_record()?)),
        None => Ok(TransitionOutcome::Missing),
    }
}

/// Appends events in order, each taking the next `seq`: one statement per
/// [`sql::EVENTS_PER_INSERT`] events.
pub(crate) async fn append_in<B: SqlBackend>(conn: &mut B::Conn, events: &[AuditEvent]) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    for chunk in events.chunks(sql::EVENTS_PER_INSERT) {
        let mut insert = db::query(db::AssertSqlSafe(B::insert_events_sql(chunk.len())));
        for event in chunk {
            insert = bind_event!(insert, event);
        }
        insert.execute(&mut *conn).await?;
    }
    Ok(())
}
