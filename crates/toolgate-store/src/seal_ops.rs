//! The audit chain on SQL ([`toolgate::receipt::ReceiptStore`]'s
//! operations): sealing, checkpoints, signed prunes, and the reads of an
//! export.
//!
//! One chain for the whole store, in `seq` order, whatever replica appended:
//! `seq` is drawn under the log's append lock and becomes visible in order
//! (see `backend.rs`), so the events after the chain's head are always the
//! next ones. Sealing reads them and the records they concern, computes
//! links and receipts and signs outside any transaction, then writes them in
//! one transaction that first checks the head is still the one it read (on
//! Postgres under an advisory lock of its own; SQLite's write lock serialises
//! writers anyway): of two replicas sealing at once, one writes and the other
//! finds the head moved and writes nothing. A checkpoint is written only
//! when no checkpoint at or after its head exists. A prune deletes only
//! chained events before the head, and writes the signed record of the runs
//! it removed in the transaction that deletes them, only if every one of
//! them was still there.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use toolgate::ledger::{AuditEvent, Millis, StoreError};
use toolgate::receipt::{
    ChainLink, Checkpoint, EventLine, GENESIS, Jwk, Jwks, ReceiptKey, SealKind, SealedBatch, Signed, chain,
    seal_events, sign_checkpoint, sign_prune,
};

use crate::backend::{SqlBackend, WriteFuture};
use crate::db::{self, Connection};
use crate::ops::Operations;
use crate::sql::{self, EventRow};

/// The columns of `audit_chain`, in [`LinkRow`] order.
const LINK_COLUMNS: &str = "seq, n, prev, digest, hash";
/// The chain's head.
const HEAD: &str = "SELECT seq, n, prev, digest, hash FROM audit_chain ORDER BY seq DESC LIMIT 1";
/// The newest checkpoint's head.
const LAST_CHECKPOINT: &str =
    "SELECT head_seq FROM audit_seals WHERE kind = 'checkpoint' ORDER BY head_seq DESC LIMIT 1";
/// Why a signed prune rolled back: another replica pruned some of its events first.
const RACED: &str = "a concurrent prune removed these events first";
/// Events removed per signed prune.
const PRUNE_BATCH: usize = 1000;

/// One row of `audit_chain`.
#[derive(sqlx::FromRow)]
struct LinkRow {
    seq: i64,
    n: i64,
    prev: String,
    digest: String,
    hash: String,
}

crate::lite::from_lite_row!(LinkRow { seq, n, prev, digest, hash });

impl LinkRow {
    fn link(&self) -> ChainLink {
        ChainLink { seq: self.seq, prev: self.prev.clone(), digest: self.digest.clone(), hash: self.hash.clone() }
    }
}

/// `$first, …` for `count` parameters.
fn params(count: usize, first: usize) -> String {
    (first..first + count).map(|n| format!("${n}")).collect::<Vec<_>>().join(", ")
}

fn corrupt(what: &str, error: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {error}"))
}

/// A sealed batch to write after the head it was computed on.
struct SealWrite {
    head_seq: i64,
    count: i64,
    batch: SealedBatch,
}

/// A checkpoint to write.
struct CheckpointWrite {
    head_seq: i64,
    at: Millis,
    body: String,
}

/// A signed prune to write with the deletes it records.
struct PruneWrite {
    seqs: Vec<i64>,
    seal: Option<(i64, Millis, String)>,
}

impl<B: SqlBackend> Operations<B> {
    async fn head(&self) -> Result<Option<LinkRow>, StoreError> {
        db::query_as::<LinkRow>(HEAD).fetch_optional(self.backend().reader()).await
    }

    /// Registers `key`'s public half in `receipt_keys` (once per key).
    pub(crate) async fn register_key(&self, key: &ReceiptKey, at: Millis) -> Result<(), StoreError> {
        let jwk = serde_json::to_string(key.public()).map_err(|error| corrupt("a key", error))?;
        let data = (key.kid().to_owned(), jwk, at);
        self.backend()
            .write_statement(data, |conn, (kid, jwk, at)| {
                Box::pin(async move {
                    db::query("INSERT INTO receipt_keys (kid, jwk, added_at) VALUES ($1, $2, $3) ON CONFLICT (kid) DO NOTHING")
                        .bind(kid)
                        .bind(jwk)
                        .bind(*at)
                        .execute(conn)
                        .await
                })
            })
            .await
            .map(drop)
    }

    /// Chains up to `limit` events after the head and writes their receipts.
    pub(crate) async fn seal(&self, key: &ReceiptKey, limit: usize, now: Millis) -> Result<u64, StoreError> {
        let head = self.head().await?;
        let (head_seq, head_n) = head.as_ref().map_or((0, 0), |row| (row.seq, row.n));
        let head_hash = match &head {
            Some(row) => chain::decode(&row.hash).ok_or_else(|| corrupt("the chain's head", "not a hash"))?,
            None => GENESIS,
        };
        let rows: Vec<EventRow> = db::query_as(concat!(
            "SELECT ",
            sql::event_columns!(),
            " FROM audit_events WHERE seq > $1 ORDER BY seq LIMIT $2"
        ))
        .bind(head_seq)
        .bind(sql::limit_param(limit))
        .fetch_all(self.backend().reader())
        .await?;
        let events: Vec<AuditEvent> = rows.into_iter().map(EventRow::into_event).collect::<Result<_, _>>()?;
        if events.is_empty() {
            return Ok(0);
        }
        let mut ids: Vec<String> =
            events.iter().map(|event| event.approval_id.clone()).filter(|id| !id.is_empty()).collect();
        ids.sort();
        ids.dedup();
        let records = self.approvals(&ids).await?;
        let records = records.into_iter().map(|record| (record.approval_id.clone(), record)).collect();
        let issued = self.issued_data(&ids).await?;
        let batch =
            seal_events(head_hash, &events, &records, &issued, key, now).map_err(|error| corrupt("an event", error))?;
        let chained = batch.links.len() as u64;
        let write = SealWrite { head_seq, count: head_n, batch };
        let wrote = self.backend().write(write, seal_in::<B>).await?;
        Ok(if wrote { chained } else { 0 })
    }

    /// The data of the first event of each of these approvals: its `issued`
    /// event, or the decision of a rule that decided it as it was issued,
    /// which hold what its receipts name (`toolDigest`, `configDigest`).
    async fn issued_data(&self, ids: &[String]) -> Result<HashMap<String, Value>, StoreError> {
        let mut issued = HashMap::new();
        for ids in ids.chunks(sql::EVENTS_PER_INSERT) {
            let text = format!(
                "SELECT approval_id, data FROM audit_events WHERE seq IN \
                 (SELECT MIN(seq) FROM audit_events WHERE approval_id IN ({}) GROUP BY approval_id)",
                params(ids.len(), 1)
            );
            let mut select = db::query_as::<(String, String)>(db::AssertSqlSafe(text));
            for id in ids {
                select = select.bind(id);
            }
            for (id, data) in select.fetch_all(self.backend().reader()).await? {
                issued.insert(id, serde_json::from_str(&data).map_err(|error| corrupt("an issued event", error))?);
            }
        }
        Ok(issued)
    }

    /// Signs a checkpoint of the head when it moved since the newest one.
    pub(crate) async fn checkpoint(&self, key: &ReceiptKey, at: Millis) -> Result<Option<Checkpoint>, StoreError> {
        let Some(head) = self.head().await? else {
            return Ok(None);
        };
        let last: Option<i64> = db::query_scalar(LAST_CHECKPOINT).fetch_optional(self.backend().reader()).await?;
        if last.is_some_and(|last| last >= head.seq) {
            return Ok(None);
        }
        let count = u64::try_from(head.n).map_err(|error| corrupt("the chain's count", error))?;
        let signed = sign_checkpoint(&head.link(), count, key, at).map_err(|error| corrupt("the head", error))?;
        let body = serde_json::to_string(&signed).map_err(|error| corrupt("a checkpoint", error))?;
        let wrote =
            self.backend().write_statement(CheckpointWrite { head_seq: head.seq, at, body }, checkpoint_in).await?;
        Ok((wrote > 0).then(|| signed.payload().ok()).flatten())
    }

    /// Prunes chained events recorded before `before` (not those of open
    /// approvals) with a signed record of each batch; the events removed.
    pub(crate) async fn prune_signed(&self, key: &ReceiptKey, before: Millis, now: Millis) -> Result<u64, StoreError> {
        let mut removed = 0u64;
        loop {
            let seqs: Vec<i64> = db::query_scalar(
                "SELECT seq FROM audit_events WHERE at < $1 AND approval_id NOT IN \
                 (SELECT approval_id FROM approvals WHERE state IN ('pending', 'approved', 'executing')) \
                 AND seq < (SELECT COALESCE(MAX(seq), 0) FROM audit_chain) ORDER BY seq LIMIT $2",
            )
            .bind(before)
            .bind(sql::limit_param(PRUNE_BATCH))
            .fetch_all(self.backend().reader())
            .await?;
            let (Some(first), Some(last)) = (seqs.first().copied(), seqs.last().copied()) else {
                return Ok(removed);
            };
            let rows: Vec<LinkRow> = db::query_as(db::AssertSqlSafe(format!(
                "SELECT {LINK_COLUMNS} FROM audit_chain WHERE seq BETWEEN $1 AND $2 ORDER BY seq"
            )))
            .bind(first)
            .bind(last)
            .fetch_all(self.backend().reader())
            .await?;
            let chosen: HashSet<i64> = seqs.iter().copied().collect();
            let links: Vec<(ChainLink, u64, bool)> = rows
                .iter()
                .map(|row| (row.link(), u64::try_from(row.n).unwrap_or_default(), chosen.contains(&row.seq)))
                .collect();
            let seal = sign_prune(&links, before, key, now).map_err(|error| corrupt("a prune", error))?;
            let seal = match seal {
                Some(signed) => {
                    Some((last, now, serde_json::to_string(&signed).map_err(|error| corrupt("a prune", error))?))
                }
                None => None,
            };
            let count = seqs.len();
            let deleted = match self.backend().write(PruneWrite { seqs, seal }, prune_in).await {
                Err(StoreError::Unavailable(why)) if why == RACED => return Ok(removed),
                other => other?,
            };
            removed += deleted;
            if deleted < count as u64 || count < PRUNE_BATCH {
                return Ok(removed);
            }
        }
    }

    /// The newest receipt of an approval, checked to be that approval's.
    pub(crate) async fn receipt(&self, approval_id: &str) -> Result<Option<Signed>, StoreError> {
        if approval_id.is_empty() {
            // Calls decided without an approval are stored under an empty one: not an approval's.
            return Ok(None);
        }
        let body: Option<String> =
            db::query_scalar("SELECT body FROM audit_receipts WHERE approval_id = $1 ORDER BY seq DESC LIMIT 1")
                .bind(approval_id)
                .fetch_optional(self.backend().reader())
                .await?;
        let Some(body) = body else {
            return Ok(None);
        };
        let signed: Signed = serde_json::from_str(&body).map_err(|error| corrupt("a receipt", error))?;
        let names = signed.payload.get("approvalId").and_then(Value::as_str);
        if signed.kind != SealKind::Receipt || names != Some(approval_id) {
            return Err(StoreError::Corrupt(format!(
                "the receipt stored for approval {approval_id} is not its own (it names {})",
                names.unwrap_or("nothing")
            )));
        }
        Ok(Some(signed))
    }

    /// The receipt of the event at `seq`, checked to name that event.
    pub(crate) async fn receipt_at(&self, seq: i64) -> Result<Option<Signed>, StoreError> {
        let body: Option<String> = db::query_scalar("SELECT body FROM audit_receipts WHERE seq = $1")
            .bind(seq)
            .fetch_optional(self.backend().reader())
            .await?;
        let Some(body) = body else {
            return Ok(None);
        };
        let signed: Signed = serde_json::from_str(&body).map_err(|error| corrupt("a receipt", error))?;
        let names = signed.payload.get("event").and_then(|event| event.get("seq")).and_then(Value::as_i64);
        if signed.kind != SealKind::Receipt || names != Some(seq) {
            return Err(StoreError::Corrupt(format!(
                "the receipt stored for event {seq} is not its own (it names {})",
                names.map_or_else(|| "nothing".to_owned(), |seq| format!("event {seq}"))
            )));
        }
        Ok(Some(signed))
    }

    pub(crate) async fn receipt_keys(&self) -> Result<Jwks, StoreError> {
        let rows: Vec<String> = db::query_scalar("SELECT jwk FROM receipt_keys ORDER BY added_at, kid")
            .fetch_all(self.backend().reader())
            .await?;
        let keys: Result<Vec<Jwk>, _> = rows.iter().map(|jwk| serde_json::from_str(jwk)).collect();
        Ok(Jwks { keys: keys.map_err(|error| corrupt("a receipt key", error))? })
    }

    pub(crate) async fn signed_records(&self, after_seq: i64) -> Result<Vec<Signed>, StoreError> {
        let mut bodies: Vec<String> =
            db::query_scalar("SELECT body FROM audit_seals ORDER BY id").fetch_all(self.backend().reader()).await?;
        let receipts: Vec<String> = db::query_scalar("SELECT body FROM audit_receipts WHERE seq > $1 ORDER BY seq")
            .bind(after_seq)
            .fetch_all(self.backend().reader())
            .await?;
        bodies.extend(receipts);
        bodies
            .iter()
            .map(|body| serde_json::from_str(body).map_err(|error| corrupt("a signed record", error)))
            .collect()
    }

    pub(crate) async fn chained_events(&self, after_seq: i64, limit: usize) -> Result<Vec<EventLine>, StoreError> {
        let rows: Vec<EventRow> = db::query_as(concat!(
            "SELECT ",
            sql::event_columns!(),
            " FROM audit_events WHERE seq > $1 ORDER BY seq LIMIT $2"
        ))
        .bind(after_seq)
        .bind(sql::limit_param(limit))
        .fetch_all(self.backend().reader())
        .await?;
        let events: Vec<AuditEvent> = rows.into_iter().map(EventRow::into_event).collect::<Result<_, _>>()?;
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return Ok(Vec::new());
        };
        let links: Vec<LinkRow> = db::query_as(db::AssertSqlSafe(format!(
            "SELECT {LINK_COLUMNS} FROM audit_chain WHERE seq BETWEEN $1 AND $2"
        )))
        .bind(first.seq)
        .bind(last.seq)
        .fetch_all(self.backend().reader())
        .await?;
        let mut links: HashMap<i64, ChainLink> = links.iter().map(|row| (row.seq, row.link())).collect();
        events
            .into_iter()
            .map(|event| {
                let link = links.remove(&event.seq).unwrap_or_else(|| ChainLink {
                    seq: event.seq,
                    prev: String::new(),
                    digest: String::new(),
                    hash: String::new(),
                });
                let event = serde_json::to_value(&event).map_err(|error| corrupt("an event", error))?;
                Ok(EventLine { link, event })
            })
            .collect()
    }

    pub(crate) async fn checkpoint_before(&self, since: Millis) -> Result<Option<Checkpoint>, StoreError> {
        let body: Option<String> = db::query_scalar(
            "SELECT body FROM audit_seals WHERE kind = 'checkpoint' AND head_seq < \
             COALESCE((SELECT MIN(seq) FROM audit_events WHERE at >= $1), 9223372036854775807) \
             ORDER BY head_seq DESC LIMIT 1",
        )
        .bind(since)
        .fetch_optional(self.backend().reader())
        .await?;
        let Some(body) = body else {
            return Ok(None);
        };
        let signed: Signed = serde_json::from_str(&body).map_err(|error| corrupt("a checkpoint", error))?;
        signed.payload().map(Some).map_err(|error| corrupt("a checkpoint", error))
    }
}

/// Writes a sealed batch if the head is still the one it was computed on.
fn seal_in<'c, B: SqlBackend>(conn: &'c mut B::Conn, write: &'c SealWrite) -> WriteFuture<'c, bool> {
    Box::pin(async move {
        if let Some(lock) = B::LOCK_CHAIN {
            db::query(lock).execute(&mut *conn).await?;
        }
        let head: Option<i64> =
            db::query_scalar("SELECT MAX(seq) FROM audit_chain").fetch_optional(&mut *conn).await?.flatten();
        if head.unwrap_or(0) != write.head_seq {
            return Ok(false);
        }
        let mut n = write.count;
        for links in write.batch.links.chunks(sql::EVENTS_PER_INSERT) {
            let rows: Vec<String> = (0..links.len()).map(|row| format!("({})", params(5, row * 5 + 1))).collect();
            let text = format!("INSERT INTO audit_chain ({LINK_COLUMNS}) VALUES {}", rows.join(", "));
            let mut insert = db::query(db::AssertSqlSafe(text));
            for link in links {
                n += 1;
                insert = insert.bind(link.seq).bind(n).bind(&link.prev).bind(&link.digest).bind(&link.hash);
            }
            insert.execute(&mut *conn).await?;
        }
        for receipts in write.batch.receipts.chunks(sql::EVENTS_PER_INSERT) {
            let rows: Vec<String> = (0..receipts.len()).map(|row| format!("({})", params(3, row * 3 + 1))).collect();
            let text = format!("INSERT INTO audit_receipts (seq, approval_id, body) VALUES {}", rows.join(", "));
            let mut insert = db::query(db::AssertSqlSafe(text));
            for (seq, approval_id, signed) in receipts {
                let body = serde_json::to_string(signed).map_err(|error| corrupt("a receipt", error))?;
                insert = insert.bind(*seq).bind(approval_id).bind(body);
            }
            insert.execute(&mut *conn).await?;
        }
        Ok(true)
    })
}

/// Writes a checkpoint unless one at or after its head exists.
fn checkpoint_in<'c, C: Connection>(conn: &'c mut C, write: &'c CheckpointWrite) -> WriteFuture<'c, u64> {
    Box::pin(async move {
        db::query(
            "INSERT INTO audit_seals (kind, head_seq, at, body) SELECT 'checkpoint', $1, $2, $3 \
             WHERE NOT EXISTS (SELECT 1 FROM audit_seals WHERE kind = 'checkpoint' AND head_seq >= $1)",
        )
        .bind(write.head_seq)
        .bind(write.at)
        .bind(&write.body)
        .execute(conn)
        .await
    })
}

/// Deletes the events, their links and receipts, and writes the signed prune,
/// only when every event was still there; the events deleted.
fn prune_in<'c, C: Connection>(conn: &'c mut C, write: &'c PruneWrite) -> WriteFuture<'c, u64> {
    Box::pin(async move {
        let mut deleted = 0;
        for table in ["audit_events", "audit_chain", "audit_receipts"] {
            let text = format!("DELETE FROM {table} WHERE seq IN ({})", params(write.seqs.len(), 1));
            let mut delete = db::query(db::AssertSqlSafe(text));
            for seq in &write.seqs {
                delete = delete.bind(*seq);
            }
            let rows = delete.execute(&mut *conn).await?;
            if table == "audit_events" {
                if rows < write.seqs.len() as u64 {
                    // Another replica pruned some of them first: its record stands.
                    return Err(StoreError::Unavailable(RACED.into()));
                }
                deleted = rows;
            }
        }
        if let Some((head_seq, at, body)) = &write.seal {
            db::query("INSERT INTO audit_seals (kind, head_seq, at, body) VALUES ('prune', $1, $2, $3)")
                .bind(*head_seq)
                .bind(*at)
                .bind(body)
                .execute(&mut *conn)
                .await?;
        }
        Ok(deleted)
    })
}
