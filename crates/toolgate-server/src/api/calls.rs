//! `/api/calls`: the call-gating API, for an agent in any language. Thin
//! handlers over `run/calls.rs`, which holds the contract; here only the
//! wire shapes.
//!
//! - `POST /api/calls` `{tool, input, conversationId?, idempotencyKey?,
//!   description?, inputSchema?, wait?}` → 200 [`CallDecided`] (`allow` or
//!   `deny`) or 202 [`CallPending`]; with `wait` (at most `60s`) the answer
//!   waits until the call is decided or the wait ends.
//! - `GET /api/calls/{id}?wait=30s` → [`CallStatus`]: long-polled while the
//!   call is `pending` or `started`.
//! - `POST /api/calls/{id}/start` → [`CallStatus`] `started` (exactly once;
//!   409 `call_already_started` after).
//! - `POST /api/calls/{id}/finish` `{output}` or `{error}` → [`CallStatus`] `finished`.
//! - `GET /api/calls/stream?ids=A,B` → server-sent events `event: call`, each
//!   a [`CallStatus`]: the listed calls as they stand, then every change to
//!   them (to all the caller's calls without `ids`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate::ledger::ApprovalRecord;
use utoipa::ToSchema;

use crate::app::AppState;
use crate::approval_item::{approvers, quorum, timestamp};
use crate::caller::{Caller, peer_of, recheck};
use crate::error::{ApiError, ErrorBody};
use crate::http::{JsonBody, sse_response};
use crate::run::calls::{self, CallState, MAX_WAIT, NewCall, Outcome, Requester};

/// How long a quiet call stream waits before a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The most ids one stream follows.
pub const MAX_STREAM_IDS: usize = 1_000;
/// The response headers of the stream.
const HEADERS: &[(&str, &str)] =
    &[("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("x-accel-buffering", "no")];

/// A call to gate.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CallRequest {
    /// The tool's name (1 to 256 bytes, no control characters).
    tool: String,
    /// The input it would run with (any JSON).
    input: Value,
    /// The agent's conversation or run (default `default`); calls are the caller's, per conversation.
    #[serde(default)]
    conversation_id: Option<String>,
    /// The caller's name for this call (1 to 256 bytes): a request with the
    /// same key is the same call, whatever its age; without one, the same
    /// tool and input within the server's retry window is.
    #[serde(default)]
    idempotency_key: Option<String>,
    /// What the tool does, for the audit log.
    #[serde(default)]
    description: Option<String>,
    /// A JSON Schema the input must satisfy (else 400 `invalid_tool_input`; 400
    /// `invalid_input_schema` when it is none), kept with the call: an
    /// approver's edit must satisfy it too.
    #[serde(default)]
    input_schema: Option<Value>,
    /// Wait up to this long for a decision (`500ms`, `30s`, `1m`; at most `60s`).
    #[serde(default)]
    #[schema(example = "30s")]
    wait: Option<String>,
}

/// A decided call: 200.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CallDecided {
    /// The call's id.
    call_id: String,
    /// `allow`: run it (start it first); `deny`: do not.
    #[schema(schema_with = decided_schema)]
    decision: &'static str,
    /// Why it was denied (`null` for an allowed call).
    reason: Option<String>,
    /// Where the call stands.
    #[schema(schema_with = call_state_schema)]
    state: &'static str,
    /// The input to run, an approver's edit or the call's own (`null` when denied).
    input: Option<Value>,
}

/// A call waiting for a person: 202.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CallPending {
    /// The call's id.
    call_id: String,
    /// Always `pending`.
    #[schema(schema_with = pending_schema)]
    decision: &'static str,
    /// The approval people decide (the inbox's id).
    approval_id: String,
    /// Who decides: principals and `group:NAME`s (the requester alone when no rule names anybody).
    approvers: Vec<String>,
    /// How many approvals decide it.
    quorum: u32,
    /// When it expires undecided (RFC 3339).
    #[schema(format = DateTime)]
    expires_at: Option<String>,
    /// The approval's page (absolute with the server's `--public-url`).
    url: String,
    /// Always `pending`.
    #[schema(schema_with = call_state_schema)]
    state: &'static str,
}

/// A call as it stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CallStatus {
    /// The call's id.
    call_id: String,
    /// Where it stands.
    #[schema(schema_with = call_state_schema)]
    state: &'static str,
    /// The tool's name.
    tool: String,
    /// The input to run: an approver's edit once decided, else the call's own.
    input: Value,
    /// Whether `input` is an approver's edit.
    edited: bool,
    /// Why: the reason of the rule that decided or asked, or the denial's reason.
    reason: Option<String>,
    /// The approval people decide (after an edit that needed other approvers, the new one).
    approval_id: String,
    /// Who decides.
    approvers: Vec<String>,
    /// How many approvals decide it.
    quorum: u32,
    /// When it expires undecided (RFC 3339).
    #[schema(format = DateTime)]
    expires_at: Option<String>,
    /// What it returned (`finished` without an error).
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
    /// Its error (`finished` with an error).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
}

/// How a started call ended: exactly one of `output` and `error`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FinishRequest {
    /// What it returned (any JSON).
    #[serde(default)]
    output: Option<Value>,
    /// Its error (a message, or any JSON).
    #[serde(default)]
    error: Option<Value>,
}

/// The schema of a call's state.
fn call_state_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    let states = ["pending", "approved", "denied", "expired", "started", "finished", "interrupted"];
    string_enum(&states, "Where the call stands.")
}

/// The schema of a decided call's decision.
fn decided_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    string_enum(&["allow", "deny"], "What was decided.")
}

/// The schema of a pending call's decision.
fn pending_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    string_enum(&["pending"], "Not decided yet.")
}

fn string_enum(values: &[&str], description: &str) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(values.iter().copied()))
        .description(Some(description))
        .into()
}

impl CallStatus {
    /// The status of call `call_id`, whose current record is `record`.
    fn of(call_id: &str, record: &ApprovalRecord) -> Self {
        let (output, error) = match calls::outcome_of(record) {
            Some(Outcome::Output(value)) => (Some(value), None),
            Some(Outcome::Error(value)) => (None, Some(value)),
            None => (None, None),
        };
        Self {
            call_id: call_id.to_owned(),
            state: CallState::of(record).as_str(),
            tool: record.tool_name.clone(),
            input: calls::input_to_run(record).clone(),
            edited: record.decision.as_ref().is_some_and(|decision| decision.edited_input.is_some())
                || record.supersedes.is_some(),
            reason: calls::reason_of(record),
            approval_id: record.approval_id.clone(),
            approvers: approvers(record),
            quorum: quorum(record),
            expires_at: timestamp(record.expires_at),
            output,
            error,
        }
    }
}

/// The answer to `POST /api/calls`: 202 while pending, else 200.
fn answer(state: &AppState, call_id: String, record: &ApprovalRecord) -> Response {
    let call_state = CallState::of(record);
    match call_state {
        CallState::Pending => {
            let path = format!("/approvals/{}", record.approval_id);
            let url = match &state.config().calls.public_url {
                Some(public) => format!("{}{path}", public.trim_end_matches('/')),
                None => path,
            };
            let body = CallPending {
                call_id,
                decision: "pending",
                approval_id: record.approval_id.clone(),
                approvers: approvers(record),
                quorum: quorum(record),
                expires_at: timestamp(record.expires_at),
                url,
                state: call_state.as_str(),
            };
            (StatusCode::ACCEPTED, Json(body)).into_response()
        }
        CallState::Denied | CallState::Expired => {
            let reason = calls::reason_of(record).or_else(|| Some(call_state.as_str().to_owned()));
            let body = CallDecided { call_id, decision: "deny", reason, state: call_state.as_str(), input: None };
            Json(body).into_response()
        }
        _ => {
            let input = Some(calls::input_to_run(record).clone());
            let body = CallDecided { call_id, decision: "allow", reason: None, state: call_state.as_str(), input };
            Json(body).into_response()
        }
    }
}

/// A `wait` as the API takes it: a duration of at most [`MAX_WAIT`].
fn parse_wait(text: &str) -> Result<Duration, String> {
    let wait =
        humantime::parse_duration(text.trim()).map_err(|error| format!("`{text}` is not a duration: {error}"))?;
    if wait > MAX_WAIT {
        return Err(format!("`wait` may be at most 60s, got `{text}`"));
    }
    Ok(wait)
}

/// Waits on a call until it settles or `wait` ends (nothing to wait for: as it is).
///
/// Ten thousand requests may wait at once, each holding its future for up to
/// a minute, and an async function's future is as large as its largest step:
/// the steps that read and settle records (kilobytes each) are boxed, so a
/// waiting request holds only what the wait needs (see the Benchmarks chapter).
async fn waited(state: &AppState, record: ApprovalRecord, wait: Option<Duration>) -> Result<ApprovalRecord, ApiError> {
    let Some(wait) = wait.filter(|wait| !wait.is_zero() && !calls::settled(&record)) else { return Ok(record) };
    let config = state.ledger_config()?;
    let watch = state.watch_call(&record.tool_call_id)?;
    // Read again after registering: a change between the first read and now is not missed.
    let fresh = config.store.approvals(std::slice::from_ref(&record.approval_id)).await?.pop().unwrap_or(record);
    calls::wait(config, watch.notify(), fresh, tokio::time::Instant::now() + wait).await
}

/// Gates a call for an agent.
///
/// The call goes through the same gate as every other (rules, sticky
/// decisions, approvers, quorum, notifications, expiry, audit) under the
/// caller's principal; a tool nothing names is decided by `[calls] default`.
/// A retry (the same `idempotencyKey`, or without one the same tool and
/// input within the retry window) attaches to the same call.
#[utoipa::path(
    post,
    path = "/api/calls",
    operation_id = "createCall",
    tag = "calls",
    request_body = CallRequest,
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "Decided: `allow` (start, run and finish it) or `deny`.", body = CallDecided),
        (status = 202, description = "Waiting for a person (after `wait`, if given).", body = CallPending),
        (status = 400, description = "A bad call.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["invalid_json", "invalid_body", "invalid_tool_input", "invalid_input_schema"])))),
        (status = 404, description = "No store.", body = ErrorBody, extensions(("x-error-codes" = json!(["no_store"])))),
        (status = 409, description = "The key names another call.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["idempotency_key_reused"])))),
        (status = 503, description = "The store failed; nothing was recorded.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let config = state.ledger_config()?;
    let body: CallRequest = parse_body(&body)?;
    let wait = body
        .wait
        .as_deref()
        .map(parse_wait)
        .transpose()
        .map_err(|message| ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", message))?;
    let call = NewCall {
        tool: body.tool,
        input: body.input,
        conversation_id: body.conversation_id,
        idempotency_key: body.idempotency_key,
        description: body.description,
        input_schema: body.input_schema,
    };
    let requester = Requester { principal: caller.principal.as_deref(), groups: &caller.groups };
    let settings = &state.config().calls;
    let (call_id, record) = Box::pin(calls::submit(state.run_context(), config, settings, requester, call)).await?;
    let record = match record.state {
        toolgate::ledger::ApprovalState::Pending => waited(&state, record, wait).await?,
        _ => record,
    };
    Ok(answer(&state, call_id, &record))
}

/// A bad query: 400 `invalid_query`.
fn bad_query(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", message)
}

/// One of the caller's calls, long-polled.
///
/// With `wait`, the answer waits while the call is `pending` or `started`
/// until it moves on or the wait ends. `approved` carries the input to run
/// (an approver's edit, or the call's own), `denied` the reason, `finished`
/// the output or the error.
#[utoipa::path(
    get,
    path = "/api/calls/{id}",
    operation_id = "getCall",
    tag = "calls",
    params(
        ("id" = String, Path, description = "The call's id."),
        ("wait" = Option<String>, Query, description = "Wait up to this long while the call is `pending` or `started` (`500ms`, `30s`; at most `60s`)."),
    ),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The call as it stands.", body = CallStatus),
        (status = 400, description = "A bad query.", body = ErrorBody, extensions(("x-error-codes" = json!(["invalid_query"])))),
        (status = 404, description = "No such call of the caller's, or no store.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["unknown_call", "no_store"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<CallStatus>, ApiError> {
    let config = state.ledger_config()?;
    if let Some(unknown) = params.keys().find(|key| key.as_str() != "wait") {
        return Err(bad_query(format!("unknown parameter `{unknown}` (use wait)")));
    }
    let wait = params.get("wait").map(|text| parse_wait(text)).transpose().map_err(bad_query)?;
    let requester = Requester { principal: caller.principal.as_deref(), groups: &caller.groups };
    // Boxed, as `submit` in `create`: the request's future keeps the size of
    // its largest step for as long as it waits (see `waited`).
    let record = Box::pin(calls::find(config, requester, &id)).await?;
    drop((caller, params));
    let record = waited(&state, record, wait).await?;
    Ok(Json(CallStatus::of(&id, &record)))
}

/// How long a started call may run before it counts as interrupted.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StartRequest {
    /// The lease (`30s`, `5m`; at most `24h`); default the server's execution lease (30 seconds).
    #[serde(default)]
    #[schema(example = "5m")]
    lease: Option<String>,
}

/// Claims an approved call before running it, exactly once.
///
/// Only the first start succeeds; the call must then finish within its
/// lease (the body's `lease`, else the server's 30 seconds), else it is
/// `interrupted`. The body is optional. A call a person approved is judged
/// again by the rules on the history as it starts: one a rule denies now
/// is `denied` and does not start (409 `call_not_approved`, naming why).
#[utoipa::path(
    post,
    path = "/api/calls/{id}/start",
    operation_id = "startCall",
    tag = "calls",
    params(("id" = String, Path, description = "The call's id.")),
    request_body(content = Option<StartRequest>, description = "Optional: the lease.", content_type = "application/json"),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "Started: run it with `input`, then finish it.", body = CallStatus),
        (status = 400, description = "A bad body.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["invalid_json", "invalid_body"])))),
        (status = 404, description = "No such call of the caller's, or no store.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["unknown_call", "no_store"])))),
        (status = 409, description = "Started before, or not approved (or denied by a rule as it starts).", body = ErrorBody,
            extensions(("x-error-codes" = json!(["call_already_started", "call_not_approved"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn start(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<CallStatus>, ApiError> {
    let config = state.ledger_config()?;
    let body: StartRequest = match body.iter().all(u8::is_ascii_whitespace) {
        true => StartRequest::default(),
        false => parse_body(&body)?,
    };
    let lease = body.lease.as_deref().map(parse_lease).transpose()?;
    let requester = Requester { principal: caller.principal.as_deref(), groups: &caller.groups };
    let settings = &state.config().calls;
    let record = calls::start(state.run_context(), config, settings, requester, &id, lease).await?;
    Ok(Json(CallStatus::of(&id, &record)))
}

/// A start's `lease`: a duration from one second to [`calls::MAX_LEASE`].
fn parse_lease(text: &str) -> Result<Duration, ApiError> {
    let invalid = |message: String| ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", message);
    let lease =
        humantime::parse_duration(text.trim()).map_err(|error| invalid(format!("`lease` `{text}`: {error}")))?;
    if lease < Duration::from_secs(1) || lease > calls::MAX_LEASE {
        return Err(invalid(format!("`lease` must be from 1s to 24h, got `{text}`")));
    }
    Ok(lease)
}

/// Records how a started call ended: `{output}` or `{error}`.
#[utoipa::path(
    post,
    path = "/api/calls/{id}/finish",
    operation_id = "finishCall",
    tag = "calls",
    params(("id" = String, Path, description = "The call's id.")),
    request_body = FinishRequest,
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "Finished.", body = CallStatus),
        (status = 400, description = "Not exactly one of `output` and `error`.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["invalid_json", "invalid_body"])))),
        (status = 404, description = "No such call of the caller's, or no store.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["unknown_call", "no_store"])))),
        (status = 409, description = "Not started (or interrupted), or finished before.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["call_not_started", "call_already_finished"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn finish(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<CallStatus>, ApiError> {
    let config = state.ledger_config()?;
    let body: FinishRequest = parse_body(&body)?;
    let outcome = match (body.output, body.error) {
        (Some(output), None) => Outcome::Output(output),
        (None, Some(error)) => Outcome::Error(error),
        _ => {
            let message = "send exactly one of `output` and `error`";
            return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", message));
        }
    };
    let requester = Requester { principal: caller.principal.as_deref(), groups: &caller.groups };
    let record = calls::finish(state.run_context(), config, requester, &id, outcome).await?;
    Ok(Json(CallStatus::of(&id, &record)))
}

/// Follows calls as server-sent events, for a worker waiting on many.
///
/// Each `event: call` has a `CallStatus` as its JSON data: first each
/// listed call as it stands, then each change to them (to every call of
/// the caller's without `ids`); `: keep-alive` comments every 15 seconds.
/// At each of them the caller's credential is checked again: one that
/// expired, was withdrawn or names someone else ends the stream with
/// `event: ended` (JSON `code` and `message`), as the inbox stream does.
#[utoipa::path(
    get,
    path = "/api/calls/stream",
    operation_id = "streamCalls",
    tag = "calls",
    params(("ids" = Option<String>, Query, description = "The calls to follow, comma-separated (at most 1000); without it, every call of the caller's.")),
    security(("bearer" = []), ("session" = []), ()),
    responses(
        (status = 200, description = "The stream: `event: call` frames, each `data` a `CallStatus` as JSON.",
            content_type = "text/event-stream", body = String),
        (status = 400, description = "A bad query.", body = ErrorBody, extensions(("x-error-codes" = json!(["invalid_query"])))),
        (status = 404, description = "No store.", body = ErrorBody, extensions(("x-error-codes" = json!(["no_store"])))),
        (status = 503, description = "The store failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn stream(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
    parts: Parts,
) -> Result<Response, ApiError> {
    let (headers, peer) = (parts.headers.clone(), peer_of(&parts));
    let caller = Caller::identify(&state, &headers, peer).await?;
    let config = state.ledger_config()?.clone();
    if let Some(unknown) = params.keys().find(|key| key.as_str() != "ids") {
        return Err(bad_query(format!("unknown parameter `{unknown}` (use ids)")));
    }
    let ids: Option<Vec<String>> = params
        .get("ids")
        .map(|text| text.split(',').map(str::trim).filter(|id| !id.is_empty()).map(str::to_owned).collect());
    if ids.as_ref().is_some_and(|ids| ids.len() > MAX_STREAM_IDS) {
        return Err(bad_query(format!("`ids` may name at most {MAX_STREAM_IDS} calls")));
    }
    let mut changes = state.inbox_hub().subscribe(&state.signals().watch_approvals(), &config.store);
    let requester = Requester { principal: caller.principal.as_deref(), groups: &caller.groups };
    let first = match &ids {
        Some(ids) => calls::find_many(&config, requester, ids).await?,
        None => Vec::new(),
    };
    let mut follow = CallFollower::new(ids, caller);
    let opening: Vec<Bytes> = first.iter().map(|record| follow.frame(record)).collect();
    let frames = async_stream::stream! {
        for frame in opening {
            yield Ok::<_, Infallible>(frame);
        }
        let mut checked = tokio::time::Instant::now();
        loop {
            // The caller's credential is checked again at every keep-alive, as the inbox stream does.
            if checked.elapsed() >= KEEP_ALIVE {
                checked = tokio::time::Instant::now();
                match recheck(&state, &headers, peer, &follow.caller).await {
                    Ok(now) => follow.caller = now,
                    Err(ended) => {
                        yield Ok(ended);
                        break;
                    }
                }
            }
            match tokio::time::timeout(KEEP_ALIVE.saturating_sub(checked.elapsed()), changes.recv()).await {
                Ok(Ok(batch)) => {
                    for record in batch.iter() {
                        if follow.wants(record) {
                            yield Ok(follow.frame(record));
                        }
                    }
                }
                Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {
                    // Fell behind: the listed calls as they stand now.
                    let Some(ids) = follow.ids.clone() else { continue };
                    let requester = Requester { principal: follow.caller.principal.as_deref(), groups: &follow.caller.groups };
                    if let Ok(records) = calls::find_many(&config, requester, &ids).await {
                        for record in &records {
                            yield Ok(follow.frame(record));
                        }
                    }
                }
                Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) => break,
                Err(_) => yield Ok(Bytes::from_static(b": keep-alive\n\n")),
            }
        }
    };
    Ok(sse_response(frames, HEADERS))
}

/// Which changes a call stream sends, and under which call id.
struct CallFollower {
    /// The calls asked for (`None`: all the caller's).
    ids: Option<Vec<String>>,
    /// Who follows them.
    caller: Caller,
    /// The call id of each approval seen (an edit's successor under its call's id).
    call_of: HashMap<String, String>,
}

impl CallFollower {
    fn new(ids: Option<Vec<String>>, caller: Caller) -> Self {
        let call_of = ids.iter().flatten().map(|id| (id.clone(), id.clone())).collect();
        Self { ids, caller, call_of }
    }

    /// Whether `record` is a change to a followed call (noting a successor under its call).
    fn wants(&mut self, record: &ApprovalRecord) -> bool {
        let requester = Requester { principal: self.caller.principal.as_deref(), groups: &self.caller.groups };
        if !calls::is_call_of(record, requester) {
            return false;
        }
        if let Some(call) = record.supersedes.as_ref().and_then(|original| self.call_of.get(original)).cloned() {
            self.call_of.insert(record.approval_id.clone(), call);
        }
        // A superseded approval is reported by its successor.
        if record.state == toolgate::ledger::ApprovalState::Superseded {
            return false;
        }
        self.ids.is_none() || self.call_of.contains_key(&record.approval_id)
    }

    /// The `event: call` frame of `record`.
    fn frame(&mut self, record: &ApprovalRecord) -> Bytes {
        let call_id = self.call_of.get(&record.approval_id).cloned().unwrap_or_else(|| record.approval_id.clone());
        let data = serde_json::to_string(&CallStatus::of(&call_id, record)).unwrap_or_default();
        Bytes::from(format!("event: call\ndata: {data}\n\n"))
    }
}

/// A request body read as `T`: 400 `invalid_json` when it is not JSON, `invalid_body` when it is not a `T`.
fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|error| {
        let code = if error.is_syntax() || error.is_eof() { "invalid_json" } else { "invalid_body" };
        ApiError::new(StatusCode::BAD_REQUEST, code, error.to_string())
    })
}
