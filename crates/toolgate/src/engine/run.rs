//! Stages 2 and 3 of an engine call: pre-resolution, then the step loop.
//!
//! The prompt is built once, by moving the history (and the pre-resolved
//! results) into it, and it is one shared vector: each step's model request
//! and the step's policies and handlers get handles to it, and the next step
//! appends the step's messages to it in place once those handles are gone.
//! So neither a step nor its model request copies the conversation.
//!
//! Every stream ends with `finish`. A failure after the stream started (a
//! model error, or a prompt that cannot be built) emits `error` first, and
//! the returned error keeps every message produced so far, including the
//! results of tools that already ran.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use toolgate_protocol::{
    FinishReason, ModelMessage, ModelRequest, Prompt, StreamPart, ToolCallPart, ToolPart, ToolResultOutput, Usage,
};

use super::agent::Nesting;
use super::execute::{ToolOutcome, ToolRun, Work, execute_all, result_part, stored_part};
use super::ledger::{direct_events, record_outcomes};
use super::step::{StepContext, run_step};
use super::stream::Emitter;
use super::{ApprovalRequest, StepResult, TextRequest, TextResult};
use crate::EngineError;
use crate::approval::lifecycle::held::with_renewed_leases;
use crate::approval::{Plan, Resolved};
use crate::model::LanguageModel;
use crate::prompt::CallIds;
use crate::tool::SharedMessages;

/// A checked request, ready to run.
pub(crate) struct Prepared {
    pub request: TextRequest,
    pub history: Arc<Vec<ModelMessage>>,
    pub plan: Plan,
    /// Warnings from settling answers against the ledger, streamed first.
    pub warnings: Vec<StreamPart>,
    /// Agent calls to resume with answers to approvals below them (see [`super::agent`]).
    pub resumes: Vec<Resumed>,
}

/// An agent call to resume, run with the pre-resolved calls.
pub(crate) struct Resumed {
    pub call: ToolCallPart,
    pub tool: crate::Tool,
    /// The sub-run, prepared (`None`: it finished already; the run gives its stored output).
    pub run: Option<super::agent::PreparedSubRun>,
}

/// Runs stages 2 and 3, writing stream parts to `out`.
pub(crate) async fn drive<M: LanguageModel>(
    model: &M,
    prepared: Prepared,
    streaming: bool,
    cancellation: CancellationToken,
    out: Emitter,
) -> Result<TextResult, EngineError> {
    let Prepared { request, history, plan: Plan { actions, approvals, .. }, warnings, resumes } = prepared;
    out.emit(StreamPart::Start).await;
    for warning in warnings {
        out.emit(warning).await;
    }
    let (preresolved, mut response_messages, paused) =
        preresolve(actions, resumes, &request, &cancellation, &out).await;
    if !paused.is_empty() {
        // A resumed sub-agent paused again: its new requests end this call before any model step.
        return Ok(paused_again(paused, preresolved, approvals, response_messages, &out).await);
    }
    // The plan's views of the history are gone: it is taken, not copied (unless a handler kept a view).
    let mut unprompted = Arc::try_unwrap(history).unwrap_or_else(|shared| shared.as_ref().clone());
    unprompted.extend(response_messages.iter().cloned());

    let system = request.system.as_ref().map(|system| ModelMessage::system(system.clone()));
    let after_system = usize::from(system.is_some());
    let mut prompt = Arc::new(Vec::from_iter(system));
    let mut calls = CallIds::default();
    let mut steps: Vec<StepResult> = Vec::new();
    let mut total_usage = Usage::default();
    loop {
        if let Err(error) = calls.append(std::mem::take(&mut unprompted), Arc::make_mut(&mut prompt)) {
            end_with_error(&out, error.to_string(), total_usage).await;
            return Err(EngineError::Incomplete { source: Box::new(error), response_messages });
        }
        let model_request = model_request(&request, Prompt::from(Arc::clone(&prompt)));
        out.emit(StreamPart::StartStep).await;
        let context = StepContext {
            request: &request,
            toolkit: request.toolkit.as_ref(),
            messages: SharedMessages::from_index(Arc::clone(&prompt), after_system),
            cancellation: &cancellation,
            step_number: steps.len(),
            streaming,
        };
        let step = run_step(model, model_request, context, &out).await;
        unprompted.extend(step.messages.iter().cloned());
        response_messages.extend(step.messages);
        total_usage = total_usage + step.result.usage;
        out.emit(StreamPart::FinishStep { finish_reason: step.result.finish_reason, usage: step.result.usage }).await;
        if let Some(failure) = step.failure {
            tracing::error!(error = %failure, "step failed");
            end_with_error(&out, failure.to_string(), total_usage).await;
            return Err(EngineError::Incomplete { source: Box::new(failure), response_messages });
        }
        if let Some(source) = step.error {
            tracing::warn!(error = %source, "model step failed");
            end_with_error(&out, source.to_string(), total_usage).await;
            return Err(EngineError::Model { source, response_messages });
        }
        let continues = every_local_call_answered(&step.result);
        steps.push(step.result);
        if !continues || steps.len() >= request.max_steps || request.stop_when.iter().any(|c| c.is_met(&steps)) {
            break;
        }
    }
    let finish_reason = steps.last().map_or(FinishReason::Stop, |step| step.finish_reason);
    out.emit(StreamPart::Finish { finish_reason, total_usage }).await;
    Ok(TextResult { preresolved, approvals, steps, response_messages, finish_reason, total_usage })
}

/// The result of a call whose resumed sub-agents paused on new approvals:
/// their requests surface as one step's (no model call), after the results.
async fn paused_again(
    paused: Vec<ApprovalRequest>,
    preresolved: Vec<toolgate_protocol::ToolResultPart>,
    approvals: Vec<crate::approval::ResolvedApproval>,
    mut response_messages: Vec<ModelMessage>,
    out: &Emitter,
) -> TextResult {
    out.emit(StreamPart::StartStep).await;
    let content = super::nested::surface(&paused, out).await;
    response_messages.push(ModelMessage::Assistant(toolgate_protocol::AssistantMessage {
        content: toolgate_protocol::AssistantContent::Parts(content.clone()),
        provider_options: None,
    }));
    let usage = Usage::default();
    out.emit(StreamPart::FinishStep { finish_reason: FinishReason::ToolCalls, usage }).await;
    out.emit(StreamPart::Finish { finish_reason: FinishReason::ToolCalls, total_usage: usage }).await;
    let step = StepResult {
        step_number: 0,
        content,
        tool_results: Vec::new(),
        approval_requests: paused,
        client_tool_calls: Vec::new(),
        held_tool_calls: Vec::new(),
        finish_reason: FinishReason::ToolCalls,
        usage,
    };
    TextResult {
        preresolved,
        approvals,
        steps: vec![step],
        response_messages,
        finish_reason: FinishReason::ToolCalls,
        total_usage: usage,
    }
}

/// Ends the stream with `error` and `finish`.
async fn end_with_error(out: &Emitter, message: String, total_usage: Usage) {
    out.emit(StreamPart::Error { error: message }).await;
    out.emit(StreamPart::Finish { finish_reason: FinishReason::Error, total_usage }).await;
}

/// True when the step called local tools, each of them has a result, and no
/// approval (local or provider-issued) is pending.
fn every_local_call_answered(step: &StepResult) -> bool {
    let local_calls = step.tool_calls().filter(|call| !call.is_provider_executed()).count();
    local_calls > 0
        && local_calls == step.tool_results.len()
        && step.approval_requests.is_empty()
        && step.finish_reason.allows_tool_execution()
}

fn model_request(request: &TextRequest, prompt: Prompt) -> ModelRequest {
    ModelRequest {
        prompt,
        tools: request.toolkit.as_ref().map(|toolkit| toolkit.specs()).unwrap_or_default(),
        tool_choice: request.tool_choice.clone(),
        max_output_tokens: request.max_output_tokens,
        temperature: request.temperature,
        stop_sequences: Vec::new(),
        provider_options: request.provider_options.clone(),
    }
}

/// Stage 2: carries out the plan, then the resumed agent calls, emitting every
/// outcome in call order; returns the results, the tool message holding them,
/// and the requests of resumed sub-agents that paused again.
async fn preresolve(
    plan: Vec<Resolved>,
    resumes: Vec<Resumed>,
    request: &TextRequest,
    cancellation: &CancellationToken,
    out: &Emitter,
) -> (Vec<toolgate_protocol::ToolResultPart>, Vec<ModelMessage>, Vec<ApprovalRequest>) {
    if plan.is_empty() && resumes.is_empty() {
        return (Vec::new(), Vec::new(), Vec::new());
    }
    let mut work = Vec::with_capacity(plan.len());
    let mut claimed: Vec<Option<&str>> = Vec::new();
    // Per run, whether it only reads back a sub-agent's stored answer (its call ran, and is on record, already).
    let mut replayed: Vec<bool> = Vec::new();
    for resolved in &plan {
        let call = resolved.call();
        let action = match resolved {
            Resolved::Run { .. } => "run",
            Resolved::Stored { .. } => "stored outcome",
            Resolved::Deny { .. } => "deny",
            Resolved::ForwardDenial { .. } => "forward denial",
        };
        tracing::info!(tool = %call.tool_name, tool_call_id = %call.tool_call_id, action, "resolving approval answer");
        work.push(match resolved {
            Resolved::Run { call, tool, messages, approval_id } => {
                claimed.push(approval_id.as_deref());
                replayed.push(false);
                let nesting = tool.is_agent().then(|| Nesting::fresh(request));
                Work::Run(ToolRun { call: call.clone(), tool: tool.clone(), messages: messages.clone(), nesting })
            }
            Resolved::Stored { call, output } => Work::Decided(stored_part(call, output)),
            Resolved::Deny { call, reason } => Work::Decided(StreamPart::ToolOutputDenied {
                tool_call_id: call.tool_call_id.clone(),
                tool_name: call.tool_name.clone(),
                provider_executed: None,
                reason: reason.clone(),
            }),
            Resolved::ForwardDenial { call, response } => Work::Decided(StreamPart::ToolOutputDenied {
                tool_call_id: call.tool_call_id.clone(),
                tool_name: call.tool_name.clone(),
                provider_executed: Some(true),
                reason: response.reason.clone(),
            }),
        });
    }
    for resumed in resumes {
        claimed.push(None);
        replayed.push(resumed.run.is_none());
        let nesting = Arc::new(Nesting { parent: request.clone(), prepared: std::sync::Mutex::new(resumed.run) });
        let messages = SharedMessages::default();
        work.push(Work::Run(ToolRun { call: resumed.call, tool: resumed.tool, messages, nesting: Some(nesting) }));
    }
    let execution = execute_all(work, request.tool_concurrency, cancellation, out);
    let outcomes = match request.ledger.as_ref().filter(|_| claimed.iter().any(Option::is_some)) {
        Some(ledger) => with_renewed_leases(ledger, execution).await,
        None => execution.await,
    };
    if let Some(ledger) = &request.ledger {
        let finished: Vec<(&str, &ToolOutcome)> =
            claimed.iter().zip(&outcomes).filter_map(|(id, outcome)| id.map(|id| (id, outcome))).collect();
        // A held call that its policy now lets run has no approval of its own; a sub-agent that paused again
        // has not finished, and one read back from its stored answer did not run now.
        let unclaimed: Vec<&ToolOutcome> = claimed
            .iter()
            .zip(&replayed)
            .zip(&outcomes)
            .filter(|((id, replayed), outcome)| id.is_none() && !**replayed && outcome.paused().is_none())
            .map(|(_, outcome)| outcome)
            .collect();
        let direct = direct_events(request, ledger, &unclaimed, &[]);
        if let Some(warning) = record_outcomes(ledger, &finished, &direct).await {
            out.emit(warning).await;
        }
    }
    let mut outcomes = outcomes.into_iter();
    let mut results = Vec::new();
    let mut parts = Vec::new();
    let mut paused = Vec::new();
    let mut take = |outcome: ToolOutcome, results: &mut Vec<_>, parts: &mut Vec<_>| match outcome.paused() {
        Some(requests) => paused.extend(requests.iter().cloned()),
        None => {
            let part = outcome.to_result_part();
            results.push(part.clone());
            parts.push(ToolPart::ToolResult(part));
        }
    };
    for resolved in plan {
        match resolved {
            Resolved::Run { .. } => {
                if let Some(outcome) = outcomes.next() {
                    take(outcome, &mut results, &mut parts);
                }
            }
            Resolved::Stored { call, output } => {
                let part = result_part(&call, output);
                results.push(part.clone());
                parts.push(ToolPart::ToolResult(part));
            }
            Resolved::Deny { call, reason } => {
                let part = result_part(&call, ToolResultOutput::denied(reason));
                results.push(part.clone());
                parts.push(ToolPart::ToolResult(part));
            }
            Resolved::ForwardDenial { response, .. } => parts.push(ToolPart::ToolApprovalResponse(response)),
        }
    }
    for outcome in outcomes {
        take(outcome, &mut results, &mut parts);
    }
    let messages = if parts.is_empty() { Vec::new() } else { vec![ModelMessage::tool(parts)] };
    (results, messages, paused)
}
