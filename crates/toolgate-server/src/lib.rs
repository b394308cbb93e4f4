//! The toolgate HTTP server.
//!
//! Endpoints:
//! - `POST /api/chat`: the Vercel AI SDK v6 UI message stream; the body is
//!   what `DefaultChatTransport` sends (`{id, messages: UIMessage[], trigger, messageId}`).
//! - `POST /ag-ui`: AG-UI 1.0 runs with interrupt/resume approvals.
//! - `GET /`: the web page (approve, deny with a reason, edit input).
//! - `GET /api/audit`: the approval audit log as JSON lines (with a store).
//! - `GET /api/chats/{id}`: a chat's stored UI messages (with a store).
//! - `GET /api/approvals[/{id}]`, `POST|DELETE /api/approvals/{id}`,
//!   `GET /api/approvals/stream`: the approvals inbox.
//! - `GET|POST /a/{token}`: one-time approval links from notifications
//!   ([`notify`]); `GET /approvals/{id}`: the page's inbox on one approval.
//! - `GET /healthz`: liveness.
//! - `GET /openapi.json`: the OpenAPI 3.1 document of every endpoint
//!   ([`openapi`]); `GET /api-docs`: the API reference page on it.
//! - `GET /auth/callback`, `GET|POST /auth/logout`: OpenID Connect sign-in
//!   for the page, when configured ([`oidc`]).
//!
//! With a ledger ([`ServerConfig::ledger`]) every approval is recorded,
//! single-use and expiring, bound to its conversation (the chat id, or the
//! AG-UI thread id), and answered by the request's principal
//! ([`PrincipalSource`]).
//!
//! Approvals are signed by default ([`ApprovalSecret`]): a forged, tampered
//! or unsigned approval of a gated tool is rejected with HTTP 400 and a JSON
//! error before anything runs. Bad input gets a 4xx naming the problem.
//!
//! Who a request is comes from `toolgate-auth` (principal sources, tokens,
//! JWTs, OpenID Connect sign-in, the approval secret), re-exported here at
//! the paths the server always had; the server keeps the HTTP glue: the
//! [`Caller`] extractor, the sign-in routes ([`oidc`]) and the mapping of
//! its errors to [`ApiError`].
//!
//! # Floors
//!
//! The crate is built in floors; a file imports only files of its own floor
//! or below, and no file imports one that imports it back
//! (`scripts/file-circles.py`):
//!
//! 1. The launcher (`launch.rs`: [`serve`], [`serve_listener`]): binds the
//!    listener, serves the router behind the `Host` guard ([`host`]), starts
//!    each background worker with the parts of the state it needs, and stops
//!    them at shutdown.
//! 2. The handlers (`api/`): one file per resource, thin (they read the
//!    request, ask the state for the conversation's ledger, call the stored
//!    runs or the store, shape the response), with the route table
//!    ([`router`], [`route_table`]) and the API reference ([`openapi`])
//!    beside them; their HTTP glue is the [`Caller`] extractor (`caller.rs`)
//!    and `http.rs` (JSON bodies, server-sent events).
//! 3. The state (`app.rs`: [`AppState`], [`ServerConfig`]): the
//!    configuration, the run context, the inbox hub and the link signer.
//! 4. The background workers (`workers/`): the server-side [`continuation`],
//!    the approvals' [`timers`], [`retention`], the notification follower
//!    and delivery, and the inbox streams' follower of the store. They take
//!    the store, their settings and the run context, never the state (but
//!    [`continuation::worker`], the public entry for a server built on the
//!    router alone, which hands the loop its parts).
//! 5. The stored runs (`run/`): a stored conversation run to its end
//!    whatever its client does, its reconciliation and replay, the step whose
//!    approvals are decided elsewhere, every path's vote and the one edit
//!    check, a due conversation continued on the server, and the AG-UI
//!    threads; all on a run context
//!    (`run/context.rs`: the model, the tools, the rules, the store of sticky
//!    decisions, the clock, the running responses, the signals).
//! 6. The ground, which imports nothing above it: an approval as the wire
//!    shows it ([`approval_item()`]), [`ApiError`], the process's signals,
//!    the running responses, the notification channels and link tokens
//!    ([`notify`]), the prompt trace ([`TraceFile`]), the `Host` guard, the
//!    Prometheus [`metrics`] and the OpenTelemetry traces ([`telemetry`]).
//!
//! Words: a client *resumes* a stream (`GET /api/chat/{id}/stream`, the AI
//! SDK's resumable streams; an AG-UI client's resume is that protocol's
//! answer to interrupts); the server *continues* a run (a conversation whose
//! approvals were decided out of band).

mod api;
mod app;
mod approval_item;
mod caller;
mod error;
pub mod host;
mod http;
mod launch;
pub mod metrics;
pub mod notify;
pub mod oidc;
mod run;
mod running;
mod signals;
pub mod telemetry;
mod trace;
mod workers;

pub use api::approvals::{DEFAULT_LIMIT as DEFAULT_APPROVALS_LIMIT, MAX_LIMIT as MAX_APPROVALS_LIMIT};
pub use api::audit::{MAX_AUDIT_EVENTS, parse_time};
pub use api::decisions::{MAX_DECISION_INPUT_BYTES, MAX_DECISIONS_IN_SCOPE, MAX_DECISIONS_PER_SCOPE};
pub use api::{openapi, route_table, router};
pub use app::{AppState, DEFAULT_MAX_BODY_BYTES, ServerConfig};
pub use approval_item::approval_item;
pub use caller::Caller;
pub use error::ApiError;
pub use launch::{serve, serve_listener, shutdown_signal};
pub use metrics::Metrics;
pub use notify::Notifications;
pub use oidc::{OidcConfig, OidcError, OidcSignIn};
pub use run::calls::{
    CALLS_PREFIX, CallState, CallsConfig, CallsDefault, DEFAULT_RETRY_WINDOW, MAX_KEY_LEN, MAX_TOOL_NAME_LEN, MAX_WAIT,
};
/// JWT bearer tokens verified against a JWKS (`--jwt-jwks`): `toolgate-auth`'s.
pub use toolgate_auth::jwt;
pub use toolgate_auth::{
    ApprovalSecret, IdentifyError, JwksSource, JwtConfig, JwtError, JwtVerifier, PrincipalSource, SHA256_PREFIX,
    SecretError, SecretSource, TokenEntryError, TokenTable, TokensError,
};
pub use trace::{PromptTracer, TraceFile, trace_prompts};
pub use workers::{continuation, receipts, retention, timers};
