//! The one edit check of the server's paths (the inbox's vote, an answer in
//! the chat): the approval lifecycle's [`lifecycle::check_edit`] with the
//! tools offered now, the requester's gate (rules and sticky decisions) and
//! their configured groups, its refusals as [`ApiError`]s (403 when the edit
//! needs other approvers, else 400).

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::Value;
use toolgate::approval::lifecycle::{self, EditCheck, EditRefusal, Voter, requester};
use toolgate::ledger::ApprovalRecord;
use toolgate::tool::{ApprovalContext, Caller as GateCaller, SharedMessages};

use super::context::RunContext;
use crate::error::ApiError;

/// An edit must be one the chat would accept, judged by the lifecycle's one
/// edit check ([`lifecycle::check_edit`]): the tool allows edits, the input
/// passes its schema, the policy (the requester's rules and the tool's own)
/// does not deny it, and does not route it to approvers `voter` is not.
pub(crate) async fn check_edit(
    context: &RunContext,
    record: &ApprovalRecord,
    voter: &Voter,
    edit: &Value,
) -> Result<(), ApiError> {
    let toolkit = context.toolkit();
    let tool = toolkit.get(&record.tool_name).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "tool_not_found",
            format!("tool `{}` is not offered any more", record.tool_name),
        )
    })?;
    let owner = requester(record);
    let gate = context.gate(&record.conversation_id, owner);
    let groups = context.configured_groups(owner);
    let check = EditCheck {
        tool,
        edit,
        requester: GateCaller {
            gate: Some(&gate),
            conversation_id: Some(&record.conversation_id),
            principal: owner,
            groups: &groups,
        },
        context: ApprovalContext::new(record.tool_call_id.clone(), SharedMessages::new(Arc::new(Vec::new()))),
        routed: record.routing.is_some(),
        voter: Some(voter),
    };
    lifecycle::check_edit(check).await.map_err(|refusal| {
        let status = match refusal {
            EditRefusal::NeedsApprovers { .. } => StatusCode::FORBIDDEN,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, refusal.code(), refusal.to_string())
    })
}
