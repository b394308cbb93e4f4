//! The store operations, written once and compiled once per backend.
//!
//! `sqlite.rs` and `postgres.rs` each include this file as their `ops`
//! module (`#[path = "ops.rs"]`), after defining `Db` (the sqlx database),
//! `Backend` (the pools) with `write` (a transaction that holds the write
//! lock it needs), `writer` (the pool single writing statements run on) and
//! `reader` (a pool for reads), `lock_log` (serialises
//! audit appends until commit) and `select_records` (approvals by id).
//! Generic sqlx code over `Database` needs long higher-ranked bounds; a
//! concrete `Db` per copy keeps every query plain.

use std::collections::HashMap;

use sqlx::Database;
use toolgate::ledger::{
    ApprovalRecord, AuditEvent, AuditQuery, DecisionQuery, Millis, StoreError, StoredConversation, StoredDecision,
    Transition, TransitionOutcome,
};

use super::{Backend, Db, lock_log};
use crate::sql::{self, ConversationRow, DecisionRow, EventRow, LeaseWrite, RecordParams, RecordRow, db_error};

type Conn = <Db as Database>::Connection;

impl Backend {
    pub(crate) async fn issue(&self, records: &[ApprovalRecord], events: &[AuditEvent]) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        for record in records {
            let params = RecordParams::new(record)?;
            let done = sqlx::query(sql::INSERT_RECORD)
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
                .execute(&mut *tx)
                .await
                .map_err(db_error)?;
            if done.rows_affected() == 0 {
                tx.rollback().await.map_err(db_error)?;
                return Err(StoreError::DuplicateApproval(params.record.approval_id.clone()));
            }
        }
        append_in(&mut tx, events).await?;
        tx.commit().await.map_err(db_error)
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
        let mut tx = self.write().await?;
        let mut outcomes = Vec::with_capacity(transitions.len());
        // Events are appended after every update, in the order the in-memory
        // store appends them, so the log lock is held only until commit.
        let mut appended: Vec<&AuditEvent> = Vec::new();
        for transition in transitions {
            let outcome = transition_in(&mut tx, transition).await?;
            if matches!(outcome, TransitionOutcome::Moved(_)) {
                appended.extend(&transition.events);
            }
            outcomes.push(outcome);
        }
        appended.extend(events);
        append_in(&mut tx, appended).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(outcomes)
    }

    pub(crate) async fn append(&self, events: &[AuditEvent]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut tx = self.write().await?;
        append_in(&mut tx, events).await?;
        tx.commit().await.map_err(db_error)
    }

    pub(crate) async fn renew_leases(&self, executor: &str, until: Millis) -> Result<u64, StoreError> {
        let mut tx = self.write().await?;
        let done =
            sqlx::query(sql::RENEW_LEASES).bind(executor).bind(until).execute(&mut *tx).await.map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(done.rows_affected())
    }

    pub(crate) async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditEvent>, StoreError> {
        if query.limit == Some(0) {
            return Ok(Vec::new());
        }
        let text = sql::audit_sql(query);
        let mut select = sqlx::query_as::<_, EventRow>(sqlx::AssertSqlSafe(text));
        if let Some(conversation_id) = &query.conversation_id {
            select = select.bind(conversation_id);
        }
        if let Some(since) = query.since {
            select = select.bind(since);
        }
        if let Some(after) = query.after_seq {
            select = select.bind(after);
        }
        if let Some(limit) = query.limit {
            select = select.bind(sql::limit_param(limit));
        }
        let rows = select.fetch_all(self.reader()).await.map_err(db_error)?;
        rows.into_iter().map(EventRow::into_event).collect()
    }

    pub(crate) async fn conversation(&self, conversation_id: &str) -> Result<Option<StoredConversation>, StoreError> {
        let row = sqlx::query_as::<_, ConversationRow>(sql::SELECT_CONVERSATION)
            .bind(conversation_id)
            .fetch_optional(self.reader())
            .await
            .map_err(db_error)?;
        row.map(ConversationRow::into_conversation).transpose()
    }

    pub(crate) async fn save_conversation(
        &self,
        conversation_id: &str,
        messages: &serde_json::Value,
        expected_version: Option<i64>,
        at: Millis,
    ) -> Result<Option<i64>, StoreError> {
        let messages = sql::messages_text(messages)?;
        let query = match expected_version {
            None => sqlx::query(sql::CREATE_CONVERSATION).bind(conversation_id).bind(&messages).bind(at),
            Some(version) => {
                sqlx::query(sql::UPDATE_CONVERSATION).bind(conversation_id).bind(&messages).bind(at).bind(version)
            }
        };
        // One conditional statement is atomic on its own: no transaction round trips.
        let done = query.execute(self.writer()).await.map_err(db_error)?;
        Ok((done.rows_affected() == 1).then(|| expected_version.unwrap_or(0) + 1))
    }

    pub(crate) async fn save_decision(&self, decision: &StoredDecision) -> Result<(), StoreError> {
        let body = sql::decision_body(decision)?;
        let mut tx = self.write().await?;
        let done = sqlx::query(sql::INSERT_DECISION)
            .bind(&decision.id)
            .bind(decision.scope.kind())
            .bind(decision.scope.key())
            .bind(&decision.tool_name)
            .bind(decision.created_at)
            .bind(decision.expires_at)
            .bind(&body)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        if done.rows_affected() == 0 {
            tx.rollback().await.map_err(db_error)?;
            return Err(StoreError::DuplicateDecision(decision.id.clone()));
        }
        tx.commit().await.map_err(db_error)
    }

    pub(crate) async fn decisions(&self, query: &DecisionQuery) -> Result<Vec<StoredDecision>, StoreError> {
        // One statement reads one snapshot: no transaction round trips.
        let rows = sqlx::query_as::<_, DecisionRow>(sql::SELECT_DECISIONS)
            .bind(query.now)
            .bind(&query.conversation_id)
            .bind(&query.principal)
            .fetch_all(self.reader())
            .await
            .map_err(db_error)?;
        rows.into_iter().map(DecisionRow::into_decision).collect()
    }

    pub(crate) async fn revoke_decision(&self, id: &str) -> Result<Option<StoredDecision>, StoreError> {
        let mut tx = self.write().await?;
        let row = sqlx::query_as::<_, DecisionRow>(sql::DELETE_DECISION)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?;
        // A row that cannot be read back is not removed: the error rolls back.
        let revoked = row.map(DecisionRow::into_decision).transpose()?;
        tx.commit().await.map_err(db_error)?;
        Ok(revoked)
    }
}

/// One conditional transition: the update, or the row as it is when it did not apply.
async fn transition_in(conn: &mut Conn, transition: &Transition) -> Result<TransitionOutcome, StoreError> {
    let lease = LeaseWrite::of(transition);
    let text = sql::transition_sql(transition.guard, lease);
    let decision = sql::json_opt(transition.update.decision.as_ref(), "a decision")?;
    let output = sql::json_opt(transition.update.output.as_ref(), "an output")?;
    let mut update = sqlx::query_as::<_, RecordRow>(text)
        .bind(&transition.approval_id)
        .bind(transition.from.as_str())
        .bind(transition.to.as_str())
        .bind(transition.at)
        .bind(decision)
        .bind(output);
    if let Some(at) = sql::guard_time(transition.guard) {
        update = update.bind(at);
    }
    if let (LeaseWrite::Set, Some(set)) = (lease, &transition.update.lease) {
        update = update.bind(&set.executor).bind(set.until);
    }
    if let Some(row) = update.fetch_optional(&mut *conn).await.map_err(db_error)? {
        return Ok(TransitionOutcome::Moved(row.into_record()?));
    }
    let row = sqlx::query_as::<_, RecordRow>(sql::SELECT_RECORD)
        .bind(&transition.approval_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)?;
    match row {
        Some(row) => Ok(TransitionOutcome::Unmoved(row.into_record()?)),
        None => Ok(TransitionOutcome::Missing),
    }
}

/// Appends events in order, each taking the next `seq`.
async fn append_in<'e>(conn: &mut Conn, events: impl IntoIterator<Item = &'e AuditEvent>) -> Result<(), StoreError> {
    let mut events = events.into_iter().peekable();
    if events.peek().is_none() {
        return Ok(());
    }
    lock_log(conn).await?;
    for event in events {
        sqlx::query(sql::INSERT_EVENT)
            .bind(event.at)
            .bind(event.kind.as_str())
            .bind(&event.approval_id)
            .bind(&event.tool_call_id)
            .bind(&event.conversation_id)
            .bind(&event.principal)
            .bind(sql::event_data(event)?)
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
    }
    Ok(())
}
