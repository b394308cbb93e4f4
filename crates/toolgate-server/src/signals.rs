//! The signals between the parts of one process: "approvals changed here"
//! (the inbox streams look again at once, see `workers/inbox_hub.rs`) and
//! "a conversation may be due" (the continuation worker looks at once, see
//! [`crate::continuation`]). Both only hurry what the workers would find at
//! their next poll anyway; another replica's changes reach them that way.
//! This file imports nothing of the server.

use std::sync::Arc;

use tokio::sync::{Notify, watch};

/// The process's signals; clones share them.
#[derive(Debug, Clone)]
pub(crate) struct Signals {
    /// Bumped whenever this process changes an approval.
    approvals: Arc<watch::Sender<u64>>,
    /// Wakes the continuation worker.
    continuations: Arc<Notify>,
}

impl Default for Signals {
    fn default() -> Self {
        Self { approvals: Arc::new(watch::Sender::new(0)), continuations: Arc::default() }
    }
}

impl Signals {
    /// Tells the inbox streams that approvals changed here.
    pub(crate) fn approvals_changed(&self) {
        self.approvals.send_modify(|version| *version = version.wrapping_add(1));
    }

    /// A receiver that wakes when approvals change here.
    pub(crate) fn watch_approvals(&self) -> watch::Receiver<u64> {
        self.approvals.subscribe()
    }

    /// Wakes the continuation worker (a decision here may have made a conversation due).
    pub(crate) fn wake_continuations(&self) {
        self.continuations.notify_one();
    }

    /// Completes when [`Self::wake_continuations`] is called (or was, since the last wait).
    pub(crate) async fn continuations_woken(&self) {
        self.continuations.notified().await;
    }
}
