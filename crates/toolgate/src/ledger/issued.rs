//! The approvals this process issued, as it issued them: a hint that spares
//! the store read when the answer comes back to the same process.
//!
//! The contract:
//! - only records the store accepted are kept (after [`ApprovalStore::issue`]
//!   returned), so an id found here was issued, whatever a client claims;
//! - what binds an approval (its conversation, call, tool, input digest and
//!   expiry) never changes after issue, so a kept record checks an answer as
//!   the stored one would; its state may be stale, which the claim settles:
//!   the claim is a conditional update on `pending`, and a claim that does not
//!   move sends the engine back to the store;
//! - a record is handed out once ([`IssuedApprovals::take`]): a second answer
//!   to the same approval reads the store;
//! - it holds at most [`MAX_KEPT`] records, none with an input over
//!   [`MAX_KEPT_INPUT_BYTES`] bytes of canonical JSON, and forgets the oldest first.
//!
//! [`ApprovalStore::issue`]: super::ApprovalStore::issue

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::ApprovalRecord;

/// The most records kept.
pub const MAX_KEPT: usize = 1024;
/// The largest input a kept record may hold, in bytes of canonical JSON.
pub const MAX_KEPT_INPUT_BYTES: usize = 16 * 1024;

/// Recently issued approvals of this process (see the module docs).
#[derive(Debug, Default)]
pub struct IssuedApprovals {
    kept: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    records: HashMap<String, ApprovalRecord>,
    /// Ids in the order they were kept; may name ids already taken.
    order: VecDeque<String>,
}

impl IssuedApprovals {
    /// Keeps records the store has just accepted; `input_bytes` gives the
    /// size of each one's canonical input.
    pub fn remember(&self, records: impl IntoIterator<Item = (ApprovalRecord, usize)>) {
        let mut kept = self.lock();
        for (record, input_bytes) in records {
            if input_bytes > MAX_KEPT_INPUT_BYTES {
                continue;
            }
            while kept.records.len() >= MAX_KEPT {
                let Some(oldest) = kept.order.pop_front() else { break };
                kept.records.remove(&oldest);
            }
            kept.order.push_back(record.approval_id.clone());
            kept.records.insert(record.approval_id.clone(), record);
            // Ids taken earlier leave stale entries in `order`: drop them once
            // they dominate (amortised: at least `MAX_KEPT` pushes apart).
            if kept.order.len() > 2 * MAX_KEPT {
                let Kept { records, order } = &mut *kept;
                order.retain(|id| records.contains_key(id));
            }
        }
    }

    /// Hands out the record issued under `approval_id`, once.
    pub fn take(&self, approval_id: &str) -> Option<ApprovalRecord> {
        self.lock().records.remove(approval_id)
    }

    /// How many records are kept.
    pub fn len(&self) -> usize {
        self.lock().records.len()
    }

    /// True when no record is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        // The map is valid after any panic in these short sections; keep using it.
        self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: usize) -> ApprovalRecord {
        let mut record = crate::ledger::record::pending_record(format!("ap_{id}"), 0, 10);
        record.tool_call_id = format!("call_{id}");
        record
    }

    #[test]
    fn a_record_is_handed_out_once() {
        let issued = IssuedApprovals::default();
        issued.remember([(record(1), 2)]);
        assert_eq!(issued.take("ap_1"), Some(record(1)));
        assert_eq!(issued.take("ap_1"), None);
        assert_eq!(issued.take("ap_2"), None, "never issued here");
    }

    #[test]
    fn it_stays_bounded_forgets_the_oldest_and_skips_large_inputs() {
        let issued = IssuedApprovals::default();
        issued.remember([(record(0), MAX_KEPT_INPUT_BYTES + 1)]);
        assert!(issued.is_empty(), "a large input is not kept");
        for round in 0..3 {
            issued.remember((0..MAX_KEPT).map(|n| (record(round * MAX_KEPT + n), 2)));
            // Take half, so `order` also holds ids no longer kept.
            for n in (0..MAX_KEPT).step_by(2) {
                assert!(issued.take(&format!("ap_{}", round * MAX_KEPT + n)).is_some());
            }
        }
        issued.remember((10_000..10_000 + MAX_KEPT).map(|n| (record(n), 2)));
        assert_eq!(issued.len(), MAX_KEPT);
        assert!(issued.take("ap_10000").is_some(), "the newest are kept");
        assert!(issued.take(&format!("ap_{}", 2 * MAX_KEPT + 1)).is_none(), "the oldest were forgotten");
        assert!(issued.lock().order.len() <= 2 * MAX_KEPT, "the order list stays bounded");
    }
}
