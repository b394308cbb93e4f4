//! `POST /api/policy/explain`: what the server decides now about one call by
//! the requester, and why: its rules (their history terms judged on its
//! store, as a request would judge them), the requester's sticky decisions,
//! and the tool's own policy. `toolgate policy explain --server` asks it.
//!
//! Body: `{"tool": NAME, "input": {...}, "conversation": ID}` (`input`
//! defaults to `{}`; `conversation`, the requester's own chat id, matters for
//! conversation-scoped terms and decisions). Nothing is recorded and nothing
//! runs. Every signed-in requester may ask about their own calls: the answer
//! holds what the reasons of their own calls would show.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate::ledger::conversation_key;
use toolgate::tool::{ApprovalContext, CallGate, Caller as GateCaller, GateAction, GateCall, decide_call};
use utoipa::ToSchema;

use crate::app::AppState;
use crate::caller::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::http::JsonBody;

/// A `POST /api/policy/explain` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExplainRequest {
    /// The tool's name.
    tool: String,
    /// The call's input (default `{}`).
    #[serde(default = "empty_input")]
    #[schema(value_type = Object)]
    input: Value,
    /// The requester's chat id the call would be in.
    #[serde(default)]
    conversation: Option<String>,
}

fn empty_input() -> Value {
    Value::Object(Default::default())
}

/// What the server decides, and why.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ExplainResponse {
    /// `allow`, `ask` or `deny`.
    decision: String,
    /// Why: the rule (with its history term's figures), the sticky decision, or the tool's own policy.
    reason: String,
    /// Every rule and sticky decision that matched.
    matches: Vec<ExplainMatch>,
}

/// One rule or sticky decision that matched.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ExplainMatch {
    /// What it decides.
    action: String,
    /// The rule's name, or the sticky decision's id.
    source: String,
    /// Why it matched.
    reason: String,
}

/// Explains the decision about one call.
#[utoipa::path(
    post,
    path = "/api/policy/explain",
    operation_id = "explainPolicy",
    tag = "decisions",
    request_body = ExplainRequest,
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The decision and why.", body = ExplainResponse),
        (status = 400, description = "The body is not an explain request.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["invalid_explain"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn explain(
    State(state): State<AppState>,
    Caller { principal, groups }: Caller,
    JsonBody(body): JsonBody,
) -> Result<Json<ExplainResponse>, ApiError> {
    let request: ExplainRequest = serde_json::from_slice(&body)
        .map_err(|error| ApiError::new(StatusCode::BAD_REQUEST, "invalid_explain", error.to_string()))?;
    let key = request.conversation.as_deref().map(|id| conversation_key(principal.as_deref(), id));
    let gate = state.gate(key.as_deref().unwrap_or_default(), principal.as_deref());
    let call = GateCall {
        tool_name: &request.tool,
        input: &request.input,
        tool_call_id: "explain",
        conversation_id: key.as_deref(),
        principal: principal.as_deref(),
        groups: &groups,
    };
    let explanation = gate.explain(&call).await?;
    let matches = explanation
        .matches
        .iter()
        .map(|matched| ExplainMatch {
            action: matched.action.as_str().to_owned(),
            source: matched.source.name().to_owned(),
            reason: matched.reason.clone(),
        })
        .collect();
    let (decision, reason) = match state.toolkit().get(&request.tool) {
        Some(tool) => {
            let caller = GateCaller {
                gate: Some(&gate as &dyn CallGate),
                conversation_id: key.as_deref(),
                principal: principal.as_deref(),
                groups: &groups,
            };
            let verdict = decide_call(caller, tool, &request.input, ApprovalContext::new("explain", Vec::new())).await;
            let reason = match verdict.action {
                GateAction::Allow => explanation.verdict().and_then(|verdict| verdict.reason),
                _ => verdict.reason,
            };
            (
                verdict.action,
                reason.unwrap_or_else(|| format!("no rule matched and `{}` needs no approval", tool.name())),
            )
        }
        None => match explanation.verdict() {
            Some(verdict) => (verdict.action, verdict.reason.unwrap_or_default()),
            None => (GateAction::Allow, format!("no rule matched and the server offers no tool `{}`", request.tool)),
        },
    };
    Ok(Json(ExplainResponse { decision: decision.as_str().to_owned(), reason, matches }))
}
