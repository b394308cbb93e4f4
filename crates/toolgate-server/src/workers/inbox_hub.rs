//! One follower of the store's changes for all of a process's inbox streams.
//!
//! Rather than each open `GET /api/approvals/stream` reading its inbox again
//! and again (a thousand streams would be a thousand queries a poll), the
//! process reads what changed once: the audit log after the last event it
//! saw (every issue, vote, decision, withdrawal and outcome is an event, in
//! any replica or the CLI on the store), at once when this process changes an
//! approval and every [`POLL`] otherwise. It reads the changed approvals in
//! one query and hands them to every stream ([`InboxHub::subscribe`]), which
//! keeps those its viewer should hear about
//! ([`toolgate::ledger::InboxChanges::offer`]). It starts with the first
//! stream and runs as long as the process, on the store alone (the state
//! holds the hub; the hub never sees the state).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use toolgate::ledger::{ApprovalRecord, AuditQuery, AuditView, LedgerStore, StoreError};

/// How often the follower reads changes made elsewhere.
pub const POLL: Duration = Duration::from_secs(2);
/// Audit events one read takes at most (more are read in further pages).
const PAGE: usize = 1_000;
/// Approvals one record read asks for at most.
const CHUNK: usize = 500;
/// Batches of changes a slow stream may fall behind before it reads its inbox again.
const BACKLOG: usize = 64;

/// The changed approvals of one look.
pub(crate) type Changes = Arc<Vec<ApprovalRecord>>;

/// The process's follower of the store's changes (see the module docs).
#[derive(Debug)]
pub(crate) struct InboxHub {
    sender: broadcast::Sender<Changes>,
    started: OnceLock<()>,
}

impl Default for InboxHub {
    fn default() -> Self {
        Self { sender: broadcast::Sender::new(BACKLOG), started: OnceLock::new() }
    }
}

impl InboxHub {
    /// A receiver of every later batch of changes; starts the follower the
    /// first time, on `store`. `changed` is bumped whenever this process
    /// changes an approval (the follower looks at once).
    pub(crate) fn subscribe(
        &self,
        changed: &watch::Receiver<u64>,
        store: &Arc<dyn LedgerStore>,
    ) -> broadcast::Receiver<Changes> {
        let receiver = self.sender.subscribe();
        self.started.get_or_init(|| {
            tokio::spawn(follow(changed.clone(), Arc::clone(store), self.sender.clone()));
        });
        receiver
    }
}

/// Reads the changes of every look and sends them to the streams.
async fn follow(mut changed: watch::Receiver<u64>, store: Arc<dyn LedgerStore>, sender: broadcast::Sender<Changes>) {
    // What happened before the first stream, its first read of its inbox shows.
    let mut after = loop {
        match latest_seq(store.as_ref()).await {
            Ok(seq) => break seq,
            Err(error) => tracing::warn!(%error, "the inbox streams cannot read the audit log"),
        }
        tokio::time::sleep(POLL).await;
    };
    loop {
        match look(store.as_ref(), &mut after).await {
            Ok(records) if !records.is_empty() => {
                // No stream listening is not an error: the next one reads its inbox first.
                let _ = sender.send(Arc::new(records));
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "the inbox streams cannot follow the store"),
        }
        let _ = tokio::time::timeout(POLL, changed.changed()).await;
    }
}

/// The position of the audit log's last event (0 when it is empty), found
/// by probing positions (each probe one indexed read of at most one event:
/// about 2·log2(n) of them), since the log is read by position only.
async fn latest_seq(store: &dyn LedgerStore) -> Result<i64, StoreError> {
    let exists_after = |seq: i64| async move {
        let query = AuditQuery {
            conversation_id: None,
            since: None,
            after_seq: Some(seq),
            limit: Some(1),
            view: AuditView::All,
        };
        store.audit(&query).await.map(|events| !events.is_empty())
    };
    // The smallest `high` with nothing after it, doubling; then halving between `low` and `high`.
    let (mut low, mut high) = (0_i64, 1_i64);
    while exists_after(high).await? {
        low = high;
        high = high.saturating_mul(2);
    }
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if exists_after(middle).await? { low = middle } else { high = middle }
    }
    Ok(if exists_after(low).await? { high } else { low })
}

/// The approvals that changed since the last look, as they are now.
async fn look(store: &dyn LedgerStore, after: &mut i64) -> Result<Vec<ApprovalRecord>, StoreError> {
    let mut ids: Vec<String> = Vec::new();
    loop {
        let query = AuditQuery {
            conversation_id: None,
            since: None,
            after_seq: Some(*after),
            limit: Some(PAGE),
            view: AuditView::All,
        };
        let events = store.audit(&query).await?;
        if let Some(last) = events.last() {
            *after = last.seq;
        }
        let full = events.len() == PAGE;
        ids.extend(events.into_iter().map(|event| event.approval_id));
        if !full {
            break;
        }
    }
    ids.sort_unstable();
    ids.dedup();
    let mut records = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(CHUNK) {
        records.extend(store.approvals(chunk).await?);
    }
    Ok(records)
}
