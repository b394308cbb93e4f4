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
/// (state, vote count) of each approval it gave, so a watcher costs a small
/// map. The server's `GET /api/approvals/stream` and `toolgate approvals
/// watch` both read their inbox through it.
#[derive(Debug, Default)]
pub struct InboxChanges {
    given: std::collections::HashMap<String, (&'static str, usize)>,
}

impl InboxChanges {
    /// The changes since the last call (everything pending, the first time).
    /// `query` should select pending approvals for the voter's keys.
    pub async fn next(
        &mut self,
        store: &dyn super::ApprovalStore,
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
        self.given.insert(record.approval_id.clone(), version) != Some(version)
    }
}
