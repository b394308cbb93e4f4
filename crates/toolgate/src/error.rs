//! The errors `generate_text` and `stream_text` return.
//!
//! Every error that concerns approvals is raised before anything runs: a call
//! either passes every check or nothing in the request executes.

use toolgate_protocol::{MessageError, ModelMessage, NormalizeError};

use crate::approval::SignatureError;
use crate::model::ModelError;

/// Why an engine call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// The messages are malformed.
    #[error(transparent)]
    InvalidMessages(#[from] MessageError),
    /// An older-form approval cannot be mapped to a request.
    #[error(transparent)]
    InvalidApproval(#[from] NormalizeError),
    /// The history holds approval answers but no toolkit was given to act on them.
    #[error("a toolkit is required to resolve pending tool approvals for: {}", pending_tools.join(", "))]
    ToolkitRequired {
        /// Tools of the pending approvals.
        pending_tools: Vec<String>,
    },
    /// An approved call names a tool this toolkit cannot run.
    #[error("tool `{tool_name}` is not available; available tools: {}", available_tools.join(", "))]
    ToolNotFound {
        /// The tool named by the call.
        tool_name: String,
        /// Tools toolgate can run.
        available_tools: Vec<String>,
    },
    /// An approval response names an approval nobody requested.
    #[error(
        "tool approval response references unknown approval `{approval_id}`: no matching tool-approval-request in the history"
    )]
    UnknownApprovalId {
        /// The approval id.
        approval_id: String,
    },
    /// An approval request names a tool call that is not in the history.
    #[error("tool call `{tool_call_id}` not found for approval `{approval_id}`")]
    ToolCallNotFoundForApproval {
        /// The approval id.
        approval_id: String,
        /// The missing call.
        tool_call_id: String,
    },
    /// The same approval was answered twice, differently.
    #[error("approval `{approval_id}` has conflicting responses")]
    ConflictingApprovalResponses {
        /// The approval id.
        approval_id: String,
    },
    /// Approval requests have no answer and the conversation did not move on.
    #[error("tool approvals have no response: {}", approval_ids.join(", "))]
    UnansweredApprovals {
        /// The unanswered approvals.
        approval_ids: Vec<String>,
    },
    /// An approved call's input (or the person's edit of it) fails the tool's schema.
    #[error("invalid input for tool `{tool_name}` (call `{tool_call_id}`): {detail}")]
    InvalidToolInput {
        /// The tool.
        tool_name: String,
        /// The call.
        tool_call_id: String,
        /// What is wrong.
        detail: String,
    },
    /// An approval for a provider-executed call carries an edited input, which the provider cannot take.
    #[error("approval `{approval_id}` edits the input of a provider-executed call, which is not supported")]
    EditNotSupported {
        /// The approval id.
        approval_id: String,
    },
    /// A signing secret is configured and an approval's signature is missing or wrong.
    #[error(
        "tool approval signature verification failed for approval `{approval_id}` (tool call `{tool_call_id}`): {reason}"
    )]
    InvalidApprovalSignature {
        /// The approval id.
        approval_id: String,
        /// The call.
        tool_call_id: String,
        /// Missing or invalid.
        reason: SignatureError,
    },
    /// Tool calls in the history have no result, so no valid prompt can be built.
    #[error("tool results are missing for tool calls: {}", tool_call_ids.join(", "))]
    MissingToolResults {
        /// The calls without results.
        tool_call_ids: Vec<String>,
    },
    /// The model failed. `response_messages` holds what this call produced
    /// before that (including results of tools that already ran): persist it.
    #[error("model call failed: {source}")]
    Model {
        /// The model's error.
        source: ModelError,
        /// Messages produced before the failure.
        response_messages: Vec<ModelMessage>,
    },
}

impl EngineError {
    /// A stable, machine-readable code for this error (HTTP bodies, `RUN_ERROR.code`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidMessages(_) => "invalid_messages",
            Self::InvalidApproval(_) => "invalid_approval",
            Self::ToolkitRequired { .. } => "toolkit_required",
            Self::ToolNotFound { .. } => "tool_not_found",
            Self::UnknownApprovalId { .. } => "unknown_approval",
            Self::ToolCallNotFoundForApproval { .. } => "approval_tool_call_not_found",
            Self::ConflictingApprovalResponses { .. } => "conflicting_approval_responses",
            Self::UnansweredApprovals { .. } => "unanswered_approvals",
            Self::InvalidToolInput { .. } => "invalid_tool_input",
            Self::EditNotSupported { .. } => "edit_not_supported",
            Self::InvalidApprovalSignature { .. } => "invalid_approval_signature",
            Self::MissingToolResults { .. } => "missing_tool_results",
            Self::Model { .. } => "model_error",
        }
    }
}
