//! An approval as the inbox shows it, and as the chat's
//! `data-toolgate-approval` part reports it. The types here are what goes
//! over the wire, and what the API reference (`GET /openapi.json`) describes.

use serde::Serialize;
use serde_json::Value;
use toolgate::approval::lifecycle::{GROUP_PREFIX, requester};
use toolgate::ledger::{ApprovalRecord, ApprovalState, Millis};
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

/// RFC 3339, in UTC, to the millisecond.
pub(crate) fn rfc3339(millis: Millis) -> Value {
    timestamp(millis).map_or(Value::Null, Value::String)
}

/// [`rfc3339`] as text (`None` out of the calendar's range).
pub(crate) fn timestamp(millis: Millis) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(millis)
        .map(|time| time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// An approval in the inbox (`GET /api/approvals/{id}`), in the approvals
/// stream, and in notifications.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ApprovalItem {
    /// The approval's id.
    id: String,
    /// The tool call it gates.
    tool_call_id: String,
    /// The tool's name.
    tool: String,
    /// The call's input (any JSON).
    input: Value,
    /// Why it asks (the rule's or the tool's reason).
    reason: Option<String>,
    /// The conversation it is answered in (the chat id, or `ag-ui:` and the
    /// AG-UI thread id): the root conversation for a sub-agent's call.
    conversation_id: String,
    /// For a sub-agent's call: the agent calls from the root conversation
    /// down to the sub-agent that made it (absent for a call of the root).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(required = false)]
    lineage: Vec<LineageItem>,
    /// Who asked (`null`: the one user of a server without principals).
    requester: Option<String>,
    /// Who decides: principals and `group:NAME`s (the requester alone when the rule names nobody).
    approvers: Vec<String>,
    /// How many approvals decide it.
    quorum: u32,
    /// The votes so far, oldest first.
    votes: Vec<VoteItem>,
    /// Where it stands.
    #[schema(schema_with = approval_state_schema)]
    state: &'static str,
    /// When it was requested (RFC 3339).
    #[schema(format = DateTime)]
    created_at: Option<String>,
    /// When it expires unless decided (RFC 3339).
    #[schema(format = DateTime)]
    expires_at: Option<String>,
    /// The approval this one replaced: an edit of that one's input needed
    /// this one's approvers (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    supersedes: Option<String>,
    /// The approval that replaced this one (state `superseded`; absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    superseded_by: Option<String>,
}

/// One agent call on the way from the root conversation to a sub-agent's call.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LineageItem {
    /// The agent (the name of the tool that runs it).
    agent: String,
    /// The id of the call that ran it, at its caller's level.
    tool_call_id: String,
}

/// One vote on an approval.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct VoteItem {
    /// Who voted (`null`: the one user of a server without principals).
    principal: Option<String>,
    /// What they chose.
    decision: Choice,
    /// When (RFC 3339).
    #[schema(format = DateTime)]
    at: Option<String>,
    /// The reason they gave.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// A vote's choice.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Choice {
    /// For the call.
    Approve,
    /// Against it.
    Deny,
}

/// The `data` of a chat's `data-toolgate-approval` part.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ApprovalPart {
    /// The approval's id.
    approval_id: String,
    /// The tool call it gates.
    tool_call_id: String,
    /// Where it stands.
    #[schema(schema_with = approval_state_schema)]
    state: &'static str,
    /// Who decides.
    approvers: Vec<String>,
    /// How many approvals decide it.
    quorum: u32,
    /// The votes so far.
    votes: Vec<VoteItem>,
    /// Who it waits for, in words (``group finance (1 of 2)``).
    waiting_for: String,
    /// The approval this one replaced (an edit needed this one's approvers).
    #[serde(skip_serializing_if = "Option::is_none")]
    supersedes: Option<String>,
    /// The approval that replaced this one (state `superseded`).
    #[serde(skip_serializing_if = "Option::is_none")]
    superseded_by: Option<String>,
}

/// The schema of an approval's state: one of [`ApprovalState::ALL`].
pub(crate) fn approval_state_schema() -> RefOr<Schema> {
    let states = ApprovalState::ALL.map(ApprovalState::as_str);
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(states))
        .description(Some("Where the approval stands."))
        .into()
}

/// Who decides, as configured: the rule's approvers, or the requester alone.
pub(crate) fn approvers(record: &ApprovalRecord) -> Vec<String> {
    match &record.routing {
        Some(routing) => routing.approvers.clone(),
        None => requester(record).map(str::to_owned).into_iter().collect(),
    }
}

pub(crate) fn quorum(record: &ApprovalRecord) -> u32 {
    record.routing.as_ref().map_or(1, |routing| routing.quorum)
}

/// The votes, each `{principal, decision, at, reason?}`.
fn votes(record: &ApprovalRecord) -> Vec<VoteItem> {
    let choice = |approve: bool| if approve { Choice::Approve } else { Choice::Deny };
    let vote = |vote: &toolgate::approval::lifecycle::Vote| VoteItem {
        principal: vote.principal.clone(),
        decision: choice(vote.decision.is_approve()),
        at: timestamp(vote.at),
        reason: vote.reason.clone(),
    };
    record.votes.iter().map(vote).collect()
}

impl ApprovalItem {
    /// The item of this record.
    pub(crate) fn of(record: &ApprovalRecord) -> Self {
        Self {
            id: record.approval_id.clone(),
            tool_call_id: record.tool_call_id.clone(),
            tool: record.tool_name.clone(),
            input: record.input.clone(),
            reason: record.reason.clone(),
            conversation_id: record.root_conversation_name().to_owned(),
            lineage: record
                .lineage
                .iter()
                .map(|step| LineageItem { agent: step.agent.clone(), tool_call_id: step.tool_call_id.clone() })
                .collect(),
            requester: requester(record).map(str::to_owned),
            approvers: approvers(record),
            quorum: quorum(record),
            votes: votes(record),
            state: record.state.as_str(),
            created_at: timestamp(record.issued_at),
            expires_at: timestamp(record.expires_at),
            supersedes: record.supersedes.clone(),
            superseded_by: record.superseded_by.clone(),
        }
    }
}

/// The inbox item (`GET /api/approvals/{id}`) as JSON.
pub fn approval_item(record: &ApprovalRecord) -> Value {
    // An item is strings, numbers and JSON values: it always serializes.
    serde_json::to_value(ApprovalItem::of(record)).unwrap_or_default()
}

/// The `data` of a chat's `data-toolgate-approval` part.
pub(crate) fn approval_part(record: &ApprovalRecord) -> Value {
    let part = ApprovalPart {
        approval_id: record.approval_id.clone(),
        tool_call_id: record.tool_call_id.clone(),
        state: record.state.as_str(),
        approvers: approvers(record),
        quorum: quorum(record),
        votes: votes(record),
        waiting_for: waiting_label(record),
        supersedes: record.supersedes.clone(),
        superseded_by: record.superseded_by.clone(),
    };
    serde_json::to_value(part).unwrap_or_default()
}

/// ``group finance (1 of 2)``, as a chat card shows who it waits for.
fn waiting_label(record: &ApprovalRecord) -> String {
    let names: Vec<String> = approvers(record)
        .iter()
        .map(|approver| match approver.strip_prefix(GROUP_PREFIX) {
            Some(group) => format!("group {group}"),
            None => approver.clone(),
        })
        .collect();
    let approved = record.votes.iter().filter(|vote| vote.decision.is_approve()).count();
    format!("{} ({approved} of {})", names.join(", "), quorum(record))
}
