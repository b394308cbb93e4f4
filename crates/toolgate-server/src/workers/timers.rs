//! The approvals' timers: escalation, reminders and on-time expiry of routed
//! approvals (see [`toolgate::approval::lifecycle::timer`]).
//!
//! Every process runs `fire_due`: every [`TICK`] it reads the timers due by the
//! ledger's clock (an indexed read of the store) and fires each; the store's
//! conditional update lets one process fire a timer, whichever sees it first,
//! and a timer due while no process ran fires at the next start. A timer
//! that denies or expires an approval marks its conversation due, and the
//! continuation worker runs the rest of the step.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use toolgate::approval::lifecycle::{Fired, fire};
use toolgate::ledger::LedgerConfig;

use crate::signals::Signals;

/// How often due timers are looked for (timers fire within this of their due time).
pub const TICK: Duration = Duration::from_millis(250);
/// Timers fired per look.
const BATCH: usize = 100;

/// Fires due timers until the task is dropped: on the ledger's store and
/// clock, with the configured groups (an escalation to a group records its
/// members), telling the inbox streams and the continuation worker through
/// `signals`.
pub(crate) async fn fire_due(ledger: LedgerConfig, groups: BTreeMap<String, Vec<String>>, signals: Signals) {
    let members = move |group: &str| groups.get(group).cloned();
    let store = Arc::clone(&ledger.store);
    loop {
        let due = match store.due_timers(ledger.clock.now(), BATCH).await {
            Ok(due) => due,
            Err(error) => {
                tracing::warn!(%error, "cannot read the approvals' timers; trying again");
                Vec::new()
            }
        };
        for record in due {
            match fire(store.as_ref(), ledger.clock.as_ref(), &members, &record).await {
                Ok(Some(fired)) => {
                    tracing::info!(approval = %record.approval_id, ?fired, "approval timer fired");
                    if matches!(fired, Fired::Denied(_) | Fired::Expired) {
                        signals.wake_continuations();
                    }
                    signals.approvals_changed();
                }
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, approval = %record.approval_id, "cannot fire an approval timer"),
            }
        }
        tokio::time::sleep(TICK).await;
    }
}
