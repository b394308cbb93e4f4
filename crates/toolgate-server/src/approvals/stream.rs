//! `GET /api/approvals/stream`: server-sent events of the approvals the
//! caller may decide, as they appear and change, for inbox pages.
//!
//! Each event is `event: approval` with the inbox item as its data: first
//! every pending approval the caller may decide (newest first, at most
//! [`super::MAX_LIMIT`]), then each one that appears or changes (a vote, a
//! decision, an execution). A connection looks again when this process
//! changes an approval, and every [`POLL`] otherwise (another replica, the
//! CLI on the store); `: keep-alive` comments keep proxies from closing it.
//! A connection holds only the ids and versions it has sent, so a thousand
//! open inboxes cost a thousand small maps.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use toolgate::approval::lifecycle::Voter;
use toolgate::ledger::{ApprovalQuery, ApprovalStore, InboxChanges, StateFilter};

use super::{MAX_LIMIT, approval_item};
use crate::app::AppState;
use crate::error::ApiError;
use crate::http::sse_response;
use crate::principal::Caller;

/// How often a connection looks for changes made elsewhere.
pub const POLL: Duration = Duration::from_secs(2);

/// The response headers of the stream.
const HEADERS: &[(&str, &str)] =
    &[("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("x-accel-buffering", "no")];

/// `GET /api/approvals/stream`.
pub(crate) async fn stream(State(state): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    let store = std::sync::Arc::clone(&state.ledger_config()?.store);
    let voter = state.voter(&caller);
    let query = ApprovalQuery {
        viewer_keys: state.viewer_keys(&voter),
        states: StateFilter::Pending,
        conversation_id: None,
        limit: MAX_LIMIT,
    };
    let mut changed = state.watch_approvals();
    let frames = async_stream::stream! {
        let mut changes = InboxChanges::default();
        loop {
            match events(store.as_ref(), &query, &voter, &mut changes).await {
                Ok(frame) => yield Ok::<_, Infallible>(frame),
                Err(error) => {
                    tracing::warn!(%error, "the approvals stream cannot read the store");
                    yield Ok(Bytes::from_static(b": store unavailable\n\n"));
                }
            }
            // A change here wakes the connection at once; elsewhere, the next poll finds it.
            let _ = tokio::time::timeout(POLL, changed.changed()).await;
        }
    };
    Ok(sse_response(frames, HEADERS))
}

/// The events for what changed since the last look (a keep-alive comment when nothing did).
async fn events(
    store: &dyn ApprovalStore,
    query: &ApprovalQuery,
    voter: &Voter,
    changes: &mut InboxChanges,
) -> Result<Bytes, toolgate::ledger::StoreError> {
    let mut body = String::new();
    for record in changes.next(store, query, voter).await? {
        body.push_str("event: approval\ndata: ");
        body.push_str(&approval_item(&record).to_string());
        body.push_str("\n\n");
    }
    if body.is_empty() {
        body.push_str(": keep-alive\n\n");
    }
    Ok(Bytes::from(body))
}
