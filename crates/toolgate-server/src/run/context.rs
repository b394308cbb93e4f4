//! What a stored run needs of the server, and nothing else: the model (traced
//! when configured), the tools offered now, the rules, the approval signer,
//! where sticky decisions live, the clock, the registry of running responses,
//! the process's signals, and the settings of an engine request. The state
//! ([`crate::AppState`]) builds one from its configuration and hands it to
//! the handlers' stored runs; the continuation worker gets a clone. Clones
//! share everything: replacing the toolkit applies to every holder from the
//! next request on.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use toolgate::approval::ApprovalSigner;
use toolgate::ledger::{Clock, LedgerStore, Millis};
use toolgate::{SharedModel, TextRequest, Toolkit};
use toolgate_policy::{PolicyHandle, StoredGate};
use toolgate_protocol::ModelMessage;

use crate::metrics::Metrics;
use crate::running::RunningResponses;
use crate::signals::Signals;

/// What runs a stored conversation (see the module docs); cheap to clone.
#[derive(Clone)]
pub(crate) struct RunContext {
    inner: Arc<Inner>,
}

struct Inner {
    parts: RunParts,
    toolkit: RwLock<Toolkit>,
    running: Arc<RunningResponses>,
}

/// The pieces of a [`RunContext`], as the state takes them from its configuration.
pub(crate) struct RunParts {
    /// The model (traced when configured).
    pub model: SharedModel,
    /// The tools offered at start ([`RunContext::set_toolkit`] replaces them).
    pub toolkit: Toolkit,
    /// The declarative rules (a handle: a replaced policy applies to the next request).
    pub policy: PolicyHandle,
    /// Signs approval requests.
    pub signer: ApprovalSigner,
    /// Where sticky decisions live: the ledger's store, else this process's memory.
    pub decisions: Arc<dyn LedgerStore>,
    /// The ledger's store, where history terms read the calls that ran (none: they are unknown).
    pub history: Option<Arc<dyn LedgerStore>>,
    /// The ledger's clock, else the system's.
    pub clock: Arc<dyn Clock>,
    /// The process's signals.
    pub signals: Signals,
    /// Model steps per request at most.
    pub max_steps: usize,
    /// A system prompt for every model call.
    pub system: Option<String>,
    /// Also send the AI SDK `signature` field.
    pub signature_field: bool,
    /// Groups and their members, as configured (`[groups]`).
    pub groups: BTreeMap<String, Vec<String>>,
    /// How long a continuation claim lasts without renewal.
    pub continuation_lease: Duration,
    /// The server's metrics.
    pub metrics: Arc<Metrics>,
}

impl RunContext {
    /// A context of these pieces, with an empty registry of running responses.
    pub(crate) fn new(parts: RunParts) -> Self {
        let toolkit = RwLock::new(parts.toolkit.clone());
        Self { inner: Arc::new(Inner { parts, toolkit, running: Arc::default() }) }
    }

    /// The model (traced when configured).
    pub(crate) fn model(&self) -> SharedModel {
        Arc::clone(&self.inner.parts.model)
    }

    /// The tools offered now.
    pub(crate) fn toolkit(&self) -> Toolkit {
        self.inner.toolkit.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Offers other tools from the next request on.
    pub(crate) fn set_toolkit(&self, toolkit: Toolkit) {
        *self.inner.toolkit.write().unwrap_or_else(std::sync::PoisonError::into_inner) = toolkit;
    }

    /// Where sticky decisions are kept.
    pub(crate) fn decision_store(&self) -> &Arc<dyn LedgerStore> {
        &self.inner.parts.decisions
    }

    /// The time, by the ledger's clock when there is one.
    pub(crate) fn now(&self) -> Millis {
        self.inner.parts.clock.now()
    }

    /// The clock [`Self::now`] reads.
    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.inner.parts.clock)
    }

    /// The server's metrics.
    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.parts.metrics
    }

    /// The process's signals.
    pub(crate) fn signals(&self) -> &Signals {
        &self.inner.parts.signals
    }

    /// The stored chats' responses running now (for `GET /api/chat/{id}/stream`).
    pub(crate) fn running(&self) -> &Arc<RunningResponses> {
        &self.inner.running
    }

    /// Whether the AI SDK `signature` field is sent.
    pub(crate) fn signature_field(&self) -> bool {
        self.inner.parts.signature_field
    }

    /// How long a continuation claim lasts without renewal.
    pub(crate) fn continuation_lease(&self) -> Duration {
        self.inner.parts.continuation_lease
    }

    /// The groups the config gives `principal` (`[groups]`).
    pub(crate) fn configured_groups(&self, principal: Option<&str>) -> Vec<String> {
        principal
            .map_or_else(Vec::new, |principal| toolgate::ledger::groups_listing(&self.inner.parts.groups, principal))
    }

    /// The gate of one request: the rules and the sticky decisions that apply
    /// to this conversation and principal now (read when first needed, or
    /// given with [`StoredGate::with_decisions`]).
    pub(crate) fn gate(&self, conversation_id: &str, principal: Option<&str>) -> StoredGate {
        let parts = &self.inner.parts;
        let policy = parts.policy.current();
        let remembers = policy.rules().iter().any(|rule| rule.history().is_some());
        let gate = StoredGate::new(
            policy,
            Arc::clone(&parts.decisions),
            Some(conversation_id.to_owned()),
            principal.map(str::to_owned),
            self.now(),
        );
        match &parts.history {
            Some(store) if remembers => {
                gate.with_history(Arc::clone(store), Arc::new(parts.groups.clone())).with_clock(self.clock())
            }
            _ => gate,
        }
    }

    /// An engine request over `messages` with the server's settings, gated by
    /// the rules and the sticky decisions that apply to this conversation and principal.
    pub(crate) fn text_request(
        &self,
        messages: Vec<ModelMessage>,
        conversation_id: &str,
        principal: Option<&str>,
    ) -> TextRequest {
        self.gated_text_request(messages, conversation_id, principal, self.gate(conversation_id, principal))
    }

    /// [`Self::text_request`] with its gate given (see [`Self::gate`]).
    pub(crate) fn gated_text_request(
        &self,
        messages: Vec<ModelMessage>,
        conversation_id: &str,
        principal: Option<&str>,
        gate: StoredGate,
    ) -> TextRequest {
        let parts = &self.inner.parts;
        let mut request = TextRequest::new(messages)
            .toolkit(self.toolkit())
            .max_steps(parts.max_steps)
            .approval_signer(parts.signer.clone())
            .gate(Arc::new(gate))
            .conversation_id(conversation_id);
        if let Some(principal) = principal {
            request = request.principal(principal);
        }
        if let Some(system) = &parts.system {
            request = request.system(system.clone());
        }
        request
    }
}
