//! What can go wrong on the client side, as one cloneable error type (it is
//! also carried by [`crate::ChatEvent::Error`]).

use toolgate_ui::ToolState;

/// A client error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The server refused the request (an HTTP error status, or the
    /// in-process engine refusing the history before it streamed).
    #[error("the server refused the request ({}{code}): {message}", status.map(|s| format!("{s} ")).unwrap_or_default())]
    Rejected {
        /// The HTTP status, when there was one.
        status: Option<u16>,
        /// The server's error code (`approval_already_decided`, ...), or `http_error` when it gave none.
        code: String,
        /// The server's message.
        message: String,
    },
    /// The request could not be sent or the response could not be read.
    #[error("transport error: {0}")]
    Transport(String),
    /// The response stream ended before it finished (a dropped connection); `resume` may pick it up.
    #[error("the response stream ended before it finished")]
    Disconnected,
    /// The server sent an `error` chunk.
    #[error("the server reported an error: {0}")]
    Stream(String),
    /// A chunk of the response could not be read.
    #[error("malformed chunk from the server: {0}")]
    MalformedChunk(String),
    /// A stream is running; wait for it or `stop` it first.
    #[error("a response is still streaming")]
    Busy,
    /// No tool part carries this approval id.
    #[error("no approval `{0}` in this chat")]
    UnknownApproval(String),
    /// The approval exists but is not waiting for an answer.
    #[error("approval `{approval_id}` is not awaiting an answer (its tool part is {})", state.as_str())]
    ApprovalNotPending {
        /// The approval id.
        approval_id: String,
        /// The state of its tool part.
        state: ToolState,
    },
    /// No tool part has this call id.
    #[error("no tool call `{0}` in this chat")]
    UnknownToolCall(String),
    /// The tool call is not waiting for a client-side result.
    #[error("tool call `{tool_call_id}` is not awaiting a client result (its tool part is {})", state.as_str())]
    ToolCallNotAwaitingOutput {
        /// The call id.
        tool_call_id: String,
        /// The state of its tool part.
        state: ToolState,
    },
    /// Edits cannot be carried by the configured approval form.
    #[error(
        "edited input cannot be sent as a user-message `tool-approval` part; use the `tool-approval-response` form"
    )]
    EditNotSupported,
    /// `regenerate` needs an assistant message after a user message.
    #[error("there is no assistant response to regenerate")]
    NothingToRegenerate,
    /// `resume` found no response stream to resume.
    #[error("the server has no response stream to resume for this chat")]
    NothingToResume,
}

impl ClientError {
    /// The server's error code for [`ClientError::Rejected`].
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Rejected { code, .. } => Some(code),
            _ => None,
        }
    }
}
