//! What one `generate_text` / `stream_text` call is asked to do.

use std::sync::Arc;

use toolgate_protocol::{ModelMessage, ProviderOptions, ToolChoice};

use super::StepResult;
use crate::approval::ApprovalSigner;
use crate::ledger::Ledger;
use crate::tool::{CallGate, Caller, Toolkit};

/// Steps a call takes at most unless told otherwise.
pub const DEFAULT_MAX_STEPS: usize = 10;
/// Tools that run at once unless told otherwise.
pub const DEFAULT_TOOL_CONCURRENCY: usize = 8;

/// Makes unique ids (approval nonces, text block ids).
pub type IdGenerator = Arc<dyn Fn() -> String + Send + Sync>;

/// A custom stop condition: given the steps so far, stop now?
pub type StopFn = Arc<dyn Fn(&[StepResult]) -> bool + Send + Sync>;

/// When to stop the step loop early (any condition met stops it).
#[derive(Clone)]
pub enum StopCondition {
    /// Stop once a step called this tool.
    ToolCalled(String),
    /// Stop when the function says so, given the steps so far.
    Custom(StopFn),
}

impl StopCondition {
    pub(crate) fn is_met(&self, steps: &[StepResult]) -> bool {
        match self {
            Self::ToolCalled(name) => {
                steps.last().is_some_and(|step| step.tool_calls().any(|call| &call.tool_name == name))
            }
            Self::Custom(condition) => condition(steps),
        }
    }
}

impl std::fmt::Debug for StopCondition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ToolCalled(name) => f.debug_tuple("ToolCalled").field(name).finish(),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// One engine call: a history, the tools, and how to run them.
#[derive(Clone)]
pub struct TextRequest {
    pub(crate) messages: Vec<ModelMessage>,
    pub(crate) system: Option<String>,
    pub(crate) toolkit: Option<Toolkit>,
    pub(crate) tool_choice: ToolChoice,
    pub(crate) max_steps: usize,
    pub(crate) stop_when: Vec<StopCondition>,
    pub(crate) tool_concurrency: usize,
    pub(crate) hold_batch_for_approval: bool,
    pub(crate) signer: Option<ApprovalSigner>,
    pub(crate) ledger: Option<Ledger>,
    pub(crate) id_generator: IdGenerator,
    pub(crate) max_output_tokens: Option<u32>,
    pub(crate) temperature: Option<f32>,
    pub(crate) provider_options: Option<ProviderOptions>,
    pub(crate) gate: Option<Arc<dyn CallGate>>,
    pub(crate) conversation_id: Option<String>,
    pub(crate) principal: Option<String>,
    pub(crate) groups: Vec<String>,
    /// Set on a sub-agent's request: where it stands under the root (see [`crate::agent`]).
    pub(crate) sub_run: Option<super::agent::SubRunPlace>,
}

impl std::fmt::Debug for TextRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextRequest")
            .field("messages", &self.messages.len())
            .field("toolkit", &self.toolkit.as_ref().map(Toolkit::names))
            .field("max_steps", &self.max_steps)
            .field("signed", &self.signer.is_some())
            .field("ledger", &self.ledger.as_ref().map(|ledger| &ledger.conversation_id))
            .finish_non_exhaustive()
    }
}

impl TextRequest {
    /// A request over this history (AI SDK `ModelMessage[]`).
    pub fn new(messages: Vec<ModelMessage>) -> Self {
        Self {
            messages,
            system: None,
            toolkit: None,
            tool_choice: ToolChoice::Auto,
            max_steps: DEFAULT_MAX_STEPS,
            stop_when: Vec::new(),
            tool_concurrency: DEFAULT_TOOL_CONCURRENCY,
            hold_batch_for_approval: false,
            signer: None,
            ledger: None,
            id_generator: Arc::new(|| uuid::Uuid::now_v7().simple().to_string()),
            max_output_tokens: None,
            temperature: None,
            provider_options: None,
            gate: None,
            conversation_id: None,
            principal: None,
            groups: Vec::new(),
            sub_run: None,
        }
    }

    /// A system prompt placed before the history in every model call.
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// The tools the model may call and that approvals are resolved against.
    pub fn toolkit(mut self, toolkit: Toolkit) -> Self {
        self.toolkit = Some(toolkit);
        self
    }

    /// Which tools the model may or must call.
    pub fn tool_choice(mut self, tool_choice: ToolChoice) -> Self {
        self.tool_choice = tool_choice;
        self
    }

    /// Model steps at most (at least 1; default [`DEFAULT_MAX_STEPS`]).
    pub fn max_steps(mut self, max_steps: usize) -> Self {
        self.max_steps = max_steps.max(1);
        self
    }

    /// An extra condition that ends the step loop.
    pub fn stop_when(mut self, condition: StopCondition) -> Self {
        self.stop_when.push(condition);
        self
    }

    /// How many tool calls run at once (at least 1; default [`DEFAULT_TOOL_CONCURRENCY`]).
    pub fn tool_concurrency(mut self, limit: usize) -> Self {
        self.tool_concurrency = limit.max(1);
        self
    }

    /// When a step has calls that need approval, hold its other calls too and
    /// run them after the decision (on the continuation) instead of at once.
    pub fn hold_batch_for_approval(mut self, hold: bool) -> Self {
        self.hold_batch_for_approval = hold;
        self
    }

    /// Sign approval requests and require valid signatures on approvals.
    pub fn approval_signer(mut self, signer: ApprovalSigner) -> Self {
        self.signer = Some(signer);
        self
    }

    /// Record every approval request in this ledger and settle answers
    /// against it: single-use, expiring, audited (see [`crate::ledger`]).
    pub fn ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Replace the id generator (e.g. for reproducible tests).
    pub fn id_generator(mut self, generator: impl Fn() -> String + Send + Sync + 'static) -> Self {
        self.id_generator = Arc::new(generator);
        self
    }

    /// Output token limit per model call.
    pub fn max_output_tokens(mut self, limit: u32) -> Self {
        self.max_output_tokens = Some(limit);
        self
    }

    /// Sampling temperature.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Provider-specific options passed to every model call.
    pub fn provider_options(mut self, options: ProviderOptions) -> Self {
        self.provider_options = Some(options);
        self
    }

    /// Rules that decide calls before each tool's own policy (declarative
    /// policies, sticky decisions); see [`CallGate`] for the precedence.
    pub fn gate(mut self, gate: Arc<dyn CallGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// The conversation gates see (default: the ledger's conversation).
    pub fn conversation_id(mut self, conversation_id: impl Into<String>) -> Self {
        self.conversation_id = Some(conversation_id.into());
        self
    }

    /// Who is asking, as gates see it (default: the ledger's principal).
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// The principal's groups, as gates see them (rules match them as `group:NAME`).
    pub fn groups(mut self, groups: Vec<String>) -> Self {
        self.groups = groups;
        self
    }

    /// The gate and the identity it decides for.
    pub(crate) fn caller(&self) -> Caller<'_> {
        let ledger = self.ledger.as_ref();
        Caller {
            gate: self.gate.as_deref(),
            conversation_id: self
                .conversation_id
                .as_deref()
                .or_else(|| ledger.map(|ledger| ledger.conversation_id.as_str())),
            principal: self.principal.as_deref().or_else(|| ledger.and_then(|ledger| ledger.principal.as_deref())),
            groups: &self.groups,
        }
    }
}
