//! Wire types for toolgate, with no IO.
//!
//! Everything here serializes to the JSON that the Vercel AI SDK v6 uses, so a
//! history stored by an AI SDK app deserializes unchanged and ours reads back
//! in AI SDK code:
//!
//! - [`ModelMessage`] and its parts: the conversation history (`ModelMessage[]`).
//! - [`ToolResultOutput`]: what a tool result tells the model.
//! - [`StreamPart`]: the engine's full stream (the AI SDK `fullStream` parts).
//! - [`ModelStreamPart`], [`ModelResponse`], [`ModelRequest`] (its messages a
//!   shared [`Prompt`]): what flows between the engine and a model provider.
//!
//! Parsing is strict and typed: [`parse_messages`] names the message index and
//! the field of anything malformed, and unknown part types are rejected.
//! [`normalize_approvals`] rewrites the two older approval encodings into the
//! canonical `tool-approval-response` form (see its docs for the rules).

mod message;
mod model;
mod normalize;
mod output;
mod parse;
mod prompt;
mod stream;

pub use message::{
    AssistantContent, AssistantMessage, AssistantPart, FilePart, ImagePart, LegacyToolApprovalPart, ModelMessage,
    ProviderOptions, ReasoningPart, SystemMessage, TextPart, ToolApprovalRequestPart, ToolApprovalResponsePart,
    ToolCallPart, ToolMessage, ToolPart, ToolResultPart, UserContent, UserMessage, UserPart,
};
pub use model::{
    FinishReason, ModelContent, ModelRequest, ModelResponse, ModelStreamPart, ModelToolCall, ModelToolResult,
    ToolChoice, ToolSpec, Usage,
};
pub use normalize::{LEGACY_APPROVAL_TOOL_NAME, NormalizeError, normalize_approvals};
pub use output::{ContentOutputPart, DENIED_TEXT, ToolResultOutput};
pub use parse::{MessageError, MessageErrorKind, parse_messages, parse_messages_str};
pub use prompt::Prompt;
pub use stream::{ApprovalRouting, StreamPart, ToolCallInfo};
