//! The router's request metrics: each answered request counted by its route
//! template (`/api/approvals/{id}`, never the raw path) and status, and
//! timed to its response's head. A path no route matches counts as
//! `unmatched`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::Metrics;

/// The label of a request that matched no route.
const UNMATCHED: &str = "unmatched";

/// Counts and times one request (an `axum::middleware::from_fn_with_state` layer).
pub(crate) async fn track(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or(UNMATCHED, MatchedPath::as_str).to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    metrics.http_request(&route, response.status().as_u16(), started.elapsed());
    response
}
