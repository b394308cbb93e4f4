//! `GET /api/chats/{id}`: one of the requester's stored chats, its UI
//! messages as the server keeps them (with a store; 404 `no_store` without).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::chat::check_chat_id;
use crate::app::AppState;
use crate::caller::Caller;
use crate::error::{ApiError, ErrorBody};

/// A stored chat (`GET /api/chats/{id}`).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StoredChat {
    /// The chat id.
    id: String,
    /// Its UI messages, as the server keeps them.
    #[schema(value_type = Vec<crate::api::openapi::schemas::UiMessageDoc>)]
    messages: Value,
    /// The stored version (bumped by every save).
    version: i64,
}

/// The stored UI messages of one of the requester's chats.
#[utoipa::path(
    get,
    path = "/api/chats/{id}",
    operation_id = "getChat",
    tag = "chat",
    params(("id" = String, Path, description = "The chat id.")),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The chat.", body = StoredChat),
        (status = 400, description = "A bad chat id.", body = ErrorBody, extensions(("x-error-codes" = json!(["invalid_chat_id"])))),
        (status = 404, description = "No such chat of the requester's, or no store.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["chat_not_found", "no_store"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn stored_messages(
    State(state): State<AppState>,
    Caller { principal, .. }: Caller,
    Path(chat_id): Path<String>,
) -> Result<Json<StoredChat>, ApiError> {
    check_chat_id(&chat_id)?;
    let key = state.conversation_key(principal.as_deref(), &chat_id)?;
    let store = &state.ledger_config()?.store;
    // Only the requester's own: another principal's chat of that id is not found.
    let stored = store
        .conversation(&key)
        .await?
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "chat_not_found", format!("no stored chat `{chat_id}`")))?;
    Ok(Json(StoredChat { id: chat_id, messages: stored.messages, version: stored.version }))
}
