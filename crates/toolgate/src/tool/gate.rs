//! Request-wide gates: rules that decide calls before a tool's own policy.
//!
//! A [`CallGate`] sees every local call the engine decides (new calls from
//! the model, approved calls about to run, edited inputs, held calls) with
//! who is asking and in which conversation. Its verdict combines with the
//! tool's own [`ApprovalPolicy`](super::ApprovalPolicy) so:
//!
//! 1. a gate `Deny` wins over everything;
//! 2. a tool's own `Deny` comes next: a gate may relax asking, never a refusal
//!    the tool's code makes;
//! 3. then a gate `Ask`, then a gate `Allow`;
//! 4. no verdict: the tool's own decision.
//!
//! Gates fail closed: a gate that panics decides `Ask`.

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;

use super::{ApprovalContext, PolicyDecision, Tool};
use crate::approval::lifecycle::Route;

/// One call as a gate sees it.
#[derive(Debug, Clone, Copy)]
pub struct GateCall<'a> {
    /// The tool's name.
    pub tool_name: &'a str,
    /// The input to decide on (an edited input when a person edited it).
    pub input: &'a Value,
    /// The model's id for the call.
    pub tool_call_id: &'a str,
    /// The conversation, when the caller named one.
    pub conversation_id: Option<&'a str>,
    /// Who is asking or answering, when known.
    pub principal: Option<&'a str>,
    /// The principal's groups (rules name them `group:NAME`).
    pub groups: &'a [String],
}

/// What a gate decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GateAction {
    /// Run without asking.
    Allow,
    /// A person must approve.
    Ask,
    /// Never run.
    Deny,
}

impl GateAction {
    /// `allow`, `ask` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// A gate's verdict and why, as the person (and, for a denial, the model) reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateVerdict {
    /// The decision.
    pub action: GateAction,
    /// Why, e.g. ``rule `ask-writes` matched /path``.
    pub reason: String,
    /// Who must approve, when an `ask` names approvers (`None`: the requester).
    pub route: Option<Route>,
}

impl GateVerdict {
    /// A verdict without named approvers.
    pub fn new(action: GateAction, reason: impl Into<String>) -> Self {
        Self { action, reason: reason.into(), route: None }
    }
}

/// Decides calls for a whole request before each tool's own policy. See the module docs.
pub trait CallGate: Send + Sync {
    /// The verdict for one call, or `None` when no rule speaks to it.
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<GateVerdict>>;
}

/// A gate and who is asking: what [`decide_call`] needs besides the call.
#[derive(Clone, Copy, Default)]
pub struct Caller<'a> {
    /// The request's gate, if any.
    pub gate: Option<&'a dyn CallGate>,
    /// The conversation.
    pub conversation_id: Option<&'a str>,
    /// Who is asking.
    pub principal: Option<&'a str>,
    /// The principal's groups.
    pub groups: &'a [String],
}

impl std::fmt::Debug for Caller<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("gate", &self.gate.is_some())
            .field("conversation_id", &self.conversation_id)
            .field("principal", &self.principal)
            .field("groups", &self.groups)
            .finish()
    }
}

/// A decision with the reason a person is asked, when one is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// What happens to the call.
    pub decision: PolicyDecision,
    /// Why a person is asked (set when `decision` is `Ask`).
    pub ask_reason: Option<String>,
    /// Who must approve, when a rule named approvers.
    pub route: Option<Route>,
}

impl Decided {
    fn plain(decision: PolicyDecision, ask_reason: Option<String>) -> Self {
        Self { decision, ask_reason, route: None }
    }
}

/// Decides one call as the engine does: the gate's verdict combined with
/// the tool's own policy (module docs). Fails closed.
pub async fn decide_call(caller: Caller<'_>, tool: &Tool, input: &Value, context: ApprovalContext) -> Decided {
    let verdict = match caller.gate {
        Some(gate) => {
            let call = GateCall {
                tool_name: tool.name(),
                input,
                tool_call_id: context.tool_call_id(),
                conversation_id: caller.conversation_id,
                principal: caller.principal,
                groups: caller.groups,
            };
            checked(gate, call).await
        }
        None => None,
    };
    if let Some(GateVerdict { action: GateAction::Deny, reason, .. }) = verdict {
        return Decided::plain(PolicyDecision::Deny { reason }, None);
    }
    let own = tool.decide(input, context).await;
    match (own, verdict) {
        (deny @ PolicyDecision::Deny { .. }, _) => Decided::plain(deny, None),
        (_, Some(GateVerdict { action: GateAction::Ask, reason, route })) => {
            Decided { decision: PolicyDecision::Ask, ask_reason: Some(reason), route }
        }
        (_, Some(GateVerdict { action: GateAction::Allow, .. })) => Decided::plain(PolicyDecision::Allow, None),
        (PolicyDecision::Ask, _) => Decided::plain(PolicyDecision::Ask, Some(tool.ask_reason())),
        (PolicyDecision::Allow, _) => Decided::plain(PolicyDecision::Allow, None),
    }
}

/// Runs the gate; a panic decides `Ask` (fail closed).
async fn checked(gate: &dyn CallGate, call: GateCall<'_>) -> Option<GateVerdict> {
    let tool_name = call.tool_name;
    let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| gate.check(call))) {
        Ok(future) => std::panic::AssertUnwindSafe(future).catch_unwind().await,
        Err(panic) => Err(panic),
    };
    outcome.unwrap_or_else(|panic| {
        let detail = super::panic_message(panic.as_ref());
        tracing::warn!(tool = tool_name, %detail, "approval gate panicked; approval required");
        Some(GateVerdict::new(GateAction::Ask, format!("the approval policy failed ({detail})")))
    })
}
