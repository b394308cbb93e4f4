//! `/api/approvals`: the inbox. Approvals are listed, shown and decided out
//! of band, by whoever may: the routing rules are the approval lifecycle's
//! ([`toolgate::approval::lifecycle`]), and every decision goes through its
//! vote ([`lifecycle::cast`]) or withdrawal ([`lifecycle::withdraw`]).
//!
//! - `GET /api/approvals?state=pending|decided|all&conversation=ID&limit=N`
//!   → `{"approvals": [...]}`, newest first ([`crate::approval_item()`]): the
//!   approvals the caller may see (those they may decide, those of their own
//!   conversations; everything for admins and single-user servers).
//! - `GET /api/approvals/{id}`: one item; 404 `unknown_approval` when the
//!   caller may not see it (an outsider never learns it exists).
//! - `POST /api/approvals/{id}` `{"decision": "approve"|"deny", "reason"?,
//!   "editedInput"?, "grant"?}`: a vote; 200 with the item in its new state.
//!   An approval with a `grant` (`{"uses", "within", "input", "scope"}`)
//!   also lets later calls like it run without asking
//!   ([`toolgate::approval::lifecycle::grant`]; 400 `invalid_grant`, 403
//!   `grant_not_allowed` for a quorum). An edit
//!   passes the same checks as in the chat (the tool allows edits, the input
//!   schema, the policy) before the vote counts; one the rules route to
//!   approvers this vote does not satisfy becomes a new approval routed to
//!   them, and the answer is the original in the state `superseded`, naming
//!   it (`supersededBy`). A deciding vote makes the server continue the
//!   conversation ([`crate::continuation`]).
//! - `DELETE /api/approvals/{id}`: the requester withdraws their pending
//!   request; it resolves like a denial ("withdrawn by the requester").
//! - `GET /api/approvals/stream`: server-sent events ([`mod@stream`]).

mod stream;

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate::Decision;
use toolgate::approval::lifecycle::grant::GrantSpec;
use toolgate::approval::lifecycle::{self, VoteOptions, may_see};
use toolgate::ledger::{ApprovalQuery, ApprovalRecord, StateFilter};
use utoipa::ToSchema;

pub(crate) use stream::__path_stream;
pub(crate) use stream::stream;

use crate::app::AppState;
use crate::approval_item::ApprovalItem;
use crate::caller::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::http::JsonBody;
use crate::run::vote::{visible, vote_with_grant};

/// A listing holds this many approvals unless asked otherwise.
pub const DEFAULT_LIMIT: usize = 50;
/// A listing holds at most this many approvals.
pub const MAX_LIMIT: usize = 500;

/// The query parameters `GET /api/approvals` takes (others are 400 `invalid_query`).
pub(crate) const LIST_PARAMS: [&str; 3] = ["state", "conversation", "limit"];

/// What `GET /api/approvals` answers.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ApprovalList {
    /// The approvals the caller may see, newest first.
    approvals: Vec<ApprovalItem>,
}

/// Lists the approvals the caller may see.
///
/// Those are the approvals they may decide and those of their own
/// conversations (everything for admins and single-user servers).
#[utoipa::path(
    get,
    path = "/api/approvals",
    operation_id = "listApprovals",
    tag = "approvals",
    params(
        ("state" = Option<String>, Query, description = "`pending` (the default), `decided` or `all`.",
            pattern = "^(pending|decided|all)$"),
        ("conversation" = Option<String>, Query,
            description = "Only this conversation's (a chat or thread id, as its approvals name it: the requester's id, whoever the requester is)."),
        ("limit" = Option<usize>, Query, description = "At most this many (1 to 500; default 50).", minimum = 1, maximum = 500),
    ),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The approvals, newest first.", body = ApprovalList),
        (status = 400, description = "A bad query.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["invalid_query", "invalid_chat_id"])))),
        (status = 404, description = "No store.", body = ErrorBody, extensions(("x-error-codes" = json!(["no_store"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<ApprovalList>, ApiError> {
    let ledger = state.ledger_config()?;
    if let Some(unknown) = params.keys().find(|key| !LIST_PARAMS.contains(&key.as_str())) {
        return Err(bad_query(format!("unknown parameter `{unknown}` (use state, conversation, limit)")));
    }
    let states = match params.get("state") {
        None => StateFilter::Pending,
        Some(text) => StateFilter::parse(text)
            .ok_or_else(|| bad_query(format!("`state` must be pending, decided or all, got `{text}`")))?,
    };
    let limit = match params.get("limit") {
        None => DEFAULT_LIMIT,
        Some(text) => match text.parse::<usize>() {
            Ok(limit) if (1..=MAX_LIMIT).contains(&limit) => limit,
            _ => return Err(bad_query(format!("`limit` must be a number from 1 to {MAX_LIMIT}, got `{text}`"))),
        },
    };
    let voter = caller.voter(&state);
    // The conversation as its approvals name it, whoever asked: among what the caller may see.
    let conversation_name = match params.get("conversation") {
        Some(id) => Some(crate::app::checked_conversation_id(id)?.to_owned()),
        None => None,
    };
    let viewer_keys = state.viewer_keys(&voter);
    let query = ApprovalQuery { viewer_keys, states, conversation_id: None, conversation_name, limit };
    let records = ledger.store.list_approvals(&query).await?;
    let approvals = records.iter().filter(|record| may_see(record, &voter)).map(ApprovalItem::of).collect();
    Ok(Json(ApprovalList { approvals }))
}

/// One approval the caller may see.
#[utoipa::path(
    get,
    path = "/api/approvals/{id}",
    operation_id = "getApproval",
    tag = "approvals",
    params(("id" = String, Path, description = "The approval's id.")),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The approval.", body = ApprovalItem),
        (status = 404, description = "No such approval visible to the caller (an outsider never learns it exists), or no store.",
            body = ErrorBody, extensions(("x-error-codes" = json!(["unknown_approval", "no_store"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ApprovalItem>, ApiError> {
    let ledger = state.ledger_config()?;
    let record = visible(ledger, &id, &caller.voter(&state)).await?;
    Ok(Json(ApprovalItem::of(&record)))
}

/// The body of `POST /api/approvals/{id}`: a vote.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct VoteBody {
    /// `approve` or `deny`.
    #[schema(pattern = "^(approve|deny)$")]
    decision: String,
    /// A denial's reason (told to the model), or a note with an approval.
    #[serde(default)]
    reason: Option<String>,
    /// An approval's edit of the call's input (the tool must allow edits; one approver only).
    #[serde(default)]
    edited_input: Option<Value>,
    /// With an approval: also let the next calls like this run without
    /// asking (a bounded approval; see the policies chapter).
    #[serde(default)]
    #[schema(value_type = Option<crate::api::openapi::schemas::GrantSpecDoc>)]
    grant: Option<GrantSpec>,
}

/// Votes on an approval. A deciding vote makes the server continue the conversation.
#[utoipa::path(
    post,
    path = "/api/approvals/{id}",
    operation_id = "voteOnApproval",
    tag = "approvals",
    params(("id" = String, Path, description = "The approval's id.")),
    request_body = VoteBody,
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The vote counts: the approval in its new state.", body = ApprovalItem),
        (status = 400, description = "A malformed vote or grant, or an edit the chat would refuse.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["invalid_body", "tool_not_found", "edit_not_allowed",
                "invalid_tool_input", "edit_denied", "edit_needs_single_approver", "invalid_grant"])))),
        (status = 403, description = "The caller may not vote on it, the edited input needs other approvers, \
            or a quorum cannot be granted away.",
            body = ErrorBody,
            extensions(("x-error-codes" = json!(["not_an_approver", "self_approval_forbidden", "edit_not_allowed",
                "grant_not_allowed"])))),
        (status = 404, description = "No such approval visible to the caller, or no store.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["unknown_approval", "no_store"])))),
        (status = 409, description = "The vote is no longer possible.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["already_voted", "approval_already_decided"])))),
        (status = 410, description = "The approval expired.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["approval_expired"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn decide(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<ApprovalItem>, ApiError> {
    let ledger = state.ledger_config()?;
    let body: VoteBody = serde_json::from_slice(&body)
        .map_err(|error| ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", error.to_string()))?;
    let mut note = None;
    let decision = match (body.decision.as_str(), body.edited_input) {
        ("approve", edited_input) => {
            note = body.reason;
            Decision::Approve { edited_input }
        }
        ("deny", None) => Decision::Deny { reason: body.reason },
        ("deny", Some(_)) => {
            return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", "a denial cannot edit the input"));
        }
        (other, _) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_body",
                format!("`decision` must be approve or deny, got `{other}`"),
            ));
        }
    };
    let voter = caller.voter(&state);
    let options = VoteOptions { continuation: true, note };
    let grant = body.grant.as_ref();
    let (record, _) = vote_with_grant(state.run_context(), ledger, &id, &voter, decision, options, grant).await?;
    decided(&state, &record);
    Ok(Json(ApprovalItem::of(&record)))
}

/// The requester withdraws their pending request; it resolves like a denial.
#[utoipa::path(
    delete,
    path = "/api/approvals/{id}",
    operation_id = "withdrawApproval",
    tag = "approvals",
    params(("id" = String, Path, description = "The approval's id.")),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "Withdrawn: the approval in its new state.", body = ApprovalItem),
        (status = 403, description = "Only the requester may withdraw it.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["not_the_requester"])))),
        (status = 404, description = "No such approval visible to the caller, or no store.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["unknown_approval", "no_store"])))),
        (status = 409, description = "It was already decided.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["approval_already_decided"])))),
        (status = 410, description = "It expired.", body = ErrorBody, extensions(("x-error-codes" = json!(["approval_expired"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn withdraw(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ApprovalItem>, ApiError> {
    let ledger = state.ledger_config()?;
    let voter = caller.voter(&state);
    let record = lifecycle::withdraw(ledger.store.as_ref(), ledger.clock.as_ref(), &id, &voter).await?;
    decided(&state, &record);
    Ok(Json(ApprovalItem::of(&record)))
}

/// After a vote or withdrawal here: inbox streams look again, and a
/// decided approval wakes the continuation worker.
pub(crate) fn decided(state: &AppState, record: &ApprovalRecord) {
    tracing::info!(approval = %record.approval_id, state = record.state.as_str(), "approval decided out of band");
    state.signals().approvals_changed();
    if record.state != toolgate::ledger::ApprovalState::Pending {
        state.signals().wake_continuations();
    }
}

fn bad_query(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", message)
}
