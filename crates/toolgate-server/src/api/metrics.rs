//! `GET /metrics`: the server's metrics in the Prometheus text format
//! ([`crate::metrics`]). Without a principal source (single-user mode) it is
//! open like every other route; with one, only admins (`--admin`) read it:
//! the series name tools, routes and outcomes, which are not everyone's to
//! see. `--metrics-addr` serves it alone, without sign-in, on a listener of
//! its own for scrapers ([`scrape_only`]): whoever reaches that address may
//! read it, so it belongs where only the scrapers do.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use toolgate::ledger::LedgerStore;

use crate::app::AppState;
use crate::caller::Caller;
use crate::error::{ApiError, ErrorBody};

/// The content type of the Prometheus text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The metrics, as Prometheus scrapes them.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    tag = "health",
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "Every series in the Prometheus text format (version 0.0.4).",
            content_type = "text/plain", body = String),
        (status = 403, description = "A principal source is configured and the caller is no admin.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["admin_only"])))),
    )
)]
pub(crate) async fn metrics(State(state): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    if state.config().principals.is_configured() && !caller.voter(&state).admin {
        return Err(ApiError::new(StatusCode::FORBIDDEN, "admin_only", "the metrics are for admins (`--admin`)"));
    }
    Ok(scraped(&state).await)
}

/// The metrics as a response, the store's gauges read first.
async fn scraped(state: &AppState) -> Response {
    let store = state.config().ledger.as_ref().map(|ledger| ledger.store.as_ref() as &dyn LedgerStore);
    ([(header::CONTENT_TYPE, TEXT_FORMAT)], state.metrics().scrape(store).await).into_response()
}

/// The router of the `--metrics-addr` listener: `GET /metrics`, open, and nothing else.
pub(crate) fn scrape_only(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(|State(state): State<AppState>| async move { scraped(&state).await }))
        .with_state(state)
}
