//! The requests waiting on single calls (`GET /api/calls/{id}?wait=…`,
//! `POST /api/calls` with `wait`), woken by the changes the inbox hub
//! follows ([`super::inbox_hub`]).
//!
//! Ten thousand waiting requests must not mean ten thousand wake-ups per
//! change: one task of the process takes each batch of changed approvals
//! from the hub and wakes only the requests whose call it names (by the
//! call's tool call id, which an approval that supersedes another keeps),
//! through a map from call to waiters. A request registers before it reads
//! its call ([`CallWaiters::watch`]), so a change between the read and the
//! wait still wakes it (a [`Notify`] keeps one permit). If the task falls
//! behind the hub, it wakes everyone, who read their call again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use tokio::sync::{Notify, broadcast, watch};
use toolgate::ledger::{ApprovalRecord, LedgerStore};

use super::inbox_hub::{Changes, InboxHub};

/// Waiters by call (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct CallWaiters {
    waiters: Arc<Mutex<HashMap<String, Vec<Weak<Notify>>>>>,
    started: OnceLock<()>,
}

/// One request's registration: woken through [`CallWatch::notify`]; removed when dropped.
#[derive(Debug)]
pub(crate) struct CallWatch {
    notify: Arc<Notify>,
    call: String,
    waiters: Arc<Mutex<HashMap<String, Vec<Weak<Notify>>>>>,
}

impl CallWatch {
    /// Notified when a change names the call (it keeps one permit between waits).
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for CallWatch {
    fn drop(&mut self) {
        let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(list) = waiters.get_mut(&self.call) {
            list.retain(|weak| weak.strong_count() > 0 && !std::ptr::eq(weak.as_ptr(), Arc::as_ptr(&self.notify)));
            if list.is_empty() {
                waiters.remove(&self.call);
            }
        }
    }
}

impl CallWaiters {
    /// Registers a waiter on the call whose tool call id is `call`; starts
    /// the dispatching task the first time, on `hub`.
    pub(crate) fn watch(
        &self,
        call: &str,
        hub: &InboxHub,
        changed: &watch::Receiver<u64>,
        store: &Arc<dyn LedgerStore>,
    ) -> CallWatch {
        self.started.get_or_init(|| {
            tokio::spawn(dispatch(hub.subscribe(changed, store), Arc::downgrade(&self.waiters)));
        });
        let notify = Arc::new(Notify::new());
        let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        waiters.entry(call.to_owned()).or_default().push(Arc::downgrade(&notify));
        CallWatch { notify, call: call.to_owned(), waiters: Arc::clone(&self.waiters) }
    }
}

/// Wakes the waiters of each changed call, as long as the map lives.
async fn dispatch(mut changes: broadcast::Receiver<Changes>, waiters: Weak<Mutex<HashMap<String, Vec<Weak<Notify>>>>>) {
    loop {
        let received = changes.recv().await;
        let Some(waiters) = waiters.upgrade() else { return };
        let waiters = waiters.lock().unwrap_or_else(PoisonError::into_inner);
        match received {
            Ok(batch) => batch.iter().for_each(|record: &ApprovalRecord| wake(waiters.get(&record.tool_call_id))),
            Err(broadcast::error::RecvError::Lagged(_)) => waiters.values().for_each(|list| wake(Some(list))),
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

fn wake(list: Option<&Vec<Weak<Notify>>>) {
    for notify in list.into_iter().flatten().filter_map(Weak::upgrade) {
        notify.notify_one();
    }
}
