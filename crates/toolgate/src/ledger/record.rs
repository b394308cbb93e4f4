//! What the ledger stores: approval records, their transitions, audit events
//! and server-side conversations.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_protocol::ToolResultOutput;

use super::AuditView;
use crate::approval::lifecycle::{ApprovalState, Decision, Routing, Vote};

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

/// A [`Decision`] as the ledger records it: who made it, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedDecision {
    /// Approved or denied.
    pub approved: bool,
    /// The input the person approved instead of the model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_input: Option<Value>,
    /// The reason given with a denial (or why nobody answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who answered, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// When the answer was recorded.
    pub decided_at: Millis,
}

impl RecordedDecision {
    /// A decision made now by `principal`.
    pub fn new(decision: Decision, principal: Option<String>, decided_at: Millis) -> Self {
        match decision {
            Decision::Approve { edited_input } => {
                Self { approved: true, edited_input, reason: None, principal, decided_at }
            }
            Decision::Deny { reason } => Self { approved: false, edited_input: None, reason, principal, decided_at },
        }
    }

    /// What was decided.
    pub fn decision(&self) -> Decision {
        if self.approved {
            Decision::Approve { edited_input: self.edited_input.clone() }
        } else {
            Decision::Deny { reason: self.reason.clone() }
        }
    }
}

/// Separates the parts of a sub-run's conversation key: the root
/// conversation's key, then each lineage call id after it (an ASCII record
/// separator, which no conversation id may hold, so no client can name it).
pub const SUB_RUN_SEPARATOR: char = '\u{1e}';

/// One agent call on the way from the root conversation to a sub-agent's
/// call (see [`crate::agent`]): a record's [`ApprovalRecord::lineage`] lists
/// them from the root down.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LineageStep {
    /// The agent (the tool's name).
    pub agent: String,
    /// The id of the call that ran it, at its caller's level.
    pub tool_call_id: String,
}

/// Who holds an `executing` claim, and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The executor (one id per process).
    pub executor: String,
    /// The claim lapses after this time unless renewed.
    pub until: Millis,
}

/// Which path holds an approval: where it was issued, and so who may read
/// and move it besides its approvers (the call-gating API serves only its
/// own). A stored field, set when the record is issued, kept by the
/// approval that supersedes it; never recovered from an id or a conversation's name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Origin {
    /// A chat's conversation (the chat API, AG-UI, a sub-agent's run, the CLI's chat).
    #[default]
    Chat,
    /// A call held by the MCP gateway (`toolgate mcp-gateway`).
    Gateway,
    /// A call of the call-gating API (`POST /api/calls`).
    Calls,
}

impl Origin {
    /// Every origin.
    pub const ALL: [Self; 3] = [Self::Chat, Self::Gateway, Self::Calls];

    /// Its stored name: `chat`, `gateway` or `calls`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Gateway => "gateway",
            Self::Calls => "calls",
        }
    }

    /// The origin stored as `name`, if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|origin| origin.as_str() == name)
    }
}

/// One issued approval request and everything that happened to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRecord {
    /// The approval id sent to the client.
    pub approval_id: String,
    /// The key of the conversation it was issued in ([`super::conversation_key`]
    /// of its owner and the chat or thread id).
    pub conversation_id: String,
    /// Who owns that conversation: the principal who asked (`None`: a
    /// conversation without owner). Stored as a field; never read out of the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The MCP client that asked, for a call held by the gateway (its
    /// `clientInfo.name`, checked where it entered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The call it gates.
    pub tool_call_id: String,
    /// The tool the call names.
    pub tool_name: String,
    /// The call's input, canonical JSON.
    pub input: Value,
    /// The input digest ([`crate::approval::input_digest`]: base64url SHA-256 of the canonical input).
    pub input_digest: String,
    /// When it was issued.
    pub issued_at: Millis,
    /// When it stops being answerable.
    pub expires_at: Millis,
    /// Where it is now.
    pub state: ApprovalState,
    /// The deciding answer, once there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<RecordedDecision>,
    /// The stored result (executed), error (failed) or outcome text (interrupted, expired).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<ToolResultOutput>,
    /// The execution claim while executing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// When the state last changed.
    pub updated_at: Millis,
    /// Who must decide it, when a rule named approvers (`None`: the
    /// conversation's owner, in one answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    /// The votes cast so far, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub votes: Vec<Vote>,
    /// Why a person is asked (the rule or tool policy that asked), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The approval this one replaced: an approver edited that one's input
    /// into this one's, and the rules route the edit to other approvers
    /// ([`crate::approval::lifecycle::supersede`]). Same call, same conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
    /// The approval that replaced this one (set when it moves to `superseded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// Which path holds it (set when it is issued; see [`Origin`]).
    #[serde(default)]
    pub origin: Origin,
    /// The JSON Schema its requester said the input must pass (the
    /// call-gating API's `inputSchema`): an approver's edit must pass it too
    /// ([`crate::approval::lifecycle::check_edit`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// For a sub-agent's call: the agent calls from the root conversation
    /// down to the sub-run that made it (empty for a call of the root; see
    /// [`crate::agent`]). Stored as a field, beside the sub-run's
    /// conversation key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lineage: Vec<LineageStep>,
}

impl ApprovalRecord {
    /// The conversation's id as its owner named it (the key without the
    /// owner's part, see [`super::conversation_name`]).
    pub fn conversation_name(&self) -> &str {
        super::conversation_name(&self.conversation_id, self.owner.as_deref())
    }

    /// The conversation where it is answered, as its owner named it: the
    /// root conversation's for a sub-agent's call (its key is the root's,
    /// then each [`Self::lineage`] call id after [`SUB_RUN_SEPARATOR`]), else
    /// [`Self::conversation_name`].
    pub fn root_conversation_name(&self) -> &str {
        let name = self.conversation_name();
        if self.lineage.is_empty() {
            return name;
        }
        let suffix: String = self
            .lineage
            .iter()
            .flat_map(|step| std::iter::once(SUB_RUN_SEPARATOR).chain(step.tool_call_id.chars()))
            .collect();
        name.strip_suffix(suffix.as_str()).unwrap_or(name)
    }
}

/// A condition a transition needs besides the current state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// No further condition.
    None,
    /// The request has not expired at this time (`expires_at > t`).
    NotExpiredAt(Millis),
    /// The request has expired at this time (`expires_at <= t`).
    ExpiredAt(Millis),
    /// The execution lease has lapsed at this time (`lease.until <= t`).
    LeaseLapsedAt(Millis),
    /// Exactly `count` votes are recorded and the request has not expired
    /// at `at`: a vote counted on the votes it read (optimistic).
    Votes {
        /// The votes the voter read.
        count: u32,
        /// The time of the vote.
        at: Millis,
    },
}

/// What a transition writes besides the new state. `None` fields keep their value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Update {
    /// The deciding answer.
    pub decision: Option<RecordedDecision>,
    /// The outcome.
    pub output: Option<ToolResultOutput>,
    /// The execution claim (set when entering `executing`, cleared when leaving it).
    pub lease: Option<Lease>,
    /// Every vote, the new one last (replaces the stored votes).
    pub votes: Option<Vec<Vote>>,
    /// The conversation's step is due to continue on the server: the store
    /// marks it in the same transaction (see
    /// [`crate::ledger::ContinuationStore::claim_continuation`]).
    pub continuation: bool,
    /// The approval that replaces this one (with `to = superseded`).
    pub superseded_by: Option<String>,
}

/// One conditional state change: applied only when the record is in `from`
/// and the guard holds, atomically.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// The approval to move.
    pub approval_id: String,
    /// The state it must be in.
    pub from: ApprovalState,
    /// The state it moves to.
    pub to: ApprovalState,
    /// The extra condition.
    pub guard: Guard,
    /// What else to write.
    pub update: Update,
    /// The time of the change.
    pub at: Millis,
    /// Audit events appended in the same transaction if, and only if, it moves.
    pub events: Vec<AuditEvent>,
}

/// What a transition did.
#[derive(Debug, Clone, PartialEq)]
pub enum TransitionOutcome {
    /// It applied; the record as it is now.
    Moved(ApprovalRecord),
    /// It did not apply; the record as it is (in another state, or the guard failed).
    Unmoved(ApprovalRecord),
    /// No record has this approval id.
    Missing,
}

/// What [`crate::ledger::AuditStore::prune`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pruned {
    /// Approval records in a final state.
    pub approvals: u64,
    /// Audit events.
    pub events: u64,
    /// Conversations.
    pub conversations: u64,
}

/// What an audit event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuditKind {
    /// An approval request was issued.
    Issued,
    /// A person approved.
    Approved,
    /// A person denied (or nobody answered before the conversation moved on).
    Denied,
    /// The approval came with an edited input.
    Edited,
    /// The call ran; the result is in the data.
    Executed,
    /// The call ran and failed; the error is in the data.
    Failed,
    /// The request expired unanswered.
    Expired,
    /// The call started but its outcome was never stored.
    Interrupted,
    /// An answer was refused (replayed, forged, conflicting, expired); why is in the data.
    Rejected,
    /// An approver voted; `principal` is the voter, the data holds the decision and reason.
    Voted,
    /// The requester withdrew the request before it was decided.
    Withdrawn,
    /// The server continued the conversation's run itself after the last
    /// decision; the data names the replica (`executor`).
    Continued,
    /// An approver's edit needed other approvers; the data names the new
    /// approval (`supersededBy`), the edited input and whom it waits for.
    Superseded,
    /// An escalation step added approvers; the data names them.
    Escalated,
    /// The approvers were reminded of a pending approval.
    Reminded,
    /// A notification was delivered; the data names the channel and delivery.
    Notified,
    /// A notification attempt failed; the data says why and whether it is retried.
    #[serde(rename = "notification_failed")]
    NotificationFailed,
    /// A rule or the tool's policy let a call run without asking, judged on
    /// the history (a rule's history term): recorded, atomically with that
    /// history, just before it runs (see [`crate::ledger::HistoryStore::append_if`]).
    /// With an approval id: the claim of a call a person approved, judged
    /// again on the history as it started
    /// ([`crate::approval::lifecycle::counted`], `decidedBy`: `approval`).
    Allowed,
    /// A rule in shadow mode matched a call: the data names the rule and what
    /// it would have decided (it was not enforced).
    Shadowed,
    /// A call ran without asking on a grant (a bounded approval, see
    /// [`crate::approval::lifecycle::grant`]): one use spent; the data names
    /// the grant (`grant`), who granted it (`grantedBy`) and the uses left.
    Granted,
}

impl AuditKind {
    /// Every kind.
    pub const ALL: [Self; 20] = [
        Self::Issued,
        Self::Approved,
        Self::Denied,
        Self::Edited,
        Self::Executed,
        Self::Failed,
        Self::Expired,
        Self::Interrupted,
        Self::Rejected,
        Self::Voted,
        Self::Withdrawn,
        Self::Continued,
        Self::Superseded,
        Self::Escalated,
        Self::Reminded,
        Self::Notified,
        Self::NotificationFailed,
        Self::Allowed,
        Self::Shadowed,
        Self::Granted,
    ];

    /// The name stored and shown (`issued`, `approved`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Issued => "issued",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Edited => "edited",
            Self::Executed => "executed",
            Self::Failed => "failed",
            Self::Expired => "expired",
            Self::Interrupted => "interrupted",
            Self::Rejected => "rejected",
            Self::Voted => "voted",
            Self::Withdrawn => "withdrawn",
            Self::Continued => "continued",
            Self::Superseded => "superseded",
            Self::Escalated => "escalated",
            Self::Reminded => "reminded",
            Self::Notified => "notified",
            Self::NotificationFailed => "notification_failed",
            Self::Allowed => "allowed",
            Self::Shadowed => "shadowed",
            Self::Granted => "granted",
        }
    }

    /// The kind with this name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }
}

/// One append-only audit entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// Position in the log, assigned by the store (0 before it is stored).
    pub seq: i64,
    /// When it happened.
    pub at: Millis,
    /// What happened.
    pub kind: AuditKind,
    /// The approval concerned.
    pub approval_id: String,
    /// Its tool call.
    pub tool_call_id: String,
    /// Its conversation's id (as the client named it; see `owner`).
    pub conversation_id: String,
    /// Who owns that conversation, when it has an owner (see [`crate::ledger::conversation_key`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Who caused it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The details: reason, inputs, result or error, why an answer was rejected.
    pub data: Value,
}

/// Which audit events to list (every condition given must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only this conversation's.
    pub conversation_id: Option<String>,
    /// Only events at or after this time.
    pub since: Option<Millis>,
    /// Only events after this position (for following the log).
    pub after_seq: Option<i64>,
    /// At most this many (oldest first).
    pub limit: Option<usize>,
    /// Whose view: only the events it may see.
    pub view: AuditView,
}

impl AuditEvent {
    /// True when `view` may see this event, given the approvals its principal
    /// answered (`answered`, for [`AuditView::Principal`]). An event of a call
    /// decided without an approval (an empty approval id) is its owner's only.
    pub fn visible_in(&self, view: &AuditView, answered: impl Fn(&str) -> bool) -> bool {
        match view {
            AuditView::All => true,
            AuditView::Principal(principal) => {
                self.owner.as_deref() == Some(principal.as_str())
                    || (!self.approval_id.is_empty() && answered(&self.approval_id))
            }
            AuditView::Anonymous => self.owner.is_none(),
        }
    }

    /// True when this event records `principal` answering its approval (a
    /// rule's `denied` event of a call without an approval answers none).
    pub fn is_answer_by(&self, principal: &str) -> bool {
        matches!(self.kind, AuditKind::Approved | AuditKind::Denied | AuditKind::Edited | AuditKind::Voted)
            && self.principal.as_deref() == Some(principal)
            && !self.approval_id.is_empty()
    }
}

/// A conversation kept by the server, as its UI messages.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredConversation {
    /// The conversation's key ([`super::conversation_key`] of its owner and id).
    pub conversation_id: String,
    /// Who owns it (`None`: a conversation without owner).
    pub owner: Option<String>,
    /// The messages (the JSON array the server returns from `GET /api/chats/:id`).
    pub messages: Value,
    /// Bumped by every save (optimistic concurrency).
    pub version: i64,
    /// When it was last saved.
    pub updated_at: Millis,
}

impl Transition {
    /// True when this transition applies to `record` as it is (state and guard).
    pub fn applies_to(&self, record: &ApprovalRecord) -> bool {
        record.state == self.from
            && match self.guard {
                Guard::None => true,
                Guard::NotExpiredAt(now) => record.expires_at > now,
                Guard::ExpiredAt(now) => record.expires_at <= now,
                Guard::LeaseLapsedAt(now) => record.lease.as_ref().is_none_or(|lease| lease.until <= now),
                Guard::Votes { count, at } => record.votes.len() == count as usize && record.expires_at > at,
            }
    }

    /// Writes this transition into `record` (call only when it applies).
    /// Leaving `executing` clears the lease.
    pub fn write_into(&self, record: &mut ApprovalRecord) {
        record.state = self.to;
        record.updated_at = self.at;
        if let Some(decision) = &self.update.decision {
            record.decision = Some(decision.clone());
        }
        if let Some(output) = &self.update.output {
            record.output = Some(output.clone());
        }
        if let Some(votes) = &self.update.votes {
            record.votes = votes.clone();
        }
        if let Some(successor) = &self.update.superseded_by {
            record.superseded_by = Some(successor.clone());
        }
        if self.update.lease.is_some() {
            record.lease = self.update.lease.clone();
        } else if self.to != ApprovalState::Executing {
            record.lease = None;
        }
    }
}

/// A pending approval of conversation `c` without owner, for unit tests.
#[cfg(test)]
pub(crate) fn pending_record(approval_id: String, issued_at: Millis, expires_at: Millis) -> ApprovalRecord {
    ApprovalRecord {
        tool_call_id: format!("call_{approval_id}"),
        approval_id,
        conversation_id: "c".into(),
        owner: None,
        client: None,
        tool_name: "t".into(),
        input: serde_json::json!({}),
        input_digest: String::new(),
        issued_at,
        expires_at,
        state: ApprovalState::Pending,
        decision: None,
        output: None,
        lease: None,
        updated_at: 0,
        routing: None,
        votes: Vec::new(),
        reason: None,
        supersedes: None,
        superseded_by: None,
        origin: Origin::Chat,
        input_schema: None,
        lineage: Vec::new(),
    }
}
