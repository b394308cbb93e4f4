//! The AG-UI 1.0 adapter for the toolgate engine (no IO: a server calls it).
//!
//! A client POSTs a [`RunAgentInput`]; the server answers with a stream of
//! [`Event`]s (`RUN_STARTED`, `TEXT_MESSAGE_*`, `TOOL_CALL_*`, `REASONING_*`,
//! snapshots, then `RUN_FINISHED` or `RUN_ERROR`), each sent as
//! [`Event::to_sse`]. The JSON matches what `@ag-ui/core` 1.0.0 validates.
//!
//! **Approvals are interrupts.** A gated tool call pauses the run:
//! `MESSAGES_SNAPSHOT`, `STATE_SNAPSHOT` (with toolgate's pending list under
//! [`STATE_KEY`]) and `RUN_FINISHED {outcome: {type: "interrupt", interrupts:
//! [{id, reason: "tool_call", toolCallId, message, responseSchema, metadata:
//! {toolName, input}}]}}`. The interrupt id is the engine's approval id. The
//! client continues with a new run carrying `resume: [{interruptId, status,
//! payload: {approved, editedArgs?, reason?}}]` and the state it was sent.
//! The adapter keeps no state: [`resume`] describes the exactly-once and
//! fail-closed rules, [`content`] how outcomes are written as text. A server
//! that keeps threads records each run's messages with a [`ThreadRecorder`]
//! and checks the next run's against them with [`check_history`]
//! ([`thread`]).
//!
//! ```no_run
//! # use futures::StreamExt;
//! # async fn handler(body: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
//! use toolgate::{ScriptedModel, TextRequest, demo};
//! use toolgate_agui::{EncoderOptions, RunAgentInput, run_events};
//!
//! let input = RunAgentInput::from_json(body)?; // on error: send `Event::run_error(e.to_string(), e.code())`
//! let model = ScriptedModel::from_file("examples/request-approval/script.json")?;
//! let events = run_events(model, input, EncoderOptions::default(), |messages| {
//!     TextRequest::new(messages).toolkit(demo::toolkit())
//! });
//! let mut events = std::pin::pin!(events);
//! while let Some(event) = events.next().await {
//!     print!("{}", event.to_sse());
//! }
//! # Ok(()) }
//! ```
//!
//! The pieces can also be used one by one: [`prepare_run`] (input → engine
//! history), [`EventEncoder`] (stream parts → events), [`engine_error_event`].

pub mod content;
pub mod convert;
pub mod encode;
pub mod error;
pub mod events;
pub mod input;
pub mod messages;
pub mod resume;
mod run;
pub mod thread;
mod transcript;

pub use encode::{EncoderOptions, EventEncoder, MODEL_ERROR_CODE};
pub use error::{AguiError, HISTORY_MISMATCH_CODE, InputError, ResumeError, engine_error_event};
pub use events::{
    APPROVAL_EVENT, Event, Interrupt, RunOutcome, SUBAGENT_PROGRESS_EVENT, TOOL_CALL_REASON, WARNING_EVENT,
    approval_response_schema,
};
pub use input::{Context, ResumeEntry, ResumeStatus, RunAgentInput, Tool};
pub use messages::{Content, ContentPart, Message};
pub use resume::{Decision, PENDING_FIELD, PendingApproval, Resolution, STATE_KEY};
pub use run::{PreparedRun, prepare_run, run_events};
pub use thread::{HistoryMismatch, ThreadRecorder, check_history};
