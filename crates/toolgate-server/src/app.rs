//! The shared state the handlers read: the configuration, what runs a stored
//! conversation (the run context of `run/context.rs`: the model, the tools,
//! the rules, the store of sticky decisions, the clock, the signals), the
//! inbox streams' follower of the store, and the link signer. The workers
//! never take it whole: the launcher (`launch.rs`) hands each the parts it
//! needs. The router is [`crate::router`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::http::StatusCode;
use toolgate::approval::lifecycle::Voter;
use toolgate::ledger::{
    AuditView, Clock, Ledger, LedgerConfig, LedgerStore, MemoryStore, Millis, SystemClock, check_conversation_id,
    conversation_key,
};
use toolgate::model::ObservedModel;
use toolgate::{SharedModel, TextRequest, Toolkit};
use toolgate_policy::{PolicyHandle, StoredGate};
use toolgate_protocol::ModelMessage;

use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::metrics::model::TimedModel;
use crate::metrics::store::MeteredStore;
use crate::run::context::{RunContext, RunParts};
use crate::signals::Signals;
use crate::telemetry::model::TracedModel;
use crate::trace::TraceFile;
use toolgate_auth::ApprovalSecret;
use toolgate_auth::PrincipalSource;

/// Request bodies larger than this are refused with 413 unless configured otherwise.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The tools offered to the model at start ([`AppState::set_toolkit`] replaces them).
    pub toolkit: Toolkit,
    /// The declarative approval rules (a handle: replacing its policy applies to the next request).
    pub policy: PolicyHandle,
    /// The approval signing secret (signing is always on).
    pub secret: ApprovalSecret,
    /// Also send the AI SDK `signature` field (for clients from ai@6.0.231 on).
    pub signature_field: bool,
    /// Append every model prompt to this file as JSON lines.
    pub trace_prompts: Option<PathBuf>,
    /// The largest accepted request body.
    pub max_body_bytes: usize,
    /// A system prompt for every model call.
    pub system: Option<String>,
    /// Model steps per request at most.
    pub max_steps: usize,
    /// The approval ledger; `None` keeps the stateless signed mode.
    pub ledger: Option<LedgerConfig>,
    /// Where the principal of a request comes from.
    pub principals: PrincipalSource,
    /// Principals who see every owner's audit events (`--admin`, `admins` in the config file).
    pub admins: Vec<String>,
    /// Groups and their members (`[groups]` in the config file), beside those a JWT names.
    pub groups: std::collections::BTreeMap<String, Vec<String>>,
    /// How long the ledger keeps finished approvals, their audit events and
    /// finished conversations (`--retain`; `None` keeps everything). See [`crate::retention`].
    pub retain: Option<std::time::Duration>,
    /// How long a server-side continuation's claim lasts without renewal
    /// (see [`crate::continuation`]; default [`CONTINUATION_LEASE`]).
    pub continuation_lease: std::time::Duration,
    /// The notification channels (`[[notify]]` in the config file; see [`crate::notify`]).
    pub notifications: Option<Arc<crate::notify::Notifications>>,
    /// `Host` names answered besides loopback (`--allowed-host`, and the
    /// `--public-url`'s host): `NAME` or `NAME:PORT` (see [`crate::host`]).
    pub allowed_hosts: Vec<String>,
    /// Also serve `GET /metrics` alone, without sign-in, on this address
    /// (`--metrics-addr`): a listener for scrapers (see [`crate::metrics`]).
    pub metrics_addr: Option<SocketAddr>,
    /// The call-gating API's settings (`[calls]`, `--retry-window`; see [`crate::CallsConfig`]).
    pub calls: crate::run::calls::CallsConfig,
    /// The audit chain and its receipts, signed with the store's key (`--receipt-key`;
    /// `None`: no receipts). The receipts worker seals it; see [`toolgate::receipt`].
    pub receipts: Option<Arc<dyn toolgate::receipt::ReceiptStore>>,
}

impl ServerConfig {
    /// A configuration with defaults for everything but the essentials.
    pub fn new(addr: SocketAddr, toolkit: Toolkit, secret: ApprovalSecret) -> Self {
        Self {
            addr,
            toolkit,
            policy: PolicyHandle::default(),
            secret,
            signature_field: false,
            trace_prompts: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            system: None,
            max_steps: toolgate::DEFAULT_MAX_STEPS,
            ledger: None,
            principals: PrincipalSource::None,
            admins: Vec::new(),
            groups: std::collections::BTreeMap::new(),
            retain: None,
            continuation_lease: CONTINUATION_LEASE,
            notifications: None,
            allowed_hosts: Vec::new(),
            metrics_addr: None,
            calls: crate::run::calls::CallsConfig::default(),
            receipts: None,
        }
    }
}

/// How long a continuation claim lasts without renewal, unless configured.
pub const CONTINUATION_LEASE: std::time::Duration = std::time::Duration::from_secs(30);

/// What every request handler shares.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    config: ServerConfig,
    /// What runs a stored conversation: the model, the tools, the rules, the
    /// signals (a clone goes to the continuation worker).
    run: RunContext,
    trace: Option<TraceFile>,
    /// Follows the store's changes for the inbox streams.
    inbox_hub: crate::workers::inbox_hub::InboxHub,
    /// The requests waiting on single calls (`/api/calls`).
    call_waiters: crate::workers::call_waiters::CallWaiters,
    /// Signs and verifies one-time approval links.
    links: crate::notify::token::LinkSigner,
}

impl AppState {
    /// State for this configuration and model; opens the prompt trace file if one is configured.
    pub fn new(mut config: ServerConfig, model: SharedModel) -> std::io::Result<Self> {
        let metrics = Arc::new(Metrics::new().map_err(std::io::Error::other)?);
        // Approvals routed to a configured group record its members when issued; every
        // store operation is metered.
        config.ledger = config.ledger.take().map(|mut ledger| {
            ledger.store = Arc::new(MeteredStore::new(ledger.store, metrics.clone()));
            ledger.groups(config.groups.clone())
        });
        // Signed-out sessions are recorded where every replica on the store reads them.
        if let (Some(oidc), Some(ledger)) = (config.principals.oidc(), &config.ledger) {
            oidc.keep_revocations_in(ledger.store.clone());
        }
        let trace = config.trace_prompts.as_deref().map(TraceFile::open).transpose()?;
        let model: SharedModel = Arc::new(TimedModel::new(model, metrics.clone()));
        let model: SharedModel = if crate::telemetry::enabled() { Arc::new(TracedModel::new(model)) } else { model };
        let model: SharedModel = match &trace {
            Some(trace) => Arc::new(ObservedModel::with_observer(model, trace.clone())),
            None => model,
        };
        let signer = config.secret.signer().clone().with_signature_field(config.signature_field);
        let links = crate::notify::token::LinkSigner::new(&config.secret);
        let (decisions, clock): (Arc<dyn LedgerStore>, Arc<dyn Clock>) = match &config.ledger {
            Some(ledger) => (Arc::clone(&ledger.store), Arc::clone(&ledger.clock)),
            None => (Arc::new(MemoryStore::new()), Arc::new(SystemClock)),
        };
        let run = RunContext::new(RunParts {
            model,
            toolkit: config.toolkit.clone(),
            policy: config.policy.clone(),
            signer,
            decisions,
            history: config.ledger.as_ref().map(|ledger| Arc::clone(&ledger.store)),
            clock,
            signals: Signals::default(),
            max_steps: config.max_steps,
            system: config.system.clone(),
            signature_field: config.signature_field,
            groups: config.groups.clone(),
            continuation_lease: config.continuation_lease,
            metrics,
        });
        let inner =
            Inner { config, run, trace, inbox_hub: Default::default(), call_waiters: Default::default(), links };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The tools offered now.
    pub fn toolkit(&self) -> Toolkit {
        self.inner.run.toolkit()
    }

    /// Offers other tools from the next request on (e.g. after an MCP server's tool list changed).
    pub fn set_toolkit(&self, toolkit: Toolkit) {
        self.inner.run.set_toolkit(toolkit);
    }

    /// The server's metrics (`GET /metrics`).
    pub fn metrics(&self) -> &Arc<Metrics> {
        self.inner.run.metrics()
    }

    /// What runs a stored conversation (see [`RunContext`]).
    pub(crate) fn run_context(&self) -> &RunContext {
        &self.inner.run
    }

    /// Where sticky decisions are kept.
    pub(crate) fn decision_store(&self) -> &Arc<dyn LedgerStore> {
        self.inner.run.decision_store()
    }

    /// The time, by the ledger's clock when there is one.
    pub(crate) fn now(&self) -> Millis {
        self.inner.run.now()
    }

    /// Waits until every prompt traced so far is in the trace file (no-op without `--trace-prompts`).
    pub fn flush_trace(&self) {
        if let Some(trace) = &self.inner.trace {
            trace.flush();
        }
    }

    /// The keys an inbox listing of this voter selects by (`None`: every
    /// approval, for admins). A single-user server files its approvals under
    /// `""` (no owner), which its one user lists through the same index.
    pub fn viewer_keys(&self, voter: &Voter) -> Option<Vec<String>> {
        match (self.config().principals.is_configured(), voter.admin) {
            (_, true) => None,
            (false, false) => Some(vec![String::new()]),
            (true, false) => Some(voter.keys()),
        }
    }

    /// The process's signals (approvals changed here; a conversation may be due).
    pub(crate) fn signals(&self) -> &Signals {
        self.inner.run.signals()
    }

    /// The follower of the store's changes for the inbox streams.
    pub(crate) fn inbox_hub(&self) -> &crate::workers::inbox_hub::InboxHub {
        &self.inner.inbox_hub
    }

    /// A registration for a request waiting on the call whose tool call id is `call`.
    pub(crate) fn watch_call(&self, call: &str) -> Result<crate::workers::call_waiters::CallWatch, ApiError> {
        let store = &self.ledger_config()?.store;
        let changed = self.signals().watch_approvals();
        Ok(self.inner.call_waiters.watch(call, &self.inner.inbox_hub, &changed, store))
    }

    /// Signs and verifies one-time approval links.
    pub(crate) fn link_signer(&self) -> &crate::notify::token::LinkSigner {
        &self.inner.links
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.inner.config
    }

    /// The model (traced when configured).
    pub fn model(&self) -> SharedModel {
        self.inner.run.model()
    }

    /// The ledger key of the requester's conversation `id` (see
    /// [`toolgate::ledger::conversation_key`]): a request reaches only the
    /// conversations of its own principal. An id with control characters is
    /// 400 `invalid_chat_id`; an empty id stays empty (with a store it is
    /// then refused as missing, see [`Self::ledger`]).
    pub fn conversation_key(&self, principal: Option<&str>, id: &str) -> Result<String, ApiError> {
        if id.is_empty() {
            return Ok(String::new());
        }
        Ok(conversation_key(principal, checked_conversation_id(id)?))
    }

    /// Which audit events a request's principal may see: all of them without
    /// principals (single-user mode) and for admins; else their own.
    pub fn audit_view(&self, principal: Option<&str>) -> AuditView {
        let config = self.config();
        let admin = principal.is_some_and(|principal| config.admins.iter().any(|admin| admin == principal));
        if !config.principals.is_configured() || admin { AuditView::All } else { AuditView::of(principal) }
    }

    /// The ledger settings, or 404 `no_store` when the server runs without a store.
    pub fn ledger_config(&self) -> Result<&LedgerConfig, ApiError> {
        self.config().ledger.as_ref().ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, "no_store", "this server runs without a store (--store none)")
        })
    }

    /// The ledger of `principal`'s conversation whose key is `conversation_id`
    /// ([`Self::conversation_key`]), when the server has a store: the
    /// principal is its owner and answers for this request. A store binds
    /// approvals to their conversation, so the id must not be empty.
    pub fn ledger(&self, conversation_id: &str, principal: Option<String>) -> Result<Option<Ledger>, ApiError> {
        let Some(config) = &self.config().ledger else { return Ok(None) };
        if conversation_id.is_empty() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "missing_conversation_id",
                "with a store every request needs a conversation id (the chat `id` or the AG-UI `threadId`)",
            ));
        }
        let mut ledger = config.conversation(conversation_id);
        ledger.owner.clone_from(&principal);
        ledger.principal = principal;
        Ok(Some(ledger))
    }

    /// An engine request over `messages` with the server's settings, gated by
    /// the rules and the sticky decisions that apply to this conversation and principal.
    pub fn text_request(
        &self,
        messages: Vec<ModelMessage>,
        conversation_id: &str,
        principal: Option<&str>,
    ) -> TextRequest {
        self.inner.run.text_request(messages, conversation_id, principal)
    }

    /// The gate of one request: the rules and the sticky decisions that apply
    /// to this conversation and principal now (read when first needed, or
    /// given with [`StoredGate::with_decisions`]).
    pub fn gate(&self, conversation_id: &str, principal: Option<&str>) -> StoredGate {
        self.inner.run.gate(conversation_id, principal)
    }

    /// [`Self::text_request`] with its gate given (see [`Self::gate`]).
    pub fn gated_text_request(
        &self,
        messages: Vec<ModelMessage>,
        conversation_id: &str,
        principal: Option<&str>,
        gate: StoredGate,
    ) -> TextRequest {
        self.inner.run.gated_text_request(messages, conversation_id, principal, gate)
    }
}

/// A chat or thread id a client sent, if it is a valid one: else 400
/// `invalid_chat_id` saying why ([`check_conversation_id`]).
pub(crate) fn checked_conversation_id(id: &str) -> Result<&str, ApiError> {
    check_conversation_id(id)
        .map_err(|error| ApiError::new(StatusCode::BAD_REQUEST, "invalid_chat_id", error.to_string()))?;
    Ok(id)
}
