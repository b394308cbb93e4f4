//! Votes, every path's one way in (the inbox, a link, the requester's answers
//! in a chat or an AG-UI resume that waits for others): [`vote`], and the
//! one edit check it judges an edit by ([`check_edit`]: the approval
//! lifecycle's [`lifecycle::check_edit`] with the tools offered now, the
//! requester's gate and their configured groups). An edit that needs other
//! approvers supersedes the approval ([`lifecycle::supersede`]); other
//! refusals are [`ApiError`]s (403 when the edit needs approvers, else 400).

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::Value;
use toolgate::Decision;
use toolgate::approval::lifecycle::grant::{GrantRefusal, GrantSpec};
use toolgate::approval::lifecycle::{
    self, EditCheck, EditRefusal, VoteOptions, VoteRefusal, Voter, may_see, requester,
};
use toolgate::ledger::{ApprovalRecord, ApprovalState, LedgerConfig, Origin, StoredDecision};
use toolgate::tool::{ApprovalContext, Caller as GateCaller, SharedMessages};

use super::context::RunContext;
use crate::error::ApiError;

/// An edit must be one the chat would accept, judged by the lifecycle's one
/// edit check ([`lifecycle::check_edit`]): the tool allows edits, the input
/// passes its schema (and the one its requester gave with the call, kept
/// with the record: the call-gating API's `inputSchema`), the policy (the requester's rules and the tool's own)
/// does not deny it. `Ok(None)`: it may run on this vote; `Ok(Some(..))`:
/// the rules route it to approvers `voter` is not
/// ([`EditRefusal::NeedsApprovers`]: a new approval supersedes this one).
pub(crate) async fn check_edit(
    context: &RunContext,
    record: &ApprovalRecord,
    voter: &Voter,
    edit: &Value,
) -> Result<Option<EditRefusal>, ApiError> {
    let toolkit = context.toolkit();
    // A held call (the gateway's, the call-gating API's) names a tool the
    // server does not run: a stand-in without a policy of its own, so the rules judge the edit.
    let stand_in;
    let tool = match toolkit.get(&record.tool_name) {
        Some(tool) => tool,
        None if record.origin != Origin::Chat => {
            stand_in = toolgate::Tool::dynamic(record.tool_name.clone(), serde_json::json!({}));
            &stand_in
        }
        None => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "tool_not_found",
                format!("tool `{}` is not offered any more", record.tool_name),
            ));
        }
    };
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
        input_schema: record.input_schema.as_ref(),
    };
    match lifecycle::check_edit(check).await {
        Ok(()) => Ok(None),
        Err(refusal @ EditRefusal::NeedsApprovers { .. }) => Ok(Some(refusal)),
        Err(refusal) => Err(edit_refused(refusal)),
    }
}

/// An edit that may not run, as the API's error: 403 when it needs
/// approvers, 400 for the rest.
fn edit_refused(refusal: EditRefusal) -> ApiError {
    let status = match refusal {
        EditRefusal::NeedsApprovers { .. } => StatusCode::FORBIDDEN,
        _ => StatusCode::BAD_REQUEST,
    };
    ApiError::new(status, refusal.code(), refusal.to_string())
}

/// Casts `voter`'s vote on approval `id`, every path's one way in (the
/// inbox, the requester's answers in a chat that waits for others). An
/// edit is judged first ([`check_edit`]); one that the rules route to
/// approvers this vote does not satisfy supersedes the approval
/// ([`lifecycle::supersede`]): the record returned is then the original,
/// `superseded`, naming its successor.
pub(crate) async fn vote(
    context: &RunContext,
    ledger: &LedgerConfig,
    id: &str,
    voter: &Voter,
    decision: Decision,
    options: VoteOptions,
) -> Result<ApprovalRecord, ApiError> {
    if let Decision::Approve { edited_input: Some(edit) } = &decision {
        let record = visible(ledger, id, voter).await?;
        if let Some(original) = supersede_if_routed(context, ledger, &record, voter, edit).await? {
            return Ok(original);
        }
    }
    Ok(lifecycle::cast(ledger.store.as_ref(), ledger.clock.as_ref(), id, voter, decision, options).await?)
}

/// [`vote`] with a grant: the approver's "yes, and the next N like this"
/// ([`lifecycle::grant`]). The grant is checked before the vote is cast
/// (the policy's predicates, [`toolgate_policy::grants::check_spec`]; the
/// lifecycle's rules, [`lifecycle::grant::issue`]: an approval, one
/// approver's quorum) and saved once the vote counted (not when an edit
/// superseded the approval). Returns the record and the grant saved.
pub(crate) async fn vote_with_grant(
    context: &RunContext,
    ledger: &LedgerConfig,
    id: &str,
    voter: &Voter,
    decision: Decision,
    options: VoteOptions,
    grant: Option<&GrantSpec>,
) -> Result<(ApprovalRecord, Option<StoredDecision>), ApiError> {
    let Some(spec) = grant else { return Ok((vote(context, ledger, id, voter, decision, options).await?, None)) };
    if !decision.is_approve() {
        return Err(grant_refused(GrantRefusal::NotApproving));
    }
    let record = visible(ledger, id, voter).await?;
    let made = toolgate_policy::grants::issue(&record, voter, spec, ledger.clock.now()).map_err(grant_refused)?;
    let record = vote(context, ledger, id, voter, decision, options).await?;
    if record.state == ApprovalState::Superseded {
        return Ok((record, None));
    }
    lifecycle::grant::save(ledger.store.as_ref(), &made).await?;
    tracing::info!(grant = %made.id, approval = %id, uses = ?made.uses_left, "grant made with an approval");
    Ok((record, Some(made)))
}

/// A grant refused, as the API's error: 403 `grant_not_allowed`, else 400 `invalid_grant`.
pub(crate) fn grant_refused(refusal: GrantRefusal) -> ApiError {
    let status = match refusal {
        GrantRefusal::Quorum { .. } => StatusCode::FORBIDDEN,
        _ => StatusCode::BAD_REQUEST,
    };
    ApiError::new(status, refusal.code(), refusal.to_string())
}

/// `voter`'s edit of `record`, as a vote: checked like any vote on it
/// ([`lifecycle::check_vote`]: a voter who may not decide it supersedes
/// nothing), then judged ([`check_edit`]). When the rules route the edit to
/// approvers this vote does not satisfy, the approval is superseded
/// ([`lifecycle::supersede`]) and the original, `superseded`, is returned;
/// `None` when the edit may run on this vote.
async fn supersede_if_routed(
    context: &RunContext,
    ledger: &LedgerConfig,
    record: &ApprovalRecord,
    voter: &Voter,
    edit: &Value,
) -> Result<Option<ApprovalRecord>, ApiError> {
    let decision = Decision::Approve { edited_input: Some(edit.clone()) };
    lifecycle::check_vote(record, voter, &decision, ledger.clock.now())?;
    let Some(refusal) = check_edit(context, record, voter, edit).await? else { return Ok(None) };
    let route = refusal.edit_route().ok_or_else(|| edit_refused(refusal.clone()))?;
    let superseded = lifecycle::supersede(ledger, record, voter, edit, route).await?;
    tracing::info!(
        approval = %record.approval_id, successor = %superseded.successor.approval_id,
        "an edit needs other approvers: a new approval supersedes it"
    );
    Ok(Some(superseded.original))
}

/// Supersedes the requester's own pending approvals (not routed) among
/// `answers` whose edit the rules route to others ([`lifecycle::supersede`]),
/// before a chat step or an AG-UI resume is read against the ledger (the
/// engine would refuse such an edit); returns the ids superseded.
pub(crate) async fn supersede_own_edits(
    context: &RunContext,
    ledger: &LedgerConfig,
    voter: &Voter,
    answers: &[(String, Decision)],
) -> Result<Vec<String>, ApiError> {
    let edits: HashMap<&str, &Value> = answers
        .iter()
        .filter_map(|(id, decision)| match decision {
            Decision::Approve { edited_input: Some(edit) } => Some((id.as_str(), edit)),
            _ => None,
        })
        .collect();
    if edits.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = edits.keys().map(|id| (*id).to_owned()).collect();
    let mut superseded = Vec::new();
    for record in ledger.store.approvals(&ids).await? {
        let Some(edit) = edits.get(record.approval_id.as_str()) else { continue };
        if record.state != ApprovalState::Pending || record.routing.is_some() {
            continue;
        }
        if !may_see(&record, voter) {
            return Err(VoteRefusal::Unknown(record.approval_id).into());
        }
        if supersede_if_routed(context, ledger, &record, voter, edit).await?.is_some() {
            superseded.push(record.approval_id);
        }
    }
    if !superseded.is_empty() {
        context.signals().approvals_changed();
    }
    Ok(superseded)
}

/// The record, if `voter` may see it; else 404 `unknown_approval`.
pub(crate) async fn visible(ledger: &LedgerConfig, id: &str, voter: &Voter) -> Result<ApprovalRecord, ApiError> {
    match ledger.store.approvals(&[id.to_owned()]).await?.pop() {
        Some(record) if may_see(&record, voter) => Ok(record),
        _ => Err(VoteRefusal::Unknown(id.to_owned()).into()),
    }
}
