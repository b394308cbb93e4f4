//! Approval policies and their fail-closed evaluation.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ApprovalContext;

type PolicyFn = Arc<dyn Fn(Value, ApprovalContext) -> BoxFuture<'static, Result<bool, String>> + Send + Sync>;

/// Whether calls to a tool need a person's approval.
#[derive(Clone, Default)]
pub enum ApprovalPolicy {
    /// Calls run without approval (the default).
    #[default]
    Never,
    /// Every call needs approval.
    Always,
    /// A function of the call decides; errors and panics mean "required".
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
    /// A policy from a synchronous function of the decoded input.
    pub fn when<I, F>(policy: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        F: Fn(&I, &ApprovalContext) -> bool + Send + Sync + 'static,
    {
        let policy = Arc::new(policy);
        Self::When(Arc::new(move |input, context| {
            let decided = I::deserialize(&input)
                .map(|input| policy(&input, &context))
                .map_err(|e| format!("input does not decode: {e}"));
            futures::future::ready(decided).boxed()
        }))
    }

    /// A policy from an async function of the decoded input.
    pub fn when_async<I, F, Fut, E>(policy: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        F: Fn(I, ApprovalContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<bool, E>> + Send + 'static,
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

    /// Evaluates the policy for one call. Fails closed: an input that does not
    /// decode, a policy error or a panic all return `true`.
    pub async fn requires_approval(&self, tool_name: &str, input: &Value, context: ApprovalContext) -> bool {
        let policy = match self {
            Self::Never => return false,
            Self::Always => return true,
            Self::When(policy) => policy,
        };
        let tool_call_id = context.tool_call_id.clone();
        let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| policy(input.clone(), context))) {
            Ok(future) => std::panic::AssertUnwindSafe(future).catch_unwind().await,
            Err(panic) => Err(panic),
        };
        match outcome {
            Ok(Ok(required)) => required,
            Ok(Err(reason)) => {
                tracing::warn!(tool = tool_name, tool_call_id, %reason, "approval policy failed; approval required");
                true
            }
            Err(panic) => {
                let reason = super::panic_message(panic.as_ref());
                tracing::warn!(tool = tool_name, tool_call_id, %reason, "approval policy panicked; approval required");
                true
            }
        }
    }
}
