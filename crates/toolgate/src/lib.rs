//! toolgate: LLM tool calling in which a person approves, denies or edits a
//! tool call before it runs.
//!
//! - [`tool`]: typed and dynamic tools, client- and provider-executed tools,
//!   approval policies that fail closed.
//! - [`model`]: the [`LanguageModel`] trait providers implement, and
//!   [`ScriptedModel`] for tests and demos.
//! - [`generate_text`] / [`stream_text`]: the engine. It emits approval
//!   requests instead of running gated calls and, on the next request,
//!   resolves the answers before calling the model.
//! - [`approval`]: HMAC signing that binds an approval to one exact call.
//! - [`ledger`]: the durable approval ledger (single-use, expiring, audited
//!   approvals) and the storage trait it runs on.
//! - [`protocol`]: the AI SDK v6 compatible wire types (re-exported).
//!
//! ```no_run
//! use toolgate::{Tool, Toolkit, TextRequest, ScriptedModel, ModelMessage, generate_text};
//! use serde::Deserialize;
//! use schemars::JsonSchema;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct DeleteFile { path: String }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let toolkit = Toolkit::new([Tool::function::<DeleteFile>("delete_file")
//!     .description("Delete a file")
//!     .needs_approval(true)
//!     .handler(|input: DeleteFile, _ctx| async move {
//!         Ok::<_, toolgate::ToolError>(serde_json::json!({ "deleted": input.path }))
//!     })])?;
//! let model = ScriptedModel::from_file("examples/request-approval/script.json")?;
//! let result = generate_text(&model, TextRequest::new(vec![ModelMessage::user("delete notes.txt")]).toolkit(toolkit)).await?;
//! for request in result.approval_requests() {
//!     println!("approve {} for {}?", request.approval_id, request.tool_call.tool_name);
//! }
//! # Ok(()) }
//! ```

pub mod approval;
pub mod demo;
mod engine;
mod error;
pub mod ledger;
pub mod model;
pub mod prompt;
pub mod tool;

pub use toolgate_protocol as protocol;
pub use toolgate_protocol::{FinishReason, ModelMessage, StreamPart, ToolChoice, ToolResultOutput, Usage};

pub use approval::lifecycle::Decision;
pub use engine::{
    ApprovalRequest, DEFAULT_MAX_STEPS, DEFAULT_TOOL_CONCURRENCY, IdGenerator, StepResult, StopCondition, StopFn,
    TextRequest, TextResult, TextStream, UNKNOWN_CALL_APPROVAL, generate_text, stream_text,
};
pub use error::{AvailableTool, EngineError};
pub use model::{DynLanguageModel, LanguageModel, ModelError, ModelStream, RecordingModel, ScriptedModel, SharedModel};
pub use tool::{
    ApprovalContext, ApprovalPolicy, CallGate, GateAction, GateCall, SharedMessages, Tool, ToolContext, ToolError,
    Toolkit, ToolkitError, Verdict,
};
