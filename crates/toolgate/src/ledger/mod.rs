//! The approval ledger: what the engine asked, what people answered, and what ran.
//!
//! A stateless gate has to trust the client's history about the past; the
//! ledger makes the engine the authority instead. With a ledger
//! ([`crate::TextRequest::ledger`]):
//! - every approval request the engine issues is recorded, `pending`, before
//!   the client sees it, bound to its conversation, call, tool and input digest;
//! - an answer is a **single-use claim**: a conditional transition
//!   `pending → approved | denied` that only the first valid answer wins.
//!   A later answer (a replay, a duplicate, another tab) executes nothing and
//!   gets the stored outcome back; one that contradicts the recorded decision
//!   is refused (`approval_already_decided`) and audited;
//! - an approval id the ledger never issued, or one presented for another
//!   call, input or conversation, is refused even when its signature verifies;
//! - requests expire ([`LedgerConfig::ttl`], per tool [`crate::Tool::approval_ttl`]);
//!   an answer after expiry runs nothing and resolves as *expired*;
//! - an approved call is `executing` while it runs, under a lease the engine
//!   renews; a call whose process died meanwhile is never run again
//!   automatically: it resolves as *interrupted* (outcome unknown), unless the
//!   tool is declared [`crate::Tool::idempotent`], which runs it again;
//! - a result in the history for a call the ledger gated must be the outcome
//!   it recorded (a forged result is refused);
//! - every step is appended to an audit log ([`AuditEvent`]).
//!
//! States and transitions (each one atomic, a conditional update in the store):
//! see [`crate::approval::lifecycle`].
//!
//! The engine defines the store's traits by role (the [`ApprovalStore`] it
//! calls itself, and the conversations and decisions, inbox, continuations,
//! outbox, links and audit roles its users need; [`LedgerStore`] is all of
//! them) and an in-memory store ([`MemoryStore`]); `toolgate-store`
//! implements them on SQLite and Postgres.

mod clock;
mod decision;
mod history;
mod identity;
mod inbox;
mod issued;
mod memory;
mod outbox;
mod owner;
mod record;
mod store;

pub use crate::approval::lifecycle::ApprovalState;
pub(crate) use clock::millis;
pub use clock::{Clock, ManualClock, SystemClock};
pub use decision::{ConversationRead, ConversationStore, DecisionQuery, DecisionScope, StoredDecision};
pub use history::{
    BY_RULE, HistoryEntry, HistoryGuard, HistoryQuery, HistoryRead, HistoryScope, HistoryStore, entries_in,
    guards_hold, history_from_audit, read_of,
};
pub use identity::{
    LINK_PREFIX, MAX_CLIENT_NAME_LEN, MAX_CONVERSATION_ID_LEN, MAX_PRINCIPAL_LEN, NameError, NameKind,
    check_client_name, check_conversation_id, check_group, check_principal,
};
pub use inbox::{
    ApprovalQuery, ContinuationClaim, ContinuationStore, InboxChanges, InboxStore, MAX_GIVEN, StateFilter,
};
pub use issued::{IssuedApprovals, MAX_KEPT, MAX_KEPT_INPUT_BYTES};
pub use memory::MemoryStore;
pub use outbox::{AttemptEnd, AttemptResult, Delivery, DeliveryState, LinkStore, Outbound, OutboxQuery, OutboxStore};
pub use owner::{AuditView, OWNER_SEPARATOR, conversation_key, conversation_name, is_valid_conversation_id};
pub use record::{
    ApprovalRecord, AuditEvent, AuditKind, AuditQuery, Guard, Lease, LineageStep, Millis, Origin, Pruned,
    RecordedDecision, SUB_RUN_SEPARATOR, StoredConversation, Transition, TransitionOutcome, Update,
};
pub use store::{ApprovalStore, AuditStore, LedgerStore, StoreError, StoreFuture};

use std::sync::Arc;
use std::time::Duration;

/// The groups of a `[groups]` table (name -> members) that list `principal`, by name.
pub fn groups_listing(groups: &std::collections::BTreeMap<String, Vec<String>>, principal: &str) -> Vec<String> {
    let listed = groups.iter().filter(|(_, members)| members.iter().any(|member| member == principal));
    listed.map(|(group, _)| group.clone()).collect()
}

/// Requests expire after this long unless configured otherwise (24 hours).
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long a request waits for an approval another request is executing.
pub const DEFAULT_SETTLE_WAIT: Duration = Duration::from_secs(5);
/// How long an execution lease lasts before a running call counts as orphaned.
pub const DEFAULT_EXECUTION_LEASE: Duration = Duration::from_secs(30);

/// The result text of a call whose approval request expired unanswered.
pub const EXPIRED_TEXT: &str = "The approval request for this tool call expired before anyone answered it, so the call did not run. Nobody refused it: ask again if it is still needed.";
/// The result text of a call that started but whose outcome was never recorded.
pub const INTERRUPTED_TEXT: &str = "This tool call was approved and started, but the server stopped before its outcome was recorded, so whether it took effect is unknown. It was not run again: check its effect before trying again.";
/// The `warning` code of an answer to an expired approval request.
pub const WARNING_EXPIRED: &str = "approval_expired";
/// The `warning` code of an approved call whose outcome is unknown.
pub const WARNING_INTERRUPTED: &str = "approval_interrupted";
/// The `warning` code of an answer that lost a race to a conflicting one.
pub const WARNING_ALREADY_DECIDED: &str = "approval_already_decided";
/// The `warning` code of a result the ledger could not record.
pub const WARNING_NOT_RECORDED: &str = "approval_outcome_not_recorded";

/// A store with the settings every conversation shares. Cheap to clone.
#[derive(Clone, Debug)]
pub struct LedgerConfig {
    /// Where records and audit events live: every role, for the server and
    /// the CLI that share this config; the engine itself calls its
    /// [`ApprovalStore`] role only.
    pub store: Arc<dyn LedgerStore>,
    /// What time it is (a [`ManualClock`] in tests).
    pub clock: Arc<dyn Clock>,
    /// How long an approval request stays answerable (tools may override it).
    pub ttl: Duration,
    /// How long an `executing` claim lasts without renewal.
    pub lease: Duration,
    /// This process's executor id (leases name it).
    pub executor: String,
    /// How long a request waits for an approval another request is executing
    /// before it answers `approval_in_progress` (a duplicate answer then gets
    /// the real outcome instead of an error).
    pub settle_wait: Duration,
    /// The approvals this process issued and nobody answered here yet: an
    /// answer that comes back to this process is checked against them
    /// without a store read (see [`IssuedApprovals`]).
    pub issued: Arc<IssuedApprovals>,
    /// The configured groups (`[groups]`): name -> members. An approval
    /// routed to a group records its members when it is issued.
    pub groups: Arc<std::collections::BTreeMap<String, Vec<String>>>,
}

impl LedgerConfig {
    /// A ledger over this store with the system clock and default durations.
    pub fn new(store: Arc<dyn LedgerStore>) -> Self {
        Self {
            store,
            clock: Arc::new(SystemClock),
            ttl: DEFAULT_APPROVAL_TTL,
            lease: DEFAULT_EXECUTION_LEASE,
            executor: format!("exe_{}", uuid::Uuid::now_v7().simple()),
            settle_wait: DEFAULT_SETTLE_WAIT,
            issued: Arc::default(),
            groups: Arc::default(),
        }
    }

    /// Sets the configured groups.
    pub fn groups(mut self, groups: std::collections::BTreeMap<String, Vec<String>>) -> Self {
        self.groups = Arc::new(groups);
        self
    }

    /// The members of a configured group (`None`: not configured).
    pub fn group_members(&self, group: &str) -> Option<Vec<String>> {
        self.groups.get(group).cloned()
    }

    /// The configured groups that list `principal`.
    pub fn member_groups(&self, principal: &str) -> Vec<String> {
        groups_listing(&self.groups, principal)
    }

    /// Replaces the clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets how long approval requests stay answerable.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets how long a request waits for another request's execution of an approval.
    pub fn settle_wait(mut self, wait: Duration) -> Self {
        self.settle_wait = wait;
        self
    }

    /// Sets the execution lease.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// The ledger of a conversation without owner (single-user mode), by its id.
    pub fn conversation(&self, conversation_id: impl Into<String>) -> Ledger {
        Ledger {
            config: self.clone(),
            conversation_id: conversation_id.into(),
            owner: None,
            client: None,
            principal: None,
            sub_run: None,
            origin: Origin::Chat,
        }
    }

    /// The ledger of `owner`'s conversation `id` (`None`: without owner): its
    /// approvals are bound to the [`conversation_key`] and record `owner` as a field.
    pub fn owned(&self, owner: Option<&str>, id: &str) -> Ledger {
        Ledger {
            config: self.clone(),
            conversation_id: conversation_key(owner, id),
            owner: owner.map(str::to_owned),
            client: None,
            principal: None,
            sub_run: None,
            origin: Origin::Chat,
        }
    }
}

/// The ledger as one engine call sees it: a conversation and who is answering.
#[derive(Clone, Debug)]
pub struct Ledger {
    /// The shared settings.
    pub config: LedgerConfig,
    /// The key of the conversation approvals are bound to (its owner and id,
    /// see [`conversation_key`]).
    pub conversation_id: String,
    /// Who owns the conversation (`None`: nobody); recorded on every approval
    /// issued in it.
    pub owner: Option<String>,
    /// The MCP client whose calls it holds (the gateway's), recorded on every approval.
    pub client: Option<String>,
    /// Who sent the answers of this request (recorded with every answer).
    pub principal: Option<String>,
    /// For a sub-agent's ledger: where its sub-run stands under the root
    /// conversation (see [`crate::agent`]); its approvals' `issued` events
    /// name the lineage and the root conversation.
    pub sub_run: Option<crate::agent::SubRunPlace>,
    /// Which path holds the approvals it issues ([`Origin`]; a chat's by default).
    pub origin: Origin,
}

impl Ledger {
    /// An audit event of this conversation, caused by this request's principal.
    pub fn event(
        &self,
        kind: AuditKind,
        approval_id: &str,
        tool_call_id: &str,
        at: Millis,
        data: serde_json::Value,
    ) -> AuditEvent {
        AuditEvent {
            seq: 0,
            at,
            kind,
            approval_id: approval_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            conversation_id: self.name().to_owned(),
            owner: self.owner.clone(),
            principal: self.principal.clone(),
            data,
        }
    }

    /// The conversation's id as its owner named it.
    pub fn name(&self) -> &str {
        conversation_name(&self.conversation_id, self.owner.as_deref())
    }

    /// Records `client` as the MCP client of every approval issued here.
    pub fn client(mut self, client: impl Into<String>) -> Self {
        self.client = Some(client.into());
        self
    }

    /// Records answers of this request as given by `principal`.
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// Records the approvals it issues as held by `origin`'s path.
    pub fn origin(mut self, origin: Origin) -> Self {
        self.origin = origin;
        self
    }
}
