//! `GET/POST/DELETE /api/decisions`: people's sticky decisions ("always allow
//! this tool in this chat", "always allow exactly this input", "never allow").
//!
//! They are kept in the approval store when the server has one (so every
//! replica sees them), else in this process's memory. Each engine request
//! reads the ones that apply to it (see [`toolgate_policy::StoredGate`]);
//! a sticky deny ranks like the config file's rules (deny > ask > allow); a
//! sticky allow is a grant without a use limit (listed in `GET /api/grants`
//! too): it never lifts a `deny`, and lifts an `ask` only where its author
//! would have decided the call (see `toolgate::approval::lifecycle::grant`).
//!
//! Who may do what, with a principal source configured (`--principal-header`
//! or `--tokens-file`):
//! - a decision records its author; a conversation-scoped one is keyed by the
//!   author's own conversation of that id and applies only to the author's
//!   calls, so nobody can allow tools in someone else's chat;
//! - `principal` scope is always the requester's own principal;
//! - `global` scope is refused (403 `global_decision_forbidden`): rules for
//!   everyone belong in the config file;
//! - listing and revoking see only the requester's decisions and unowned ones.
//!
//! Without a principal source every request is the same person and may use
//! every scope.
//!
//! `POST` body: `{"action": "allow"|"deny", "tool", "input"?, "scope":
//! "conversation"|"principal"|"global", "conversationId"?, "ttl"?, "note"?}`
//! (`ttl` a duration such as `30m` or `7d`; none: until revoked). It answers
//! 201 with the decision. `GET ?conversation=ID` answers `{"decisions":
//! [...]}`, oldest first. `DELETE /api/decisions/{id}?conversation=ID`
//! answers 204, or 404 `unknown_decision`.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate::ledger::{DecisionQuery, DecisionScope, conversation_name};
use toolgate_policy::{StickyAction, StickyDecision, to_stored, visible_to};
use utoipa::ToSchema;

use crate::app::AppState;
use crate::caller::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::http::JsonBody;

/// The longest note kept with a decision, in bytes.
const MAX_NOTE_BYTES: usize = 1024;

/// The largest exact input a decision may hold, in bytes of JSON. Every request
/// reads the decisions that apply to it, so what they hold must stay small.
pub const MAX_DECISION_INPUT_BYTES: usize = 8 * 1024;

/// The most live decisions one author may keep in one scope (one conversation,
/// one principal, global).
pub const MAX_DECISIONS_PER_SCOPE: usize = 100;

/// The most live decisions one scope (one conversation, one principal, the
/// global scope) holds, whoever made them: defence in depth. Conversations are
/// keyed by their owner and the principal scope is always the requester's, so
/// one author writes each scope and [`MAX_DECISIONS_PER_SCOPE`] binds first; a
/// request reads its conversation's decisions, its principal's and the global
/// ones, at most three times this.
pub const MAX_DECISIONS_IN_SCOPE: usize = 4 * MAX_DECISIONS_PER_SCOPE;

/// The query parameters `GET` and `DELETE` take (others are 400 `invalid_query`).
pub(crate) const QUERY_PARAMS: [&str; 1] = ["conversation"];

/// The scope a `POST` names.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum ScopeKind {
    /// One conversation (`conversationId`), the author's calls only.
    Conversation,
    /// Every conversation of the requester.
    Principal,
    /// Everyone (refused on servers with principals).
    Global,
}

/// A `POST /api/decisions` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NewDecision {
    /// Always allow, or never allow.
    #[schema(schema_with = crate::api::openapi::schemas::sticky_action)]
    action: StickyAction,
    /// The tool (one the server offers).
    tool: String,
    /// Only exactly this input (at most 8 KiB of JSON; none: any input).
    #[serde(default)]
    input: Option<Value>,
    /// Where it applies.
    scope: ScopeKind,
    /// The chat id, for scope `conversation`.
    #[serde(default)]
    conversation_id: Option<String>,
    /// How long it lasts, such as `30m` or `7d` (none: until revoked).
    #[serde(default)]
    ttl: Option<String>,
    /// Free text (at most 1 KiB).
    #[serde(default)]
    note: Option<String>,
}

/// What `GET /api/decisions` answers.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DecisionList {
    /// The live decisions, oldest first.
    #[schema(value_type = Vec<crate::api::openapi::schemas::StickyDecisionDoc>)]
    decisions: Vec<StickyDecision>,
}

/// Records a sticky decision.
#[utoipa::path(
    post,
    path = "/api/decisions",
    operation_id = "addDecision",
    tag = "decisions",
    request_body = NewDecision,
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 201, description = "Recorded: the decision (a conversation scope names the chat id).",
            body = crate::api::openapi::schemas::StickyDecisionDoc),
        (status = 400, description = "The decision is refused.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["invalid_decision", "unknown_tool", "invalid_chat_id"])))),
        (status = 403, description = "Global decisions are refused on servers with principals.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["global_decision_forbidden"])))),
        (status = 409, description = "The scope holds too many decisions.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["too_many_decisions"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn add(
    State(state): State<AppState>,
    Caller { principal, .. }: Caller,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let new: NewDecision = serde_json::from_slice(&body)
        .map_err(|error| ApiError::new(StatusCode::BAD_REQUEST, "invalid_decision", error.to_string()))?;
    let scope = scope(&state, &new, principal.as_deref())?;
    check_tool(&state, &new)?;
    if new.note.as_ref().is_some_and(|note| note.len() > MAX_NOTE_BYTES) {
        return Err(invalid(format!("`note` is longer than {MAX_NOTE_BYTES} bytes")));
    }
    if new.input.as_ref().is_some_and(|input| input.to_string().len() > MAX_DECISION_INPUT_BYTES) {
        return Err(invalid(format!("`input` is longer than {MAX_DECISION_INPUT_BYTES} bytes of JSON")));
    }
    let now = state.now();
    check_room(&state, &scope, principal.as_deref(), now).await?;
    let expires_at = match &new.ttl {
        Some(text) => {
            let ttl = humantime::parse_duration(text)
                .map_err(|error| invalid(format!("`ttl` must be a duration such as `30m` or `7d`: {error}")))?;
            let ttl = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
            if ttl == 0 {
                return Err(invalid("`ttl` must be longer than zero".into()));
            }
            Some(now.saturating_add(ttl))
        }
        None => None,
    };
    let decision = StickyDecision {
        id: format!("dec_{}", uuid::Uuid::now_v7().simple()),
        action: new.action,
        tool: new.tool,
        input: new.input,
        scope,
        expires_at,
        created_at: now,
        created_by: principal,
        note: new.note,
        ..StickyDecision::new(String::new(), StickyAction::Allow, String::new(), DecisionScope::Global, now)
    };
    state.decision_store().save_decision(&to_stored(&decision)).await?;
    tracing::info!(id = %decision.id, tool = %decision.tool, action = ?decision.action, scope = decision.scope.kind(), "sticky decision added");
    Ok((StatusCode::CREATED, Json(shown(decision))).into_response())
}

/// A decision as its author sees it: a conversation scope names the chat id,
/// not the ledger's key (which holds the owner, its author, as well).
fn shown(mut decision: StickyDecision) -> StickyDecision {
    if let DecisionScope::Conversation { conversation_id } = &mut decision.scope {
        *conversation_id = conversation_name(conversation_id, decision.created_by.as_deref()).to_owned();
    }
    decision
}

/// Lists the live sticky decisions that apply to a conversation and the requester.
///
/// Those are the conversation's (if given), the requester's principal's, and global ones.
#[utoipa::path(
    get,
    path = "/api/decisions",
    operation_id = "listDecisions",
    tag = "decisions",
    params(("conversation" = Option<String>, Query, description = "Also this chat's decisions.")),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The decisions, oldest first.", body = DecisionList),
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
) -> Result<Json<DecisionList>, ApiError> {
    let decisions = visible(&state, &params, principal.as_deref()).await?.into_iter().map(shown).collect();
    Ok(Json(DecisionList { decisions }))
}

/// Revokes one sticky decision the requester can see.
#[utoipa::path(
    delete,
    path = "/api/decisions/{id}",
    operation_id = "revokeDecision",
    tag = "decisions",
    params(
        ("id" = String, Path, description = "The decision's id."),
        ("conversation" = Option<String>, Query, description = "The chat of a conversation-scoped decision."),
    ),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 204, description = "Revoked."),
        (status = 400, description = "A bad query.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["invalid_query", "invalid_chat_id"])))),
        (status = 404, description = "No such decision visible to the requester.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["unknown_decision"])))),
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
    let seen = visible(&state, &params, principal.as_deref()).await?.iter().any(|decision| decision.id == id);
    let unknown = ApiError::new(StatusCode::NOT_FOUND, "unknown_decision", format!("no sticky decision `{id}`"));
    revoke_seen(&state, &id, seen, unknown).await
}

/// Revokes the stored decision (or grant) `id` that the caller was found to
/// see (`seen`); `unknown` answers one it does not see or that is gone.
pub(crate) async fn revoke_seen(
    state: &AppState,
    id: &str,
    seen: bool,
    unknown: ApiError,
) -> Result<Response, ApiError> {
    if !seen {
        return Err(unknown);
    }
    match state.decision_store().revoke_decision(id).await? {
        Some(_) => {
            tracing::info!(%id, "decision revoked");
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        None => Err(unknown),
    }
}

/// The live decisions of `?conversation=ID` (if given), the requester's principal and global ones.
async fn visible(
    state: &AppState,
    params: &HashMap<String, String>,
    principal: Option<&str>,
) -> Result<Vec<StickyDecision>, ApiError> {
    let conversation_id = conversation_param(state, params, principal)?;
    let query = DecisionQuery { conversation_id, principal: principal.map(str::to_owned), now: state.now() };
    let stored = state.decision_store().decisions(&query).await?;
    let decisions = toolgate_policy::decode_stored(stored).map_err(ApiError::from)?;
    Ok(decisions.into_iter().filter(|decision| visible_to(decision, principal)).collect())
}

/// The `conversation` query parameter of a listing or revocation (of sticky
/// decisions and of grants), as the caller's conversation key; any other
/// parameter is 400 `invalid_query`.
pub(super) fn conversation_param(
    state: &AppState,
    params: &HashMap<String, String>,
    principal: Option<&str>,
) -> Result<Option<String>, ApiError> {
    if let Some(unknown) = params.keys().find(|key| !QUERY_PARAMS.contains(&key.as_str())) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!("unknown parameter `{unknown}` (use conversation)"),
        ));
    }
    params.get("conversation").map(|id| state.conversation_key(principal, id)).transpose()
}

/// The scope a new decision gets, checked against who is asking (module docs).
fn scope(state: &AppState, new: &NewDecision, principal: Option<&str>) -> Result<DecisionScope, ApiError> {
    let with_principals = state.config().principals.is_configured();
    match new.scope {
        ScopeKind::Conversation => match new.conversation_id.as_deref() {
            Some(id) if !id.is_empty() => {
                Ok(DecisionScope::Conversation { conversation_id: state.conversation_key(principal, id)? })
            }
            _ => Err(invalid("`conversationId` is required for scope `conversation`".into())),
        },
        ScopeKind::Principal => match principal {
            Some(principal) => Ok(DecisionScope::Principal { principal: principal.to_owned() }),
            None => Err(invalid("scope `principal` needs a principal, and this request has none".into())),
        },
        ScopeKind::Global if with_principals => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "global_decision_forbidden",
            "with principals, decisions apply to a conversation or to their principal; rules for everyone belong in the config file",
        )),
        ScopeKind::Global => Ok(DecisionScope::Global),
    }
}

/// Refuses a decision past [`MAX_DECISIONS_PER_SCOPE`] of this author's live
/// ones in this scope, or past [`MAX_DECISIONS_IN_SCOPE`] of anyone's.
async fn check_room(state: &AppState, scope: &DecisionScope, author: Option<&str>, now: i64) -> Result<(), ApiError> {
    let query = DecisionQuery {
        conversation_id: match scope {
            DecisionScope::Conversation { conversation_id } => Some(conversation_id.clone()),
            DecisionScope::Principal { .. } | DecisionScope::Global => None,
        },
        principal: match scope {
            DecisionScope::Principal { principal } => Some(principal.clone()),
            DecisionScope::Conversation { .. } | DecisionScope::Global => None,
        },
        now,
    };
    let decisions = toolgate_policy::decode_stored(state.decision_store().decisions(&query).await?)?;
    let in_scope: Vec<&StickyDecision> = decisions.iter().filter(|decision| &decision.scope == scope).collect();
    let own = in_scope.iter().filter(|decision| decision.created_by.as_deref() == author).count();
    let full = |kept: usize, whose: &str| {
        ApiError::new(
            StatusCode::CONFLICT,
            "too_many_decisions",
            format!(
                "{kept} sticky decisions{whose} are kept in this {} scope already: revoke some first",
                scope.kind()
            ),
        )
    };
    if own >= MAX_DECISIONS_PER_SCOPE {
        return Err(full(own, " of yours"));
    }
    if in_scope.len() >= MAX_DECISIONS_IN_SCOPE {
        return Err(full(in_scope.len(), ""));
    }
    Ok(())
}

/// The tool must be offered now, and an exact input must be one the tool accepts.
fn check_tool(state: &AppState, new: &NewDecision) -> Result<(), ApiError> {
    let toolkit = state.toolkit();
    let Some(tool) = toolkit.get(&new.tool) else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "unknown_tool",
            format!("no tool `{}` (tools: {})", new.tool, toolkit.names().join(", ")),
        ));
    };
    if let Some(input) = &new.input {
        tool.validate_input(input)
            .map_err(|detail| invalid(format!("`input` is not a valid input of `{}`: {detail}", new.tool)))?;
    }
    Ok(())
}

fn invalid(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_decision", message)
}
