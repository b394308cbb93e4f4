//! The span of each HTTP request: `{method} {route}` by route template
//! (never the raw path: a link's path holds its token), with the response's
//! status, a child of the caller's trace when the request carries a W3C
//! `traceparent`. A streamed response's run keeps the span open until it
//! ends. Nothing at all when traces are off.

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::propagation::Extractor;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::SPAN_TARGET;

/// The route of a request that matched none.
const UNMATCHED: &str = "unmatched";

/// Opens the request's span (an `axum::middleware::from_fn` layer).
pub(crate) async fn trace(request: Request, next: Next) -> Response {
    if !super::enabled() {
        return next.run(request).await;
    }
    let route = request.extensions().get::<MatchedPath>().map_or(UNMATCHED, MatchedPath::as_str);
    let method = request.method().as_str();
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "http_request",
        otel.name = format!("{method} {route}"),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = method,
        http.route = route,
        http.response.status_code = tracing::field::Empty,
    );
    let parent =
        opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&Headers(request.headers())));
    // A request without a valid `traceparent` starts a trace of its own.
    let _ = span.set_parent(parent);
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    response
}

/// A request's headers as the propagator reads them.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(axum::http::HeaderName::as_str).collect()
    }
}
