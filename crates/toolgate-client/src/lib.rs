//! A Rust chat client for tool approvals: the conversation state of an AI SDK
//! v6 `useChat` client, without a UI.
//!
//! - [`Chat`]: messages with tool parts in their seven states, status, error;
//!   [`Chat::send_message`], [`Chat::add_tool_approval_response`] with a
//!   [`Decision`] (approve, approve with edited input, deny with a reason),
//!   [`Chat::add_tool_output`], [`Chat::stop`], [`Chat::regenerate`],
//!   [`Chat::resume`].
//! - Automatic continuation by seed 003's rules: once every approval and
//!   client tool call of the last step is answered the chat sends once; an
//!   answer given while a response streams is sent when it ends; a state
//!   already sent is never sent again.
//! - [`ChatEvent`]s (seed 004's update listeners), in order, as a stream
//!   ([`Chat::subscribe`]) or a callback ([`Chat::on_event`]).
//! - Transports behind [`ChatTransport`]: [`HttpTransport`] to any AI SDK v6
//!   UI-message-stream endpoint (`toolgate serve`, or a Vercel AI SDK
//!   backend), [`AguiTransport`] to an AG-UI endpoint (interrupts and
//!   resumes), and [`InProcessTransport`] running the engine directly.
//! - [`ChatOptions`]: approvals as `tool-approval-response` parts (default)
//!   or as seed 004's user-message `tool-approval` parts; edits as toolgate's
//!   `editedInput` or by replacing the input (stock AI SDK servers).

mod chat;
mod decision;
mod error;
mod event;
mod options;
mod state;
pub mod transport;

pub use chat::Chat;
pub use decision::Decision;
pub use error::ClientError;
pub use event::{ChatEvent, MessageChange, Status};
pub use options::{ApprovalForm, ChatOptions, EditForm};
pub use state::ToolOutput;
pub use toolgate_ui::{ToolState, UiMessage, UiPart, UiToolPart};
pub use transport::{AguiTransport, ChatTransport, HttpTransport, InProcessTransport, TransportRequest, Trigger};
