//! The Vercel AI SDK v6 UI message stream, so a `useChat` frontend can talk to toolgate.
//!
//! - [`UiMessage`]: the client's message list (`UIMessage[]`), with tool parts
//!   in their seven states and the `approval` object.
//! - [`convert_to_model_messages`] (and [`into_model_messages`], which moves): `UIMessage[]` to the engine's
//!   `ModelMessage[]`, with the AI SDK's rules (an `approval` gives a request
//!   part, and a response part once `approved` is set).
//! - [`UiStreamEncoder`]: the engine's stream parts to UI chunks, which
//!   [`sse_frame`] frames as server-sent events ending with [`SSE_DONE`].
//! - [`ChatRequest`]: the body `DefaultChatTransport` POSTs.
//! - [`UiMessageBuilder`]: the assistant message a client assembles from the
//!   chunks, so a server can keep the conversation it streamed.
//!
//! No IO here; the server crate does the HTTP.

mod build;
mod chunk;
mod convert;
mod encode;
mod error;
mod message;
mod read;

pub use build::{APPROVAL_PART, REASON_PART, UiMessageBuilder};
pub use chunk::{SSE_DONE, UI_MESSAGE_STREAM_HEADERS, UiChunk, sse_frame};
pub use convert::{convert_to_model_messages, into_model_messages};
pub use encode::{EncoderOptions, UiStreamEncoder};
pub use error::ConvertError;
pub use message::{ChatRequest, ToolState, UiApproval, UiMessage, UiPart, UiRole, UiToolPart, parse_ui_messages};
