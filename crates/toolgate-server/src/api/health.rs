//! `GET /healthz`: liveness. It answers `ok` whenever the server answers at
//! all; it reads nothing (not the store, not the model).
//!
//! `GET /readyz`: readiness, for load balancers. 200 `ready` when the store
//! answers (within [`READY_TIMEOUT`]) and its schema is this build's (or
//! there is no store); else 503 `not_ready` with the reason.

use axum::extract::State;
use axum::http::StatusCode;

use std::time::Duration;

use crate::app::AppState;

/// How long `GET /readyz` waits for the store: a load balancer asks often,
/// and a store that takes longer is not ready for requests either.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(2);
use crate::error::{ApiError, ErrorBody};

/// Liveness: the server answers.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "health",
    tag = "health",
    responses((status = 200, description = "`ok`.", content_type = "text/plain", body = String, example = "ok"))
)]
pub(crate) async fn healthz() -> &'static str {
    "ok"
}

/// Readiness: the store answers, at this build's schema.
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "ready",
    tag = "health",
    responses(
        (status = 200, description = "`ready`.", content_type = "text/plain", body = String, example = "ready"),
        (status = 503, description = "The store does not answer, or its schema is not this build's.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["not_ready"])))),
    )
)]
pub(crate) async fn readyz(State(state): State<AppState>) -> Result<&'static str, ApiError> {
    let Some(ledger) = &state.config().ledger else { return Ok("ready") };
    let reason = match tokio::time::timeout(READY_TIMEOUT, ledger.store.ready()).await {
        Ok(Ok(())) => return Ok("ready"),
        Ok(Err(error)) => error.to_string(),
        Err(_) => format!("the store did not answer within {} s", READY_TIMEOUT.as_secs()),
    };
    tracing::warn!(%reason, "not ready");
    Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", reason))
}
