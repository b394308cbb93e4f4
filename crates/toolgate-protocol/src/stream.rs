//! The engine's full stream: one [`StreamPart`] per event, named and shaped as
//! the AI SDK v6 `fullStream` parts.
//!
//! Order within one `stream_text` call: `start`; then, on a continuation, the
//! pre-resolution parts (`tool-output-denied`, `tool-result`, `tool-error`);
//! then per step `start-step`, the model's text/reasoning/tool-input parts and
//! `tool-call`s, the step's `tool-result`/`tool-error`s, its
//! `tool-approval-request`s, and `finish-step`; finally `finish`.
//!
//! Errors: `error` is fatal and is always followed by `finish` (reason
//! `error`); `warning` reports a problem the engine recovered from and the
//! stream goes on. Adapters map them consistently: `error` ends the run
//! (UI `error` chunk, AG-UI `RUN_ERROR`), `warning` does not.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{FinishReason, Usage};

/// A tool call as the stream reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallInfo {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The input (the raw text as a JSON string when it did not parse).
    pub input: Value,
    /// True when the provider runs the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_executed: Option<bool>,
    /// True for dynamic tools (schema known only at runtime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<bool>,
    /// True when the call cannot run: unknown tool or input that fails the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid: Option<bool>,
    /// Why the call is invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The call's provider metadata, kept with the call in the history (a
    /// sub-agent's call surfaced above it carries its lineage here, under `toolgate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<crate::ProviderOptions>,
}

impl ToolCallInfo {
    /// The lineage of a sub-agent's call surfaced here (its
    /// `providerMetadata.toolgate.subAgent.lineage`: the agent calls from
    /// this level down, each `{"agent", "toolCallId"}`), when it is one.
    pub fn sub_agent_lineage(&self) -> Option<&Value> {
        self.provider_metadata.as_ref()?.get("toolgate")?.get("subAgent")?.get("lineage")
    }
}

/// One event of the engine's full stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum StreamPart {
    /// The call starts.
    Start,
    /// A model step starts.
    StartStep,
    /// A text block starts.
    TextStart {
        /// Block id.
        id: String,
    },
    /// More text.
    TextDelta {
        /// Block id.
        id: String,
        /// The text.
        text: String,
    },
    /// A text block ends.
    TextEnd {
        /// Block id.
        id: String,
    },
    /// A reasoning block starts.
    ReasoningStart {
        /// Block id.
        id: String,
    },
    /// More reasoning.
    ReasoningDelta {
        /// Block id.
        id: String,
        /// The text.
        text: String,
    },
    /// A reasoning block ends.
    ReasoningEnd {
        /// Block id.
        id: String,
    },
    /// The model starts writing a tool call's input.
    ToolInputStart {
        /// The tool call id.
        id: String,
        /// The tool's name.
        #[serde(rename = "toolName")]
        tool_name: String,
        /// True when the provider runs the tool.
        #[serde(default, rename = "providerExecuted", skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
        /// True for dynamic tools.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dynamic: Option<bool>,
    },
    /// More input JSON text.
    ToolInputDelta {
        /// The tool call id.
        id: String,
        /// The text.
        delta: String,
    },
    /// The input is complete.
    ToolInputEnd {
        /// The tool call id.
        id: String,
    },
    /// A complete tool call.
    ToolCall(ToolCallInfo),
    /// A tool's output (`preliminary` for intermediate outputs of a streaming tool).
    #[serde(rename_all = "camelCase")]
    ToolResult {
        /// The call's id.
        tool_call_id: String,
        /// The tool's name.
        tool_name: String,
        /// The input the tool ran with.
        input: Value,
        /// The tool's output.
        output: Value,
        /// True when the provider ran the tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
        /// True for an intermediate output; the final one follows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        preliminary: Option<bool>,
        /// True for dynamic tools.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dynamic: Option<bool>,
    },
    /// A tool failed, or its call was invalid.
    #[serde(rename_all = "camelCase")]
    ToolError {
        /// The call's id.
        tool_call_id: String,
        /// The tool's name.
        tool_name: String,
        /// The input of the call.
        input: Value,
        /// The error.
        error: Value,
        /// True when the provider ran the tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
        /// True for dynamic tools.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dynamic: Option<bool>,
    },
    /// A call waits for a person's decision; it has not run.
    #[serde(rename_all = "camelCase")]
    ToolApprovalRequest {
        /// The approval's id (opaque; echo it back in the response).
        approval_id: String,
        /// The call.
        tool_call: ToolCallInfo,
        /// The AI SDK's separate signature field, when configured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// Why a person is asked (e.g. the policy rule that matched), when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Who decides, when a rule named approvers (`None`: the requester).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        routing: Option<ApprovalRouting>,
    },
    /// A call was denied and did not run.
    #[serde(rename_all = "camelCase")]
    ToolOutputDenied {
        /// The call's id.
        tool_call_id: String,
        /// The tool's name.
        tool_name: String,
        /// True when the provider would have run the tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
        /// Why it was denied, when known (a toolgate extension; AI SDK clients ignore it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A model step ends.
    #[serde(rename_all = "camelCase")]
    FinishStep {
        /// Why the step ended.
        finish_reason: FinishReason,
        /// The step's token usage.
        usage: Usage,
    },
    /// The call ends.
    #[serde(rename_all = "camelCase")]
    Finish {
        /// Why the call ended.
        finish_reason: FinishReason,
        /// Token usage over all steps.
        total_usage: Usage,
    },
    /// A fatal error: the call ends. Always followed by `finish` with the
    /// finish reason `error`.
    Error {
        /// What happened.
        error: String,
    },
    /// A problem the engine reported and recovered from; the call goes on
    /// (a toolgate extension, e.g. a provider approval request for a call the
    /// provider never made).
    Warning {
        /// A stable, machine-readable code.
        code: String,
        /// What happened.
        message: String,
    },
}

/// Who decides an approval a rule routed to named approvers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRouting {
    /// The approvers as configured: principals and `group:NAME`s.
    pub approvers: Vec<String>,
    /// How many distinct approvers must approve.
    pub quorum: u32,
}
