//! LLM tool calling in which a person approves, denies or edits a tool call
//! before it runs.
//!
//! Tools declare whether they need approval: never, always, or a policy of the
//! input (sync or async, failing closed: a policy that errors or panics means
//! "ask"). When the model calls a gated tool, the engine does not run it: it
//! emits an approval request (`tool-approval-request`) and ends the turn. The
//! person's answer goes into the history as a `tool-approval-response`
//! (approved, possibly with an edited input, or denied with a reason), and on
//! the next request the engine resolves the answers **before** calling the
//! model: approved calls run, denied ones become `execution-denied` results, so
//! the model always sees a complete conversation. Histories are the Vercel AI
//! SDK v6 `ModelMessage` JSON, so an AI SDK app's stored chats load unchanged.
//!
//! # Example
//!
//! A tool that always asks, a scripted model that calls it, the approval
//! request read from the stream, a person's answer, and the call running on
//! the next request:
//!
//! ```
//! use futures::StreamExt;
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use serde_json::json;
//! use toolgate::approval::ApprovalOutcome;
//! use toolgate::protocol::{ToolApprovalResponsePart, ToolPart};
//! use toolgate::{
//!     ModelMessage, ScriptedModel, StreamPart, TextRequest, Tool, ToolError, Toolkit, generate_text, stream_text,
//! };
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct DeleteFile {
//!     path: String,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let toolkit = Toolkit::new([Tool::function::<DeleteFile>("delete_file")
//!     .description("Delete a file")
//!     .needs_approval(true) // or .approval_when(|input, _ctx| ...) / .policy(...)
//!     .handler(|input: DeleteFile, _ctx| async move {
//!         Ok::<_, ToolError>(json!({ "deleted": input.path }))
//!     })])?;
//!
//! // Any `LanguageModel` fits here (toolgate-openai, toolgate-anthropic, ...); this
//! // one plays a script: it calls `delete_file`, then answers once the call has a result.
//! let model = ScriptedModel::from_json(r#"{"turns": [
//!     [{"type": "tool-call", "toolCallId": "call-1", "toolName": "delete_file", "input": {"path": "notes.txt"}}],
//!     [{"type": "text", "text": "notes.txt is gone."}]
//! ]}"#)?;
//!
//! // 1. The model calls the gated tool: the stream carries an approval request instead of a result.
//! let mut history = vec![ModelMessage::user("Delete notes.txt")];
//! let mut stream = stream_text(&model, TextRequest::new(history.clone()).toolkit(toolkit.clone())).await?;
//! while let Some(part) = stream.next().await {
//!     if let StreamPart::ToolApprovalRequest { approval_id, tool_call, .. } = &part {
//!         println!("approve {} {} ({approval_id})?", tool_call.tool_name, tool_call.input);
//!     }
//! }
//! let result = stream.finish().await?; // the same `TextResult` as `generate_text` returns
//! let request = &result.approval_requests()[0];
//! assert_eq!(request.tool_call.tool_name, "delete_file");
//! assert!(result.steps[0].tool_results.is_empty(), "nothing ran");
//!
//! // 2. A person approves: the turn's messages and their answer go into the history.
//! history.extend(result.response_messages.iter().cloned());
//! history.push(ModelMessage::tool(vec![ToolPart::ToolApprovalResponse(ToolApprovalResponsePart {
//!     approval_id: request.approval_id.clone(),
//!     approved: true,
//!     reason: None,
//!     provider_executed: None,
//!     edited_input: None, // Some(json!({"path": "old.txt"})) runs the call with that input instead
//! })]));
//!
//! // 3. The next request runs the approved call before the model is called again.
//! let result = generate_text(&model, TextRequest::new(history).toolkit(toolkit)).await?;
//! assert_eq!(result.approvals[0].outcome, ApprovalOutcome::Approved { edited_input: None });
//! assert_eq!(result.preresolved[0].tool_name, "delete_file"); // its result, now in the history
//! assert_eq!(result.text(), "notes.txt is gone.");
//! # Ok(()) }
//! ```
//!
//! A client that is not trusted with the history gets signed approvals
//! ([`TextRequest::approval_signer`]: a forged or tampered approval is refused
//! before anything runs) or, better, a ledger ([`TextRequest::ledger`]) that
//! records every request and makes each answer a single-use claim.
//!
//! # Modules
//!
//! - [`tool`]: typed and dynamic tools, client- and provider-executed tools,
//!   approval policies that fail closed ([`Verdict`]: allow, ask or deny),
//!   the [`Toolkit`], and the request-wide [`CallGate`] that rules plug into.
//! - [`model`]: the [`LanguageModel`] trait providers implement, and
//!   [`ScriptedModel`] for tests and demos (the `toolgate-model` crate,
//!   re-exported: providers depend on it, not on the engine).
//! - [`generate_text`] / [`stream_text`]: the engine. It emits approval
//!   requests instead of running gated calls and, on the next request,
//!   resolves the answers before calling the model; [`TextResult::approvals`]
//!   records what happened to each.
//! - [`agent`]: sub-agents, an [`Agent`] used as a tool ([`Tool::agent`]),
//!   whose gated calls are asked and answered at the root and run exactly once.
//! - [`approval`]: HMAC signing that binds an approval to one exact call, and
//!   [`approval::lifecycle`], the states of an approval and the one
//!   [`Decision`].
//! - [`ledger`]: the durable approval ledger (single-use, expiring, audited
//!   approvals) and the storage trait it runs on ([`ledger::ApprovalStore`];
//!   `toolgate-store` implements it on SQLite and Postgres).
//! - [`prompt`]: the clean prompt a model receives (no approval parts, every
//!   result after its call).
//! - [`demo`]: the built-in demo toolkit of the CLI, the server and the examples.
//! - [`protocol`]: the AI SDK v6 compatible wire types (re-exported).
//!
//! The rest of the workspace builds on this crate: providers (`toolgate-openai`,
//! `toolgate-anthropic`, `toolgate-local`), the AI SDK UI stream and AG-UI
//! adapters (`toolgate-ui`, `toolgate-agui`), rules (`toolgate-policy`), the
//! axum server (`toolgate-server`) and the `toolgate` command (`toolgate-cli`).

pub mod approval;
pub mod demo;
mod engine;
mod error;
pub mod ledger;
pub use toolgate_model as model;
pub mod prompt;
pub mod receipt;
pub mod tool;

pub use toolgate_protocol as protocol;
pub use toolgate_protocol::{FinishReason, ModelMessage, StreamPart, ToolChoice, ToolResultOutput, Usage};

pub use approval::lifecycle::Decision;
pub use engine::agent;
pub use engine::{
    Agent, ApprovalRequest, CONTENT_TARGET, DEFAULT_MAX_STEPS, DEFAULT_TOOL_CONCURRENCY, IdGenerator, LineageStep,
    SPAN_TARGET, StepResult, StopCondition, StopFn, TextRequest, TextResult, TextStream, UNKNOWN_CALL_APPROVAL,
    generate_text, stream_text,
};
pub use error::{AvailableTool, EngineError};
pub use model::{DynLanguageModel, LanguageModel, ModelError, ModelStream, RecordingModel, ScriptedModel, SharedModel};
pub use tool::{
    ApprovalContext, ApprovalPolicy, CallGate, GateAction, GateCall, SharedMessages, Tool, ToolContext, ToolError,
    Toolkit, ToolkitError, Verdict,
};
