//! Why a request body or a message list cannot be used: the one error type
//! the readers (`message`, `read`) and the conversion (`convert`) share.

/// A request body or message list that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// The body is not JSON.
    #[error("the body is not valid JSON: {0}")]
    InvalidJson(String),
    /// The body is JSON but not a chat request.
    #[error("invalid chat request: {0}")]
    InvalidBody(String),
    /// A message or part is malformed.
    #[error("invalid message {message_index}{}: {detail}", part_index.map(|p| format!(", part {p}")).unwrap_or_default())]
    InvalidMessage {
        /// Index of the message.
        message_index: usize,
        /// Index of the part, when a part is at fault.
        part_index: Option<usize>,
        /// What is wrong.
        detail: String,
    },
}
