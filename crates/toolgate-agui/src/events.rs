//! The AG-UI 1.0 events the adapter emits, shaped as `@ag-ui/core` 1.0.0
//! validates them: `type` in SCREAMING_SNAKE_CASE, camelCase fields, optional
//! fields omitted (never `null`).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::messages::{Extra, Message};

/// One AG-UI event, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Event {
    /// The run starts. Always first.
    #[serde(rename_all = "camelCase")]
    RunStarted {
        /// The thread.
        thread_id: String,
        /// The run.
        run_id: String,
        /// The run this one continues, when the input named one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_run_id: Option<String>,
    },
    /// The run ended without failing: completed, or paused on interrupts.
    #[serde(rename_all = "camelCase")]
    RunFinished {
        /// The thread.
        thread_id: String,
        /// The run.
        run_id: String,
        /// A result value (unused by toolgate).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// How it ended.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<RunOutcome>,
    },
    /// The run failed. Always last.
    RunError {
        /// What went wrong.
        message: String,
        /// A stable machine-readable code (see [`crate::error`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
    /// An assistant text message opens.
    #[serde(rename_all = "camelCase")]
    TextMessageStart {
        /// The message (one per assistant step).
        message_id: String,
        /// Always `assistant`.
        role: TextRole,
    },
    /// More text.
    #[serde(rename_all = "camelCase")]
    TextMessageContent {
        /// The message.
        message_id: String,
        /// The text (never empty).
        delta: String,
    },
    /// The text message closes.
    #[serde(rename_all = "camelCase")]
    TextMessageEnd {
        /// The message.
        message_id: String,
    },
    /// A tool call opens.
    #[serde(rename_all = "camelCase")]
    ToolCallStart {
        /// The call.
        tool_call_id: String,
        /// The tool.
        tool_call_name: String,
        /// The assistant message (step) holding the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
    },
    /// More argument JSON text.
    #[serde(rename_all = "camelCase")]
    ToolCallArgs {
        /// The call.
        tool_call_id: String,
        /// A fragment of the arguments' JSON text.
        delta: String,
    },
    /// The call's arguments are complete.
    #[serde(rename_all = "camelCase")]
    ToolCallEnd {
        /// The call.
        tool_call_id: String,
    },
    /// A tool's outcome, as a new tool message (see [`crate::content`] for the content).
    #[serde(rename_all = "camelCase")]
    ToolCallResult {
        /// The tool message's id.
        message_id: String,
        /// The call answered.
        tool_call_id: String,
        /// The outcome as text.
        content: String,
        /// Always `tool`.
        role: ToolRole,
    },
    /// The whole agent state.
    StateSnapshot {
        /// The state.
        snapshot: Value,
    },
    /// The whole conversation.
    MessagesSnapshot {
        /// The messages.
        messages: Vec<Message>,
    },
    /// A reasoning span opens.
    #[serde(rename_all = "camelCase")]
    ReasoningStart {
        /// The span.
        message_id: String,
    },
    /// A reasoning message opens.
    #[serde(rename_all = "camelCase")]
    ReasoningMessageStart {
        /// The message.
        message_id: String,
        /// Always `reasoning`.
        role: ReasoningRole,
    },
    /// More reasoning text.
    #[serde(rename_all = "camelCase")]
    ReasoningMessageContent {
        /// The message.
        message_id: String,
        /// The text (never empty).
        delta: String,
    },
    /// The reasoning message closes.
    #[serde(rename_all = "camelCase")]
    ReasoningMessageEnd {
        /// The message.
        message_id: String,
    },
    /// The reasoning span closes.
    #[serde(rename_all = "camelCase")]
    ReasoningEnd {
        /// The span.
        message_id: String,
    },
    /// An application event; toolgate sends [`WARNING_EVENT`] for problems the run recovered from.
    Custom {
        /// What kind of event.
        name: String,
        /// Its payload.
        value: Value,
    },
}

/// The `CUSTOM` event name of a warning: `value` is `{code, message}`; the run goes on.
pub const WARNING_EVENT: &str = "toolgate.warning";

/// The `CUSTOM` event name of an approval routed to named approvers: `value`
/// is `{approvalId, toolCallId, state, approvers, quorum, votes}`, sent when
/// it is requested (the interrupt) and as it changes.
pub const APPROVAL_EVENT: &str = "toolgate.approval";

/// The `CUSTOM` event name of a sub-agent's progress, streamed while the
/// agent call runs or waits: `value` is `{toolCallId, subagentRunId,
/// lineage, progress}`, the agent call's id, the sub-run it is (the agent
/// call ids from the root, joined by `/`, as an interrupt's
/// `subagentRunId`), its lineage (`[{agent, toolCallId}]`) and the progress
/// itself (the whole progress so far: a client shows the latest).
pub const SUBAGENT_PROGRESS_EVENT: &str = "toolgate.subagent.progress";

impl Event {
    /// A `CUSTOM` warning event (see [`WARNING_EVENT`]).
    pub fn warning(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Custom { name: WARNING_EVENT.to_owned(), value: json!({"code": code.into(), "message": message.into()}) }
    }

    /// A `RUN_ERROR` with a code.
    pub fn run_error(message: impl Into<String>, code: impl Into<String>) -> Self {
        Self::RunError { message: message.into(), code: Some(code.into()) }
    }

    /// The `type` as it appears on the wire (e.g. `RUN_STARTED`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::RunStarted { .. } => "RUN_STARTED",
            Self::RunFinished { .. } => "RUN_FINISHED",
            Self::RunError { .. } => "RUN_ERROR",
            Self::TextMessageStart { .. } => "TEXT_MESSAGE_START",
            Self::TextMessageContent { .. } => "TEXT_MESSAGE_CONTENT",
            Self::TextMessageEnd { .. } => "TEXT_MESSAGE_END",
            Self::ToolCallStart { .. } => "TOOL_CALL_START",
            Self::ToolCallArgs { .. } => "TOOL_CALL_ARGS",
            Self::ToolCallEnd { .. } => "TOOL_CALL_END",
            Self::ToolCallResult { .. } => "TOOL_CALL_RESULT",
            Self::StateSnapshot { .. } => "STATE_SNAPSHOT",
            Self::MessagesSnapshot { .. } => "MESSAGES_SNAPSHOT",
            Self::ReasoningStart { .. } => "REASONING_START",
            Self::ReasoningMessageStart { .. } => "REASONING_MESSAGE_START",
            Self::ReasoningMessageContent { .. } => "REASONING_MESSAGE_CONTENT",
            Self::ReasoningMessageEnd { .. } => "REASONING_MESSAGE_END",
            Self::ReasoningEnd { .. } => "REASONING_END",
            Self::Custom { .. } => "CUSTOM",
        }
    }

    /// True for `RUN_FINISHED` and `RUN_ERROR`: nothing may follow in this run.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::RunFinished { .. } | Self::RunError { .. })
    }

    /// The event as one Server-Sent Events frame: `data: <json>\n\n`.
    pub fn to_sse(&self) -> String {
        // An Event always serializes: every field is a string, a Value or a derived type.
        format!("data: {}\n\n", serde_json::to_string(self).unwrap_or_default())
    }
}

/// The role of a streamed text message; toolgate only streams assistant text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextRole {
    /// The agent.
    Assistant,
}

/// The role of a tool result message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolRole {
    /// A tool.
    Tool,
}

/// The role of a reasoning message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningRole {
    /// Reasoning.
    Reasoning,
}

/// Why a run ended (`RUN_FINISHED.outcome`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum RunOutcome {
    /// The run completed.
    #[serde(rename_all = "camelCase")]
    Success {
        /// Client-executed calls left for the application to answer.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pending_tool_call_ids: Vec<String>,
    },
    /// The run paused; a new run with `resume` entries continues it.
    Interrupt {
        /// What the run waits for (at least one).
        interrupts: Vec<Interrupt>,
    },
    /// The run was stopped (not emitted by toolgate today).
    Cancelled,
}

/// Something a paused run needs: for toolgate, a person's decision on one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Interrupt {
    /// The interrupt id: the engine's approval id (signed when signing is on).
    pub id: String,
    /// `tool_call` for approvals.
    pub reason: String,
    /// A human-readable prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The call awaiting the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// JSON Schema of the resume payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Value>,
    /// When the interrupt stops accepting answers (RFC 3339), if configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The sub-agent run that made the call, for a call of a sub-agent
    /// (toolgate: the agent call ids from the root, joined by `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// toolgate: `{toolName, input}`, and `lineage` for a sub-agent's call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Extra>,
}

/// The `reason` of a tool approval interrupt.
pub const TOOL_CALL_REASON: &str = "tool_call";

/// The JSON Schema of an approval's resume payload:
/// `{approved: boolean (required), editedArgs?: object, reason?: string}`.
pub fn approval_response_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "editedArgs": {"type": "object"},
            "reason": {"type": "string"}
        },
        "required": ["approved"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn optional_fields_are_omitted_and_types_are_screaming_snake_case() {
        let events = [
            Event::RunStarted { thread_id: "t".into(), run_id: "r".into(), parent_run_id: None },
            Event::RunError { message: "m".into(), code: None },
            Event::ToolCallStart { tool_call_id: "c".into(), tool_call_name: "f".into(), parent_message_id: None },
            Event::RunFinished {
                thread_id: "t".into(),
                run_id: "r".into(),
                result: None,
                outcome: Some(RunOutcome::Success { pending_tool_call_ids: Vec::new() }),
            },
            Event::RunFinished {
                thread_id: "t".into(),
                run_id: "r".into(),
                result: None,
                outcome: Some(RunOutcome::Cancelled),
            },
        ];
        let json: Vec<Value> = events.iter().map(|e| serde_json::to_value(e).unwrap()).collect();
        assert_eq!(
            json,
            [
                json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
                json!({"type": "RUN_ERROR", "message": "m"}),
                json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"}),
                json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "success"}}),
                json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "cancelled"}}),
            ]
        );
        for (event, value) in events.iter().zip(&json) {
            assert_eq!(event.kind(), value["type"]);
            assert_eq!(&serde_json::from_value::<Event>(value.clone()).unwrap(), event);
        }
    }

    #[test]
    fn sse_frames_are_one_data_line() {
        let event = Event::run_error("bad\nthing", "x");
        assert_eq!(event.to_sse(), "data: {\"type\":\"RUN_ERROR\",\"message\":\"bad\\nthing\",\"code\":\"x\"}\n\n");
    }
}
