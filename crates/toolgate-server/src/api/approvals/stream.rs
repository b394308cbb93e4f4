//! `GET /api/approvals/stream`: server-sent events of the approvals the
//! caller may decide, as they appear and change, for inbox pages.
//!
//! Each event is `event: approval` with the inbox item as its data: first
//! every pending approval the caller may decide (newest first, at most
//! [`super::MAX_LIMIT`]), then each one that appears or changes (a vote, a
//! decision, an execution), as the process's follower of the store finds
//! them ([`crate::workers::inbox_hub`]: one read for all streams, at once for a
//! change made here, within [`crate::workers::inbox_hub::POLL`] for one made elsewhere). A stream
//! that falls behind reads its inbox again. `: keep-alive` comments every
//! [`KEEP_ALIVE`] keep proxies from closing it. A connection holds only the
//! ids and versions it has sent, at most [`toolgate::ledger::MAX_GIVEN`] of
//! the newest, so a thousand open inboxes cost a thousand small maps and no
//! queries of their own, however many approvals wait.
//!
//! A stream keeps no permission it no longer has: at every keep-alive (so
//! within [`KEEP_ALIVE`]) it checks the caller's credential again, as a new
//! request would. A credential that expired, was withdrawn or now names
//! someone else ends the stream with `event: ended` and a JSON `data` of
//! `code` and `message` saying why; changed groups (the config's `[groups]`,
//! a JWT's claim) change what it shows from then on.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::request::Parts;
use axum::response::Response;
use tokio::sync::broadcast;
use toolgate::approval::lifecycle::Voter;
use toolgate::ledger::{ApprovalQuery, ApprovalRecord, InboxChanges, StateFilter};

use super::MAX_LIMIT;
use crate::app::AppState;
use crate::approval_item::ApprovalItem;
use crate::caller::{Caller, peer_of, recheck};
use crate::error::{ApiError, ErrorBody};
use crate::http::sse_response;

/// How long a quiet stream waits before a keep-alive comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The response headers of the stream.
const HEADERS: &[(&str, &str)] =
    &[("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("x-accel-buffering", "no")];

/// Follows the approvals the caller may decide, as server-sent events.
///
/// Each `event: approval` has an `ApprovalItem` as its JSON data: first each
/// pending approval, then each one that appears or changes; `: keep-alive`
/// comments come every 15 seconds.
#[utoipa::path(
    get,
    path = "/api/approvals/stream",
    operation_id = "streamApprovals",
    tag = "approvals",
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The stream: `event: approval` frames, each `data` an `ApprovalItem` as JSON.",
            content_type = "text/event-stream", body = String),
        (status = 404, description = "No store.", body = ErrorBody, extensions(("x-error-codes" = json!(["no_store"])))),
    )
)]
pub(crate) async fn stream(State(state): State<AppState>, parts: Parts) -> Result<Response, ApiError> {
    let (headers, peer) = (parts.headers.clone(), peer_of(&parts));
    let caller = Caller::identify(&state, &headers, peer).await?;
    let store = std::sync::Arc::clone(&state.ledger_config()?.store);
    let mut voter = caller.voter(&state);
    let mut query = inbox_query(&state, &voter);
    // Subscribed before the first read, so nothing between the two is missed.
    let mut changes = state.inbox_hub().subscribe(&state.signals().watch_approvals(), &state.ledger_config()?.store);
    let frames = async_stream::stream! {
        let mut heard = InboxChanges::default();
        let mut refresh = true;
        let mut checked = tokio::time::Instant::now();
        loop {
            if checked.elapsed() >= KEEP_ALIVE {
                checked = tokio::time::Instant::now();
                match recheck(&state, &headers, peer, &caller).await {
                    Ok(now) => {
                        let again = now.voter(&state);
                        if again != voter {
                            query = inbox_query(&state, &again);
                            voter = again;
                            refresh = true;
                        }
                    }
                    Err(ended) => {
                        yield Ok(ended);
                        break;
                    }
                }
            }
            if refresh {
                refresh = false;
                yield Ok::<_, Infallible>(match heard.next(store.as_ref(), &query, &voter).await {
                    Ok(records) => frame(records.iter()),
                    Err(error) => {
                        tracing::warn!(%error, "the approvals stream cannot read the store");
                        Bytes::from_static(b": store unavailable\n\n")
                    }
                });
            }
            let wait = KEEP_ALIVE.saturating_sub(checked.elapsed());
            match tokio::time::timeout(wait, changes.recv()).await {
                Ok(Ok(records)) => {
                    let offered = heard.offer(&records, &voter);
                    if !offered.is_empty() {
                        yield Ok(frame(offered.into_iter()));
                    }
                }
                // Fell behind: read the inbox again.
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => refresh = true,
                Ok(Err(broadcast::error::RecvError::Closed)) => break,
                Err(_) => yield Ok(Bytes::from_static(b": keep-alive\n\n")),
            }
        }
    };
    Ok(sse_response(frames, HEADERS))
}

/// The pending approvals `voter` may decide, as the stream reads them.
fn inbox_query(state: &AppState, voter: &Voter) -> ApprovalQuery {
    ApprovalQuery {
        viewer_keys: state.viewer_keys(voter),
        states: StateFilter::Pending,
        conversation_id: None,
        conversation_name: None,
        limit: MAX_LIMIT,
    }
}

/// The `approval` events of these records.
fn frame<'r>(records: impl Iterator<Item = &'r ApprovalRecord>) -> Bytes {
    let mut body = String::new();
    for record in records {
        body.push_str("event: approval\ndata: ");
        body.push_str(&serde_json::to_string(&ApprovalItem::of(record)).unwrap_or_default());
        body.push_str("\n\n");
    }
    if body.is_empty() {
        body.push_str(": keep-alive\n\n");
    }
    Bytes::from(body)
}
