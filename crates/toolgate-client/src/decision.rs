//! A person's answer to an approval request.

use serde_json::Value;

/// The answer given to [`crate::Chat::add_tool_approval_response`].
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Run the call as the model asked.
    Approve,
    /// Run the call with this input instead.
    ApproveWithInput(Value),
    /// Do not run the call.
    Deny {
        /// Why, passed on to the model when given.
        reason: Option<String>,
    },
}

impl Decision {
    /// A denial with a reason.
    pub fn deny_because(reason: impl Into<String>) -> Self {
        Self::Deny { reason: Some(reason.into()) }
    }

    /// Whether the call may run.
    pub fn approves(&self) -> bool {
        matches!(self, Self::Approve | Self::ApproveWithInput(_))
    }
}
