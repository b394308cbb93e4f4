//! `generate_text` and `stream_text`: run a model with tools and approvals.
//!
//! One call goes through three stages:
//! 1. **Prepare** (nothing runs yet): normalize older approval encodings,
//!    collect approval answers anywhere in the history, and check them all
//!    (structure, schemas and signatures first, then policies) and the
//!    prompt they lead to. With a ledger, the history's results are checked
//!    against it and the answers settled as single-use claims. Any problem
//!    is an [`EngineError`] and nothing executes. The work is linear in the
//!    size of the history.
//! 2. **Pre-resolve**: before the model is called, approved calls run (with
//!    the person's edit, if any), denied and unanswered ones become
//!    `execution-denied` results, provider-executed answers are forwarded.
//!    The results form one tool message, first in `response_messages`; in
//!    the stream they come before the first `start-step`.
//! 3. **Steps**: call the model, run automatic calls, issue approval requests
//!    for gated ones, and loop while every local call got a result, up to
//!    `max_steps` or a stop condition. A pending approval or client-executed
//!    call ends the loop with the model's finish reason (`tool-calls`).

pub mod agent;
mod execute;
mod ledger;
mod nested;
mod request;
mod result;
mod run;
mod step;
mod stream;

use std::sync::Arc;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use toolgate_protocol::{ModelMessage, ToolPart, ToolResultOutput, normalize_approvals};
use tracing::Instrument;

pub use agent::{Agent, LineageStep};
pub use execute::{CONTENT_TARGET, SPAN_TARGET};
pub use request::{DEFAULT_MAX_STEPS, DEFAULT_TOOL_CONCURRENCY, IdGenerator, StopCondition, StopFn, TextRequest};
pub use result::{ApprovalRequest, StepResult, TextResult};
pub use step::UNKNOWN_CALL_APPROVAL;
pub use stream::TextStream;

use crate::EngineError;
use crate::approval::{ResolveOptions, Resolved, collect, lifecycle, resolve};
use crate::model::LanguageModel;
use crate::prompt::check_results;
use crate::tool::SharedMessages;
use run::Resumed;
pub(crate) use run::{Prepared, drive};
use stream::Emitter;

/// Runs the model to completion and returns what it produced.
pub async fn generate_text<M: LanguageModel>(model: M, request: TextRequest) -> Result<TextResult, EngineError> {
    let span = tracing::info_span!("generate_text", model = model.model_id());
    async move {
        let prepared = prepare(request).await?;
        run::drive(&model, prepared, false, CancellationToken::new(), Emitter::silent()).await
    }
    .instrument(span)
    .await
}

/// Runs the model as a stream of parts. Errors in the history are returned
/// here, before anything runs; a model failure later ends the stream with an
/// `error` part and makes [`TextStream::finish`] return it.
pub async fn stream_text<'a, M: LanguageModel + 'a>(
    model: M,
    request: TextRequest,
) -> Result<TextStream<'a>, EngineError> {
    let span = tracing::info_span!("stream_text", model = model.model_id());
    let prepared = prepare(request).instrument(span.clone()).await?;
    let cancellation = CancellationToken::new();
    let token = cancellation.clone();
    Ok(TextStream::new(cancellation, move |emitter| {
        async move { run::drive(&model, prepared, true, token, emitter).await }.instrument(span).boxed()
    }))
}

/// Stage 1: everything that can fail before anything runs (for a resumed
/// sub-agent too: see [`agent`]).
async fn prepare(mut request: TextRequest) -> Result<Prepared, EngineError> {
    let (history, resumes) = nested::split(normalize_approvals(std::mem::take(&mut request.messages))?)?;
    let history = Arc::new(history);
    let (plan, warnings) = settled_plan(&request, &history, &resumes).await?;
    let resumed = resumed_calls(&history, &resumes, request.toolkit.as_ref())?;
    let mut prepared_resumes = Vec::with_capacity(resumes.len());
    for ((call, tool), resume) in resumed.into_iter().zip(resumes) {
        let run = agent::prepare_resume(&request, tool, call, resume.answers).await?;
        prepared_resumes.push(Resumed { call: call.clone(), tool: tool.clone(), run });
    }
    Ok(Prepared { request, history, plan, warnings, resumes: prepared_resumes })
}

/// The history's answers resolved ([`resolve`]) and, with a ledger, settled
/// against it ([`lifecycle::claim::settle`]). A claim whose verdict rested on
/// a history that moved before it was written is resolved (judged) again,
/// at most [`lifecycle::direct::MAX_ADMITS`] times; then nothing runs and
/// the request fails (`store_unavailable`: try again).
async fn settled_plan(
    request: &TextRequest,
    history: &Arc<Vec<ModelMessage>>,
    resumes: &[nested::Resume],
) -> Result<(crate::approval::Plan, Vec<toolgate_protocol::StreamPart>), EngineError> {
    let messages = SharedMessages::new(Arc::clone(history));
    for _ in 0..lifecycle::direct::MAX_ADMITS {
        let collected = collect(history)?;
        let options = ResolveOptions {
            toolkit: request.toolkit.as_ref(),
            signer: request.signer.as_ref(),
            hold_batch: request.hold_batch_for_approval,
            caller: request.caller(),
            ledger: request.ledger.is_some(),
        };
        let plan = resolve(collected, &messages, options).await?;
        let resumed = resumed_calls(history, resumes, request.toolkit.as_ref())?;
        check_prompt_after(history, &plan.actions, resumed.iter().map(|(call, _)| *call))?;
        let Some(ledger) = &request.ledger else { return Ok((plan, Vec::new())) };
        lifecycle::verify::verify_results(history, ledger).await?;
        let judge = lifecycle::claim::ClaimJudge { caller: request.caller(), messages: &messages };
        if let Some(settled) = lifecycle::claim::settle(plan, ledger, request.toolkit.as_ref(), judge).await? {
            return Ok(settled);
        }
    }
    let detail = "the history kept changing while the approved calls were claimed; try again".to_owned();
    Err(crate::ledger::StoreError::Unavailable(detail).into())
}

/// The agent calls of the history that `resumes` name, with their tools.
fn resumed_calls<'h, 't>(
    history: &'h [ModelMessage],
    resumes: &[nested::Resume],
    toolkit: Option<&'t crate::Toolkit>,
) -> Result<Vec<(&'h toolgate_protocol::ToolCallPart, &'t crate::Tool)>, EngineError> {
    if resumes.is_empty() {
        return Ok(Vec::new());
    }
    let calls: std::collections::HashMap<&str, &toolgate_protocol::ToolCallPart> = history
        .iter()
        .filter_map(|message| match message {
            ModelMessage::Assistant(assistant) => Some(assistant.part_slice()),
            _ => None,
        })
        .flatten()
        .filter_map(|part| match part {
            toolgate_protocol::AssistantPart::ToolCall(call) => Some((call.tool_call_id.as_str(), call)),
            _ => None,
        })
        .collect();
    resumes
        .iter()
        .map(|resume| {
            let call = calls.get(resume.call_id.as_str());
            let tool = call.and_then(|call| toolkit.and_then(|toolkit| toolkit.get(&call.tool_name)));
            match (call, tool) {
                (Some(call), Some(tool)) if tool.is_agent() => Ok((*call, tool)),
                _ => Err(EngineError::ApprovalMismatch {
                    approval_id: resume.answers.first().map(|answer| answer.approval_id.clone()).unwrap_or_default(),
                    detail: format!("it was issued below the call `{}`, which is no agent call here", resume.call_id),
                }),
            }
        })
        .collect()
}

/// Fails if the prompt would still miss tool results once the plan (and the resumed agent calls) are carried out.
fn check_prompt_after<'c>(
    history: &[ModelMessage],
    plan: &'c [Resolved],
    resumed: impl Iterator<Item = &'c toolgate_protocol::ToolCallPart>,
) -> Result<(), EngineError> {
    let placeholders: Vec<ToolPart> = plan
        .iter()
        .filter(|resolved| !matches!(resolved, Resolved::ForwardDenial { .. }))
        .map(Resolved::call)
        .chain(resumed)
        .map(|call| ToolPart::ToolResult(execute::result_part(call, ToolResultOutput::denied(None))))
        .collect();
    let planned = if placeholders.is_empty() { Vec::new() } else { vec![ModelMessage::tool(placeholders)] };
    check_results(history, &planned)
}
