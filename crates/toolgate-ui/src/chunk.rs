//! UI message stream chunks and their SSE framing.
//!
//! The field set is the one ai@6.0.0 accepts: its chunk schemas reject
//! unknown keys (up to 6.0.230), so optional fields are omitted when absent
//! and `signature` is only sent when the server is configured for newer clients.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_protocol::FinishReason;

/// Response headers of a UI message stream.
pub const UI_MESSAGE_STREAM_HEADERS: &[(&str, &str)] = &[
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
];

/// The last frame of every stream.
pub const SSE_DONE: &str = "data: [DONE]\n\n";

/// One chunk of the UI message stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum UiChunk {
    /// The response message starts.
    #[serde(rename_all = "camelCase")]
    Start {
        /// The assistant message id (the continued message's id on a continuation).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    /// The response ends.
    #[serde(rename_all = "camelCase")]
    Finish {
        /// Why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        finish_reason: Option<FinishReason>,
    },
    /// A step starts.
    StartStep,
    /// A step ends.
    FinishStep,
    /// An error ended the response.
    #[serde(rename_all = "camelCase")]
    Error {
        /// What happened.
        error_text: String,
    },
    /// A problem the engine recovered from (`data-toolgate-warning`, a transient
    /// data chunk: clients hand it to `onData` and do not store it in the message).
    #[serde(rename = "data-toolgate-warning")]
    Warning {
        /// `{code, message}`.
        data: Value,
        /// Always true.
        transient: bool,
    },
    /// Why a call waits for a person or was denied (`data-toolgate-reason`, a
    /// data part stored in the message, one per call: a later reason for the
    /// same call replaces the earlier one). `data` is
    /// `{toolCallId, approvalId?, decision: "ask" | "deny", reason}`.
    #[serde(rename = "data-toolgate-reason")]
    Reason {
        /// The call's id (the data part's id).
        id: String,
        /// See above.
        data: Value,
    },
    /// Where an approval stands (`data-toolgate-approval`, a data part
    /// stored in the message, one per approval, replaced as it changes).
    /// `data` is `{approvalId, toolCallId, state, approvers, quorum, votes}`
    /// (`votes`: `[{principal, decision, reason?, at}]`, `at` RFC 3339).
    #[serde(rename = "data-toolgate-approval")]
    Approval {
        /// The approval's id (the data part's id).
        id: String,
        /// See above.
        data: Value,
    },
    /// A text part starts.
    TextStart {
        /// Part id.
        id: String,
    },
    /// More text.
    TextDelta {
        /// Part id.
        id: String,
        /// The text.
        delta: String,
    },
    /// A text part ends.
    TextEnd {
        /// Part id.
        id: String,
    },
    /// A reasoning part starts.
    ReasoningStart {
        /// Part id.
        id: String,
    },
    /// More reasoning.
    ReasoningDelta {
        /// Part id.
        id: String,
        /// The text.
        delta: String,
    },
    /// A reasoning part ends.
    ReasoningEnd {
        /// Part id.
        id: String,
    },
    /// A tool call's input starts streaming.
    #[serde(rename_all = "camelCase")]
    ToolInputStart {
        /// The call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// True when the provider runs the tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
        /// True for dynamic tools.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dynamic: Option<bool>,
    },
    /// More input JSON text.
    #[serde(rename_all = "camelCase")]
    ToolInputDelta {
        /// The call id.
        tool_call_id: String,
        /// The text.
        input_text_delta: String,
    },
    /// The call's input is complete.
    #[serde(rename_all = "camelCase")]
    ToolInputAvailable {
        /// The call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The input.
        input: Value,
        /// True when the provider runs the tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
        /// True for dynamic tools.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dynamic: Option<bool>,
        /// The call's provider metadata (the part's `callProviderMetadata`; a
        /// sub-agent's surfaced call carries its lineage here).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<serde_json::Map<String, Value>>,
    },
    /// The call cannot run (unknown tool, invalid input).
    #[serde(rename_all = "camelCase")]
    ToolInputError {
        /// The call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The input.
        input: Value,
        /// Why.
        error_text: String,
        /// True when the provider runs the tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
        /// True for dynamic tools.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dynamic: Option<bool>,
    },
    /// The call waits for a person's decision.
    #[serde(rename_all = "camelCase")]
    ToolApprovalRequest {
        /// The approval id to answer with.
        approval_id: String,
        /// The call id.
        tool_call_id: String,
        /// The AI SDK signature (only when configured for ai >= 6.0.231).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// The tool's output.
    #[serde(rename_all = "camelCase")]
    ToolOutputAvailable {
        /// The call id.
        tool_call_id: String,
        /// The output.
        output: Value,
        /// True when the provider ran the tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
        /// True for dynamic tools.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dynamic: Option<bool>,
        /// True for an intermediate output.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        preliminary: Option<bool>,
    },
    /// The tool failed.
    #[serde(rename_all = "camelCase")]
    ToolOutputError {
        /// The call id.
        tool_call_id: String,
        /// The error.
        error_text: String,
        /// True when the provider ran the tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
        /// True for dynamic tools.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dynamic: Option<bool>,
    },
    /// The call was denied and did not run.
    #[serde(rename_all = "camelCase")]
    ToolOutputDenied {
        /// The call id.
        tool_call_id: String,
    },
}

/// Frames a chunk as one server-sent event.
pub fn sse_frame(chunk: &UiChunk) -> String {
    // Serializing these plain data types cannot fail.
    let json = serde_json::to_string(chunk).unwrap_or_default();
    format!("data: {json}\n\n")
}
