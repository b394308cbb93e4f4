//! History terms on SQL ([`toolgate::ledger::HistoryStore`]): the calls of a
//! window and scope, read through the partial indexes of migrations 0009 and
//! 0014 (the events that are calls, by time, by requester and time, by
//! conversation key and time), and the guarded append: the guards' checks
//! and the append in one write transaction that holds the audit log's lock
//! from its start (SQLite's write lock; on Postgres the advisory lock every
//! append takes), so no call is appended between a guard's check and this
//! append. The guarded issue is the same transaction with an issue in place
//! of the append, and the guarded apply (a claim judged on the history) with
//! transitions.
//!
//! A guard is checked cheaply first: when no call of its window and scope
//! came after the last event its read saw (`seq > through`, a short range
//! of the primary key), it holds; otherwise its calls are read and counted
//! again, as the read that judged them counted them. A guarded append tries
//! that cheap check first as one statement on its own, outside a
//! transaction (on Postgres it takes the lock itself and checks that it saw
//! every append before it: [`SqlBackend::CURRENT_UNDER_LOCK`]), then in the
//! transaction above when that statement appended nothing.

use toolgate::ledger::{
    ApprovalRecord, AuditEvent, HistoryGuard, HistoryQuery, HistoryRead, HistoryScope, StoreError, Transition,
    TransitionOutcome, entries_in, read_of,
};

use crate::backend::SqlBackend;
use crate::db;
use crate::ops::{Operations, append_in, apply_in, bind_event, issue_in};
use crate::sql::{self, EventRow, event_columns};

/// The kinds of event that are calls (see [`entries_in`]).
const CALL_KINDS: &str = "kind IN ('executed', 'allowed', 'failed', 'approved', 'interrupted')";

impl<B: SqlBackend> Operations<B> {
    pub(crate) async fn history(&self, query: &HistoryQuery) -> Result<HistoryRead, StoreError> {
        let events = select::<B>(query)?.fetch_all(self.backend().reader()).await?;
        let events: Vec<AuditEvent> = events.into_iter().map(EventRow::into_event).collect::<Result<_, _>>()?;
        Ok(read_of(&events, query))
    }

    pub(crate) async fn append_if(&self, guards: &[HistoryGuard], events: &[AuditEvent]) -> Result<bool, StoreError> {
        let data = (guards.to_vec(), events.to_vec());
        let backend = self.backend();
        if backend.write_statement(data.clone(), |conn, data| Box::pin(append_alone_in::<B>(conn, data))).await? {
            return Ok(true);
        }
        backend.write_log_locked(data, |conn, data| Box::pin(append_if_in::<B>(conn, data))).await
    }

    pub(crate) async fn issue_if(
        &self,
        guards: &[HistoryGuard],
        records: &[ApprovalRecord],
        events: &[AuditEvent],
    ) -> Result<bool, StoreError> {
        let data = (guards.to_vec(), records.to_vec(), events.to_vec());
        self.backend().write_log_locked(data, |conn, data| Box::pin(issue_if_in::<B>(conn, data))).await
    }

    pub(crate) async fn apply_if(
        &self,
        guards: &[HistoryGuard],
        transitions: &[Transition],
    ) -> Result<Option<Vec<TransitionOutcome>>, StoreError> {
        let data = (guards.to_vec(), transitions.to_vec());
        self.backend().write_log_locked(data, |conn, data| Box::pin(apply_if_in::<B>(conn, data))).await
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

/// The append, in one statement on its own, when no call came after any
/// guard's read and (the backend's [`SqlBackend::CURRENT_UNDER_LOCK`]) the
/// statement saw every append before it; whether it appended.
async fn append_alone_in<B: SqlBackend>(
    conn: &mut B::Conn,
    (guards, events): &(Vec<HistoryGuard>, Vec<AuditEvent>),
) -> Result<bool, StoreError> {
    append_unmoved::<B>(conn, guards, events, B::CURRENT_UNDER_LOCK).await
}

/// The append if each guard still counts what it read, in a transaction
/// that holds the log's lock: in one statement when no call came after any
/// guard's read, else after counting again.
async fn append_if_in<B: SqlBackend>(
    conn: &mut B::Conn,
    (guards, events): &(Vec<HistoryGuard>, Vec<AuditEvent>),
) -> Result<bool, StoreError> {
    if append_unmoved::<B>(conn, guards, events, "").await? {
        return Ok(true);
    }
    if !guards_hold_in::<B>(conn, guards).await? {
        return Ok(false);
    }
    append_in::<B>(conn, events).await?;
    Ok(true)
}

/// Appends `events` in one statement when every guard names its read's last
/// event and no call of its window and scope came after it, and `current`
/// (a condition without parameters, or empty) holds; whether it did (never
/// without guards, when a guard does not name it, or when the events need
/// several statements).
async fn append_unmoved<B: SqlBackend>(
    conn: &mut B::Conn,
    guards: &[HistoryGuard],
    events: &[AuditEvent],
    current: &str,
) -> Result<bool, StoreError> {
    let unnamed = guards.iter().any(|guard| guard.through.is_none());
    if guards.is_empty() || unnamed || events.is_empty() || events.len() > sql::EVENTS_PER_INSERT {
        return Ok(false);
    }
    let mut next = sql::EVENT_PARAMS * events.len() + 1;
    let mut conditions = Vec::with_capacity(guards.len() + 1);
    if !current.is_empty() {
        conditions.push(format!("({current})"));
    }
    let mut scopes = Vec::with_capacity(guards.len());
    for guard in guards {
        let (condition, values) = later::<B>(&guard.query, next)?;
        next += 2 + values.len();
        conditions.push(format!("NOT EXISTS (SELECT 1 FROM audit_events WHERE {condition})"));
        scopes.push(values);
    }
    let text = format!(
        "INSERT INTO audit_events ({}) SELECT * FROM (VALUES {}) AS event WHERE {}",
        sql::EVENT_INSERT_COLUMNS,
        sql::event_rows(events.len(), 1),
        conditions.join(" AND ")
    );
    let mut insert = db::query(db::AssertSqlSafe(text));
    for event in events {
        insert = bind_event!(insert, event);
    }
    for (guard, values) in guards.iter().zip(scopes) {
        insert = insert.bind(guard.through.unwrap_or_default()).bind(guard.query.since);
        insert = values.into_iter().fold(insert, |insert, value| insert.bind(value));
    }
    Ok(insert.execute(&mut *conn).await? == events.len() as u64)
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

/// Whether each guard still counts what it read (the transaction holds the log's lock).
async fn guards_hold_in<B: SqlBackend>(conn: &mut B::Conn, guards: &[HistoryGuard]) -> Result<bool, StoreError> {
    for guard in guards {
        if let Some(through) = guard.through
            && moved::<B>(&guard.query, through)?.fetch_optional(&mut *conn).await?.is_none()
        {
            continue;
        }
        let rows: Vec<EventRow> = select::<B>(&guard.query)?.fetch_all(&mut *conn).await?;
        let events: Vec<AuditEvent> = rows.into_iter().map(EventRow::into_event).collect::<Result<_, _>>()?;
        if entries_in(&events, &guard.query).len() != guard.count {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The condition that the events are calls of the query's window and scope,
/// its parameters numbered from `$first` (the window's start) on, and the
/// values of the scope's parameters (after the start), in order.
fn window<B: SqlBackend>(query: &HistoryQuery, first: usize) -> Result<(String, Vec<String>), StoreError> {
    let scope = first + 1;
    let (condition, values) = match &query.scope {
        HistoryScope::Principal(Some(principal)) => {
            (format!(" AND COALESCE(owner, principal) = ${scope}"), vec![principal.clone()])
        }
        HistoryScope::Principal(None) => (" AND owner IS NULL AND principal IS NULL".to_owned(), vec![]),
        HistoryScope::Conversation(key) => (format!(" AND {} = ${scope}", B::CONVERSATION_KEY), vec![key.clone()]),
        HistoryScope::Everyone => (String::new(), vec![]),
        HistoryScope::Principals(members) if members.is_empty() => (" AND 1 = 0".to_owned(), vec![]),
        HistoryScope::Principals(members) => {
            let list: Vec<String> = (0..members.len()).map(|index| format!("${}", scope + index)).collect();
            (format!(" AND COALESCE(owner, principal) IN ({})", list.join(", ")), members.clone())
        }
        other => return Err(StoreError::Unavailable(format!("this store cannot read the history of {other:?}"))),
    };
    Ok((format!("{CALL_KINDS} AND at >= ${first}{condition}"), values))
}

/// The events that may be the query's calls, oldest first.
fn select<B: SqlBackend>(query: &HistoryQuery) -> Result<db::QueryAs<'static, EventRow>, StoreError> {
    let (condition, values) = window::<B>(query, 1)?;
    let text = format!("SELECT {} FROM audit_events WHERE {condition} ORDER BY seq", event_columns!());
    let select = db::query_as::<EventRow>(db::AssertSqlSafe(text)).bind(query.since);
    Ok(values.into_iter().fold(select, |select, value| select.bind(value)))
}

/// The condition that an event is a call of the query's window and scope
/// recorded after a read that saw up to `$first`, its parameters numbered
/// from `$first` on (that `seq`, the window's start), and the values of the
/// scope's parameters that follow, in order.
fn later<B: SqlBackend>(query: &HistoryQuery, first: usize) -> Result<(String, Vec<String>), StoreError> {
    let (condition, values) = window::<B>(query, first + 1)?;
    Ok((format!("seq > ${first} AND {condition}"), values))
}

/// A row (the first such call's `seq`) when a call of the query's window and scope came after `through`.
fn moved<B: SqlBackend>(query: &HistoryQuery, through: i64) -> Result<db::QueryScalar<'static, i64>, StoreError> {
    let (condition, values) = later::<B>(query, 1)?;
    let text = format!("SELECT seq FROM audit_events WHERE {condition} LIMIT 1");
    let moved = db::query_scalar::<i64>(db::AssertSqlSafe(text)).bind(through).bind(query.since);
    Ok(values.into_iter().fold(moved, |moved, value| moved.bind(value)))
}
