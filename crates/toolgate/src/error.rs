//! The errors `generate_text` and `stream_text` return.
//!
//! Every error that concerns approvals is raised before anything runs: a call
//! either passes every check or nothing in the request executes.

use serde_json::Value;
use toolgate_protocol::{MessageError, ModelMessage, NormalizeError};

use crate::approval::SignatureError;
use crate::approval::lifecycle::Decision;
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
    /// An approved call names a tool this toolkit cannot run. Carries what a
    /// caller needs to recover: the call, and the tools it could have used.
    #[error(
        "tool `{tool_name}` (call `{tool_call_id}`) is not available; available tools: {}",
        available_tools.iter().map(|tool| tool.name.as_str()).collect::<Vec<_>>().join(", ")
    )]
    ToolNotFound {
        /// The tool named by the call.
        tool_name: String,
        /// The call.
        tool_call_id: String,
        /// The call's input (seed 001's `toolParams`).
        tool_input: Box<Value>,
        /// Tools toolgate can run, with their input schemas.
        available_tools: Vec<AvailableTool>,
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
    /// The same approval was answered twice, differently. The first answer
    /// decides; a contradicting later one is never ignored silently.
    #[error("approval `{approval_id}` has conflicting responses: first {first}, then {later}")]
    ConflictingApprovalResponses {
        /// The approval id.
        approval_id: String,
        /// The first answer.
        first: Box<Decision>,
        /// The later answer that contradicts it.
        later: Box<Decision>,
    },
    /// Two tool calls in the history share an id, so results and approvals would be ambiguous.
    #[error("tool call id `{tool_call_id}` is used by more than one tool call")]
    DuplicateToolCallId {
        /// The id.
        tool_call_id: String,
    },
    /// Two approval requests in the history share an approval id.
    #[error("approval id `{approval_id}` is used by more than one approval request")]
    DuplicateApprovalId {
        /// The id.
        approval_id: String,
    },
    /// One tool call has more than one approval request.
    #[error("tool call `{tool_call_id}` has more than one approval request: {}", approval_ids.join(", "))]
    DuplicateApprovalRequest {
        /// The call.
        tool_call_id: String,
        /// The approval ids of its requests, first first.
        approval_ids: Vec<String>,
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
    /// An approval edits the input of a tool declared `editable(false)`.
    #[error("approval `{approval_id}` edits the input of tool `{tool_name}`, whose input cannot be edited")]
    EditNotAllowed {
        /// The approval id.
        approval_id: String,
        /// The tool.
        tool_name: String,
    },
    /// The tool's policy denies the input a person edited into an approval.
    #[error("approval `{approval_id}`: the edited input of tool `{tool_name}` is denied: {reason}")]
    EditDenied {
        /// The approval id.
        approval_id: String,
        /// The tool.
        tool_name: String,
        /// The policy's reason.
        reason: String,
    },
    /// An approval's edit needs approvers that the approval does not have:
    /// the rules route the edited input to others (see [`crate::approval::lifecycle::check_edit`]).
    #[error("approval `{approval_id}`: the edited input of tool `{tool_name}` is not allowed: {refusal}")]
    EditNeedsApprovers {
        /// The approval id.
        approval_id: String,
        /// The tool.
        tool_name: String,
        /// What the edited input needs (names the rule).
        refusal: crate::approval::lifecycle::EditRefusal,
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
    /// The ledger never issued this approval id, whatever its signature says.
    #[error("approval `{approval_id}` was never issued by this server; nothing runs")]
    ApprovalNotIssued {
        /// The approval id.
        approval_id: String,
    },
    /// The ledger issued this approval id for another call, input or conversation.
    #[error("approval `{approval_id}` does not match what was issued: {detail}")]
    ApprovalMismatch {
        /// The approval id.
        approval_id: String,
        /// What differs.
        detail: String,
    },
    /// The approval was already decided otherwise; the recorded decision stands.
    #[error("approval `{approval_id}` was already decided: recorded {recorded}, received {received}")]
    ApprovalAlreadyDecided {
        /// The approval id.
        approval_id: String,
        /// The decision on record.
        recorded: Box<Decision>,
        /// The conflicting answer this request carried.
        received: Box<Decision>,
    },
    /// An answer in the chat to an approval routed to named approvers, that
    /// the ledger refuses (the requester is not an approver, ...).
    #[error(transparent)]
    Vote(#[from] crate::approval::lifecycle::VoteRefusal),
    /// A new message while approvals routed to others are pending: the
    /// requester cannot cancel someone else's decision.
    #[error("approvals are pending: {}", pending.join("; "))]
    ApprovalsPending {
        /// Each pending approval and who it waits for.
        pending: Vec<String>,
    },
    /// The approved call is running right now (another request claimed it); retry for its outcome.
    #[error("approval `{approval_id}` is being executed by another request; retry to get its outcome")]
    ApprovalInProgress {
        /// The approval id.
        approval_id: String,
    },
    /// A tool result in the history contradicts the ledger: the server never
    /// produced it (the call awaits approval, or ran with another outcome).
    #[error("tool call `{tool_call_id}` has a result the server did not produce: {detail}")]
    ForgedToolResult {
        /// The call.
        tool_call_id: String,
        /// What the ledger says.
        detail: String,
    },
    /// The approval store failed; nothing ran that was not recorded.
    #[error(transparent)]
    Store(#[from] crate::ledger::StoreError),
    /// The call failed after it started producing messages (tools may have
    /// run). `response_messages` holds what it produced: persist it.
    #[error("{source}")]
    Incomplete {
        /// What failed.
        source: Box<EngineError>,
        /// Messages produced before the failure.
        response_messages: Vec<ModelMessage>,
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
            Self::DuplicateToolCallId { .. } => "duplicate_tool_call_id",
            Self::DuplicateApprovalId { .. } => "duplicate_approval_id",
            Self::DuplicateApprovalRequest { .. } => "duplicate_approval_request",
            Self::EditNotAllowed { .. } | Self::EditNeedsApprovers { .. } => "edit_not_allowed",
            Self::EditDenied { .. } => "edit_denied",
            Self::ApprovalNotIssued { .. } => "approval_not_issued",
            Self::ApprovalMismatch { .. } => "approval_mismatch",
            Self::ApprovalAlreadyDecided { .. } => "approval_already_decided",
            Self::ApprovalInProgress { .. } => "approval_in_progress",
            Self::Vote(refusal) => refusal.code(),
            Self::ApprovalsPending { .. } => "approvals_pending",
            Self::ForgedToolResult { .. } => "forged_tool_result",
            Self::Store(_) => "store_unavailable",
            Self::Incomplete { source, .. } => source.code(),
        }
    }

    /// Messages the call produced before it failed (tools may have run): persist them.
    pub fn response_messages(&self) -> &[ModelMessage] {
        match self {
            Self::Incomplete { response_messages, .. } | Self::Model { response_messages, .. } => response_messages,
            _ => &[],
        }
    }
}

/// A tool a caller could have used, as [`EngineError::ToolNotFound`] lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct AvailableTool {
    /// The tool's name.
    pub name: String,
    /// Its input JSON Schema.
    pub input_schema: Value,
}
