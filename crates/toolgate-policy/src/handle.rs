//! [`PolicyHandle`]: the current policy, swappable while requests read it.

use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use toolgate::ledger::Millis;

use crate::compile::Policy;
use crate::evaluate::PolicyGate;
use crate::sticky::StickyDecision;

/// A shared, atomically replaceable policy. Clones share the same policy.
/// Each request takes a snapshot with [`current`](Self::current) (or
/// [`gate`](Self::gate)), so a reload never changes a request mid-way.
#[derive(Clone)]
pub struct PolicyHandle {
    inner: Arc<ArcSwap<Policy>>,
}

impl PolicyHandle {
    /// A handle holding `policy`.
    pub fn new(policy: Policy) -> Self {
        Self { inner: Arc::new(ArcSwap::from_pointee(policy)) }
    }

    /// The current policy.
    pub fn current(&self) -> Arc<Policy> {
        self.inner.load_full()
    }

    /// Replaces the policy for every clone of this handle.
    pub fn replace(&self, policy: Policy) {
        self.inner.store(Arc::new(policy));
    }

    /// A gate over the current policy, these sticky decisions and the clock value `now_ms`.
    pub fn gate(&self, sticky: Vec<StickyDecision>, now_ms: Millis) -> PolicyGate {
        PolicyGate::new(self.current(), sticky, now_ms)
    }
}

impl Default for PolicyHandle {
    fn default() -> Self {
        Self::new(Policy::empty())
    }
}

impl fmt::Debug for PolicyHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyHandle").field("rules", &self.inner.load().rules().len()).finish()
    }
}
