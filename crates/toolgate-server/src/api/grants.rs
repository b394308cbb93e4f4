//! `GET /api/grants`, `DELETE /api/grants/{id}`: grants, the bounded
//! approvals an approver makes with a vote ("yes, and the next 5 like this
//! within the hour", see [`toolgate::approval::lifecycle::grant`]), and the
//! "always allow" sticky decisions, which are grants without a use limit.
//!
//! Owner-scoped: a caller sees the live grants they made, and those that let
//! their own calls run (their principal's, and with `?conversation=ID` that
//! chat's); without a principal source every request is the same person and
//! sees every grant. A request without a principal on a server that has
//! principals sees none. A spent or expired grant is not listed.
//!
//! `GET ?conversation=ID` answers `{"grants": [...]}`, oldest first, each a
//! sticky decision with `usesLeft` (absent: no limit).
//! `DELETE /api/grants/{id}?conversation=ID` revokes one the caller sees:
//! 204, or 404 `unknown_grant`. A revoked grant lifts no later call.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use toolgate::ledger::{DecisionQuery, DecisionScope, StoredDecision, conversation_name};
use toolgate_policy::{StickyAction, StickyDecision, decode_stored};
use utoipa::ToSchema;

use crate::app::AppState;
use crate::caller::Caller;
use crate::error::{ApiError, ErrorBody};

/// One grant as listed: the decision, and the uses it has left.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Grant {
    #[serde(flatten)]
    decision: StickyDecision,
    /// Uses left (absent: no limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    uses_left: Option<i64>,
}

/// What `GET /api/grants` answers.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct GrantList {
    /// The live grants, oldest first.
    #[schema(value_type = Vec<crate::api::openapi::schemas::GrantDoc>)]
    grants: Vec<Grant>,
}

/// Lists the live grants the caller made or that let their calls run.
#[utoipa::path(
    get,
    path = "/api/grants",
    operation_id = "listGrants",
    tag = "grants",
    params(("conversation" = Option<String>, Query, description = "Also this chat's grants.")),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The grants, oldest first.", body = GrantList),
        (status = 400, description = "A bad query.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["invalid_query", "invalid_chat_id"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    Caller { principal, .. }: Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<GrantList>, ApiError> {
    let grants = visible(&state, &params, principal.as_deref()).await?;
    Ok(Json(GrantList { grants: grants.into_iter().map(shown).collect() }))
}

/// Revokes one grant the caller sees; it lifts no later call.
#[utoipa::path(
    delete,
    path = "/api/grants/{id}",
    operation_id = "revokeGrant",
    tag = "grants",
    params(
        ("id" = String, Path, description = "The grant's id."),
        ("conversation" = Option<String>, Query, description = "The chat of a grant made for it by someone else."),
    ),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 204, description = "Revoked."),
        (status = 400, description = "A bad query.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["invalid_query", "invalid_chat_id"])))),
        (status = 404, description = "No such grant visible to the caller.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["unknown_grant"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn revoke(
    State(state): State<AppState>,
    Caller { principal, .. }: Caller,
    Path(id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let seen = visible(&state, &params, principal.as_deref()).await?.iter().any(|(grant, _)| grant.id == id);
    let unknown = ApiError::new(StatusCode::NOT_FOUND, "unknown_grant", format!("no grant `{id}`"));
    super::decisions::revoke_seen(&state, &id, seen, unknown).await
}

/// The live grants `principal` sees (module docs), oldest first, with their uses left.
async fn visible(
    state: &AppState,
    params: &HashMap<String, String>,
    principal: Option<&str>,
) -> Result<Vec<(StickyDecision, Option<i64>)>, ApiError> {
    let conversation_id = super::decisions::conversation_param(state, params, principal)?;
    if principal.is_none() && state.config().principals.is_configured() {
        return Ok(Vec::new());
    }
    let store = state.decision_store();
    let now = state.now();
    let mut rows: Vec<StoredDecision> = store.decisions_by(principal, now).await?;
    if principal.is_some() {
        let query = DecisionQuery { conversation_id, principal: principal.map(str::to_owned), now };
        // Theirs to see: grants that let their own calls run (not global ones, which are nobody's).
        let theirs = store.decisions(&query).await?.into_iter().filter(|row| row.scope != DecisionScope::Global);
        rows.extend(theirs);
    }
    let mut seen = std::collections::HashSet::new();
    rows.retain(|row| seen.insert(row.id.clone()));
    rows.sort_by_key(|row| row.created_at);
    let uses: HashMap<String, Option<i64>> = rows.iter().map(|row| (row.id.clone(), row.uses_left)).collect();
    let grants = decode_stored(rows).map_err(ApiError::from)?;
    Ok(grants
        .into_iter()
        .filter(|grant| grant.action == StickyAction::Allow)
        .map(|grant| {
            let left = uses.get(&grant.id).copied().flatten();
            (grant, left)
        })
        .collect())
}

/// A grant as the caller sees it: a conversation scope names the chat id
/// (as its owner named it), not the ledger's key.
fn shown((mut decision, uses_left): (StickyDecision, Option<i64>)) -> Grant {
    if let DecisionScope::Conversation { conversation_id } = &mut decision.scope {
        let owner = decision.requester.as_deref().or(decision.created_by.as_deref());
        *conversation_id = conversation_name(conversation_id, owner).to_owned();
    }
    Grant { decision, uses_left }
}
