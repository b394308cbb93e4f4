//! Who decides an approval, and how their votes add up.
//!
//! An approval without [`Routing`] is decided by its conversation's owner
//! (anyone, in a conversation without one: single-user mode), in one
//! answer. An approval issued under a rule with `approvers` carries its
//! routing: the approvers as configured (principals and `group:NAME`), the
//! members of the configured groups at the time it was issued (so every
//! process that decides it agrees on who may), the quorum, and whether the
//! requester may count. Each approver votes once ([`Vote`]); the approval is
//! approved when `quorum` distinct approvers approved, and denied by the
//! first denial ([`tally`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::schedule::Schedule;
use super::{ApprovalState, Decision};
use crate::ledger::{ApprovalRecord, Millis};

/// How rules name a group among principals: `group:finance`.
pub const GROUP_PREFIX: &str = "group:";

/// Who must decide an approval, as a rule asks (before groups are resolved).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Route {
    /// Principals and `group:NAME`s, as configured (never empty).
    pub approvers: Vec<String>,
    /// Distinct approvals needed (at least 1).
    pub quorum: u32,
    /// Whether the requester counts as an approver.
    pub self_approval: bool,
    /// Escalation and reminders while it waits.
    pub schedule: Schedule,
}

impl Route {
    /// The routing an approval issued now records: `groups` gives the
    /// members of each configured group (a group it does not know, e.g. one
    /// from a JWT claim, matches at decision time only).
    pub fn resolve(&self, groups: impl Fn(&str) -> Option<Vec<String>>) -> Routing {
        let mut members: Vec<String> = Vec::new();
        for approver in &self.approvers {
            match approver.strip_prefix(GROUP_PREFIX) {
                Some(group) => members.extend(groups(group).unwrap_or_default()),
                None => members.push(approver.clone()),
            }
        }
        members.sort();
        members.dedup();
        Routing {
            approvers: self.approvers.clone(),
            members,
            quorum: self.quorum,
            self_approval: self.self_approval,
            schedule: self.schedule.clone(),
        }
    }
}

/// The routing an approval was issued with (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Routing {
    /// Principals and `group:NAME`s, as configured.
    pub approvers: Vec<String>,
    /// The principals they named when it was issued (configured groups resolved).
    pub members: Vec<String>,
    /// Distinct approvals needed.
    pub quorum: u32,
    /// Whether the requester counts.
    pub self_approval: bool,
    /// Escalation and reminders, and how far they went (see [`super::timer`]).
    #[serde(default, skip_serializing_if = "Schedule::is_unset")]
    pub schedule: Schedule,
}

/// One approver's vote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Vote {
    /// Who voted (`None`: the one user of a server without principals).
    pub principal: Option<String>,
    /// `approve` or `deny`.
    #[serde(with = "choice")]
    pub decision: Decision,
    /// The reason given, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was cast.
    pub at: Millis,
}

/// Serializes a vote's decision as `"approve"` or `"deny"` (the edit and the
/// denial's reason live in the record's decision and the vote's `reason`).
mod choice {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Decision;

    pub(super) fn serialize<S: Serializer>(decision: &Decision, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(if decision.is_approve() { "approve" } else { "deny" })
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Decision, D::Error> {
        match String::deserialize(deserializer)?.as_str() {
            "approve" => Ok(Decision::APPROVE),
            "deny" => Ok(Decision::Deny { reason: None }),
            other => Err(serde::de::Error::custom(format!("`{other}` is not a vote (approve or deny)"))),
        }
    }
}

/// Who is voting: a principal and the groups their sign-in carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Voter {
    /// The principal (`None`: a server without principals).
    pub principal: Option<String>,
    /// Their groups (from the JWT claim and the config's `[groups]`), without `group:`.
    pub groups: Vec<String>,
    /// True for an admin (sees every approval; decides only where an approver).
    pub admin: bool,
    /// True for the holder of a bearer link (`links = "bearer"`) signed for
    /// the one approval they act on: they see it and count as one of its
    /// approvers, under their principal `link:<channel>`.
    pub bearer_link: bool,
    /// True for a request without a principal on a server that has
    /// principals (a `--principal-header` request without the header): it is
    /// nobody, so it approves, denies and withdraws nothing out of band.
    pub anonymous: bool,
}

impl Voter {
    /// A voter without groups.
    pub fn new(principal: Option<String>) -> Self {
        Self { principal, groups: Vec::new(), admin: false, bearer_link: false, anonymous: false }
    }

    /// The keys this voter is found under in an approval's viewers
    /// ([`viewers`]): their principal and `group:NAME` for each group.
    pub fn keys(&self) -> Vec<String> {
        let mut keys = vec![self.principal.clone().unwrap_or_default()];
        keys.extend(self.groups.iter().map(|group| format!("{GROUP_PREFIX}{group}")));
        keys
    }
}

/// Why a vote (or a withdrawal) is refused. Each has a stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VoteRefusal {
    /// No approval has this id that the voter may see.
    #[error("no approval `{0}` is visible to you")]
    Unknown(String),
    /// The voter may see the approval but is not among its approvers.
    #[error("you are not an approver of approval `{approval_id}`; it waits for {waiting_for}")]
    NotAnApprover {
        /// The approval.
        approval_id: String,
        /// Who may decide it, in words.
        waiting_for: String,
    },
    /// The voter is an approver but requested the call, and the rule forbids self-approval.
    #[error("approval `{0}` was requested by you, and its rule does not let the requester approve it")]
    SelfApprovalForbidden(String),
    /// The voter already voted on it.
    #[error("you already voted on approval `{0}`")]
    AlreadyVoted(String),
    /// It is no longer pending.
    #[error("approval `{approval_id}` was already decided: it is {}", state.as_str())]
    AlreadyDecided {
        /// The approval.
        approval_id: String,
        /// Where it is now.
        state: ApprovalState,
    },
    /// It expired before this vote.
    #[error("approval `{0}` expired before it was decided")]
    Expired(String),
    /// An edit on an approval that needs several approvers.
    #[error("approval `{0}` needs several approvers, who cannot approve different inputs: edits are refused")]
    EditNeedsSingleApprover(String),
    /// A withdrawal by someone other than the requester.
    #[error("only the requester may withdraw approval `{0}`")]
    NotTheRequester(String),
    /// A reason or note longer than [`MAX_REASON_BYTES`]: it would go to the
    /// model, the audit log and every notification.
    #[error("the vote's reason is {len} bytes long; at most {max} are allowed")]
    ReasonTooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// The longest reason (or note) a vote may carry, in bytes.
pub const MAX_REASON_BYTES: usize = 4096;

impl VoteRefusal {
    /// The stable code (`not_an_approver`, `already_voted`, ...).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unknown(_) => "unknown_approval",
            Self::NotAnApprover { .. } => "not_an_approver",
            Self::SelfApprovalForbidden(_) => "self_approval_forbidden",
            Self::AlreadyVoted(_) => "already_voted",
            Self::AlreadyDecided { .. } => "approval_already_decided",
            Self::Expired(_) => "approval_expired",
            Self::EditNeedsSingleApprover(_) => "edit_needs_single_approver",
            Self::NotTheRequester(_) => "not_the_requester",
            Self::ReasonTooLong { .. } => "invalid_body",
        }
    }
}

/// Where the votes stand.
#[derive(Debug, Clone, PartialEq)]
pub enum Tally {
    /// Not decided yet: `approvals` of `quorum` so far.
    Open {
        /// Approvals so far.
        approvals: u32,
        /// Needed.
        quorum: u32,
    },
    /// The votes reached this decision.
    Decided(Decision),
}

/// Adds up `votes` for an approval needing `quorum`: the first denial denies;
/// `quorum` approvals approve (with the edit of the deciding vote, if any).
pub fn tally(votes: &[Vote], quorum: u32, edit: Option<&Value>) -> Tally {
    if let Some(denial) = votes.iter().find(|vote| !vote.decision.is_approve()) {
        return Tally::Decided(Decision::Deny { reason: denial.reason.clone() });
    }
    let approvals = u32::try_from(votes.len()).unwrap_or(u32::MAX);
    if approvals >= quorum.max(1) {
        Tally::Decided(Decision::Approve { edited_input: edit.cloned() })
    } else {
        Tally::Open { approvals, quorum }
    }
}

/// The requester of an approval: its conversation's owner, as the record stores it.
pub fn requester(record: &ApprovalRecord) -> Option<&str> {
    record.owner.as_deref()
}

/// The keys an approval is listed under for its viewers: its requester
/// (`""` for a conversation without owner), its approvers as configured and
/// their members at issue.
pub fn viewers(record: &ApprovalRecord) -> Vec<String> {
    let mut keys = vec![requester(record).unwrap_or_default().to_owned()];
    if let Some(routing) = &record.routing {
        keys.extend(routing.approvers.iter().cloned());
        keys.extend(routing.members.iter().cloned());
    }
    keys.sort();
    keys.dedup();
    keys
}

/// Whether `voter` may see the approval: its requester, an admin, one of its
/// approvers. A voter without a principal (the one user of a server without
/// principals, or an anonymous request) sees the approvals of conversations
/// without owner, and no others.
pub fn may_see(record: &ApprovalRecord, voter: &Voter) -> bool {
    let keys = voter.keys();
    voter.admin || voter.bearer_link || viewers(record).iter().any(|viewer| keys.contains(viewer))
}

/// Whether `voter` is among the approval's approvers (ignoring whether they voted).
pub fn is_approver(record: &ApprovalRecord, voter: &Voter) -> bool {
    if voter.bearer_link {
        return true;
    }
    let owner = requester(record);
    match (&record.routing, voter.principal.as_deref()) {
        // Without a principal: only in a conversation without owner (its one user decides).
        (_, None) => owner.is_none(),
        (None, Some(principal)) => owner.is_none_or(|owner| owner == principal),
        (Some(routing), Some(principal)) => {
            routing.members.iter().any(|member| member == principal)
                || routing.approvers.iter().any(|approver| match approver.strip_prefix(GROUP_PREFIX) {
                    Some(group) => voter.groups.iter().any(|own| own == group),
                    None => approver == principal,
                })
        }
    }
}

/// Checks that `voter` may vote on the pending approval now (see [`VoteRefusal`]).
pub fn check_vote(record: &ApprovalRecord, voter: &Voter, decision: &Decision, now: Millis) -> Result<(), VoteRefusal> {
    let id = || record.approval_id.clone();
    if !may_see(record, voter) {
        return Err(VoteRefusal::Unknown(id()));
    }
    match record.state {
        ApprovalState::Pending if record.expires_at <= now => return Err(VoteRefusal::Expired(id())),
        ApprovalState::Pending => {}
        ApprovalState::Expired => return Err(VoteRefusal::Expired(id())),
        state => return Err(VoteRefusal::AlreadyDecided { approval_id: id(), state }),
    }
    if voter.anonymous || !is_approver(record, voter) {
        return Err(VoteRefusal::NotAnApprover { approval_id: id(), waiting_for: waiting_for(record) });
    }
    let routing = record.routing.as_ref();
    let is_requester = voter.principal.is_some() && voter.principal.as_deref() == requester(record);
    if routing.is_some_and(|routing| !routing.self_approval) && is_requester {
        return Err(VoteRefusal::SelfApprovalForbidden(id()));
    }
    if record.votes.iter().any(|vote| vote.principal == voter.principal) {
        return Err(VoteRefusal::AlreadyVoted(id()));
    }
    let quorum = routing.map_or(1, |routing| routing.quorum);
    if quorum > 1 && matches!(decision, Decision::Approve { edited_input: Some(_) }) {
        return Err(VoteRefusal::EditNeedsSingleApprover(id()));
    }
    Ok(())
}

/// Approvers as configured, in words: ``group `finance`, `dave` ``.
pub(crate) fn approvers_in_words(approvers: &[String]) -> String {
    let named: Vec<String> = approvers
        .iter()
        .map(|approver| match approver.strip_prefix(GROUP_PREFIX) {
            Some(group) => format!("group `{group}`"),
            None => format!("`{approver}`"),
        })
        .collect();
    named.join(", ")
}

/// Who an approval waits for, in words: ``group `finance` (1 of 2)``.
pub fn waiting_for(record: &ApprovalRecord) -> String {
    match &record.routing {
        None => match requester(record) {
            Some(owner) => format!("`{owner}`"),
            None => "its requester".to_owned(),
        },
        Some(routing) => {
            let approvals = record.votes.iter().filter(|vote| vote.decision.is_approve()).count();
            format!("{} ({approvals} of {})", approvers_in_words(&routing.approvers), routing.quorum)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn vote(principal: &str, decision: Decision) -> Vote {
        Vote { principal: Some(principal.into()), decision, reason: Some(format!("{principal}'s reason")), at: 1 }
    }

    #[test]
    fn one_denial_denies_and_the_quorum_approves() {
        let yes = |p: &str| vote(p, Decision::APPROVE);
        assert_eq!(tally(&[yes("bob")], 2, None), Tally::Open { approvals: 1, quorum: 2 });
        assert_eq!(tally(&[yes("bob"), yes("carol")], 2, None), Tally::Decided(Decision::APPROVE));
        let denied = tally(&[yes("bob"), vote("erin", Decision::Deny { reason: None })], 2, None);
        assert_eq!(denied, Tally::Decided(Decision::Deny { reason: Some("erin's reason".into()) }));
    }

    #[test]
    fn groups_resolve_to_their_members_at_issue() {
        let route = Route {
            approvers: vec!["group:finance".into(), "dave".into()],
            quorum: 2,
            self_approval: false,
            schedule: Schedule::default(),
        };
        let routing = route.resolve(|group| (group == "finance").then(|| vec!["bob".into(), "carol".into()]));
        assert_eq!(routing.members, ["bob", "carol", "dave"]);
        let encoded = serde_json::to_value(vote("bob", Decision::APPROVE)).unwrap();
        assert_eq!(encoded, json!({"principal": "bob", "decision": "approve", "reason": "bob's reason", "at": 1}));
    }
}
