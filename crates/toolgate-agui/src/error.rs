//! Errors, and how each becomes a `RUN_ERROR` with a stable `code`.
//!
//! Every error here is raised before anything runs. The server reports it as
//! `RUN_ERROR {message, code}`; the codes are part of the wire contract:
//!
//! | code | raised by |
//! |---|---|
//! | `invalid_input` | the body is not a `RunAgentInput` |
//! | `unknown_role`, `invalid_message`, `invalid_tool_arguments`, `unknown_tool_call`, `unsupported_content` | a message (names its index) |
//! | `invalid_resume_entry` | a resume entry without an `interruptId` (names its index) |
//! | `invalid_state` | `state` is not an object, or toolgate's key in it is malformed |
//! | `no_pending_interrupts`, `unknown_interrupt`, `duplicate_resume_entry`, `missing_resume_entry` | the resume does not answer the pending interrupts exactly once |
//! | `interrupt_tool_call_not_found`, `interrupt_tool_mismatch` | a pending interrupt does not match the messages |
//! | `history_mismatch` | with a stored thread: a tool call or result the server never produced (names the message and call) |
//! | engine codes, see `toolgate::EngineError::code` | the engine refused the history |

use toolgate::EngineError;

use crate::events::Event;
use crate::thread::HistoryMismatch;

/// The `RUN_ERROR.code` of a [`HistoryMismatch`].
pub const HISTORY_MISMATCH_CODE: &str = "history_mismatch";

/// The request body or its messages cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    /// The body is not a `RunAgentInput`.
    #[error("invalid RunAgentInput: {0}")]
    Invalid(String),
    /// A message has a role AG-UI does not define.
    #[error("message {index}: unknown role `{role}`")]
    UnknownRole {
        /// The message's position in `messages`.
        index: usize,
        /// The role given.
        role: String,
    },
    /// A message does not decode.
    #[error("message {index}: {detail}")]
    InvalidMessage {
        /// The message's position in `messages`.
        index: usize,
        /// What is wrong.
        detail: String,
    },
    /// A tool call's `arguments` are not JSON.
    #[error("message {index}: tool call `{tool_call_id}` has arguments that are not JSON: {detail}")]
    InvalidToolArguments {
        /// The assistant message's position in `messages`.
        index: usize,
        /// The call.
        tool_call_id: String,
        /// The parse error.
        detail: String,
    },
    /// A tool message answers a call no earlier assistant message made.
    #[error("message {index}: tool result for `{tool_call_id}`, which no earlier assistant message called")]
    UnknownToolCall {
        /// The tool message's position in `messages`.
        index: usize,
        /// The call it names.
        tool_call_id: String,
    },
    /// Content toolgate cannot pass to a model.
    #[error("message {index}: {detail}")]
    UnsupportedContent {
        /// The message's position in `messages`.
        index: usize,
        /// What is unsupported.
        detail: String,
    },
    /// A resume entry cannot be tied to an interrupt.
    #[error("resume entry {index}: {detail}")]
    InvalidResumeEntry {
        /// The entry's position in `resume`.
        index: usize,
        /// What is wrong.
        detail: String,
    },
    /// `state` is present but not a JSON object, so toolgate cannot keep its key in it.
    #[error("state must be a JSON object (or absent) for toolgate to track pending approvals")]
    StateNotObject,
}

impl InputError {
    /// The stable `RUN_ERROR.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "invalid_input",
            Self::UnknownRole { .. } => "unknown_role",
            Self::InvalidMessage { .. } => "invalid_message",
            Self::InvalidToolArguments { .. } => "invalid_tool_arguments",
            Self::UnknownToolCall { .. } => "unknown_tool_call",
            Self::UnsupportedContent { .. } => "unsupported_content",
            Self::InvalidResumeEntry { .. } => "invalid_resume_entry",
            Self::StateNotObject => "invalid_state",
        }
    }

    /// The message without the index prefix (for contexts that have no index).
    pub(crate) fn detail(&self) -> String {
        match self {
            Self::UnknownRole { role, .. } => format!("unknown role `{role}`"),
            Self::InvalidMessage { detail, .. } | Self::InvalidResumeEntry { detail, .. } => detail.clone(),
            other => other.to_string(),
        }
    }
}

/// The resume does not answer the pending interrupts exactly once, or the
/// pending interrupts do not match the messages. Nothing runs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResumeError {
    /// toolgate's key in `state` is malformed.
    #[error("state `{key}` is malformed: {detail}", key = crate::STATE_KEY)]
    InvalidState {
        /// What is wrong.
        detail: String,
    },
    /// A resume entry was sent but the state lists no pending approvals.
    #[error(
        "resume entry {index}: interrupt `{interrupt_id}` cannot be resumed: the state lists no pending approvals (`{key}.pendingApprovals`)",
        key = crate::STATE_KEY
    )]
    NoPendingInterrupts {
        /// The entry's position in `resume`.
        index: usize,
        /// The interrupt it names.
        interrupt_id: String,
    },
    /// A resume entry names an interrupt that is not pending.
    #[error("resume entry {index}: interrupt `{interrupt_id}` is not pending")]
    UnknownInterrupt {
        /// The entry's position in `resume`.
        index: usize,
        /// The interrupt it names.
        interrupt_id: String,
    },
    /// Two resume entries answer the same interrupt.
    #[error("resume entry {index}: interrupt `{interrupt_id}` was already answered by entry {first_index}")]
    DuplicateEntry {
        /// The second entry's position in `resume`.
        index: usize,
        /// The first entry's position.
        first_index: usize,
        /// The interrupt.
        interrupt_id: String,
    },
    /// The state lists one interrupt twice, or two interrupts for one tool call.
    #[error("pending interrupts `{first}` and `{second}` both answer tool call `{tool_call_id}`")]
    DuplicatePending {
        /// The first pending interrupt.
        first: String,
        /// The second one (the same id when an interrupt is listed twice).
        second: String,
        /// The call both name.
        tool_call_id: String,
    },
    /// Pending interrupts that no entry answers.
    #[error("pending interrupts have no resume entry: {}", interrupt_ids.join(", "))]
    MissingEntries {
        /// The unanswered interrupts.
        interrupt_ids: Vec<String>,
    },
    /// A pending interrupt names a tool call that is not in the messages.
    #[error("interrupt `{interrupt_id}`: tool call `{tool_call_id}` is not in the messages")]
    ToolCallNotFound {
        /// The interrupt.
        interrupt_id: String,
        /// The missing call.
        tool_call_id: String,
    },
    /// A pending interrupt names a different tool than the call in the messages.
    #[error("interrupt `{interrupt_id}`: tool call `{tool_call_id}` is `{found}` in the messages, not `{pending}`")]
    ToolNameMismatch {
        /// The interrupt.
        interrupt_id: String,
        /// The call.
        tool_call_id: String,
        /// The tool the state names.
        pending: String,
        /// The tool the messages name.
        found: String,
    },
}

impl ResumeError {
    /// The stable `RUN_ERROR.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidState { .. } => "invalid_state",
            Self::NoPendingInterrupts { .. } => "no_pending_interrupts",
            Self::UnknownInterrupt { .. } => "unknown_interrupt",
            Self::DuplicateEntry { .. } => "duplicate_resume_entry",
            Self::MissingEntries { .. } => "missing_resume_entry",
            Self::DuplicatePending { .. } => "duplicate_pending_interrupt",
            Self::ToolCallNotFound { .. } => "interrupt_tool_call_not_found",
            Self::ToolNameMismatch { .. } => "interrupt_tool_mismatch",
        }
    }
}

/// Anything that stops an AG-UI run before it streams.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AguiError {
    /// The input cannot be used.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The resume does not fit the pending interrupts.
    #[error(transparent)]
    Resume(#[from] ResumeError),
    /// The engine refused the history (bad messages, forged approvals, ...).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The messages hold a tool call or result the server never produced in this thread.
    #[error(transparent)]
    History(#[from] HistoryMismatch),
}

impl AguiError {
    /// The stable `RUN_ERROR.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Input(error) => error.code(),
            Self::Resume(error) => error.code(),
            Self::Engine(error) => error.code(),
            Self::History(_) => HISTORY_MISMATCH_CODE,
        }
    }

    /// The `RUN_ERROR` event reporting this error.
    pub fn to_event(&self) -> Event {
        Event::run_error(self.to_string(), self.code())
    }
}

/// The `RUN_ERROR` event for an engine error (e.g. one `stream_text` returned before streaming).
pub fn engine_error_event(error: &EngineError) -> Event {
    Event::run_error(error.to_string(), error.code())
}
