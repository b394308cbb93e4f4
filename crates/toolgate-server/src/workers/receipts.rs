//! The receipts worker: keeps the audit chain sealed ([`toolgate::receipt`]).
//!
//! Every [`SEAL_EVERY`] it chains the events appended since the chain's head
//! and signs their receipts (in batches of [`BATCH`] until none is left);
//! every [`CHECKPOINT_EVERY`] it signs a checkpoint of the head, when the
//! head moved. At shutdown the launcher calls `finish`: the last events are
//! sealed and a final checkpoint signed. Replicas on one store each run it;
//! the store serialises them on one chain. A failure is logged and tried
//! again at the next tick; the events wait, unchained, meanwhile.
//!
//! Processes that write to the store without serving (`toolgate chat`,
//! `toolgate mcp-gateway`) run the same worker through a [`Sealer`], which
//! they [`finish`](Sealer::finish) when they end.

use std::sync::Arc;
use std::time::Duration;

use toolgate::ledger::Clock;
use toolgate::receipt::ReceiptStore;

/// How often new events are chained.
pub const SEAL_EVERY: Duration = Duration::from_secs(1);
/// How often the head is signed (at most this long between two checkpoints while events come).
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(60);
/// Events chained per store call.
pub const BATCH: usize = 2000;

/// Seals everything appended so far; the events chained.
async fn seal_all(store: &dyn ReceiptStore) -> Result<u64, toolgate::ledger::StoreError> {
    let mut chained = 0;
    loop {
        let batch = store.seal(BATCH).await?;
        chained += batch;
        if batch < BATCH as u64 {
            return Ok(chained);
        }
    }
}

/// Seals every [`SEAL_EVERY`] and signs a checkpoint every [`CHECKPOINT_EVERY`], until aborted.
pub(crate) async fn seal_loop(store: Arc<dyn ReceiptStore>, clock: Arc<dyn Clock>) {
    let mut seal = tokio::time::interval(SEAL_EVERY);
    seal.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut checkpoint = tokio::time::interval(CHECKPOINT_EVERY);
    checkpoint.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    checkpoint.tick().await;
    loop {
        tokio::select! {
            _ = seal.tick() => {
                if let Err(error) = seal_all(store.as_ref()).await {
                    tracing::warn!(%error, "cannot seal the audit log; trying again");
                }
            }
            _ = checkpoint.tick() => {
                sign_head(store.as_ref(), clock.as_ref()).await;
            }
        }
    }
}

async fn sign_head(store: &dyn ReceiptStore, clock: &dyn Clock) {
    if let Err(error) = seal_all(store).await {
        tracing::warn!(%error, "cannot seal the audit log before a checkpoint");
    }
    match store.checkpoint(clock.now()).await {
        Ok(Some(checkpoint)) => {
            tracing::debug!(head = checkpoint.head_seq, count = checkpoint.count, "signed a checkpoint")
        }
        Ok(None) => {}
        Err(error) => tracing::warn!(%error, "cannot sign a checkpoint of the audit log; trying again"),
    }
}

/// At shutdown: seals the last events and signs a final checkpoint.
pub(crate) async fn finish(store: &dyn ReceiptStore, clock: &dyn Clock) {
    sign_head(store, clock).await;
}

/// The receipts worker outside the server: started beside whatever writes
/// audit events, finished when it ends (the last events sealed, a final
/// checkpoint signed).
#[derive(Debug)]
pub struct Sealer {
    store: Arc<dyn ReceiptStore>,
    clock: Arc<dyn Clock>,
    task: tokio::task::JoinHandle<()>,
}

impl Sealer {
    /// Starts sealing `store` every [`SEAL_EVERY`] and signing checkpoints
    /// every [`CHECKPOINT_EVERY`], on the current Tokio runtime.
    pub fn start(store: Arc<dyn ReceiptStore>, clock: Arc<dyn Clock>) -> Self {
        let task = tokio::spawn(seal_loop(Arc::clone(&store), Arc::clone(&clock)));
        Self { store, clock, task }
    }

    /// Stops the loop, seals what is left and signs a final checkpoint.
    pub async fn finish(self) {
        self.task.abort();
        let _ = self.task.await;
        finish(self.store.as_ref(), self.clock.as_ref()).await;
    }
}
