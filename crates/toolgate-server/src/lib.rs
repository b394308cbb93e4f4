//! The toolgate HTTP server.
//!
//! Endpoints:
//! - `POST /api/chat`: the Vercel AI SDK v6 UI message stream; the body is
//!   what `DefaultChatTransport` sends (`{id, messages: UIMessage[], trigger, messageId}`).
//! - `POST /ag-ui`: AG-UI 1.0 runs with interrupt/resume approvals.
//! - `GET /`: the web page (approve, deny with a reason, edit input).
//! - `GET /healthz`: liveness.
//!
//! Approvals are signed by default ([`ApprovalSecret`]): a forged, tampered
//! or unsigned approval of a gated tool is rejected with HTTP 400 and a JSON
//! error before anything runs. Bad input gets a 4xx naming the problem.

mod agui;
mod app;
mod chat;
mod error;
mod page;
mod secret;
mod trace;

pub use app::{AppState, DEFAULT_MAX_BODY_BYTES, ServerConfig, router, serve, shutdown_signal};
pub use error::ApiError;
pub use secret::{ApprovalSecret, SecretError, SecretSource};
pub use trace::{PromptTracer, TraceFile, trace_prompts};
