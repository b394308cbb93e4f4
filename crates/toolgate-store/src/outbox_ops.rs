//! Timers, the notification outbox and one-time links: more of
//! [`Operations`]' methods, written once over [`SqlBackend`] as `ops.rs`'s
//! are (see there), with the texts of `outbox_sql.rs`.

use toolgate::approval::lifecycle::TimerAdvance;
use toolgate::ledger::{ApprovalRecord, AttemptEnd, Delivery, Millis, Outbound, OutboxQuery, StoreError};

use crate::backend::{SqlBackend, WriteFuture};
use crate::db::{self, Connection};
use crate::ops::{Operations, append_in};
use crate::outbox_sql::{self, DeliveryRow};
use crate::sql::{self, RecordRow, json_opt};

impl<B: SqlBackend> Operations<B> {
    /// See `ApprovalStore::due_timers`.
    pub(crate) async fn due_timers(&self, now: Millis, limit: usize) -> Result<Vec<ApprovalRecord>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let rows = db::query_as::<RecordRow>(outbox_sql::DUE_TIMERS)
            .bind(now)
            .bind(sql::limit_param(limit))
            .fetch_all(self.backend().reader())
            .await?;
        rows.into_iter().map(RecordRow::into_record).collect()
    }

    /// See `ApprovalStore::advance_timer`: the conditional update, then its
    /// viewers and events, in one transaction.
    pub(crate) async fn advance_timer(&self, advance: &TimerAdvance) -> Result<bool, StoreError> {
        let routing = json_opt(Some(&advance.routing), "a routing")?;
        let read = json_opt(Some(&advance.read), "a routing")?;
        self.backend().write((advance.clone(), routing, read), advance_timer_in::<B>).await
    }

    /// See `OutboxStore::notify_cursor`.
    pub(crate) async fn notify_cursor(&self) -> Result<i64, StoreError> {
        db::query_scalar::<i64>(outbox_sql::NOTIFY_CURSOR)
            .fetch_optional(self.backend().reader())
            .await
            .map(Option::unwrap_or_default)
    }

    /// See `OutboxStore::enqueue`: the cursor's conditional move first,
    /// the deliveries only when it moved.
    pub(crate) async fn enqueue(&self, deliveries: &[Outbound], from: i64, to: i64) -> Result<bool, StoreError> {
        let bodies = deliveries
            .iter()
            .map(|outbound| serde_json::to_string(&outbound.body))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| StoreError::Corrupt(format!("a notification body: {error}")))?;
        self.backend().write((deliveries.to_vec(), bodies, from, to), enqueue_in).await
    }

    /// See `OutboxStore::claim_deliveries`: one conditional update.
    pub(crate) async fn claim_deliveries(
        &self,
        executor: &str,
        now: Millis,
        until: Millis,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let ask = (executor.to_owned(), until, now, sql::limit_param(limit));
        let mut rows = self.backend().write_statement(ask, claim_deliveries_in).await?;
        rows.sort_by_key(|row| (row.next_at(), row.created_at()));
        rows.into_iter().map(DeliveryRow::into_delivery).collect()
    }

    /// See `OutboxStore::finish_attempt`.
    pub(crate) async fn finish_attempt(&self, end: &AttemptEnd) -> Result<bool, StoreError> {
        self.backend().write(end.clone(), finish_attempt_in::<B>).await
    }

    /// See `OutboxStore::deliveries`.
    pub(crate) async fn deliveries(&self, query: &OutboxQuery) -> Result<Vec<Delivery>, StoreError> {
        if query.limit == 0 {
            return Ok(Vec::new());
        }
        let text = outbox_sql::deliveries_sql(query);
        let mut select = db::query_as::<DeliveryRow>(db::AssertSqlSafe(text));
        if let Some(approval_id) = &query.approval_id {
            select = select.bind(approval_id);
        }
        if let Some(state) = query.state {
            select = select.bind(state.as_str());
        }
        let rows = select.bind(sql::limit_param(query.limit)).fetch_all(self.backend().reader()).await?;
        rows.into_iter().map(DeliveryRow::into_delivery).collect()
    }

    /// See `LinkStore::consume_link`.
    pub(crate) async fn consume_link(&self, link_id: &str, at: Millis, expires_at: Millis) -> Result<bool, StoreError> {
        self.backend().write_statement((link_id.to_owned(), at, expires_at), consume_link_in).await
    }

    /// See `LinkStore::release_link`.
    pub(crate) async fn release_link(&self, link_id: &str) -> Result<(), StoreError> {
        self.backend().write_statement(link_id.to_owned(), release_link_in).await
    }

    /// See `LinkStore::link_used`.
    pub(crate) async fn link_used(&self, link_id: &str) -> Result<bool, StoreError> {
        let used = db::query_scalar::<i64>(outbox_sql::LINK_USED)
            .bind(link_id)
            .fetch_optional(self.backend().reader())
            .await?;
        Ok(used.is_some())
    }

    /// Prunes ended deliveries and expired link uses, a chunk per write; the rows removed.
    pub(crate) async fn prune_outbox(&self, before: Millis) -> Result<u64, StoreError> {
        let mut removed = 0;
        for text in [outbox_sql::PRUNE_DELIVERIES, outbox_sql::PRUNE_LINKS] {
            loop {
                let chunk = self.prune_chunk(text, before).await?;
                removed += chunk;
                if chunk < sql::PRUNE_CHUNK {
                    break;
                }
            }
        }
        Ok(removed)
    }
}

fn advance_timer_in<'c, B: SqlBackend>(
    conn: &'c mut B::Conn,
    (advance, routing, read): &'c (TimerAdvance, Option<String>, Option<String>),
) -> WriteFuture<'c, bool> {
    Box::pin(async move {
        let issued_at = db::query_scalar::<i64>(outbox_sql::ADVANCE_TIMER)
            .bind(&advance.approval_id)
            .bind(advance.expected)
            .bind(advance.next)
            .bind(routing)
            .bind(advance.at)
            .bind(read)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(issued_at) = issued_at else {
            return Ok(false);
        };
        for viewers in advance.viewers.chunks(sql::VIEWERS_PER_INSERT) {
            let text = format!(
                "INSERT INTO approval_viewers ({}) VALUES {} ON CONFLICT DO NOTHING",
                sql::VIEWER_INSERT_COLUMNS,
                sql::viewer_rows(viewers.len(), 1)
            );
            let mut insert = db::query(db::AssertSqlSafe(text));
            for viewer in viewers {
                insert = insert.bind(viewer).bind(issued_at).bind(&advance.approval_id);
            }
            insert.execute(&mut *conn).await?;
        }
        append_in::<B>(conn, &advance.events).await?;
        Ok(true)
    })
}

type Enqueue = (Vec<Outbound>, Vec<String>, i64, i64);

fn enqueue_in<'c, C: Connection>(
    conn: &'c mut C,
    (deliveries, bodies, from, to): &'c Enqueue,
) -> WriteFuture<'c, bool> {
    Box::pin(async move {
        let moved =
            db::query_scalar::<i64>(outbox_sql::MOVE_CURSOR).bind(*from).bind(*to).fetch_optional(&mut *conn).await?;
        if moved.is_none() {
            return Ok(false);
        }
        for (outbound, body) in deliveries.iter().zip(bodies) {
            db::query(outbox_sql::ENQUEUE)
                .bind(&outbound.delivery_id)
                .bind(&outbound.event_id)
                .bind(&outbound.kind)
                .bind(&outbound.channel)
                .bind(&outbound.recipient)
                .bind(&outbound.approval_id)
                .bind(&outbound.conversation_id)
                .bind(&outbound.tool_call_id)
                .bind(body)
                .bind(outbound.created_at)
                .bind(&outbound.owner)
                .execute(&mut *conn)
                .await?;
        }
        Ok(true)
    })
}

fn claim_deliveries_in<'c, C: Connection>(
    conn: &'c mut C,
    (executor, until, now, limit): &'c (String, Millis, Millis, i64),
) -> WriteFuture<'c, Vec<DeliveryRow>> {
    Box::pin(async move {
        db::query_as::<DeliveryRow>(outbox_sql::CLAIM_DELIVERIES)
            .bind(executor)
            .bind(*until)
            .bind(*now)
            .bind(*limit)
            .fetch_all(conn)
            .await
    })
}

fn finish_attempt_in<'c, B: SqlBackend>(conn: &'c mut B::Conn, end: &'c AttemptEnd) -> WriteFuture<'c, bool> {
    Box::pin(async move {
        let (state, next_at, error) = outbox_sql::attempt_columns(&end.result, end.at);
        let finished = db::query_scalar::<i32>(outbox_sql::FINISH_ATTEMPT)
            .bind(&end.delivery_id)
            .bind(&end.executor)
            .bind(end.at)
            .bind(state)
            .bind(next_at)
            .bind(error)
            .fetch_optional(&mut *conn)
            .await?;
        if finished.is_none() {
            return Ok(false);
        }
        append_in::<B>(conn, &end.events).await?;
        Ok(true)
    })
}

fn consume_link_in<'c, C: Connection>(
    conn: &'c mut C,
    (link_id, at, expires_at): &'c (String, Millis, Millis),
) -> WriteFuture<'c, bool> {
    Box::pin(async move {
        let used = db::query_scalar::<i64>(outbox_sql::CONSUME_LINK)
            .bind(link_id)
            .bind(*at)
            .bind(*expires_at)
            .fetch_optional(conn)
            .await?;
        Ok(used.is_some())
    })
}

fn release_link_in<'c, C: Connection>(conn: &'c mut C, link_id: &'c String) -> WriteFuture<'c, ()> {
    Box::pin(async move {
        db::query(outbox_sql::RELEASE_LINK).bind(link_id).execute(conn).await?;
        Ok(())
    })
}
