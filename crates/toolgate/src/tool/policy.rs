//! Approval policies and their fail-closed evaluation.
//!
//! A policy decides each call: [`PolicyDecision::Allow`] (run it),
//! [`PolicyDecision::Ask`] (a person decides) or [`PolicyDecision::Deny`]
//! (never run it; the call gets an `execution-denied` result naming the
//! reason, and no person is asked). An input that does not decode, a policy
//! that errors and a policy that panics all decide `Ask`.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ApprovalContext;

type PolicyFn = Arc<dyn Fn(Value, ApprovalContext) -> BoxFuture<'static, Result<PolicyDecision, String>> + Send + Sync>;

/// What a policy decides for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyDecision {
    /// Run the call without asking.
    Allow,
    /// A person must approve the call first.
    Ask,
    /// Never run the call: it gets an `execution-denied` result with this reason.
    Deny {
        /// Why, as the model and the person read it.
        reason: String,
    },
}

impl PolicyDecision {
    /// `Ask` when `required`, else `Allow`.
    pub fn ask_if(required: bool) -> Self {
        if required { Self::Ask } else { Self::Allow }
    }
}

/// Whether calls to a tool need a person's approval.
#[derive(Clone, Default)]
pub enum ApprovalPolicy {
    /// Calls run without approval (the default).
    #[default]
    Never,
    /// Every call needs approval.
    Always,
    /// A function of the call decides; errors and panics mean "ask".
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
        Self::deciding(move |input: &I, context: &ApprovalContext| PolicyDecision::ask_if(policy(input, context)))
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
            async move { decided.await.map(PolicyDecision::ask_if) }
        })
    }

    /// A policy that may also deny, from a synchronous function of the decoded input.
    pub fn deciding<I, F>(policy: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        F: Fn(&I, &ApprovalContext) -> PolicyDecision + Send + Sync + 'static,
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
        Fut: Future<Output = Result<PolicyDecision, E>> + Send + 'static,
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
    /// error or a panic all decide [`PolicyDecision::Ask`].
    pub async fn decide(&self, tool_name: &str, input: &Value, context: ApprovalContext) -> PolicyDecision {
        let policy = match self {
            Self::Never => return PolicyDecision::Allow,
            Self::Always => return PolicyDecision::Ask,
            Self::When(policy) => policy,
        };
        let tool_call_id = context.tool_call_id().to_owned();
        let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| policy(input.clone(), context))) {
            Ok(future) => std::panic::AssertUnwindSafe(future).catch_unwind().await,
            Err(panic) => Err(panic),
        };
        match outcome {
            Ok(Ok(decision)) => decision,
            Ok(Err(reason)) => {
                tracing::warn!(tool = tool_name, tool_call_id, %reason, "approval policy failed; approval required");
                PolicyDecision::Ask
            }
            Err(panic) => {
                let reason = super::panic_message(panic.as_ref());
                tracing::warn!(tool = tool_name, tool_call_id, %reason, "approval policy panicked; approval required");
                PolicyDecision::Ask
            }
        }
    }

    /// Whether the call needs a person (anything but [`PolicyDecision::Allow`]). Fails closed.
    pub async fn requires_approval(&self, tool_name: &str, input: &Value, context: ApprovalContext) -> bool {
        self.decide(tool_name, input, context).await != PolicyDecision::Allow
    }
}
