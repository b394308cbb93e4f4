//! Retention (`toolgate serve --retain 90d`): the audit log and finished
//! conversations are kept for a while, then removed.
//!
//! While the server runs, once at start and then every [`PRUNE_EVERY`], it
//! asks the store to prune what finished more than the retention period ago
//! ([`toolgate::ledger::AuditStore::prune`]: final approvals, their audit
//! events, conversations without an open approval). Nothing pending, approved
//! or executing is ever removed, however old. A failed prune is logged and
//! tried again at the next period. Time is the ledger's clock.

use std::sync::Arc;
use std::time::Duration;

use toolgate::ledger::{Clock, LedgerStore};

/// How often the store is pruned.
pub const PRUNE_EVERY: Duration = Duration::from_secs(60 * 60);

/// Prunes `store` now and every [`PRUNE_EVERY`], removing what finished more than `retain` ago.
pub(crate) async fn prune_loop(store: Arc<dyn LedgerStore>, clock: Arc<dyn Clock>, retain: Duration) {
    let retain_ms = i64::try_from(retain.as_millis()).unwrap_or(i64::MAX);
    loop {
        let before = clock.now().saturating_sub(retain_ms);
        match store.prune(before).await {
            Ok(pruned) => tracing::info!(
                approvals = pruned.approvals,
                events = pruned.events,
                conversations = pruned.conversations,
                "pruned what finished before the retention period"
            ),
            Err(error) => tracing::warn!(%error, "cannot prune the store; trying again at the next period"),
        }
        tokio::time::sleep(PRUNE_EVERY).await;
    }
}
