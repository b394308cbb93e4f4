//! History terms on SQL ([`toolgate::ledger::HistoryStore`]): the calls of a
//! window and scope, read through the partial indexes of migration 0009
//! (`audit_events_calls*`: the events that are calls, by time, by owner and
//! time), and the guarded append: the guards' reads and the append in one
//! write transaction that holds the audit log's lock (SQLite's write lock;
//! on Postgres the advisory lock every append takes), so no call is
//! appended between a guard's read and this append. The guarded issue is
//! the same transaction with an issue in place of the append, and the
//! guarded apply (a claim judged on the history) with transitions.

use toolgate::ledger::{
    ApprovalRecord, AuditEvent, HistoryEntry, HistoryGuard, HistoryQuery, HistoryScope, OWNER_SEPARATOR, StoreError,
    Transition, TransitionOutcome, entries_in,
};

use crate::backend::SqlBackend;
use crate::db;
use crate::ops::{Operations, append_in, apply_in, issue_in};
use crate::sql::{EventRow, event_columns};

/// The kinds of event that are calls (see [`entries_in`]).
const CALL_KINDS: &str = "kind IN ('executed', 'allowed', 'failed', 'approved', 'interrupted')";

impl<B: SqlBackend> Operations<B> {
    pub(crate) async fn history(&self, query: &HistoryQuery) -> Result<Vec<HistoryEntry>, StoreError> {
        let events = select(query)?.fetch_all(self.backend().reader()).await?;
        let events: Vec<AuditEvent> = events.into_iter().map(EventRow::into_event).collect::<Result<_, _>>()?;
        Ok(entries_in(&events, query))
    }

    pub(crate) async fn append_if(&self, guards: &[HistoryGuard], events: &[AuditEvent]) -> Result<bool, StoreError> {
        self.backend()
            .write((guards.to_vec(), events.to_vec()), |conn, data| Box::pin(append_if_in::<B>(conn, data)))
            .await
    }

    pub(crate) async fn issue_if(
        &self,
        guards: &[HistoryGuard],
        records: &[ApprovalRecord],
        events: &[AuditEvent],
    ) -> Result<bool, StoreError> {
        let data = (guards.to_vec(), records.to_vec(), events.to_vec());
        self.backend().write(data, |conn, data| Box::pin(issue_if_in::<B>(conn, data))).await
    }

    pub(crate) async fn apply_if(
        &self,
        guards: &[HistoryGuard],
        transitions: &[Transition],
    ) -> Result<Option<Vec<TransitionOutcome>>, StoreError> {
        let data = (guards.to_vec(), transitions.to_vec());
        self.backend().write(data, |conn, data| Box::pin(apply_if_in::<B>(conn, data))).await
    }
}

/// The guards' reads, then the transitions (with their events) if each guard still counts what it read.
async fn apply_if_in<B: SqlBackend>(
    conn: &mut B::Conn,
    (guards, transitions): &(Vec<HistoryGuard>, Vec<Transition>),
) -> Result<Option<Vec<TransitionOutcome>>, StoreError> {
    if !guards_hold_in::<B>(conn, guards).await? {
        return Ok(None);
    }
    let apply = (transitions.clone(), Vec::new());
    apply_in::<B>(conn, &apply).await.map(Some)
}

/// The guards' reads, then the append if each still counts what it read.
async fn append_if_in<B: SqlBackend>(
    conn: &mut B::Conn,
    (guards, events): &(Vec<HistoryGuard>, Vec<AuditEvent>),
) -> Result<bool, StoreError> {
    if !guards_hold_in::<B>(conn, guards).await? {
        return Ok(false);
    }
    append_in::<B>(conn, events).await?;
    Ok(true)
}

/// The guards' reads, then the issue if each still counts what it read.
async fn issue_if_in<B: SqlBackend>(
    conn: &mut B::Conn,
    (guards, records, events): &(Vec<HistoryGuard>, Vec<ApprovalRecord>, Vec<AuditEvent>),
) -> Result<bool, StoreError> {
    if !guards_hold_in::<B>(conn, guards).await? {
        return Ok(false);
    }
    let issue = (records.clone(), events.clone());
    issue_in::<B>(conn, &issue).await?;
    Ok(true)
}

/// Takes the audit log's lock, then whether each guard still counts what it read.
async fn guards_hold_in<B: SqlBackend>(conn: &mut B::Conn, guards: &[HistoryGuard]) -> Result<bool, StoreError> {
    if let Some(lock) = B::LOCK_AUDIT_LOG {
        db::query(lock).execute(&mut *conn).await?;
    }
    for guard in guards {
        let rows: Vec<EventRow> = select(&guard.query)?.fetch_all(&mut *conn).await?;
        let events: Vec<AuditEvent> = rows.into_iter().map(EventRow::into_event).collect::<Result<_, _>>()?;
        if entries_in(&events, &guard.query).len() != guard.count {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The events that may be the query's calls, oldest first.
fn select(query: &HistoryQuery) -> Result<db::QueryAs<'static, EventRow>, StoreError> {
    let mut text = format!("SELECT {} FROM audit_events WHERE {CALL_KINDS} AND at >= $1", event_columns!());
    let scope = match &query.scope {
        HistoryScope::Principal(Some(_)) => " AND (owner = $2 OR (owner IS NULL AND principal = $2))".to_owned(),
        HistoryScope::Principal(None) => " AND owner IS NULL AND principal IS NULL".to_owned(),
        HistoryScope::Conversation(_) => {
            " AND (CASE WHEN owner IS NULL THEN conversation_id ELSE owner || $3 || conversation_id END) = $2"
                .to_owned()
        }
        HistoryScope::Everyone => String::new(),
        HistoryScope::Principals(members) if members.is_empty() => " AND 1 = 0".to_owned(),
        HistoryScope::Principals(members) => {
            let list: Vec<String> = (0..members.len()).map(|index| format!("${}", index + 2)).collect();
            let list = list.join(", ");
            format!(" AND (owner IN ({list}) OR (owner IS NULL AND principal IN ({list})))")
        }
        other => return Err(StoreError::Unavailable(format!("this store cannot read the history of {other:?}"))),
    };
    text.push_str(&scope);
    text.push_str(" ORDER BY seq");
    let mut select = db::query_as::<EventRow>(db::AssertSqlSafe(text)).bind(query.since);
    match &query.scope {
        HistoryScope::Principal(Some(principal)) => select = select.bind(principal.clone()),
        HistoryScope::Conversation(key) => select = select.bind(key.clone()).bind(OWNER_SEPARATOR.to_string()),
        HistoryScope::Principals(members) => {
            for member in members {
                select = select.bind(member.clone());
            }
        }
        _ => {}
    }
    Ok(select)
}
