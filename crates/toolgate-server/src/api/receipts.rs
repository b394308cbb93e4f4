//! Signed receipts ([`toolgate::receipt`]) over HTTP:
//! - `GET /.well-known/toolgate/receipt-keys`: the JWKS of every key that
//!   signed receipts and checkpoints on this store (public; old keys stay,
//!   verify-only, so what they signed still verifies);
//! - `GET /api/approvals/{id}/receipt`: the newest signed receipt of an
//!   approval the caller may see, as a download (`receipt-ID.json`),
//!   verifiable alone with `toolgate audit verify --receipt FILE --keys JWKS_FILE`.
//!   The chain is sealed first, so an approval decided a moment ago has its
//!   receipt;
//! - `GET /api/audit/{seq}/receipt`: the receipt signed for one audit event,
//!   for every event that has one, those of calls decided without an
//!   approval (allowed or denied by a rule, run on a grant, and how they ran)
//!   too; visible exactly when the event is in the caller's `GET /api/audit`
//!   view (another owner's event is 404 `unknown_event`);
//! - `GET /api/calls/{id}/receipt`: the newest receipt of one of the
//!   caller's call-gating API calls (its approval's), 404 `unknown_call` for
//!   anybody else's.
//!
//! A server without a receipt key (no store, or `--no-receipts`) answers 404 `receipts_off`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use toolgate::ledger::AuditQuery;
use toolgate::receipt::{Jwks, ReceiptStore, Signed};
use utoipa::ToSchema;

use crate::app::AppState;
use crate::caller::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::run::calls::{self, Requester};
use crate::run::vote::visible;

/// Events sealed before a receipt is read.
const SEAL_BEFORE_READ: usize = 10_000;

/// A JWKS of OKP Ed25519 keys (`{"keys": [{"kty": "OKP", "crv": "Ed25519", "x", "kid", ...}]}`).
#[derive(ToSchema)]
#[schema(as = ReceiptKeys)]
#[allow(dead_code)]
pub(crate) struct ReceiptKeysDoc {
    /// The keys.
    keys: Vec<Value>,
}

/// A signed receipt: `{"type": "receipt", "kid", "payload", "sig"}`; `sig` is
/// Ed25519 over the canonical JSON (RFC 8785) of `{"type", "kid", "payload"}`.
#[derive(ToSchema)]
#[schema(as = SignedReceipt)]
#[allow(dead_code)]
pub(crate) struct SignedReceiptDoc {
    /// Always `receipt`.
    r#type: String,
    /// The signing key's id (its RFC 7638 thumbprint).
    kid: String,
    /// The approval, conversation, owner, tool and its digest, input digests as
    /// asked and as run, decision, votes, rule, config digest, times, result
    /// digest, and the chained event it was signed for.
    payload: Value,
    /// The signature, base64url.
    sig: String,
}

fn receipts(state: &AppState) -> Result<&Arc<dyn ReceiptStore>, ApiError> {
    state.config().receipts.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "receipts_off",
            "this server signs no receipts (it runs without a store, or with --no-receipts)",
        )
    })
}

/// The public keys receipts and checkpoints are signed with.
#[utoipa::path(
    get,
    path = "/.well-known/toolgate/receipt-keys",
    operation_id = "getReceiptKeys",
    tag = "audit",
    responses(
        (status = 200, description = "The JWKS, every key that ever signed on this store.", body = ReceiptKeysDoc),
        (status = 404, description = "No receipts on this server.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["receipts_off"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn keys(State(state): State<AppState>) -> Result<Json<Jwks>, ApiError> {
    Ok(Json(receipts(&state)?.receipt_keys().await?))
}

/// The newest signed receipt of an approval the caller may see.
#[utoipa::path(
    get,
    path = "/api/approvals/{id}/receipt",
    operation_id = "getApprovalReceipt",
    tag = "approvals",
    params(("id" = String, Path, description = "The approval's id.")),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The receipt, as a download.", body = SignedReceiptDoc),
        (status = 404, description = "No such approval visible to the caller, no receipt for it yet (nothing decided), or no receipts on this server.",
            body = ErrorBody, extensions(("x-error-codes" = json!(["unknown_approval", "no_receipt", "receipts_off", "no_store"])))),
        (status = 503, description = "The store failed, or holds another approval's receipt under this one.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn receipt(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let ledger = state.ledger_config()?;
    let store = receipts(&state)?;
    visible(ledger, &id, &caller.voter(&state)).await?;
    seal_first(store).await;
    let signed = store.receipt(&id).await?.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "no_receipt",
            format!("approval {id} has no receipt yet: nothing decided it"),
        )
    })?;
    Ok(download(signed, &id))
}

/// A signed receipt as a download named `receipt-NAME.json`.
fn download(signed: Signed, name: &str) -> Response {
    let mut response = Json(signed).into_response();
    let file = format!(
        "attachment; filename=\"receipt-{}.json\"",
        name.replace(|c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '-', "_")
    );
    if let Ok(value) = HeaderValue::from_str(&file) {
        response.headers_mut().insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

/// Seals what is not sealed yet, so a receipt of a moment ago can be read.
async fn seal_first(store: &Arc<dyn ReceiptStore>) {
    if let Err(error) = store.seal(SEAL_BEFORE_READ).await {
        tracing::warn!(%error, "cannot seal the audit log before reading a receipt");
    }
}

/// The signed receipt of one audit event the caller may see.
#[utoipa::path(
    get,
    path = "/api/audit/{seq}/receipt",
    operation_id = "getAuditEventReceipt",
    tag = "audit",
    params(("seq" = i64, Path, description = "The event's position in the log (`seq`)."),),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The receipt, as a download.", body = SignedReceiptDoc),
        (status = 404, description = "No such event in the caller's audit view, an event that gets no receipt (or none yet), or no receipts on this server.",
            body = ErrorBody, extensions(("x-error-codes" = json!(["unknown_event", "no_receipt", "receipts_off", "no_store"])))),
        (status = 503, description = "The store failed, or holds another event's receipt under this one.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn event_receipt(
    State(state): State<AppState>,
    Caller { principal, .. }: Caller,
    Path(seq): Path<String>,
) -> Result<Response, ApiError> {
    let ledger = state.ledger_config()?;
    let store = receipts(&state)?;
    let unknown = || ApiError::new(StatusCode::NOT_FOUND, "unknown_event", format!("no audit event {seq} you may see"));
    let at: i64 = seq.parse().map_err(|_| unknown())?;
    let query = AuditQuery {
        after_seq: Some(at.checked_sub(1).ok_or_else(unknown)?),
        limit: Some(1),
        view: state.audit_view(principal.as_deref()),
        ..AuditQuery::default()
    };
    let events = ledger.store.audit(&query).await?;
    if events.first().map(|event| event.seq) != Some(at) {
        return Err(unknown());
    }
    seal_first(store).await;
    let signed = store.receipt_at(at).await?.ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "no_receipt", format!("audit event {at} has no receipt (or none yet)"))
    })?;
    Ok(download(signed, &format!("event-{at}")))
}

/// The newest signed receipt of one of the caller's call-gating API calls.
#[utoipa::path(
    get,
    path = "/api/calls/{id}/receipt",
    operation_id = "getCallReceipt",
    tag = "calls",
    params(("id" = String, Path, description = "The call's id."),),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The receipt of the call's newest decision or outcome, as a download.", body = SignedReceiptDoc),
        (status = 404, description = "No such call of the caller's, no receipt for it yet, or no receipts on this server.",
            body = ErrorBody, extensions(("x-error-codes" = json!(["unknown_call", "no_receipt", "receipts_off", "no_store"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn call_receipt(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let ledger = state.ledger_config()?;
    let store = receipts(&state)?;
    let requester = Requester { principal: caller.principal.as_deref(), groups: &caller.groups };
    let record = Box::pin(calls::find(ledger, requester, &id)).await?;
    seal_first(store).await;
    let signed = store.receipt(&record.approval_id).await?.ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "no_receipt", format!("call {id} has no receipt yet: nothing decided it"))
    })?;
    Ok(download(signed, &id))
}
