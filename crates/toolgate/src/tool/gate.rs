//! Request-wide gates: rules that decide calls before a tool's own policy.
//!
//! A [`CallGate`] sees every local call the engine decides (new calls from
//! the model, approved calls about to run, edited inputs, held calls) with
//! who is asking and in which conversation. Its [`Verdict`] combines with
//! the tool's own [`ApprovalPolicy`](super::ApprovalPolicy) verdict so:
//!
//! 1. a gate `Deny` wins over everything;
//! 2. a tool's own `Deny` comes next: a gate may relax asking, never a refusal
//!    the tool's code makes;
//! 3. then a gate `Ask`, then a gate `Allow`;
//! 4. no verdict: the tool's own verdict.
//!
//! Gates fail closed: a gate that panics decides `Ask`.

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ApprovalContext, Tool, Verdict};

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

/// What a rule or policy decides about a call: the action of a [`Verdict`].
///
/// Ordered by precedence, `Allow < Ask < Deny`, so among rules that all
/// match, the maximum wins. Serialized lowercase (`"allow"`, `"ask"`,
/// `"deny"`), as policy files write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GateAction {
    /// Run without asking.
    Allow,
    /// A person must approve.
    Ask,
    /// Never run.
    Deny,
}

impl GateAction {
    /// Every action, in precedence order (lowest first).
    pub const ALL: [GateAction; 3] = [GateAction::Allow, GateAction::Ask, GateAction::Deny];

    /// `allow`, `ask` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }

    /// Parses `allow`, `ask` or `deny` (exact, lowercase).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|action| action.as_str() == text)
    }
}

impl std::fmt::Display for GateAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Decides calls for a whole request before each tool's own policy; see
/// [`decide_call`] for how its verdict combines with the tool's own. A gate
/// that panics decides `Ask`.
pub trait CallGate: Send + Sync {
    /// The verdict for one call, or `None` when no rule speaks to it. The
    /// verdict's `reason` is what people (and, for a denial, the model) read.
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<Verdict>>;

    /// The history its last verdict for this call rested on (a rule's
    /// history term read it), taken: the engine records the call with these
    /// guards before it runs ([`crate::approval::lifecycle::direct::admit`]).
    /// None by default: a gate that reads no history.
    fn guards(&self, tool_call_id: &str) -> Vec<crate::ledger::HistoryGuard> {
        let _ = tool_call_id;
        Vec::new()
    }

    /// The rules in shadow mode that matched this call at its last verdict,
    /// taken: what they would have decided, not enforced. The engine records
    /// each as a `shadowed` audit event. None by default.
    fn shadowed(&self, tool_call_id: &str) -> Vec<Shadowed> {
        let _ = tool_call_id;
        Vec::new()
    }

    /// The stored grants that covered this call at its last verdict (tool,
    /// scope, input and expiry), taken: the engine lets one lift a question
    /// and spends a use ([`crate::approval::lifecycle::direct::lift`]). None by default.
    fn grants(&self, tool_call_id: &str) -> Vec<crate::approval::lifecycle::grant::GrantOffer> {
        let _ = tool_call_id;
        Vec::new()
    }

    /// Why its last verdict for this call allowed it, when a rule did (the
    /// rule as its reason names it), not taken: the engine records it in the
    /// call's `allowed`, `executed` or `failed` event (`rule`), which the
    /// call's receipt names ([`crate::receipt::CallReceipt`]). `None` by
    /// default, and when the verdict was not an allow.
    fn allowed_by(&self, tool_call_id: &str) -> Option<String> {
        let _ = tool_call_id;
        None
    }

    /// The digest of the configuration its verdicts come from (a rules
    /// file's, as loaded), which the approvals it asks for record in their
    /// `issued` events (`configDigest`) and their receipts name. `None` by
    /// default: a gate with no configuration to name.
    fn config_digest(&self) -> Option<String> {
        None
    }
}

/// A rule in shadow mode that matched a call: what it would have decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shadowed {
    /// The rule's name.
    pub rule: String,
    /// What it would have decided.
    pub action: GateAction,
    /// Why it matched (with its history term's figures).
    pub reason: String,
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

/// Decides one call as the engine does: the gate's verdict combined with
/// the tool's own policy. Fails closed.
///
/// Precedence: a gate `Deny`, then the tool's own `Deny`, then a gate `Ask`,
/// then a gate `Allow`; with no gate verdict, the tool's own verdict.
///
/// The result's `reason` is set for `Ask` (why a person is asked: the gate's
/// reason, else the tool's own, else [`Tool::ask_reason`]) and for `Deny`
/// (why the call never runs, as the model reads it), and is `None` for
/// `Allow`. Its `route` is set only for `Ask`, when the deciding verdict
/// named approvers.
pub async fn decide_call(caller: Caller<'_>, tool: &Tool, input: &Value, context: ApprovalContext) -> Verdict {
    let gate = match caller.gate {
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
    let decided = match gate {
        Some(verdict) if verdict.action == GateAction::Deny => verdict,
        gate => {
            let own = tool.decide(input, context).await;
            match gate {
                // A gate `Ask` or `Allow` (its `Deny` won above) yields to the tool's own `Deny` only.
                Some(gate) if own.action != GateAction::Deny => gate,
                _ => own,
            }
        }
    };
    normalized(decided, tool)
}

/// Why a deny that names no reason denies.
const DENIED_REASON: &str = "the approval policy denies this call";

/// The verdict as [`decide_call`] documents it: a reason for `Ask` and
/// `Deny` only, a route for `Ask` only.
fn normalized(verdict: Verdict, tool: &Tool) -> Verdict {
    let Verdict { action, reason, route } = verdict;
    match action {
        GateAction::Allow => Verdict::allow(),
        GateAction::Ask => Verdict { action, reason: Some(reason.unwrap_or_else(|| tool.ask_reason())), route },
        GateAction::Deny => Verdict::deny(reason.unwrap_or_else(|| DENIED_REASON.to_owned())),
    }
}

/// Runs the gate; a panic decides `Ask` (fail closed).
async fn checked(gate: &dyn CallGate, call: GateCall<'_>) -> Option<Verdict> {
    let tool_name = call.tool_name;
    let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| gate.check(call))) {
        Ok(future) => std::panic::AssertUnwindSafe(future).catch_unwind().await,
        Err(panic) => Err(panic),
    };
    outcome.unwrap_or_else(|panic| {
        let detail = super::panic_message(panic.as_ref());
        tracing::warn!(tool = tool_name, %detail, "approval gate panicked; approval required");
        Some(Verdict::ask().because(format!("the approval policy failed ({detail})")))
    })
}
