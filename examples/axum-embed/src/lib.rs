//! toolgate embedded in an axum app of your own: the app keeps its routes
//! (here `GET /hello`) and gains toolgate's chat endpoints (`POST /api/chat`
//! for the Vercel AI SDK's `useChat`, `POST /ag-ui`), the approvals API and
//! the approval page, all from the `toolgate-server` library rather than the
//! `toolgate` binary.
//!
//! The pieces: a [`Toolkit`] whose `delete_file` needs a person's approval
//! ([`toolkit`]), a model ([`scripted_model`], which needs no network; any
//! [`toolgate::LanguageModel`] such as `toolgate-openai`'s fits the same
//! place), toolgate's [`AppState`] built from a [`ServerConfig`]
//! ([`toolgate_state`]), and [`app`], which merges
//! [`toolgate_server::router`] into the app's own [`Router`].
//!
//! Serve the router with
//! [`into_make_service_with_connect_info::<SocketAddr>`](Router::into_make_service_with_connect_info),
//! as `src/main.rs` does: toolgate reads the peer's address from it to decide
//! whether a principal header may be believed.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolgate::model::ScriptPart;
use toolgate::{FinishReason, ScriptedModel, SharedModel, Tool, ToolError, Toolkit, ToolkitError};
use toolgate_server::{AppState, ApprovalSecret, ServerConfig};

/// The input of `delete_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteFile {
    /// The file to delete.
    pub path: String,
}

/// The app's tools: `delete_file` never runs before a person approves it.
pub fn toolkit() -> Result<Toolkit, ToolkitError> {
    Toolkit::new([Tool::function::<DeleteFile>("delete_file")
        .description("Delete a file")
        .needs_approval(true)
        .handler(|input: DeleteFile, _ctx| async move {
            // A real app deletes the file here; the example only says it did.
            Ok::<_, ToolError>(json!({ "deleted": input.path }))
        })])
}

/// A model that plays a fixed conversation: it asks to delete `notes.txt`,
/// then answers once the call has a result (approved or denied).
pub fn scripted_model() -> ScriptedModel {
    let call = ScriptPart::ToolCall {
        tool_call_id: "call-1".into(),
        tool_name: "delete_file".into(),
        input: json!({ "path": "notes.txt" }),
        provider_executed: None,
    };
    let ask = vec![
        ScriptPart::Text { text: "Let me delete that file.".into() },
        call,
        ScriptPart::Finish { finish_reason: FinishReason::ToolCalls, usage: None },
    ];
    let answer = vec![ScriptPart::Text { text: "Done.".into() }];
    ScriptedModel::new(vec![ask, answer]).expect("a script with two turns")
}

/// toolgate's state: the tools, the model and the secret that signs every
/// approval request (a forged or tampered approval is refused before
/// anything runs). `addr` is only used by [`toolgate_server::serve`]; an app
/// that serves the router itself may pass any address.
///
/// This is the stateless signed mode. For durable, single-use approvals set
/// [`ServerConfig::ledger`] (with `toolgate-store`'s SQLite or Postgres
/// store); the ledger's background work (server-side continuation, timers,
/// notifications) is started by [`toolgate_server::serve_listener`].
pub fn toolgate_state(addr: SocketAddr, model: SharedModel, secret: ApprovalSecret) -> std::io::Result<AppState> {
    let toolkit = toolkit().map_err(std::io::Error::other)?;
    let mut config = ServerConfig::new(addr, toolkit, secret);
    config.system = Some("You manage the user's files.".into());
    AppState::new(config, model)
}

/// The app's own routes with toolgate's merged in.
///
/// Merged at the root, so the approval page (`GET /`), its one-time links and
/// sign-in callbacks keep the paths they expect; the JSON APIs also work
/// nested under a prefix (`Router::nest("/toolgate", toolgate_server::router(state))`).
pub fn app(toolgate: AppState) -> Router {
    Router::new().route("/hello", get(hello)).merge(toolgate_server::router(toolgate))
}

async fn hello() -> &'static str {
    "hello from the app\n"
}

/// The model of [`scripted_model`] as toolgate's [`SharedModel`].
pub fn shared_scripted_model() -> SharedModel {
    Arc::new(scripted_model())
}
