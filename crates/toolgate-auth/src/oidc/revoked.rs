//! Sessions signed out before their cookie expires.
//!
//! A session cookie is sealed, so the server cannot take it back from the
//! browser: a copy (another tab's, a stolen one) would stay valid until it
//! expires. Signing out therefore records the session's id as revoked until
//! then, and every request with a session cookie is checked against the
//! record. With a store the record is the store's (a `session:<id>` entry
//! among the used one-time links, pruned once the session would have
//! expired), so every replica refuses the session at once; without one it is
//! this process's memory. A store that cannot answer counts as revoked: the
//! check fails closed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use toolgate::ledger::{LinkStore, Millis};

/// The prefix of a revoked session's entry in the store.
const ENTRY_PREFIX: &str = "session:";

/// Where revoked sessions are recorded.
#[derive(Default)]
pub(crate) struct Revocations {
    /// The store, once the server has one.
    store: OnceLock<Arc<dyn LinkStore>>,
    /// Without a store: revoked ids and when their sessions expire.
    memory: Mutex<HashMap<String, Millis>>,
}

impl std::fmt::Debug for Revocations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revocations").field("in_store", &self.store.get().is_some()).finish_non_exhaustive()
    }
}

impl Revocations {
    /// Records revocations in `store` from now on (the first store given stays).
    pub(crate) fn keep_in(&self, store: Arc<dyn LinkStore>) {
        let _ = self.store.set(store);
    }

    /// Revokes session `id` until `until` (when it would expire).
    pub(crate) async fn revoke(&self, id: &str, until: Millis, now: Millis) -> Result<(), String> {
        match self.store.get() {
            Some(store) => {
                let entry = format!("{ENTRY_PREFIX}{id}");
                store.consume_link(&entry, now, until).await.map(drop).map_err(|error| error.to_string())
            }
            None => {
                let mut memory = self.memory.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                memory.retain(|_, expires| *expires > now);
                memory.insert(id.to_owned(), until);
                Ok(())
            }
        }
    }

    /// Whether session `id` was revoked (a store error counts as revoked).
    pub(crate) async fn is_revoked(&self, id: &str) -> bool {
        match self.store.get() {
            Some(store) => store.link_used(&format!("{ENTRY_PREFIX}{id}")).await.unwrap_or_else(|error| {
                tracing::warn!(%error, "cannot read the revoked sessions; refusing the session");
                true
            }),
            None => self.memory.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains_key(id),
        }
    }
}

#[cfg(test)]
mod tests {
    use toolgate::ledger::MemoryStore;

    use super::*;

    #[tokio::test]
    async fn revoked_sessions_are_refused_in_memory_and_in_the_store() {
        let local = Revocations::default();
        local.revoke("s1", 2_000, 1_000).await.unwrap();
        assert!(local.is_revoked("s1").await && !local.is_revoked("s2").await);
        let store: Arc<dyn LinkStore> = Arc::new(MemoryStore::new());
        let shared = Revocations::default();
        shared.keep_in(Arc::clone(&store));
        shared.revoke("s1", 2_000, 1_000).await.unwrap();
        // Another replica on the same store agrees.
        let replica = Revocations::default();
        replica.keep_in(store);
        assert!(replica.is_revoked("s1").await && !replica.is_revoked("s2").await);
    }
}
