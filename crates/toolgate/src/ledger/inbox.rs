//! Reading approvals across conversations (the inbox), and the marks that
//! make the server continue a conversation once its step is decided.
//!
//! - [`ApprovalQuery`] lists approvals newest first, as one viewer may see
//!   them: the store keeps, for every approval, the keys of who may see it
//!   ([`crate::approval::lifecycle::viewers`]: the requester, the approvers
//!   as configured and their members at issue), and a viewer is found under
//!   [`Voter::keys`](crate::approval::lifecycle::Voter::keys).
//! - A decision made outside the conversation's own requests (the inbox, a
//!   link, the CLI on the store) marks the conversation *due*, in the
//!   decision's transaction ([`crate::ledger::Update::continuation`]). Any
//!   process may then claim it for a while ([`ContinuationClaim`]), continue
//!   the run, and clear the mark if no decision came meanwhile; a claim whose
//!   holder died lapses and is claimed again.

use super::{ApprovalRecord, Millis, StoreFuture};
use crate::approval::lifecycle::ApprovalState;

/// Which states an inbox listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StateFilter {
    /// Waiting for votes.
    #[default]
    Pending,
    /// Every state but `pending`.
    Decided,
    /// Every state.
    All,
}

impl StateFilter {
    /// Parses `pending`, `decided` or `all`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "pending" => Some(Self::Pending),
            "decided" => Some(Self::Decided),
            "all" => Some(Self::All),
            _ => None,
        }
    }

    /// Whether a record in `state` is shown.
    pub fn admits(self, state: ApprovalState) -> bool {
        match self {
            Self::Pending => state == ApprovalState::Pending,
            Self::Decided => state != ApprovalState::Pending,
            Self::All => true,
        }
    }
}

/// An inbox listing: approvals newest first (by issue time, then id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalQuery {
    /// Whose: `None` for every approval (single-user mode, an admin, the
    /// operator); else the viewer keys, any of which admits an approval.
    pub viewer_keys: Option<Vec<String>>,
    /// Which states.
    pub states: StateFilter,
    /// Only this conversation's (by its key).
    pub conversation_id: Option<String>,
    /// Only the approvals of conversations with this id as their approvals
    /// name it (the id its requester chose, whoever that is): what a viewer
    /// filters by, among the approvals they may see
    /// ([`ApprovalRecord::conversation_name`](super::ApprovalRecord::conversation_name)); a sub-agent's
    /// approvals by their root conversation's
    /// ([`ApprovalRecord::root_conversation_name`](super::ApprovalRecord::root_conversation_name)).
    pub conversation_name: Option<String>,
    /// At most this many.
    pub limit: usize,
}

/// A conversation claimed for a server-side continuation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinuationClaim {
    /// The conversation's key.
    pub conversation_id: String,
    /// The mark's generation when claimed: a decision made later bumps it,
    /// so finishing does not clear a mark it did not see.
    pub generation: i64,
}

/// Follows an inbox: which approvals a voter should hear about next, given
/// what they heard before. [`InboxChanges::next`] reads the store (the
/// pending approvals the voter may decide that are new or changed since the
/// last call, and where those that stopped being pending went);
/// [`InboxChanges::offer`] sorts records someone else read (changes a server
/// follows once for all its inbox streams). It keeps the id and version
/// (state, vote count) of each approval it gave, at most [`MAX_GIVEN`] (the
/// newest), so a watcher costs a small map however large its inbox grows: an
/// approval it forgot is given again when it changes, and its leaving the
/// pending list is not reported (a watcher that reads its inbox again sees
/// it gone). The server's `GET /api/approvals/stream` and `toolgate
/// approvals watch` both read their inbox through it.
#[derive(Debug, Default)]
pub struct InboxChanges {
    /// Approval id -> (version given, issued at).
    given: std::collections::HashMap<String, ((&'static str, usize), super::Millis)>,
}

/// The most approvals an [`InboxChanges`] remembers (the newest are kept).
pub const MAX_GIVEN: usize = 1_000;

impl InboxChanges {
    /// The changes since the last call (everything pending, the first time).
    /// `query` should select pending approvals for the voter's keys.
    pub async fn next(
        &mut self,
        store: &dyn super::LedgerStore,
        query: &ApprovalQuery,
        voter: &crate::approval::lifecycle::Voter,
    ) -> Result<Vec<super::ApprovalRecord>, super::StoreError> {
        let mut current = store.list_approvals(query).await?;
        // Given before and no longer pending: read where they went.
        let listed: std::collections::HashSet<&str> =
            current.iter().map(|record| record.approval_id.as_str()).collect();
        let left: Vec<String> = self.given.keys().filter(|id| !listed.contains(id.as_str())).cloned().collect();
        if !left.is_empty() {
            current.extend(store.approvals(&left).await?);
        }
        current.retain(|record| self.admit(record, voter));
        Ok(current)
    }

    /// Of these records (changed approvals, read by someone else), the ones
    /// the voter should hear about.
    pub fn offer<'r>(
        &mut self,
        records: &'r [super::ApprovalRecord],
        voter: &crate::approval::lifecycle::Voter,
    ) -> Vec<&'r super::ApprovalRecord> {
        records.iter().filter(|record| self.admit(record, voter)).collect()
    }

    /// Whether to give `record`: a pending one the voter may decide, new or
    /// changed; one given before that is no longer pending (once).
    fn admit(&mut self, record: &super::ApprovalRecord, voter: &crate::approval::lifecycle::Voter) -> bool {
        use crate::approval::lifecycle::{is_approver, may_see};
        if record.state != ApprovalState::Pending {
            return self.given.remove(&record.approval_id).is_some();
        }
        if !(may_see(record, voter) && is_approver(record, voter)) {
            return false;
        }
        let version = (record.state.as_str(), record.votes.len());
        let before = self.given.insert(record.approval_id.clone(), (version, record.issued_at));
        self.forget_oldest();
        before.map(|(given, _)| given) != Some(version)
    }

    /// Keeps the map at [`MAX_GIVEN`] entries, the newest, trimming in
    /// batches (a quarter over the bound) so the work per approval stays
    /// logarithmic.
    fn forget_oldest(&mut self) {
        if self.given.len() <= MAX_GIVEN + MAX_GIVEN / 4 {
            return;
        }
        let mut issued: Vec<(super::Millis, String)> =
            self.given.iter().map(|(id, (_, issued_at))| (*issued_at, id.clone())).collect();
        issued.sort_unstable();
        let excess = self.given.len() - MAX_GIVEN;
        for (_, id) in issued.into_iter().take(excess) {
            self.given.remove(&id);
        }
    }

    /// How many approvals it remembers.
    pub fn remembered(&self) -> usize {
        self.given.len()
    }
}

/// The inbox: approvals as their viewers list them.
pub trait InboxStore: Send + Sync + std::fmt::Debug {
    /// Approvals as an inbox lists them (see [`ApprovalQuery`]), newest first.
    fn list_approvals<'a>(&'a self, query: &'a ApprovalQuery) -> StoreFuture<'a, Vec<ApprovalRecord>>;

    /// How many approvals are `pending`, all owners together (what every
    /// replica reports as waiting: the store's count, not its own).
    fn count_pending(&self) -> StoreFuture<'_, u64>;
}

/// Conversations due to continue on the server, claimed by one replica at a time.
pub trait ContinuationStore: Send + Sync + std::fmt::Debug {
    /// Claims a conversation marked due to continue, until `until`, for
    /// `executor`, if nobody holds it at `now` (an unexpired claim of
    /// another executor blocks it). With `create`, marks it due first (a
    /// request that continues the conversation itself). `None`: not due, or
    /// held by another.
    fn claim_continuation<'a>(
        &'a self,
        conversation_id: &'a str,
        executor: &'a str,
        until: Millis,
        now: Millis,
        create: bool,
    ) -> StoreFuture<'a, Option<ContinuationClaim>>;

    /// Ends a claim: clears the mark when no decision bumped it since the
    /// claim (returns `true`), else releases it so it is claimed again.
    fn finish_continuation<'a>(&'a self, claim: &'a ContinuationClaim, executor: &'a str) -> StoreFuture<'a, bool>;

    /// Conversations due to continue that nobody holds at `now`, oldest mark first.
    fn due_continuations(&self, now: Millis, limit: usize) -> StoreFuture<'_, Vec<String>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::lifecycle::{Decision, Vote, Voter};
    use crate::ledger::ApprovalRecord;

    /// A pending approval of a conversation without owner (its one user decides it), issued at `n`.
    fn pending(n: usize) -> ApprovalRecord {
        crate::ledger::record::pending_record(format!("ap_{n:06}"), n as i64, i64::MAX)
    }

    #[test]
    fn a_watcher_remembers_a_bounded_number_of_the_newest_approvals() {
        let voter = Voter::new(None);
        let mut heard = InboxChanges::default();
        let records: Vec<ApprovalRecord> = (0..10 * MAX_GIVEN).map(pending).collect();
        for chunk in records.chunks(100) {
            assert_eq!(heard.offer(chunk, &voter).len(), chunk.len(), "each new approval is given once");
            assert!(heard.remembered() <= MAX_GIVEN + MAX_GIVEN / 4, "{}", heard.remembered());
        }
        let newest = &records[records.len() - 10..];
        assert!(heard.offer(newest, &voter).is_empty(), "the newest are remembered: nothing new to give");
        let mut changed = records[0].clone();
        changed.votes.push(Vote { principal: None, decision: Decision::APPROVE, reason: None, at: 1 });
        assert_eq!(heard.offer(std::slice::from_ref(&changed), &voter).len(), 1, "a forgotten one is given again");
    }
}
