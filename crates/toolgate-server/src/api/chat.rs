//! `POST /api/chat`: the AI SDK v6 UI message stream.
//!
//! Without a store the request's history is the conversation (stateless
//! signed mode). With one, the history is reconciled with the stored
//! conversation first ([`crate::run::conversation`]), the run goes on even if the
//! client disconnects, and the conversation is stored once it ends.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use futures::StreamExt;
use toolgate::ledger::Ledger;
use toolgate_ui::{ChatRequest, SSE_DONE, UI_MESSAGE_STREAM_HEADERS, UiRole, into_model_messages, sse_frame};

use crate::app::AppState;
use crate::caller::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::http::{JsonBody, detached_sse, sse_response};
use crate::run::conversation::{self, Reconciled};
use crate::run::{StoredRun, encoder, new_message_id, run_stored, start};

/// Answers one chat request with a UI message stream (AI SDK v6).
///
/// Without a store the request's history is the conversation; with one it
/// is reconciled with the stored conversation first, and the run goes on
/// when the client goes away. The stream's `data-toolgate-*` parts are
/// described by `ui-data-parts.schema.json` in the documentation.
#[utoipa::path(
    post,
    path = "/api/chat",
    operation_id = "chat",
    tag = "chat",
    request_body = crate::api::openapi::schemas::ChatRequestDoc,
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The UI message stream: `data: <chunk JSON>` frames, then `data: [DONE]`.",
            content_type = "text/event-stream", body = String,
            headers(("x-vercel-ai-ui-message-stream" = String, description = "`v1`"))),
        (status = 400, description = "The request or its history is refused before anything runs.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["invalid_json", "invalid_body", "invalid_message", "invalid_chat_id",
                "missing_conversation_id", "history_mismatch", "invalid_messages", "invalid_approval",
                "toolkit_required", "tool_not_found", "unknown_approval", "approval_tool_call_not_found",
                "conflicting_approval_responses", "unanswered_approvals", "invalid_tool_input", "edit_not_supported",
                "invalid_approval_signature", "missing_tool_results", "duplicate_tool_call_id",
                "duplicate_approval_id", "duplicate_approval_request", "edit_not_allowed", "edit_denied",
                "approval_not_issued", "approval_mismatch", "forged_tool_result", "edit_needs_single_approver"])))),
        (status = 403, description = "An answer in the chat that the approval's routing refuses.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["not_an_approver", "self_approval_forbidden", "not_the_requester"])))),
        (status = 404, description = "An answer to an approval the requester cannot see.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["unknown_approval"])))),
        (status = 409, description = "The history conflicts with what the server recorded.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["approval_already_decided", "approval_in_progress",
                "approvals_pending", "already_voted"])))),
        (status = 410, description = "An answer to an approval that expired.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["approval_expired"])))),
        (status = 500, description = "The stored conversation cannot be read.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["corrupt_conversation"])))),
        (status = 502, description = "The model failed before the stream started.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["model_error"])))),
        (status = 503, description = "The store failed; nothing ran.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn chat(
    State(state): State<AppState>,
    Caller { principal, groups }: Caller,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let request = ChatRequest::from_json(&body)?;
    check_chat_id(&request.id)?;
    let key = state.conversation_key(principal.as_deref(), &request.id)?;
    match state.ledger(&key, principal.clone())? {
        Some(ledger) => stored_chat(state, request, ledger, groups).await,
        None => stateless_chat(state, request, &key, principal, groups).await,
    }
}

/// The conversations other than chats keep in the same store, by prefix: a chat id may not start with one.
const RESERVED: [(&str, &str); 2] = [
    (crate::run::agui::AGUI_PREFIX, "the AG-UI threads' namespace"),
    (crate::run::calls::CALLS_PREFIX, "the call-gating API's namespace"),
];

/// Chat ids share the store with AG-UI threads (`ag-ui:`) and the call-gating API's calls (`api:`), whose
/// prefixes no chat may take, so no chat request reaches their records.
pub(crate) fn check_chat_id(chat_id: &str) -> Result<(), ApiError> {
    match RESERVED.iter().find(|(prefix, _)| chat_id.starts_with(prefix)) {
        Some((prefix, what)) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_chat_id",
            format!("chat ids may not start with `{prefix}` ({what})"),
        )),
        None => Ok(()),
    }
}

/// The stateless mode: the client's history is the conversation.
async fn stateless_chat(
    state: AppState,
    request: ChatRequest,
    key: &str,
    principal: Option<String>,
    groups: Vec<String>,
) -> Result<Response, ApiError> {
    let message_id = request.continued_message_id().map(str::to_owned).unwrap_or_else(new_message_id);
    let ChatRequest { id: chat_id, messages, .. } = request;
    let messages = into_model_messages(messages)?;
    tracing::info!(chat = %chat_id, messages = messages.len(), "chat request");
    let engine_request = state.text_request(messages, key, principal.as_deref()).groups(groups);
    let stream = start(state.run_context(), &chat_id, engine_request).await?;
    let mut encoder = encoder(state.run_context(), message_id);
    let frames = stream
        .flat_map(move |part| futures::stream::iter(encoder.encode(&part)))
        .map(|chunk| Ok::<_, Infallible>(Bytes::from(sse_frame(&chunk))))
        .chain(futures::stream::once(async { Ok(Bytes::from_static(SSE_DONE.as_bytes())) }));
    Ok(sse_response(frames, UI_MESSAGE_STREAM_HEADERS))
}

/// With a store: reconcile, run to the end whatever the client does, store the conversation.
async fn stored_chat(
    state: AppState,
    request: ChatRequest,
    ledger: Ledger,
    groups: Vec<String>,
) -> Result<Response, ApiError> {
    let store = ledger.config.store.clone();
    let chat_id = request.id.clone();
    // The requester's own conversation of that id.
    let key = ledger.conversation_id.clone();
    let principal = ledger.principal.clone();
    // The conversation and the sticky decisions the gate needs, in one read.
    let gate = state.gate(&key, principal.as_deref());
    let read = store.conversation_with_decisions(&key, &gate.query()).await?;
    let gate = gate.with_decisions(read.decisions);
    let new_message = request.messages.last().is_some_and(|message| message.role == UiRole::User);
    let Reconciled { mut messages, version, replay } =
        conversation::reconcile(&ledger, request, read.conversation, &state.toolkit()).await?;
    if let Some(chunks) = replay {
        tracing::info!(chat = %chat_id, "repeated request answered from the stored conversation");
        let frames = chunks
            .into_iter()
            .map(|chunk| Ok::<_, Infallible>(Bytes::from(sse_frame(&chunk))))
            .chain([Ok(Bytes::from_static(SSE_DONE.as_bytes()))]);
        return Ok(sse_response(futures::stream::iter(frames), UI_MESSAGE_STREAM_HEADERS));
    }
    let voter = crate::caller::Caller { principal: principal.clone(), groups: groups.clone() }.voter(&state);
    let step = crate::run::step::settle_step(state.run_context(), &ledger, &voter, &mut messages, new_message).await?;
    let run = StoredRun { key, principal, groups, ledger, gate: Some(gate), messages, version, step };
    Ok(match run.step {
        crate::run::step::Step::Waiting { .. } => {
            detached_sse(crate::run::step::waiting(state.run_context(), run).await?, UI_MESSAGE_STREAM_HEADERS)
        }
        crate::run::step::Step::None | crate::run::step::Step::Ready { .. } => {
            detached_sse(run_stored(state.run_context(), run).await?, UI_MESSAGE_STREAM_HEADERS)
        }
    })
}
