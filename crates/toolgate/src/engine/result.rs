//! What an engine call produced.

use toolgate_protocol::{AssistantPart, FinishReason, ModelMessage, ToolCallPart, ToolResultPart, Usage};

use crate::approval::ResolvedApproval;

/// An approval request the engine issued: the call waits for a person.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The approval id (signed when a signer is configured).
    pub approval_id: String,
    /// The AI SDK separate signature, when enabled.
    pub signature: Option<String>,
    /// The call awaiting the decision.
    pub tool_call: ToolCallPart,
    /// True when the provider issued it (provider-executed call).
    pub provider_executed: bool,
    /// Why a person is asked (the rule or tool policy that asked), when known.
    pub reason: Option<String>,
    /// Who must approve, when a rule named approvers (`None`: the requester).
    pub route: Option<crate::approval::lifecycle::Route>,
    /// Where the call was made: empty for a call of this engine call's own
    /// model; else the agent calls, from here down, that lead to the
    /// sub-agent that made it (see [`crate::agent`]).
    pub lineage: Vec<crate::agent::LineageStep>,
}

/// One model step: what the model said and what happened to its calls.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    /// 0 for the first model call of this engine call.
    pub step_number: usize,
    /// The assistant message's parts, as stored in history.
    pub content: Vec<AssistantPart>,
    /// Results of calls run (or refused) in this step, in call order.
    pub tool_results: Vec<ToolResultPart>,
    /// Calls waiting for approval.
    pub approval_requests: Vec<ApprovalRequest>,
    /// Calls the caller must run.
    pub client_tool_calls: Vec<ToolCallPart>,
    /// Calls held back until pending approvals are decided.
    pub held_tool_calls: Vec<ToolCallPart>,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// Token usage of the step.
    pub usage: Usage,
}

impl StepResult {
    /// The step's text.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|part| match part {
                AssistantPart::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The step's tool calls.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCallPart> {
        self.content.iter().filter_map(|part| match part {
            AssistantPart::ToolCall(call) => Some(call),
            _ => None,
        })
    }
}

/// The outcome of a `generate_text` or `stream_text` call.
#[derive(Debug, Clone, PartialEq)]
pub struct TextResult {
    /// Results produced before the first model call, from approval answers in the history.
    pub preresolved: Vec<ToolResultPart>,
    /// What happened to each approval of the history acted on before the
    /// first model call, in call order (the audit record: who asked for
    /// what, the answer, and the edit, if any, next to the original input).
    pub approvals: Vec<ResolvedApproval>,
    /// The model steps.
    pub steps: Vec<StepResult>,
    /// Messages to append to the history (pre-resolution results first).
    pub response_messages: Vec<ModelMessage>,
    /// Why the call ended (the last step's reason).
    pub finish_reason: FinishReason,
    /// Token usage over all steps.
    pub total_usage: Usage,
}

impl TextResult {
    /// The last step's text.
    pub fn text(&self) -> String {
        self.steps.last().map(StepResult::text).unwrap_or_default()
    }

    /// Approval requests waiting for a person (from the last step).
    pub fn approval_requests(&self) -> &[ApprovalRequest] {
        self.steps.last().map(|step| step.approval_requests.as_slice()).unwrap_or_default()
    }

    /// Calls waiting for the caller to run them (from the last step).
    pub fn client_tool_calls(&self) -> &[ToolCallPart] {
        self.steps.last().map(|step| step.client_tool_calls.as_slice()).unwrap_or_default()
    }
}
