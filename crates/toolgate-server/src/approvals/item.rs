//! An approval as the inbox shows it, and as the chat's
//! `data-toolgate-approval` part reports it.

use serde_json::{Value, json};
use toolgate::approval::lifecycle::{GROUP_PREFIX, requester};
use toolgate::ledger::{ApprovalRecord, Millis, split_conversation_key};

/// RFC 3339, in UTC, to the millisecond.
pub(crate) fn rfc3339(millis: Millis) -> Value {
    match chrono::DateTime::from_timestamp_millis(millis) {
        Some(time) => json!(time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        None => Value::Null,
    }
}

/// Who decides, as configured: the rule's approvers, or the requester alone.
fn approvers(record: &ApprovalRecord) -> Vec<String> {
    match &record.routing {
        Some(routing) => routing.approvers.clone(),
        None => requester(record).map(str::to_owned).into_iter().collect(),
    }
}

/// The votes, each `{principal, decision, reason?, at}`.
fn votes(record: &ApprovalRecord) -> Value {
    record
        .votes
        .iter()
        .map(|vote| {
            let mut item = json!({
                "principal": vote.principal,
                "decision": if vote.decision.is_approve() { "approve" } else { "deny" },
                "at": rfc3339(vote.at),
            });
            if let Some(reason) = &vote.reason {
                item["reason"] = json!(reason);
            }
            item
        })
        .collect()
}

/// The inbox item (`GET /api/approvals/{id}`).
pub fn approval_item(record: &ApprovalRecord) -> Value {
    json!({
        "id": record.approval_id,
        "toolCallId": record.tool_call_id,
        "tool": record.tool_name,
        "input": record.input,
        "reason": record.reason,
        "conversationId": split_conversation_key(&record.conversation_id).1,
        "requester": requester(record),
        "approvers": approvers(record),
        "quorum": record.routing.as_ref().map_or(1, |routing| routing.quorum),
        "votes": votes(record),
        "state": record.state.as_str(),
        "createdAt": rfc3339(record.issued_at),
        "expiresAt": rfc3339(record.expires_at),
    })
}

/// The `data` of a chat's `data-toolgate-approval` part.
pub(crate) fn approval_part(record: &ApprovalRecord) -> Value {
    json!({
        "approvalId": record.approval_id,
        "toolCallId": record.tool_call_id,
        "state": record.state.as_str(),
        "approvers": approvers(record),
        "quorum": record.routing.as_ref().map_or(1, |routing| routing.quorum),
        "votes": votes(record),
        "waitingFor": waiting_label(record),
    })
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
    let quorum = record.routing.as_ref().map_or(1, |routing| routing.quorum);
    format!("{} ({approved} of {quorum})", names.join(", "))
}
