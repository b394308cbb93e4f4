//! Approval policies and their fail-closed evaluation.
//!
//! A tool's [`ApprovalPolicy`] rules on each call with a [`Verdict`]:
//! [`Verdict::allow`] (run it), [`Verdict::ask`] (a person decides) or
//! [`Verdict::deny`] (never run it; the call gets an `execution-denied`
//! result naming the reason, and no person is asked). An `ask` may name why
//! ([`Verdict::because`]; default [`Tool::ask_reason`](super::Tool::ask_reason))
//! and who approves ([`Verdict::routed`]). An input that does not decode, a
//! policy that errors and a policy that panics all decide `Ask`.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{ApprovalContext, GateAction, Verdict};

type PolicyFn = Arc<dyn Fn(Value, ApprovalContext) -> BoxFuture<'static, Result<Verdict, String>> + Send + Sync>;

/// Whether calls to a tool need a person's approval.
#[derive(Clone, Default)]
pub enum ApprovalPolicy {
    /// Calls run without approval (the default).
    #[default]
    Never,
    /// Every call needs approval.
    Always,
    /// A function of the call returns the [`Verdict`]; errors and panics mean "ask".
    When(PolicyFn),
}

impl fmt::Debug for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Never => "Never",
            Self::Always => "Always",
            Self::When(_) => "When(..)",
        })
    }
}

impl ApprovalPolicy {
    /// A policy from a synchronous function of the decoded input: `true` asks a person.
    pub fn when<I, F>(policy: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        F: Fn(&I, &ApprovalContext) -> bool + Send + Sync + 'static,
    {
        Self::deciding(move |input: &I, context: &ApprovalContext| Verdict::ask_if(policy(input, context)))
    }

    /// A policy from an async function of the decoded input: `Ok(true)` asks a person.
    pub fn when_async<I, F, Fut, E>(policy: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        F: Fn(I, ApprovalContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<bool, E>> + Send + 'static,
        E: fmt::Display + 'static,
    {
        Self::deciding_async(move |input: I, context| {
            let decided = policy(input, context);
            async move { decided.await.map(Verdict::ask_if) }
        })
    }

    /// A policy that may also deny, from a synchronous function of the decoded input.
    pub fn deciding<I, F>(policy: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        F: Fn(&I, &ApprovalContext) -> Verdict + Send + Sync + 'static,
    {
        let policy = Arc::new(policy);
        Self::When(Arc::new(move |input, context| {
            let decided = I::deserialize(&input)
                .map(|input| policy(&input, &context))
                .map_err(|e| format!("input does not decode: {e}"));
            futures::future::ready(decided).boxed()
        }))
    }

    /// A policy that may also deny, from an async function of the decoded input.
    pub fn deciding_async<I, F, Fut, E>(policy: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        F: Fn(I, ApprovalContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Verdict, E>> + Send + 'static,
        E: fmt::Display + 'static,
    {
        let policy = Arc::new(policy);
        Self::When(Arc::new(move |input, context| {
            let policy = Arc::clone(&policy);
            async move {
                let input = I::deserialize(&input).map_err(|e| format!("input does not decode: {e}"))?;
                policy(input, context).await.map_err(|e| format!("policy failed: {e}"))
            }
            .boxed()
        }))
    }

    /// Decides one call. Fails closed: an input that does not decode, a policy
    /// error or a panic all decide [`Verdict::ask`]. A deny always has a reason
    /// (``tool `NAME` denies this call`` when the policy gave none).
    pub async fn decide(&self, tool_name: &str, input: &Value, context: ApprovalContext) -> Verdict {
        let policy = match self {
            Self::Never => return Verdict::allow(),
            Self::Always => return Verdict::ask(),
            Self::When(policy) => policy,
        };
        let tool_call_id = context.tool_call_id().to_owned();
        let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| policy(input.clone(), context))) {
            Ok(future) => std::panic::AssertUnwindSafe(future).catch_unwind().await,
            Err(panic) => Err(panic),
        };
        match outcome {
            Ok(Ok(Verdict { action: GateAction::Deny, reason: None, .. })) => {
                Verdict::deny(format!("tool `{tool_name}` denies this call"))
            }
            Ok(Ok(verdict)) => verdict,
            Ok(Err(reason)) => {
                tracing::warn!(tool = tool_name, tool_call_id, %reason, "approval policy failed; approval required");
                Verdict::ask()
            }
            Err(panic) => {
                let reason = super::panic_message(panic.as_ref());
                tracing::warn!(tool = tool_name, tool_call_id, %reason, "approval policy panicked; approval required");
                Verdict::ask()
            }
        }
    }

    /// Whether the call needs a person (anything but [`GateAction::Allow`]). Fails closed.
    pub async fn requires_approval(&self, tool_name: &str, input: &Value, context: ApprovalContext) -> bool {
        self.decide(tool_name, input, context).await.action != GateAction::Allow
    }
}
