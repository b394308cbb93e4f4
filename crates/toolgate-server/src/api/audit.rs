//! `GET /api/audit`: the approval audit log as JSON lines, oldest first.
//!
//! Query: `conversation=ID` (only that conversation), `since=T` (events at or
//! after T: milliseconds since the epoch or an RFC 3339 time), `after=SEQ`
//! (events after that position, for following the log), `limit=N`
//! (default and maximum 10,000). Without a store the endpoint answers 404
//! `no_store`. With principals, a requester sees the events of the
//! conversations they own and of the approvals they answered; admins
//! (`ServerConfig::admins`) and single-user servers see everything.

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use toolgate::ledger::{AuditQuery, Millis};

use crate::app::AppState;
use crate::caller::Caller;
use crate::error::{ApiError, ErrorBody};

/// The most events one response holds.
pub const MAX_AUDIT_EVENTS: usize = 10_000;

/// The query parameters `GET /api/audit` takes (others are 400 `invalid_query`).
pub(crate) const QUERY_PARAMS: [&str; 4] = ["conversation", "since", "after", "limit"];

/// Lists audit events as `application/x-ndjson`, oldest first.
#[utoipa::path(
    get,
    path = "/api/audit",
    operation_id = "listAuditEvents",
    tag = "audit",
    params(
        ("conversation" = Option<String>, Query, description = "Only this conversation's events."),
        ("since" = Option<String>, Query,
            description = "Events at or after this time: milliseconds since the epoch, or an RFC 3339 time."),
        ("after" = Option<i64>, Query, description = "Events after this position (`seq`), for following the log."),
        ("limit" = Option<usize>, Query, description = "At most this many (default and maximum 10,000)."),
    ),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The events the requester may see, one JSON object per line.",
            content_type = "application/x-ndjson", body = crate::api::openapi::schemas::AuditEventDoc),
        (status = 400, description = "A bad query.", body = ErrorBody, extensions(("x-error-codes" = json!(["invalid_query"])))),
        (status = 404, description = "No store.", body = ErrorBody, extensions(("x-error-codes" = json!(["no_store"])))),
        (status = 500, description = "An event could not be encoded.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["encoding_failed"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn audit(
    State(state): State<AppState>,
    Caller { principal, .. }: Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let ledger = state.ledger_config()?;
    if let Some(unknown) = params.keys().find(|key| !QUERY_PARAMS.contains(&key.as_str())) {
        return Err(bad_query(format!("unknown parameter `{unknown}` (use conversation, since, after, limit)")));
    }
    let limit = match params.get("limit") {
        Some(text) => {
            text.parse::<usize>().map_err(|_| bad_query(format!("`limit` must be a number, got `{text}`")))?
        }
        None => MAX_AUDIT_EVENTS,
    };
    let query = AuditQuery {
        conversation_id: params.get("conversation").cloned(),
        since: params.get("since").map(|text| parse_time(text)).transpose()?,
        after_seq: match params.get("after") {
            Some(text) => Some(text.parse().map_err(|_| bad_query(format!("`after` must be a number, got `{text}`")))?),
            None => None,
        },
        limit: Some(limit.min(MAX_AUDIT_EVENTS)),
        view: state.audit_view(principal.as_deref()),
    };
    let events = ledger.store.audit(&query).await.map_err(ApiError::from)?;
    let mut body = Vec::with_capacity(events.len() * 256);
    for event in &events {
        serde_json::to_writer(&mut body, event)
            .map_err(|error| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "encoding_failed", error.to_string()))?;
        body.push(b'\n');
    }
    let mut response = Response::new(Body::from(body));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    Ok(response)
}

/// Milliseconds since the epoch, or an RFC 3339 time.
pub fn parse_time(text: &str) -> Result<Millis, ApiError> {
    if let Ok(millis) = text.parse::<Millis>() {
        return Ok(millis);
    }
    let time = humantime::parse_rfc3339_weak(text).map_err(|error| {
        bad_query(format!("`since` must be milliseconds since the epoch or an RFC 3339 time, got `{text}`: {error}"))
    })?;
    let since = time.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Ok(Millis::try_from(since.as_millis()).unwrap_or(Millis::MAX))
}

fn bad_query(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", message)
}
