//! One model step: call the model, follow its parts, then act on its tool calls.
//!
//! Each complete tool call is classified when it arrives:
//! - *invalid* (unknown tool, input that is not JSON or fails the schema):
//!   a `tool-error` result at once, nothing runs;
//! - *provider-executed*: nothing runs here; the provider's result or
//!   approval request follows in the stream;
//! - *client-executed*: handed back to the caller;
//! - *local*: the approval policy decides between *automatic*, *gated* and
//!   *denied* (an `execution-denied` result naming the policy's reason at
//!   once; no person is asked). With a signer or a ledger, a local call whose input has
//!   no exact canonical form (see [`crate::approval::canonical_json`]) is
//!   invalid: nothing could be bound to it.
//!
//! After the model finishes, the gated calls' approval requests are settled
//! first: with a ledger they are recorded `pending` only while the history
//! their verdicts rested on stands (a call judged again when it moved may
//! now run or be refused instead; see [`crate::approval::lifecycle::direct`]).
//! Then automatic calls run (only when the finish reason is `stop` or
//! `tool-calls`; otherwise they get a "not run" error result), unless the
//! batch is held for a pending approval. Then every gated call's approval
//! request is streamed (after the step's results), so a decision can still be
//! made even when the stream was cut; with a signer, each request's signature
//! also covers the calls held with it, so only those can run later.

use std::collections::HashMap;

use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolgate_protocol::{
    AssistantContent, AssistantMessage, AssistantPart, FinishReason, ModelContent, ModelMessage, ModelRequest,
    ModelResponse, ModelStreamPart, ModelToolCall, ModelToolResult, ReasoningPart, StreamPart, TextPart,
    ToolApprovalRequestPart, ToolCallInfo, ToolCallPart, ToolResultOutput, ToolResultPart, Usage,
};

use super::agent::Nesting;
use super::execute::{ToolOutcome, ToolRun, Work, error_part, execute_all, result_part};
use super::ledger::{direct_events, record_issued, record_outcomes};
use super::stream::Emitter;
use super::{ApprovalRequest, StepResult, TextRequest};
use crate::approval::lifecycle::direct::{HISTORY_CHURN_REASON, Judged, MAX_ADMITS, judge};
use crate::approval::{HeldCalls, SignedCall, canonical_json, unsigned_approval_id};
use crate::ledger::HistoryGuard;
use crate::model::{LanguageModel, ModelError, ModelStream};
use crate::tool::{ApprovalContext, GateAction, SharedMessages, Tool, Toolkit, Verdict};

/// Why a person is asked about a provider-executed call.
const PROVIDER_APPROVAL_REASON: &str = "the model provider asked for approval";

/// The `warning` code of a provider approval request naming a call the provider never made.
pub const UNKNOWN_CALL_APPROVAL: &str = "tool_call_not_found_for_approval";

/// What a step needs besides the model.
pub(crate) struct StepContext<'a> {
    pub request: &'a TextRequest,
    pub toolkit: Option<&'a Toolkit>,
    /// The conversation so far (no system prompt), for policies and handlers.
    pub messages: SharedMessages,
    pub cancellation: &'a CancellationToken,
    pub step_number: usize,
    pub streaming: bool,
}

/// A finished step.
pub(crate) struct StepOutput {
    pub result: StepResult,
    pub messages: Vec<ModelMessage>,
    pub error: Option<ModelError>,
    /// A failure of the engine itself (the ledger could not record the step's approval requests).
    pub failure: Option<crate::EngineError>,
}

enum CallClass {
    Invalid(String),
    Denied(String),
    Provider,
    Client,
    /// Run by toolgate; `ask` says why a person must approve first (none: it runs).
    Local {
        tool: Tool,
        ask: Option<String>,
        /// Who must approve, when a rule named approvers.
        route: Option<crate::approval::lifecycle::Route>,
        /// The history a question rested on ([`Judged::guards`]): it is issued only while that stands.
        guards: Vec<HistoryGuard>,
    },
}

struct Call {
    part: ToolCallPart,
    class: CallClass,
    dynamic: Option<bool>,
}

#[derive(Default)]
struct Transcript {
    content: Vec<AssistantPart>,
    open_blocks: HashMap<String, usize>,
    calls: Vec<Call>,
    provider_approvals: Vec<ApprovalRequest>,
    finish: Option<(FinishReason, Usage)>,
}

impl Transcript {
    fn append(&mut self, id: &str, delta: &str, reasoning: bool) {
        let index = *self.open_blocks.entry(id.to_owned()).or_insert_with(|| {
            self.content.push(if reasoning {
                AssistantPart::Reasoning(ReasoningPart { text: String::new(), provider_options: None })
            } else {
                AssistantPart::Text(TextPart::new(""))
            });
            self.content.len() - 1
        });
        if let Some(AssistantPart::Text(TextPart { text, .. }) | AssistantPart::Reasoning(ReasoningPart { text, .. })) =
            self.content.get_mut(index)
        {
            text.push_str(delta);
        }
    }

    fn call_info(&self, tool_call_id: &str) -> Option<ToolCallInfo> {
        self.calls.iter().find(|call| call.part.tool_call_id == tool_call_id).map(info)
    }
}

/// Runs one step; see the module docs.
pub(crate) async fn run_step<M: LanguageModel>(
    model: &M,
    model_request: ModelRequest,
    context: StepContext<'_>,
    out: &Emitter,
) -> StepOutput {
    let mut transcript = Transcript::default();
    let mut error = None;
    match open_model_stream(model, model_request, &context).await {
        Err(failure) => error = Some(failure),
        Ok(mut parts) => {
            while let Some(part) = parts.next().await {
                match part {
                    Ok(part) => follow(part, &mut transcript, &context, out).await,
                    Err(failure) => {
                        error = Some(failure);
                        break;
                    }
                }
            }
            if error.is_none() && transcript.finish.is_none() {
                error =
                    Some(ModelError::StreamInterrupted { message: "the stream ended without a finish part".into() });
            }
        }
    }
    let (finish_reason, usage) = match (&error, transcript.finish) {
        (None, Some(finish)) => finish,
        (_, finish) => (FinishReason::Error, finish.map(|(_, usage)| usage).unwrap_or_default()),
    };
    act_on_calls(transcript, finish_reason, usage, &context, out).await.with_error(error)
}

impl StepOutput {
    fn with_error(mut self, error: Option<ModelError>) -> Self {
        self.error = error;
        self
    }
}

async fn open_model_stream<M: LanguageModel>(
    model: &M,
    request: ModelRequest,
    context: &StepContext<'_>,
) -> Result<ModelStream, ModelError> {
    if context.streaming {
        model.stream(request).await
    } else {
        let response = model.generate(request).await?;
        Ok(Box::pin(futures::stream::iter(response_parts(response).into_iter().map(Ok))))
    }
}

/// The parts a streamed response with the same content would have
/// (block ids are the content positions).
fn response_parts(response: ModelResponse) -> Vec<ModelStreamPart> {
    let mut parts = Vec::with_capacity(response.content.len() + 1);
    for (position, content) in response.content.into_iter().enumerate() {
        let id = position.to_string();
        match content {
            ModelContent::Text { text } => {
                parts.push(ModelStreamPart::TextStart { id: id.clone() });
                parts.push(ModelStreamPart::TextDelta { id: id.clone(), delta: text });
                parts.push(ModelStreamPart::TextEnd { id });
            }
            ModelContent::Reasoning { text } => {
                parts.push(ModelStreamPart::ReasoningStart { id: id.clone() });
                parts.push(ModelStreamPart::ReasoningDelta { id: id.clone(), delta: text });
                parts.push(ModelStreamPart::ReasoningEnd { id });
            }
            ModelContent::ToolCall(call) => parts.push(ModelStreamPart::ToolCall(call)),
            ModelContent::ToolApprovalRequest { approval_id, tool_call_id } => {
                parts.push(ModelStreamPart::ToolApprovalRequest { approval_id, tool_call_id })
            }
            ModelContent::ToolResult(result) => parts.push(ModelStreamPart::ToolResult(result)),
        }
    }
    parts.push(ModelStreamPart::Finish {
        finish_reason: response.finish_reason,
        usage: response.usage,
        provider_metadata: response.provider_metadata,
    });
    parts
}

async fn follow(part: ModelStreamPart, transcript: &mut Transcript, context: &StepContext<'_>, out: &Emitter) {
    let emitted = match part {
        ModelStreamPart::TextStart { id } => StreamPart::TextStart { id },
        ModelStreamPart::TextDelta { id, delta } => {
            transcript.append(&id, &delta, false);
            StreamPart::TextDelta { id, text: delta }
        }
        ModelStreamPart::TextEnd { id } => StreamPart::TextEnd { id },
        ModelStreamPart::ReasoningStart { id } => StreamPart::ReasoningStart { id },
        ModelStreamPart::ReasoningDelta { id, delta } => {
            transcript.append(&id, &delta, true);
            StreamPart::ReasoningDelta { id, text: delta }
        }
        ModelStreamPart::ReasoningEnd { id } => StreamPart::ReasoningEnd { id },
        ModelStreamPart::ToolInputStart { id, tool_name, provider_executed } => {
            let dynamic = is_dynamic(context.toolkit, &tool_name, provider_executed == Some(true));
            StreamPart::ToolInputStart { id, tool_name, provider_executed, dynamic }
        }
        ModelStreamPart::ToolInputDelta { id, delta } => StreamPart::ToolInputDelta { id, delta },
        ModelStreamPart::ToolInputEnd { id } => StreamPart::ToolInputEnd { id },
        ModelStreamPart::ToolCall(call) => {
            let call = classify(call, context).await;
            out.emit(StreamPart::ToolCall(info(&call))).await;
            match &call.class {
                CallClass::Invalid(error) => out.emit(error_part(&call.part, Value::String(error.clone()))).await,
                CallClass::Denied(reason) => {
                    out.emit(StreamPart::ToolOutputDenied {
                        tool_call_id: call.part.tool_call_id.clone(),
                        tool_name: call.part.tool_name.clone(),
                        provider_executed: None,
                        reason: Some(reason.clone()),
                    })
                    .await
                }
                CallClass::Provider | CallClass::Client | CallClass::Local { .. } => {}
            }
            transcript.content.push(AssistantPart::ToolCall(call.part.clone()));
            transcript.calls.push(call);
            return;
        }
        ModelStreamPart::ToolApprovalRequest { approval_id, tool_call_id } => {
            let Some(tool_call) = transcript.call_info(&tool_call_id) else {
                let message = format!("Tool call \"{tool_call_id}\" not found for approval request \"{approval_id}\".");
                tracing::warn!(%approval_id, %tool_call_id, "provider approval request for an unknown call");
                out.emit(StreamPart::Warning { code: UNKNOWN_CALL_APPROVAL.to_owned(), message }).await;
                return;
            };
            transcript.content.push(AssistantPart::ToolApprovalRequest(ToolApprovalRequestPart {
                approval_id: approval_id.clone(),
                tool_call_id: tool_call_id.clone(),
                signature: None,
            }));
            if let Some(call) = transcript.calls.iter().find(|call| call.part.tool_call_id == tool_call_id) {
                transcript.provider_approvals.push(ApprovalRequest {
                    approval_id: approval_id.clone(),
                    signature: None,
                    tool_call: call.part.clone(),
                    provider_executed: true,
                    reason: Some(PROVIDER_APPROVAL_REASON.to_owned()),
                    route: None,
                    lineage: Vec::new(),
                });
            }
            let reason = Some(PROVIDER_APPROVAL_REASON.to_owned());
            StreamPart::ToolApprovalRequest { approval_id, tool_call, signature: None, reason, routing: None }
        }
        ModelStreamPart::ToolResult(result) => {
            let part = provider_result(result, transcript, context.toolkit);
            transcript.content.push(AssistantPart::ToolResult(part.0));
            part.1
        }
        ModelStreamPart::Finish { finish_reason, usage, .. } => {
            transcript.finish = Some((finish_reason, usage));
            return;
        }
    };
    out.emit(emitted).await;
}

fn provider_result(
    result: ModelToolResult,
    transcript: &Transcript,
    toolkit: Option<&Toolkit>,
) -> (ToolResultPart, StreamPart) {
    let call = transcript.calls.iter().find(|call| call.part.tool_call_id == result.tool_call_id);
    let input = call.map(|call| call.part.input.clone()).unwrap_or(Value::Null);
    let dynamic = call.map_or_else(|| is_dynamic(toolkit, &result.tool_name, true), |call| call.dynamic);
    let output = if result.is_error {
        ToolResultOutput::error_json(result.result.clone())
    } else {
        ToolResultOutput::json(result.result.clone())
    };
    let stream_part = if result.is_error {
        StreamPart::ToolError {
            tool_call_id: result.tool_call_id.clone(),
            tool_name: result.tool_name.clone(),
            input,
            error: result.result,
            provider_executed: Some(true),
            dynamic,
        }
    } else {
        StreamPart::ToolResult {
            tool_call_id: result.tool_call_id.clone(),
            tool_name: result.tool_name.clone(),
            input,
            output: result.result,
            provider_executed: Some(true),
            preliminary: None,
            dynamic,
        }
    };
    let part = ToolResultPart {
        tool_call_id: result.tool_call_id,
        tool_name: result.tool_name,
        output,
        provider_options: result.provider_metadata,
    };
    (part, stream_part)
}

/// `Some(true)` for calls to dynamic tools: tools built with a runtime schema,
/// and provider-executed tools the toolkit does not declare (e.g. hosted MCP tools).
fn is_dynamic(toolkit: Option<&Toolkit>, tool_name: &str, provider_executed: bool) -> Option<bool> {
    match toolkit.and_then(|toolkit| toolkit.get(tool_name)) {
        Some(tool) => tool.is_dynamic(),
        None => provider_executed,
    }
    .then_some(true)
}

fn info(call: &Call) -> ToolCallInfo {
    let (invalid, error) = match &call.class {
        CallClass::Invalid(error) => (Some(true), Some(error.clone())),
        CallClass::Denied(_) | CallClass::Local { .. } | CallClass::Provider | CallClass::Client => (None, None),
    };
    ToolCallInfo {
        tool_call_id: call.part.tool_call_id.clone(),
        tool_name: call.part.tool_name.clone(),
        input: call.part.input.clone(),
        provider_executed: call.part.provider_executed,
        dynamic: call.dynamic,
        invalid,
        error,
        provider_metadata: None,
    }
}

async fn classify(call: ModelToolCall, context: &StepContext<'_>) -> Call {
    let parsed = if call.input.trim().is_empty() {
        Ok(Value::Object(Default::default()))
    } else {
        serde_json::from_str::<Value>(&call.input)
    };
    let part = ToolCallPart {
        tool_call_id: call.tool_call_id,
        tool_name: call.tool_name,
        input: parsed.as_ref().cloned().unwrap_or_else(|_| Value::Object(Default::default())),
        provider_executed: call.provider_executed,
        provider_options: call.provider_metadata,
    };
    let class = if part.is_provider_executed() {
        CallClass::Provider
    } else {
        match (context.toolkit.and_then(|toolkit| toolkit.get(&part.tool_name)), parsed) {
            (None, _) => CallClass::Invalid(format!(
                "Model tried to call unavailable tool '{}'. Available tools: {}.",
                part.tool_name,
                context.toolkit.map(Toolkit::names).unwrap_or_default().join(", ")
            )),
            (Some(_), Err(error)) => CallClass::Invalid(format!(
                "Invalid input for tool {}: input is not JSON ({error}): {}",
                part.tool_name, call.input
            )),
            (Some(tool), Ok(input)) => match tool.validate_input(&input) {
                Err(detail) => CallClass::Invalid(format!("Invalid input for tool {}: {detail}", part.tool_name)),
                Ok(()) if tool.is_client_executed() => CallClass::Client,
                Ok(()) if tool.is_provider_executed() => CallClass::Provider,
                Ok(()) => match binds_inputs(context.request).then(|| canonical_json(&input)) {
                    Some(Err(error)) => {
                        CallClass::Invalid(format!("Invalid input for tool {}: {error}", part.tool_name))
                    }
                    None | Some(Ok(_)) => gate_local(tool, &part.tool_call_id, &input, context).await,
                },
            },
        }
    };
    let dynamic = is_dynamic(context.toolkit, &part.tool_name, part.is_provider_executed());
    Call { part, class, dynamic }
}

/// How the caller's gate decides a local call ([`judge`]): it runs, it is
/// refused, or it is asked about (on the history the verdict rested on, if any).
async fn gate_local(tool: &Tool, tool_call_id: &str, input: &Value, context: &StepContext<'_>) -> CallClass {
    let approval = ApprovalContext::new(tool_call_id.to_owned(), context.messages.clone());
    let ledger = context.request.ledger.as_ref();
    let Judged { verdict: Verdict { action, reason, route }, guards, .. } =
        judge(ledger, context.request.caller(), tool, input, approval).await;
    match action {
        GateAction::Allow => CallClass::Local { tool: tool.clone(), ask: None, route: None, guards: Vec::new() },
        GateAction::Ask => CallClass::Local { tool: tool.clone(), ask: reason, route, guards },
        GateAction::Deny => CallClass::Denied(reason.unwrap_or_default()),
    }
}

/// Runs, refuses, holds or gates the step's calls, and assembles the step's messages.
async fn act_on_calls(
    mut transcript: Transcript,
    finish_reason: FinishReason,
    usage: Usage,
    context: &StepContext<'_>,
    out: &Emitter,
) -> StepOutput {
    let runnable = finish_reason.allows_tool_execution();
    // The questions are settled first: one judged again may run, or be refused, instead.
    let (issued, failure) = issue_questions(&mut transcript, runnable, context).await;
    let hold = context.request.hold_batch_for_approval && any_gated(&transcript.calls);

    let mut results: Vec<(usize, ToolResultPart)> = Vec::new();
    let mut runs = Vec::new();
    let mut run_positions = Vec::new();
    let mut gated = Vec::new();
    let mut client_tool_calls = Vec::new();
    let mut held_tool_calls = Vec::new();
    for (position, call) in transcript.calls.iter().enumerate() {
        match &call.class {
            CallClass::Invalid(error) => {
                results.push((position, result_part(&call.part, ToolResultOutput::error_text(error.clone()))))
            }
            CallClass::Denied(reason) => {
                results.push((position, result_part(&call.part, ToolResultOutput::denied(Some(reason.clone())))))
            }
            CallClass::Provider => {}
            CallClass::Client => client_tool_calls.push(call.part.clone()),
            CallClass::Local { ask: Some(_), .. } => gated.push(position),
            CallClass::Local { .. } if runnable && hold => held_tool_calls.push(call.part.clone()),
            CallClass::Local { tool, .. } if runnable => {
                run_positions.push(position);
                let nesting = tool.is_agent().then(|| Nesting::fresh(context.request));
                let messages = context.messages.clone();
                runs.push(ToolRun { call: call.part.clone(), tool: tool.clone(), messages, nesting });
            }
            CallClass::Local { .. } => {
                let error = format!(
                    "Tool call was not run because the model response ended with finish reason `{}`.",
                    reason_name(finish_reason)
                );
                out.emit(error_part(&call.part, Value::String(error.clone()))).await;
                results.push((position, result_part(&call.part, ToolResultOutput::error_text(error))));
            }
        }
    }

    let work = runs.into_iter().map(Work::Run).collect();
    let outcomes = execute_all(work, context.request.tool_concurrency, context.cancellation, out).await;
    if let Some(ledger) = &context.request.ledger {
        // A sub-agent waiting for an approval has not run: it is on record when it finishes.
        let ran: Vec<&ToolOutcome> = outcomes.iter().filter(|outcome| outcome.paused().is_none()).collect();
        let refused: Vec<(&ToolCallPart, &str)> = transcript
            .calls
            .iter()
            .filter_map(|call| match &call.class {
                CallClass::Denied(reason) => Some((&call.part, reason.as_str())),
                _ => None,
            })
            .collect();
        if let Some(warning) =
            record_outcomes(ledger, &[], &direct_events(context.request, ledger, &ran, &refused)).await
        {
            out.emit(warning).await;
        }
    }
    let mut paused = Vec::new();
    for (position, outcome) in run_positions.into_iter().zip(&outcomes) {
        match outcome.paused() {
            Some(requests) => paused.extend(requests.iter().cloned()),
            None => results.push((position, outcome.to_result_part())),
        }
    }
    results.sort_by_key(|(position, _)| *position);
    let tool_results: Vec<ToolResultPart> = results.into_iter().map(|(_, part)| part).collect();

    let mut approval_requests = std::mem::take(&mut transcript.provider_approvals);
    if failure.is_none() {
        for (position, request) in gated.into_iter().zip(issued) {
            let call = &transcript.calls[position].part;
            tracing::info!(tool = %call.tool_name, tool_call_id = %call.tool_call_id, approval_id = %request.approval_id, "approval requested");
            out.emit(StreamPart::ToolApprovalRequest {
                approval_id: request.approval_id.clone(),
                tool_call: info(&transcript.calls[position]),
                signature: request.signature.clone(),
                reason: request.reason.clone(),
                routing: request.route.as_ref().map(|route| toolgate_protocol::ApprovalRouting {
                    approvers: route.approvers.clone(),
                    quorum: route.quorum,
                }),
            })
            .await;
            transcript.content.push(AssistantPart::ToolApprovalRequest(ToolApprovalRequestPart {
                approval_id: request.approval_id.clone(),
                tool_call_id: call.tool_call_id.clone(),
                signature: request.signature.clone(),
            }));
            approval_requests.push(request);
        }
        // Sub-agents that paused: their requests surface here, after this step's own (see `super::nested`).
        transcript.content.extend(super::nested::surface(&paused, out).await);
        approval_requests.extend(paused);
    }

    transcript.content.retain(|part| match part {
        AssistantPart::Text(text) => !text.text.is_empty(),
        AssistantPart::Reasoning(reasoning) => !reasoning.text.is_empty(),
        _ => true,
    });
    let mut messages = Vec::with_capacity(2);
    if !transcript.content.is_empty() {
        messages.push(ModelMessage::Assistant(AssistantMessage {
            content: AssistantContent::Parts(transcript.content.clone()),
            provider_options: None,
        }));
    }
    if !tool_results.is_empty() {
        messages.push(ModelMessage::tool(
            tool_results.iter().cloned().map(toolgate_protocol::ToolPart::ToolResult).collect(),
        ));
    }
    StepOutput {
        result: StepResult {
            step_number: context.step_number,
            content: transcript.content,
            tool_results,
            approval_requests,
            client_tool_calls,
            held_tool_calls,
            finish_reason,
            usage,
        },
        messages,
        error: None,
        failure,
    }
}

/// Whether any of the calls asks a person.
fn any_gated(calls: &[Call]) -> bool {
    calls.iter().any(|call| matches!(call.class, CallClass::Local { ask: Some(_), .. }))
}

/// The approval requests of the step's gated calls, in their order, and
/// (with a ledger) recorded `pending` ([`record_issued`]) only while the
/// history each verdict rested on stands, in one conditional write with that
/// check ([`crate::ledger::HistoryStore::issue_if`]). When it moved, nothing
/// is written and every call asked on the history is judged again (it may
/// now run, be refused, or be asked differently), at most [`MAX_ADMITS`]
/// times; then those calls are asked without a guard (a person decides).
/// A store that fails is the step's failure, and nothing is asked.
async fn issue_questions(
    transcript: &mut Transcript,
    runnable: bool,
    context: &StepContext<'_>,
) -> (Vec<ApprovalRequest>, Option<crate::EngineError>) {
    let config_digest = context.request.gate.as_ref().and_then(|gate| gate.config_digest());
    let mut round = 0;
    loop {
        // Unguarded, the write below cannot miss: the loop ends.
        if round == MAX_ADMITS {
            unguard(&mut transcript.calls);
        }
        let requests = questions(&transcript.calls, runnable, context.request);
        let Some(ledger) = context.request.ledger.as_ref().filter(|_| !requests.is_empty()) else {
            return (requests, None);
        };
        let guards: Vec<HistoryGuard> = transcript
            .calls
            .iter()
            .filter_map(|call| match &call.class {
                CallClass::Local { ask: Some(_), guards, .. } => Some(guards.iter().cloned()),
                _ => None,
            })
            .flatten()
            .collect();
        match record_issued(ledger, context.toolkit, &requests, config_digest.as_deref(), &guards).await {
            Ok(true) => return (requests, None),
            Ok(false) => {
                round += 1;
                rejudge(&mut transcript.calls, context).await;
            }
            Err(error) => return (requests, Some(error)),
        }
    }
}

/// Asks every call asked on the history without a guard, saying why.
fn unguard(calls: &mut [Call]) {
    for call in calls {
        if let CallClass::Local { ask: ask @ Some(_), guards, .. } = &mut call.class
            && !guards.is_empty()
        {
            guards.clear();
            *ask = Some(HISTORY_CHURN_REASON.to_owned());
        }
    }
}

/// Judges again every call that was asked about on the history.
async fn rejudge(calls: &mut [Call], context: &StepContext<'_>) {
    for call in calls {
        if let CallClass::Local { tool, ask: Some(_), guards, .. } = &call.class
            && !guards.is_empty()
        {
            let tool = tool.clone();
            call.class = gate_local(&tool, &call.part.tool_call_id, &call.part.input, context).await;
        }
    }
}

/// An approval request for each gated call, in order, signed (with a signer)
/// over the calls held with it when the batch is held.
fn questions(calls: &[Call], runnable: bool, request: &TextRequest) -> Vec<ApprovalRequest> {
    let hold = request.hold_batch_for_approval && any_gated(calls);
    let held_calls: Vec<SignedCall<'_>> = calls
        .iter()
        .filter(|call| runnable && hold && matches!(call.class, CallClass::Local { ask: None, .. }))
        .map(|call| signed_call(&call.part))
        .collect();
    // Classification made every local input canonical when a signer is set.
    let held = HeldCalls::of(&held_calls).unwrap_or_default();
    calls
        .iter()
        .filter_map(|call| match &call.class {
            CallClass::Local { ask: Some(reason), route, .. } => {
                let mut approval = issue_approval(&call.part, &held, request, Some(reason.clone()));
                approval.route = route.clone();
                Some(approval)
            }
            _ => None,
        })
        .collect()
}

/// An approval request for `call`; signed (covering the calls `held` with it) when a signer is set.
fn issue_approval(
    call: &ToolCallPart,
    held: &HeldCalls,
    request: &TextRequest,
    reason: Option<String>,
) -> ApprovalRequest {
    let nonce = (request.id_generator)();
    let issued = request.signer.as_ref().map(|signer| signer.issue(&nonce, signed_call(call), held));
    let (approval_id, signature) = match issued {
        Some(Ok(issued)) => (issued.approval_id, issued.signature),
        // Classification made every local input canonical before a signer sees it; should one
        // still fail, the request carries no signature and can never be approved.
        Some(Err(error)) => {
            tracing::error!(tool_call_id = %call.tool_call_id, %error, "cannot sign the approval request");
            (unsigned_approval_id(&nonce), None)
        }
        None => (unsigned_approval_id(&nonce), None),
    };
    let tool_call = call.clone();
    ApprovalRequest {
        approval_id,
        signature,
        tool_call,
        provider_executed: false,
        reason,
        route: None,
        lineage: Vec::new(),
    }
}

/// True when approvals bind the exact input (a signer or a ledger), so every
/// local input needs a canonical form.
fn binds_inputs(request: &TextRequest) -> bool {
    request.signer.is_some() || request.ledger.is_some()
}

fn signed_call(call: &ToolCallPart) -> SignedCall<'_> {
    SignedCall { tool_call_id: &call.tool_call_id, tool_name: &call.tool_name, input: &call.input }
}

fn reason_name(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content-filter",
        FinishReason::ToolCalls => "tool-calls",
        FinishReason::Error => "error",
        FinishReason::Other => "other",
    }
}
