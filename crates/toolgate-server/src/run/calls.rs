//! Calls gated for any agent (`/api/calls`): the call-gating API's logic,
//! on the approval lifecycle's held-call path
//! ([`toolgate::approval::lifecycle::held`], the one the MCP gateway uses).
//!
//! The contract:
//! - A call is its requester's: it lives in the conversation
//!   `api:<conversationId>` (`api:default` without one) of their principal,
//!   and is identified by its idempotency key, else by its canonical tool and
//!   input ([`held::attach`]): a retry attaches to the same call (a keyed one
//!   always, an unkeyed one while it is open or within the retry window).
//! - It is held by the API: its record's [`Origin`] is [`Origin::Calls`], a
//!   stored field set as it is issued, and only such records of the
//!   requester's are calls here (never told by their ids or conversations).
//! - A retry attaches before anything is judged ([`held::attachable`]). A
//!   new call is decided by the gate every other path uses: the rules and
//!   sticky decisions ([`toolgate_policy::StoredGate`]) under the
//!   requester's principal and groups, a call nothing speaks to by
//!   `[calls] default` ([`CallsDefault`]), through [`held::admit`]: a call
//!   the rules let through on the history they read is issued in one
//!   conditional write with that history (its record, led by its `allowed`
//!   event), and one they
//!   ask about on it is issued so (its record and `issued` event), else
//!   judged again, so concurrent calls cannot all slip under a history
//!   term's limit. (Two identical requests racing may both be judged; the
//!   `allowed` event is written with the call's record, so the second
//!   attaches to the first's call and counts nothing.) An allowed or denied call is
//!   recorded decided ([`held::HeldCall::decided`]); an asked one is a
//!   pending approval in the inbox, routed, notified, escalated and expired
//!   as any other, and decided by the same votes.
//! - Its `inputSchema`, checked against its input here, is kept with its
//!   record: an approver's edit must pass it too (the one edit check,
//!   [`toolgate::approval::lifecycle::check_edit`]).
//! - Its state ([`CallState`]) is read from its record as it stands (a
//!   superseded approval as its successor), after time has settled it
//!   ([`held::observe`]: expired, interrupted).
//! - [`start`] claims an approved call once ([`held::start`], under a lease
//!   of the ledger's length that nobody renews); [`finish`] records its
//!   outcome ([`held::finish`]). A start not finished within the lease is
//!   `interrupted`.
//! - Another principal's call is unknown (404 `unknown_call`).

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use toolgate::approval::lifecycle;
use toolgate::approval::lifecycle::counted::Rejudge;
use toolgate::approval::lifecycle::grant::GrantOffer;
use toolgate::approval::lifecycle::held::{self, HeldCall, HeldError, Started};
use toolgate::ledger::{
    ApprovalRecord, ApprovalState, HistoryGuard, Ledger, LedgerConfig, Millis, Origin, check_conversation_id,
    conversation_name,
};
use toolgate::tool::{ApprovalContext, CallGate, Caller, GateCall, Shadowed, SharedMessages, Verdict};
use toolgate_policy::StoredGate;
use toolgate_protocol::ToolResultOutput;

use super::context::RunContext;
use crate::error::ApiError;

/// The prefix of the conversations the API's calls live in.
pub const CALLS_PREFIX: &str = "api:";
/// The conversation of a call sent without `conversationId`.
pub const DEFAULT_CONVERSATION: &str = "default";
/// The longest a request may wait for a decision (`wait`).
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// How long after its final state an identical unkeyed call still attaches to it, unless configured.
pub const DEFAULT_RETRY_WINDOW: Duration = Duration::from_secs(10 * 60);
/// The longest idempotency key, in bytes.
pub const MAX_KEY_LEN: usize = 256;
/// The longest lease a start may ask for.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 60 * 60);
/// The longest tool name, in bytes.
pub const MAX_TOOL_NAME_LEN: usize = 256;

/// What decides a call that no rule, grant or sticky decision names (`[calls] default`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CallsDefault {
    /// Its owner is asked (the default: a call the server knows nothing about waits).
    #[default]
    Ask,
    /// It is allowed.
    Allow,
    /// It is denied.
    Deny,
}

/// The call-gating API's settings.
#[derive(Debug, Clone)]
pub struct CallsConfig {
    /// What decides a call nothing names (`[calls] default`).
    pub default: CallsDefault,
    /// How long after its final state an identical unkeyed call attaches to it (`--retry-window`).
    pub retry_window: Duration,
    /// Where people reach the server (`--public-url`): a pending call's `url` is absolute with it.
    pub public_url: Option<String>,
}

impl Default for CallsConfig {
    fn default() -> Self {
        Self { default: CallsDefault::Ask, retry_window: DEFAULT_RETRY_WINDOW, public_url: None }
    }
}

/// Who sends a request: their principal (`None`: single-user mode) and groups.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Requester<'a> {
    /// The principal.
    pub principal: Option<&'a str>,
    /// Their groups.
    pub groups: &'a [String],
}

/// A call to gate, as `POST /api/calls` takes it.
#[derive(Debug, Clone)]
pub(crate) struct NewCall {
    /// The tool's name.
    pub tool: String,
    /// Its input.
    pub input: Value,
    /// The caller's conversation (`None`: `default`).
    pub conversation_id: Option<String>,
    /// The caller's name for the call.
    pub idempotency_key: Option<String>,
    /// What the tool does, for the approvers (recorded in the audit log).
    pub description: Option<String>,
    /// The JSON Schema the input must satisfy.
    pub input_schema: Option<Value>,
}

/// A call's state, as the API names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallState {
    /// Waiting for a person.
    Pending,
    /// Approved (by a rule or a person), not started.
    Approved,
    /// Denied (or withdrawn by its requester).
    Denied,
    /// Nobody decided in time.
    Expired,
    /// Started, not finished.
    Started,
    /// Finished, with an output or an error.
    Finished,
    /// Started but not finished within the lease: whether it took effect is unknown.
    Interrupted,
}

impl CallState {
    /// The state of a call whose current record is `record`.
    pub fn of(record: &ApprovalRecord) -> Self {
        match record.state {
            ApprovalState::Pending => Self::Pending,
            ApprovalState::Approved => Self::Approved,
            ApprovalState::Denied | ApprovalState::Withdrawn => Self::Denied,
            ApprovalState::Executing => Self::Started,
            ApprovalState::Executed | ApprovalState::Failed => Self::Finished,
            ApprovalState::Interrupted => Self::Interrupted,
            // A superseded approval whose successor is gone, and expiry itself.
            ApprovalState::Expired | ApprovalState::Superseded => Self::Expired,
        }
    }

    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
            Self::Started => "started",
            Self::Finished => "finished",
            Self::Interrupted => "interrupted",
        }
    }
}

/// The input a decided call runs with: the approver's edit, else its own.
pub(crate) fn input_to_run(record: &ApprovalRecord) -> &Value {
    record.decision.as_ref().and_then(|decision| decision.edited_input.as_ref()).unwrap_or(&record.input)
}

/// Why a call was denied (or is asked), as recorded.
pub(crate) fn reason_of(record: &ApprovalRecord) -> Option<String> {
    match record.state {
        ApprovalState::Denied | ApprovalState::Withdrawn => record
            .decision
            .as_ref()
            .and_then(|decision| decision.reason.clone())
            .or_else(|| record.reason.clone())
            .or_else(|| Some("denied".to_owned())),
        _ => record.reason.clone(),
    }
}

/// A held call's error as the API answers it.
fn held_error(error: HeldError) -> ApiError {
    match error {
        HeldError::Input { .. } => ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", error.to_string()),
        HeldError::KeyReused { .. } => ApiError::new(StatusCode::CONFLICT, "idempotency_key_reused", error.to_string()),
        HeldError::Store(error) => error.into(),
        HeldError::Missing(id) => unknown(&id),
        _ => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", error.to_string()),
    }
}

/// 404 `unknown_call`.
pub(crate) fn unknown(id: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "unknown_call", format!("no call `{id}` of yours"))
}

/// A bad request body: 400 `invalid_body`.
fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", message)
}

/// Checks what a call names before anything is recorded.
fn check_new_call(call: &NewCall) -> Result<(), ApiError> {
    let control = |text: &str| text.chars().any(char::is_control);
    if call.tool.is_empty() || call.tool.len() > MAX_TOOL_NAME_LEN || control(&call.tool) {
        return Err(invalid(format!("`tool` must be 1 to {MAX_TOOL_NAME_LEN} bytes without control characters")));
    }
    if let Some(key) = &call.idempotency_key
        && (key.is_empty() || key.len() > MAX_KEY_LEN || control(key))
    {
        return Err(invalid(format!("`idempotencyKey` must be 1 to {MAX_KEY_LEN} bytes without control characters")));
    }
    if let Some(id) = &call.conversation_id {
        check_conversation_id(id).map_err(|error| invalid(format!("`conversationId`: {error}")))?;
    }
    if let Some(schema) = &call.input_schema {
        let tool = toolgate::Tool::dynamic(call.tool.clone(), schema.clone());
        if let Some(problem) = tool.schema_error() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_input_schema",
                format!("`inputSchema` is not a JSON Schema this server can check: {problem}"),
            ));
        }
        tool.validate_input(&call.input).map_err(|detail| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_tool_input",
                format!("`input` fails `inputSchema`: {detail}"),
            )
        })?;
    }
    Ok(())
}

/// The ledger of `requester`'s API conversation `id`, answered by them.
fn ledger(config: &LedgerConfig, requester: Requester<'_>, id: Option<&str>) -> Ledger {
    let name = format!("{CALLS_PREFIX}{}", id.unwrap_or(DEFAULT_CONVERSATION));
    let mut ledger = config.owned(requester.principal, &name).origin(Origin::Calls);
    ledger.principal = requester.principal.map(str::to_owned);
    ledger
}

/// The ledger a call's record is moved under: its owner's, with an executor
/// of its own, so no renewal of this process's leases keeps its claim alive.
fn ledger_of(config: &LedgerConfig, record: &ApprovalRecord) -> Ledger {
    let owner = record.owner.as_deref();
    let mut ledger = config.owned(owner, conversation_name(&record.conversation_id, owner)).origin(record.origin);
    ledger.principal = owner.map(str::to_owned);
    ledger.config.executor = format!("api/{}", record.approval_id);
    ledger
}

/// The gate of the API's calls: the rules and sticky decisions
/// ([`StoredGate`]), and `[calls] default` for a call they do not name.
struct CallsGate {
    /// The rules and sticky decisions under the requester's identity.
    rules: StoredGate,
    /// What decides a call they do not name.
    default: CallsDefault,
}

impl CallGate for CallsGate {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<Verdict>> {
        Box::pin(async move {
            let named = self.rules.check(call).await;
            Some(named.unwrap_or_else(|| match self.default {
                CallsDefault::Allow => Verdict::allow(),
                CallsDefault::Deny => {
                    Verdict::deny(format!("no rule names `{}` ([calls] default = \"deny\")", call.tool_name))
                }
                CallsDefault::Ask => {
                    Verdict::ask().because(format!("no rule names `{}` ([calls] default = \"ask\")", call.tool_name))
                }
            }))
        })
    }

    fn guards(&self, tool_call_id: &str) -> Vec<HistoryGuard> {
        self.rules.guards(tool_call_id)
    }

    fn shadowed(&self, tool_call_id: &str) -> Vec<Shadowed> {
        self.rules.shadowed(tool_call_id)
    }

    fn grants(&self, tool_call_id: &str) -> Vec<GrantOffer> {
        self.rules.grants(tool_call_id)
    }

    fn allowed_by(&self, tool_call_id: &str) -> Option<String> {
        self.rules.allowed_by(tool_call_id)
    }

    fn config_digest(&self) -> Option<String> {
        self.rules.config_digest()
    }
}

/// Decides a new call with the gate ([`CallsGate`] under the requester's
/// identity) and records it as decided ([`held::admit`]): one the rules let
/// through on the history they read is recorded (its `allowed` event) in one
/// conditional write with that history, and one they ask about on it is
/// issued so too, or decided again, so concurrent calls cannot all slip
/// under (or past) a history term's limit; a question a grant covers is
/// lifted there, spending one of its uses
/// ([`toolgate::approval::lifecycle::direct::lift`]).
async fn decide_and_attach(
    context: &RunContext,
    settings: &CallsConfig,
    ledger: &Ledger,
    requester: Requester<'_>,
    held_call: HeldCall<'_>,
    call_id: &str,
) -> Result<held::Attached, ApiError> {
    let gate =
        CallsGate { rules: context.gate(&ledger.conversation_id, requester.principal), default: settings.default };
    let caller = Caller {
        gate: Some(&gate),
        conversation_id: Some(&ledger.conversation_id),
        principal: requester.principal,
        groups: requester.groups,
    };
    // The receipts name the rules config that held the verdict.
    let config_digest = gate.config_digest();
    let held_call = HeldCall { config_digest: config_digest.as_deref(), ..held_call };
    // A stand-in for a tool the server does not run: no policy of its own, so the gate decides.
    let tool = toolgate::Tool::dynamic(held_call.tool_name.to_owned(), json!({}));
    let approval = ApprovalContext::new(call_id, SharedMessages::new(Arc::new(Vec::new())));
    held::admit(ledger, caller, &tool, approval, held_call, settings.retry_window).await.map_err(held_error)
}

/// Gates a call: finds the call it retries, or decides and records a new
/// one (see the module docs). Returns its call id and its record as it stands.
pub(crate) async fn submit(
    context: &RunContext,
    config: &LedgerConfig,
    settings: &CallsConfig,
    requester: Requester<'_>,
    call: NewCall,
) -> Result<(String, ApprovalRecord), ApiError> {
    check_new_call(&call)?;
    let ledger = ledger(config, requester, call.conversation_id.as_deref());
    let note = (call.description.is_some() || call.input_schema.is_some())
        .then(|| json!({"description": call.description, "inputSchema": call.input_schema}));
    // The definition as the caller offered it, for the call's receipts.
    let tool_digest = note.as_ref().and_then(|_| {
        let schema = call.input_schema.clone().unwrap_or_default();
        toolgate::receipt::definition_digest(&call.tool, call.description.as_deref(), &schema)
    });
    let held_call = HeldCall {
        tool_name: &call.tool,
        input: &call.input,
        reason: None,
        route: None,
        ttl: None,
        single_use: false,
        key: call.idempotency_key.as_deref(),
        decided: None,
        note: note.as_ref(),
        input_schema: call.input_schema.as_ref(),
        tool_digest: tool_digest.as_deref(),
        // Set by the gate that decides it (`decide_and_attach`).
        config_digest: None,
    };
    // A retry is not decided (nor counted by a history term) again.
    if let Some(record) = held::attachable(&ledger, held_call, settings.retry_window).await.map_err(held_error)? {
        return answer_of(config, record).await;
    }
    let call_id = match &call.idempotency_key {
        Some(key) => held::keyed_call_id(&ledger.conversation_id, key),
        None => held::call_id_of(&ledger.conversation_id, &call.tool, &call.input).map_err(held_error)?,
    };
    let attached = decide_and_attach(context, settings, &ledger, requester, held_call, &call_id).await?;
    if let held::Attached::Issued(record) = &attached {
        tracing::debug!(call = %record.approval_id, tool = %record.tool_name, state = record.state.as_str(), "call gated");
        context.signals().approvals_changed();
    }
    answer_of(config, attached.into_record()).await
}

/// A gated call's id and its record as it stands.
async fn answer_of(config: &LedgerConfig, record: ApprovalRecord) -> Result<(String, ApprovalRecord), ApiError> {
    let call_id = root_id(config, &record).await?;
    Ok((call_id, current(config, record).await?))
}

/// The call id of `record`: its own id, or, for an approval that superseded
/// another (an edit that needed other approvers), the id of the approval
/// its call was issued as (its call's newest that supersedes none).
async fn root_id(config: &LedgerConfig, record: &ApprovalRecord) -> Result<String, ApiError> {
    if record.supersedes.is_none() {
        return Ok(record.approval_id.clone());
    }
    let ids = std::slice::from_ref(&record.tool_call_id);
    let records = config.store.approvals_for_calls(&record.conversation_id, ids).await?;
    let issued = records.into_iter().filter(|record| record.supersedes.is_none());
    let newest = issued.max_by_key(|record| record.issued_at).map(|record| record.approval_id);
    Ok(newest.unwrap_or_else(|| record.approval_id.clone()))
}

/// `record` as it stands: its successor when superseded, settled by time ([`held::observe`]).
async fn current(config: &LedgerConfig, record: ApprovalRecord) -> Result<ApprovalRecord, ApiError> {
    let record = match record.state {
        ApprovalState::Superseded => {
            let id = record.approval_id.clone();
            lifecycle::current(config.store.as_ref(), std::slice::from_ref(&id)).await?.remove(&id).unwrap_or(record)
        }
        _ => record,
    };
    let ledger = ledger_of(config, &record);
    held::observe(&ledger, record).await.map_err(held_error)
}

/// Whether `record` is one of `requester`'s API calls, as its call id names
/// it: held by the API ([`Origin::Calls`], a stored field), theirs, and
/// issued as the call (not an approval that superseded it).
fn is_own_call(record: &ApprovalRecord, requester: Requester<'_>) -> bool {
    is_call_of(record, requester) && record.supersedes.is_none()
}

/// The requester's call `id` as it stands, or 404 `unknown_call`.
pub(crate) async fn find(
    config: &LedgerConfig,
    requester: Requester<'_>,
    id: &str,
) -> Result<ApprovalRecord, ApiError> {
    match config.store.approvals(&[id.to_owned()]).await?.pop() {
        Some(record) if is_own_call(&record, requester) => current(config, record).await,
        _ => Err(unknown(id)),
    }
}

/// When a wait on `record` must look again by itself (the ledger clock's
/// time): when it expires (pending) or its lease lapses (started).
fn wake_at(record: &ApprovalRecord) -> Option<Millis> {
    match record.state {
        ApprovalState::Pending => Some(record.expires_at),
        ApprovalState::Executing => record.lease.as_ref().map(|lease| lease.until),
        _ => None,
    }
}

/// Whether a wait on a call stops at this state: anything but pending or started.
pub(crate) fn settled(record: &ApprovalRecord) -> bool {
    !matches!(record.state, ApprovalState::Pending | ApprovalState::Executing)
}

/// Waits until the call `record` is settled ([`settled`]) or `until` passes,
/// woken by `changed` (notified when the process's follower of the store
/// sees a change to the call: a vote here answers at once, one on another
/// replica within its poll) and by the record's own expiry or lease (the
/// ledger clock's). Returns it as it stands (read again when the wait ends).
///
/// While it waits it holds the call's id and when to look again, not the
/// record (kilobytes with its input): ten thousand requests may wait at once.
pub(crate) async fn wait(
    config: &LedgerConfig,
    changed: &tokio::sync::Notify,
    record: ApprovalRecord,
    until: tokio::time::Instant,
) -> Result<ApprovalRecord, ApiError> {
    if settled(&record) || tokio::time::Instant::now() >= until {
        return Ok(record);
    }
    let mut id = record.approval_id.clone();
    let mut due_at = wake_at(&record);
    drop(record);
    loop {
        let now = tokio::time::Instant::now();
        let due = due_at.map(|at| {
            let left = u64::try_from(at.saturating_sub(config.clock.now())).unwrap_or(0);
            now + Duration::from_millis(left.max(1))
        });
        let wake = due.map_or(until, |due| due.min(until));
        let woken = tokio::time::timeout_at(wake, changed.notified()).await.is_ok();
        let now = tokio::time::Instant::now();
        if woken || due.is_some_and(|due| due <= now) || now >= until {
            // Boxed: reading and settling a record is a large future, which would
            // otherwise be part of every waiting request's for as long as it waits.
            let record = Box::pin(read_current(config, &id)).await?;
            if settled(&record) || now >= until {
                return Ok(record);
            }
            // An edit that needed other approvers made it a new approval: wait on that one.
            id.clone_from(&record.approval_id);
            due_at = wake_at(&record);
        }
    }
}

/// The call whose current record is `id`, read again and settled ([`current`]).
async fn read_current(config: &LedgerConfig, id: &str) -> Result<ApprovalRecord, ApiError> {
    let ids = [id.to_owned()];
    let fresh = config.store.approvals(&ids).await?.pop().ok_or_else(|| unknown(id))?;
    current(config, fresh).await
}

/// Claims the requester's approved call `id` before it runs (exactly once),
/// for `lease` (default: the ledger's execution lease), judged again by the
/// rules on the history as it starts
/// ([`toolgate::approval::lifecycle::counted`]): one a rule now denies is
/// `denied` and does not start (409 `call_not_approved`, naming the reason);
/// 409 `call_already_started` when it was started before (or finished, or
/// interrupted), 409 `call_not_approved` when it is not approved.
pub(crate) async fn start(
    context: &RunContext,
    config: &LedgerConfig,
    settings: &CallsConfig,
    requester: Requester<'_>,
    id: &str,
    lease: Option<Duration>,
) -> Result<ApprovalRecord, ApiError> {
    let record = find(config, requester, id).await?;
    if record.state != ApprovalState::Approved {
        return Err(not_startable(&record));
    }
    let mut ledger = ledger_of(config, &record);
    if let Some(lease) = lease {
        ledger.config.lease = lease;
    }
    // Judged again on the history as it starts: claimed only while that stands, refused when a rule denies it now.
    let gate =
        CallsGate { rules: context.gate(&ledger.conversation_id, requester.principal), default: settings.default };
    let tool = toolgate::Tool::dynamic(record.tool_name.clone(), json!({}));
    let judge = Rejudge {
        caller: Caller {
            gate: Some(&gate),
            conversation_id: Some(&ledger.conversation_id),
            principal: requester.principal,
            groups: requester.groups,
        },
        tool: &tool,
        context: ApprovalContext::new(record.tool_call_id.clone(), SharedMessages::new(Arc::new(Vec::new()))),
    };
    let started = held::start(&ledger, &record, false, Some(&judge)).await.map_err(held_error)?;
    context.signals().approvals_changed();
    match started {
        Started::Run(record) => Ok(record),
        Started::Elsewhere(record) => Err(not_startable(&record)),
    }
}

/// Why a call cannot start now.
fn not_startable(record: &ApprovalRecord) -> ApiError {
    let state = CallState::of(record);
    match state {
        CallState::Started | CallState::Finished | CallState::Interrupted => ApiError::new(
            StatusCode::CONFLICT,
            "call_already_started",
            format!("call `{}` was already started (it is {})", record.approval_id, state.as_str()),
        ),
        _ => {
            let why = match record.decision.as_ref().and_then(|decision| decision.reason.as_deref()) {
                Some(reason) if record.state == ApprovalState::Denied => format!(" ({reason})"),
                _ => String::new(),
            };
            ApiError::new(
                StatusCode::CONFLICT,
                "call_not_approved",
                format!("call `{}` is {}{why}, not approved: it may not run", record.approval_id, state.as_str()),
            )
        }
    }
}

/// How a started call ended, as its runner reports it.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// It ran; its output.
    Output(Value),
    /// It failed; the error.
    Error(Value),
}

/// Records the outcome of the requester's started call `id`: 409
/// `call_not_started` when it is not started (never, or its lease lapsed:
/// then it is `interrupted`), 409 `call_already_finished` when it has an outcome.
pub(crate) async fn finish(
    context: &RunContext,
    config: &LedgerConfig,
    requester: Requester<'_>,
    id: &str,
    outcome: Outcome,
) -> Result<ApprovalRecord, ApiError> {
    let record = find(config, requester, id).await?;
    if record.state != ApprovalState::Executing {
        return Err(not_finishable(&record));
    }
    let ledger = ledger_of(config, &record);
    let (output, failed, detail) = match outcome {
        Outcome::Output(value) => (ToolResultOutput::json(value.clone()), false, value),
        Outcome::Error(Value::String(text)) => (ToolResultOutput::error_text(text.clone()), true, Value::String(text)),
        Outcome::Error(value) => (ToolResultOutput::error_json(value.clone()), true, value),
    };
    let moved = held::finish(&ledger, &record, output, failed, detail).await.map_err(held_error)?;
    context.signals().approvals_changed();
    match moved {
        toolgate::ledger::TransitionOutcome::Moved(record) => Ok(record),
        toolgate::ledger::TransitionOutcome::Unmoved(record) => Err(not_finishable(&record)),
        toolgate::ledger::TransitionOutcome::Missing => Err(unknown(id)),
    }
}

/// Why a call cannot finish now.
fn not_finishable(record: &ApprovalRecord) -> ApiError {
    let state = CallState::of(record);
    let id = &record.approval_id;
    match state {
        CallState::Finished => {
            ApiError::new(StatusCode::CONFLICT, "call_already_finished", format!("call `{id}` already has its outcome"))
        }
        CallState::Interrupted => ApiError::new(
            StatusCode::CONFLICT,
            "call_not_started",
            format!("call `{id}` is interrupted: its lease lapsed before it finished, so its outcome is unknown"),
        ),
        _ => ApiError::new(
            StatusCode::CONFLICT,
            "call_not_started",
            format!("call `{id}` is {}: only a started call finishes", state.as_str()),
        ),
    }
}

/// What a finished call's record holds: its output, or its error.
pub(crate) fn outcome_of(record: &ApprovalRecord) -> Option<Outcome> {
    if record.state != ApprovalState::Executed && record.state != ApprovalState::Failed {
        return None;
    }
    Some(match record.output.as_ref()? {
        ToolResultOutput::Json { value, .. } if record.state == ApprovalState::Executed => {
            Outcome::Output(value.clone())
        }
        ToolResultOutput::Text { value, .. } if record.state == ApprovalState::Executed => {
            Outcome::Output(Value::String(value.clone()))
        }
        ToolResultOutput::ErrorText { value, .. } => Outcome::Error(Value::String(value.clone())),
        ToolResultOutput::ErrorJson { value, .. } => Outcome::Error(value.clone()),
        other => {
            let value = serde_json::to_value(other).unwrap_or(Value::Null);
            if record.state == ApprovalState::Executed { Outcome::Output(value) } else { Outcome::Error(value) }
        }
    })
}

/// The requester's calls among `ids`, as they stand (unknown ones left out).
pub(crate) async fn find_many(
    config: &LedgerConfig,
    requester: Requester<'_>,
    ids: &[String],
) -> Result<Vec<ApprovalRecord>, ApiError> {
    let mut found = Vec::with_capacity(ids.len());
    for record in config.store.approvals(ids).await? {
        if is_own_call(&record, requester) {
            found.push(current(config, record).await?);
        }
    }
    Ok(found)
}

/// Whether a changed record is one of `requester`'s API calls or an
/// approval that superseded one (the stream's filter): held by the API
/// ([`Origin::Calls`]) and owned by them.
pub(crate) fn is_call_of(record: &ApprovalRecord, requester: Requester<'_>) -> bool {
    record.origin == Origin::Calls && record.owner.as_deref() == requester.principal
}
