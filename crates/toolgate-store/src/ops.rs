//! The store operations, written once and compiled once per backend.
//!
//! `sqlite.rs` and `postgres.rs` each include this file as their `ops`
//! module (`#[path = "ops.rs"]`), after defining `db` (the query API:
//! `query`, `query_as`, `query_scalar`, `AssertSqlSafe`, `QueryAs`, the
//! connection type `Conn` and `db_error`, as sqlx has them; on SQLite from
//! `lite.rs`, which runs them on rusqlite), `Backend` with `write` (runs an operation in a transaction that holds the
//! write lock it needs), `write_statement` (runs a one-statement operation,
//! atomic on its own), `write_fused` (runs the text of `fused_issue_sql` or
//! `fused_transition_sql`: one statement on Postgres, several in a
//! transaction on SQLite), `reader` (a pool for reads) and `select_records`
//! (approvals by id), `insert_events_sql` (appends events, serialised
//! with other appends until commit), and the continuation marks' texts:
//! `MARK_DUE` and `MARK_AND_CLAIM` (see `sql::mark_due_sql!` and
//! `sql::mark_and_claim_sql!`, each drawing the backend's next generation),
//! and whether drawing a generation needs a transaction of its own
//! (`GENERATION_NEEDS_TRANSACTION`: a counter row on SQLite, a sequence on
//! Postgres).
//!
//! A transition that marks its conversation due to continue
//! (`Update::continuation`) runs in a transaction, never fused: the mark is
//! written after the update moved, before commit. Every other transition,
//! with or without votes, takes the fused paths.
//!
//! Generic code over both drivers would need long higher-ranked bounds; a
//! concrete `db` per copy keeps every query plain.

use std::collections::HashMap;

use toolgate::ledger::{
    ApprovalQuery, ApprovalRecord, AuditEvent, AuditQuery, AuditView, ContinuationClaim, ConversationRead,
    DecisionQuery, Millis, Pruned, StoreError, StoredConversation, StoredDecision, Transition, TransitionOutcome,
};

use super::db::{self, Conn, db_error};
use super::{
    Backend, GENERATION_NEEDS_TRANSACTION, MARK_AND_CLAIM, MARK_DUE, fused_issue_sql, fused_transition_sql,
    insert_events_sql,
};
use crate::batch::WriteFuture;
use crate::chain::{Chain, Split};
use crate::sql::{
    self, ConversationRow, DecisionRow, EventRow, LeaseWrite, ReadRow, RecordParams, RecordRow, VotesWrite,
};

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

impl Backend {
    pub(crate) async fn issue(&self, records: &[ApprovalRecord], events: &[AuditEvent]) -> Result<(), StoreError> {
        if let [record] = records {
            let params = RecordParams::new(record)?;
            if let Some(text) = fused_issue_sql(events.len(), params.viewers.len()) {
                let item = FusedIssue { record: record.clone(), params, events: events.to_vec() };
                return self.write_fused(Fused::new(item, text), fused_issue_in).await;
            }
        }
        self.write((records.to_vec(), events.to_vec()), issue_in).await
    }

    pub(crate) async fn approvals(&self, approval_ids: &[String]) -> Result<Vec<ApprovalRecord>, StoreError> {
        if approval_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut found: HashMap<String, ApprovalRecord> = HashMap::new();
        for row in self.select_records(approval_ids).await? {
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
        let rows = self.select_records_for_calls(conversation_id, tool_call_ids).await?;
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
                && let Some(text) = fused_transition_sql(transition)
            {
                let outcome = self.write_fused(Fused::new(transition.clone(), text), fused_transition_in).await?;
                return Ok(vec![outcome]);
            }
            if let Some(chain) = Chain::of(transitions)
                && let Some(text) = fused_transition_sql(&chain.fused)
            {
                return self.write_fused(Fused::new(chain, text), fused_chain_in).await;
            }
        }
        self.write((transitions.to_vec(), events.to_vec()), apply_in).await
    }

    pub(crate) async fn append(&self, events: &[AuditEvent]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        self.write(events.to_vec(), |conn, events| Box::pin(append_in(conn, events))).await
    }

    pub(crate) async fn renew_leases(&self, executor: &str, until: Millis) -> Result<u64, StoreError> {
        self.write_statement((executor.to_owned(), until), renew_leases_in).await
    }

    /// Prunes in chunks of at most [`sql::PRUNE_CHUNK`] rows, each its own
    /// write: events first (they look at the approvals), then approvals (with
    /// their viewers, in the same transaction), then conversations.
    pub(crate) async fn prune(&self, before: Millis) -> Result<Pruned, StoreError> {
        let mut removed = [0u64; 3];
        for (step, count) in removed.iter_mut().enumerate() {
            loop {
                let chunk = match step {
                    0 => self.write_statement((sql::PRUNE_EVENTS, before), prune_chunk_in).await?,
                    1 => self.write(before, prune_approvals_in).await?,
                    _ => self.write_statement((sql::PRUNE_CONVERSATIONS, before), prune_chunk_in).await?,
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
        let rows = select.fetch_all(self.reader()).await.map_err(db_error)?;
        rows.into_iter().map(EventRow::into_event).collect()
    }

    pub(crate) async fn conversation(&self, conversation_id: &str) -> Result<Option<StoredConversation>, StoreError> {
        let row = db::query_as::<ConversationRow>(sql::SELECT_CONVERSATION)
            .bind(conversation_id)
            .fetch_optional(self.reader())
            .await
            .map_err(db_error)?;
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
        self.write_statement(save, save_conversation_in).await
    }

    pub(crate) async fn save_decision(&self, decision: &StoredDecision) -> Result<(), StoreError> {
        let body = sql::decision_body(decision)?;
        self.write_statement((decision.clone(), body), save_decision_in).await
    }

    pub(crate) async fn decisions(&self, query: &DecisionQuery) -> Result<Vec<StoredDecision>, StoreError> {
        // One statement reads one snapshot: no transaction round trips.
        let rows = db::query_as::<DecisionRow>(sql::SELECT_DECISIONS)
            .bind(query.now)
            .bind(&query.conversation_id)
            .bind(&query.principal)
            .fetch_all(self.reader())
            .await
            .map_err(db_error)?;
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
            .fetch_all(self.reader())
            .await
            .map_err(db_error)?;
        sql::conversation_read(rows)
    }

    pub(crate) async fn revoke_decision(&self, id: &str) -> Result<Option<StoredDecision>, StoreError> {
        // In a transaction: a row that cannot be read back is not removed (the error rolls back).
        self.write(id.to_owned(), revoke_decision_in).await
    }

    /// The inbox listing (see [`sql::list_sql`]): one statement, one snapshot.
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
            select = select.bind(name).bind(format!("{}{name}", toolgate::ledger::OWNER_SEPARATOR));
        }
        let rows = select.bind(sql::limit_param(query.limit)).fetch_all(self.reader()).await.map_err(db_error)?;
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
        let generation = match (create, GENERATION_NEEDS_TRANSACTION) {
            (false, _) => self.write_statement(ask, claim_in).await?,
            (true, true) => self.write(ask, mark_and_claim_in).await?,
            (true, false) => self.write_statement(ask, mark_and_claim_in).await?,
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
        self.write((claim.clone(), executor.to_owned()), finish_continuation_in).await
    }

    /// The marks nobody holds at `now`, oldest generation first.
    pub(crate) async fn due_continuations(&self, now: Millis, limit: usize) -> Result<Vec<String>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        db::query_scalar::<String>(sql::DUE_CONTINUATIONS)
            .bind(now)
            .bind(sql::limit_param(limit))
            .fetch_all(self.reader())
            .await
            .map_err(db_error)
    }
}

/// A claim asked for: the conversation, the executor, until when, and now.
struct ClaimAsk {
    conversation_id: String,
    executor: String,
    until: Millis,
    now: Millis,
}

fn claim_in<'c>(conn: &'c mut Conn, ask: &'c ClaimAsk) -> WriteFuture<'c, Option<i64>> {
    Box::pin(async move {
        db::query_scalar::<i64>(sql::CLAIM_CONTINUATION)
            .bind(&ask.conversation_id)
            .bind(&ask.executor)
            .bind(ask.until)
            .bind(ask.now)
            .fetch_optional(conn)
            .await
            .map_err(db_error)
    })
}

fn mark_and_claim_in<'c>(conn: &'c mut Conn, ask: &'c ClaimAsk) -> WriteFuture<'c, Option<i64>> {
    Box::pin(async move {
        // On SQLite the text draws the generation first (a statement without rows).
        let rows = db::query_as::<(i64, bool)>(MARK_AND_CLAIM)
            .bind(&ask.conversation_id)
            .bind(&ask.executor)
            .bind(ask.until)
            .bind(ask.now)
            .fetch_all(conn)
            .await
            .map_err(db_error)?;
        Ok(rows.into_iter().find_map(|(generation, claimed)| claimed.then_some(generation)))
    })
}

/// Deletes the mark when it is still the claim's and nobody else holds it
/// (`true`); else releases it when the executor holds it (`false`); else
/// `true` only when there is no mark at all.
fn finish_continuation_in<'c>(
    conn: &'c mut Conn,
    (claim, executor): &'c (ContinuationClaim, String),
) -> WriteFuture<'c, bool> {
    Box::pin(async move {
        let cleared = db::query_scalar::<i64>(sql::FINISH_CONTINUATION)
            .bind(&claim.conversation_id)
            .bind(claim.generation)
            .bind(executor)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db_error)?;
        if cleared.is_some() {
            return Ok(true);
        }
        let released = db::query_scalar::<i64>(sql::RELEASE_CONTINUATION)
            .bind(&claim.conversation_id)
            .bind(executor)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db_error)?;
        if released.is_some() {
            return Ok(false);
        }
        let marked = db::query_scalar::<i64>(sql::CONTINUATION_GENERATION)
            .bind(&claim.conversation_id)
            .fetch_optional(conn)
            .await
            .map_err(db_error)?;
        Ok(marked.is_none())
    })
}

/// Marks a conversation due to continue with a new generation, keeping its holder.
async fn mark_due_in(conn: &mut Conn, conversation_id: &str) -> Result<(), StoreError> {
    db::query(MARK_DUE).bind(conversation_id).execute(conn).await.map_err(db_error)?;
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

fn issue_in<'c>(
    conn: &'c mut Conn,
    (records, events): &'c (Vec<ApprovalRecord>, Vec<AuditEvent>),
) -> WriteFuture<'c, ()> {
    Box::pin(async move {
        let mut viewers: Vec<(String, Millis, &str)> = Vec::with_capacity(records.len());
        for record in records {
            let params = RecordParams::new(record)?;
            let done = bind_record!(db::query(sql::INSERT_RECORD), record, &params)
                .execute(&mut *conn)
                .await
                .map_err(db_error)?;
            if done.rows_affected() == 0 {
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
            insert.execute(&mut *conn).await.map_err(db_error)?;
        }
        append_in(conn, events).await
    })
}

/// One approval to issue on a fused path: the record, its columns as
/// written (with its viewers), and its events.
pub(crate) struct FusedIssue {
    record: ApprovalRecord,
    params: RecordParams,
    events: Vec<AuditEvent>,
}

/// A fused operation's data: what it writes, the text of `fused_issue_sql`
/// or `fused_transition_sql` that writes it, and whether that text brings its
/// own transaction (on SQLite, an operation alone in its batch opens and
/// commits it in the same text: one round trip, not three).
pub(crate) struct Fused<T> {
    item: T,
    text: String,
    own_transaction: bool,
}

impl<T> Fused<T> {
    fn new(item: T, text: String) -> Self {
        Self { item, text, own_transaction: false }
    }

    /// Makes the operation open and commit its own transaction.
    #[allow(dead_code, reason = "only SQLite calls it; on Postgres a fused text is one statement")]
    pub(crate) fn bring_own_transaction(&mut self) {
        self.own_transaction = true;
    }

    /// The text to run.
    fn sql(&self) -> String {
        self.sql_of(&self.text)
    }

    /// Another fused text of the same operation, as it runs.
    fn sql_of(&self, text: &str) -> String {
        if self.own_transaction { format!("BEGIN IMMEDIATE; {text}; COMMIT") } else { text.to_owned() }
    }
}

/// One approval, its viewers and its events in one statement (`text`, from
/// the backend), which inserts the viewers and events only when it inserted
/// the approval.
fn fused_issue_in<'c>(conn: &'c mut Conn, fused: &'c Fused<FusedIssue>) -> WriteFuture<'c, ()> {
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
        let inserted: i64 = insert.fetch_all(&mut *conn).await.map_err(db_error)?.into_iter().sum();
        if inserted == 0 {
            return Err(StoreError::DuplicateApproval(record.approval_id.clone()));
        }
        Ok(())
    })
}

fn apply_in<'c>(
    conn: &'c mut Conn,
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
                mark_due_in(&mut *conn, &record.conversation_id).await?;
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
        append_in(conn, &appended).await?;
        Ok(outcomes)
    })
}

fn renew_leases_in<'c>(conn: &'c mut Conn, (executor, until): &'c (String, Millis)) -> WriteFuture<'c, u64> {
    Box::pin(async move {
        let done = db::query(sql::RENEW_LEASES).bind(executor).bind(until).execute(conn).await.map_err(db_error)?;
        Ok(done.rows_affected())
    })
}

/// One chunk of prunable approvals and their viewers; the approvals removed.
fn prune_approvals_in<'c>(conn: &'c mut Conn, before: &'c Millis) -> WriteFuture<'c, u64> {
    Box::pin(async move {
        let chunk = i64::try_from(sql::PRUNE_CHUNK).unwrap_or(i64::MAX);
        let removed: Vec<String> = db::query_scalar(sql::PRUNE_APPROVALS)
            .bind(*before)
            .bind(chunk)
            .fetch_all(&mut *conn)
            .await
            .map_err(db_error)?;
        for ids in removed.chunks(sql::VIEWERS_PER_INSERT) {
            let params: Vec<String> = (1..=ids.len()).map(|n| format!("${n}")).collect();
            let text = format!("DELETE FROM approval_viewers WHERE approval_id IN ({})", params.join(", "));
            let mut delete = db::query(db::AssertSqlSafe(text));
            for id in ids {
                delete = delete.bind(id);
            }
            delete.execute(&mut *conn).await.map_err(db_error)?;
        }
        Ok(u64::try_from(removed.len()).unwrap_or(u64::MAX))
    })
}

/// One prune statement over `before`; the rows it removed.
fn prune_chunk_in<'c>(conn: &'c mut Conn, (text, before): &'c (&'static str, Millis)) -> WriteFuture<'c, u64> {
    Box::pin(async move {
        let chunk = i64::try_from(sql::PRUNE_CHUNK).unwrap_or(i64::MAX);
        let done = db::query(*text).bind(*before).bind(chunk).execute(conn).await.map_err(db_error)?;
        Ok(done.rows_affected())
    })
}

fn save_conversation_in<'c>(conn: &'c mut Conn, save: &'c ConversationSave) -> WriteFuture<'c, Option<i64>> {
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
        let done = query.execute(conn).await.map_err(db_error)?;
        Ok((done.rows_affected() == 1).then(|| save.expected_version.unwrap_or(0) + 1))
    })
}

fn save_decision_in<'c>(conn: &'c mut Conn, (decision, body): &'c (StoredDecision, String)) -> WriteFuture<'c, ()> {
    Box::pin(async move {
        let done = db::query(sql::INSERT_DECISION)
            .bind(&decision.id)
            .bind(decision.scope.kind())
            .bind(decision.scope.key())
            .bind(&decision.tool_name)
            .bind(decision.created_at)
            .bind(decision.expires_at)
            .bind(body)
            .execute(conn)
            .await
            .map_err(db_error)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::DuplicateDecision(decision.id.clone()));
        }
        Ok(())
    })
}

fn revoke_decision_in<'c>(conn: &'c mut Conn, id: &'c String) -> WriteFuture<'c, Option<StoredDecision>> {
    Box::pin(async move {
        let row =
            db::query_as::<DecisionRow>(sql::DELETE_DECISION).bind(id).fetch_optional(conn).await.map_err(db_error)?;
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
async fn transition_in(conn: &mut Conn, transition: &Transition) -> Result<TransitionOutcome, StoreError> {
    let columns = TransitionColumns::new(transition)?;
    let text = sql::transition_sql(transition.guard, LeaseWrite::of(transition), VotesWrite::of(transition));
    let update = bind_transition(db::query_as::<RecordRow>(text), transition, &columns);
    let moved = update.fetch_optional(&mut *conn).await.map_err(db_error)?;
    outcome(conn, transition, moved).await
}

/// A transition and its own events in one statement (`text`, from the backend).
fn fused_transition_in<'c>(conn: &'c mut Conn, fused: &'c Fused<Transition>) -> WriteFuture<'c, TransitionOutcome> {
    Box::pin(fused_transition(conn, &fused.item, fused.sql()))
}

/// A fused pair in one statement (`text`, from the backend); when the first
/// did not move and the second applies, the second in one more.
fn fused_chain_in<'c>(conn: &'c mut Conn, fused: &'c Fused<Chain>) -> WriteFuture<'c, Vec<TransitionOutcome>> {
    Box::pin(async move {
        let chain = &fused.item;
        match chain.split(fused_transition(&mut *conn, &chain.fused, fused.sql()).await?) {
            Split::Done(outcomes) => Ok(outcomes),
            Split::SecondToRun(first) => {
                // The second has at most the pair's events: the backend fuses it too.
                let second = fused_transition_sql(chain.second()).ok_or_else(|| {
                    StoreError::Unavailable("no single statement for the second transition of a pair".into())
                })?;
                Ok(vec![*first, fused_transition(conn, chain.second(), fused.sql_of(&second)).await?])
            }
        }
    })
}

async fn fused_transition(
    conn: &mut Conn,
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
    let moved = update.fetch_all(&mut *conn).await.map_err(db_error)?.into_iter().next();
    outcome(conn, transition, moved).await
}

/// The outcome of a transition whose update returned `moved`: when it did
/// not move, the record as it is now (or that there is none).
async fn outcome(
    conn: &mut Conn,
    transition: &Transition,
    moved: Option<RecordRow>,
) -> Result<TransitionOutcome, StoreError> {
    if let Some(row) = moved {
        return Ok(TransitionOutcome::Moved(row.into_record()?));
    }
    let row = db::query_as::<RecordRow>(sql::SELECT_RECORD)
        .bind(&transition.approval_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)?;
    match row {
        Some(row) => Ok(TransitionOutcome::Unmoved(row.into_record()?)),
        None => Ok(TransitionOutcome::Missing),
    }
}

/// Appends events in order, each taking the next `seq`: one statement per
/// [`sql::EVENTS_PER_INSERT`] events.
pub(super) async fn append_in(conn: &mut Conn, events: &[AuditEvent]) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    for chunk in events.chunks(sql::EVENTS_PER_INSERT) {
        let mut insert = db::query(db::AssertSqlSafe(insert_events_sql(chunk.len())));
        for event in chunk {
            insert = bind_event!(insert, event);
        }
        insert.execute(&mut *conn).await.map_err(db_error)?;
    }
    Ok(())
}
