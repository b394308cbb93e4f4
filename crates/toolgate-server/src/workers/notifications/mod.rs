//! The notification workers (see [`crate::notify`] for the path of an event):
//! [`enqueue`] follows the audit log into the store's outbox, [`deliver`]
//! sends what the outbox holds. Every process with a store and `[[notify]]`
//! channels runs both; they take the store, its clock, the configured groups
//! and the link signer ([`Follower`]), never the state.

pub(crate) mod deliver;
pub(crate) mod enqueue;

use std::sync::Arc;

pub(crate) use enqueue::Follower;

use crate::notify::Notifications;

/// Starts this process's notification tasks: the outbox follower and the
/// delivery worker.
pub(crate) fn start(follower: Follower, notifications: &Arc<Notifications>) -> Vec<tokio::task::JoinHandle<()>> {
    let (store, clock) = (Arc::clone(&follower.store), Arc::clone(&follower.clock));
    let metrics = Arc::clone(&follower.metrics);
    vec![
        tokio::spawn(enqueue::follow(follower, Arc::clone(notifications))),
        tokio::spawn(deliver::deliver(store, clock, Arc::clone(notifications), metrics)),
    ]
}
