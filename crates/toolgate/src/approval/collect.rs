//! Finds, anywhere in a history, the approval answers that still need acting on.
//!
//! Rules (one pass over the history, then lookups, so linear in its size):
//! - Calls, approval requests and results are gathered from every message,
//!   not only the last one: an answer followed by more messages still counts.
//! - Structure is checked first, for every part of the history: a tool call
//!   id used by two calls, an approval id used twice, or two requests for one
//!   call are errors; so is an answer naming an unknown approval, or an
//!   answered request naming an unknown call.
//! - Every answer is checked, including answers to calls already resolved:
//!   the first answer to an approval decides, and a later answer that
//!   contradicts it (another decision or another edit) is an error naming
//!   both; an edit of a provider-executed call is an error.
//! - A call that already has a result is resolved and is never acted on again.
//! - A request with no answer is *unanswered* when a user message comes after
//!   it (it will resolve as denied) and *open* otherwise.
//! - In each assistant message with a request being resolved, the local calls
//!   with neither a request nor a result are *held candidates*: the resolver
//!   runs them only if the engine provably held them (see `resolve`).

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use toolgate_protocol::{
    AssistantPart, ModelMessage, ToolApprovalRequestPart, ToolApprovalResponsePart, ToolCallPart, ToolPart,
};

use crate::EngineError;
use crate::approval::lifecycle::Decision;

/// A tool call and where it is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallRef<'h> {
    /// Index of the assistant message holding the call.
    pub message_index: usize,
    /// Position of the call among that message's parts.
    pub part_index: usize,
    /// The call.
    pub call: &'h ToolCallPart,
}

/// A person's [`Decision`], borrowed from the history: the first one given to its approval.
#[derive(Debug, Clone)]
pub(crate) enum DecisionRef<'h> {
    /// Run it, with the person's edit of the input if any.
    Approve { edited_input: Option<&'h Value> },
    /// Do not run it.
    Deny { reason: Option<&'h str> },
}

/// An answered request whose call has no result yet.
#[derive(Debug, Clone)]
pub(crate) struct Answered<'h> {
    pub request: &'h ToolApprovalRequestPart,
    pub call: CallRef<'h>,
    pub decision: DecisionRef<'h>,
}

/// An assistant message whose approvals are being resolved, with the calls
/// that may have been held back until the decision.
#[derive(Debug, Clone)]
pub(crate) struct HeldCandidates<'h> {
    /// Calls with no request and no result, not provider-executed, in part order.
    pub calls: Vec<CallRef<'h>>,
    /// Every approval request of the message for a call that is not provider-executed.
    pub requests: Vec<(&'h ToolApprovalRequestPart, CallRef<'h>)>,
}

/// What the history asks the engine to act on.
#[derive(Debug, Default)]
pub(crate) struct Collected<'h> {
    pub answered: Vec<Answered<'h>>,
    pub unanswered: Vec<(&'h ToolApprovalRequestPart, CallRef<'h>)>,
    pub open: Vec<&'h ToolApprovalRequestPart>,
    pub held: Vec<HeldCandidates<'h>>,
}

struct RequestRef<'h> {
    message_index: usize,
    request: &'h ToolApprovalRequestPart,
}

/// Collects approval state from a normalized history (see the module docs).
pub(crate) fn collect(history: &[ModelMessage]) -> Result<Collected<'_>, EngineError> {
    // Sized by the message count (linear in the body), so the maps rarely grow by rehashing every key.
    let mut calls: HashMap<&str, CallRef<'_>> = HashMap::with_capacity(history.len());
    let mut requests: Vec<RequestRef<'_>> = Vec::new();
    let mut results: HashSet<&str> = HashSet::with_capacity(history.len());
    let mut responses: Vec<&ToolApprovalResponsePart> = Vec::new();
    let mut last_user_message = None;

    for (message_index, message) in history.iter().enumerate() {
        match message {
            ModelMessage::Assistant(assistant) => {
                for (part_index, part) in assistant.part_slice().iter().enumerate() {
                    match part {
                        AssistantPart::ToolCall(call) => {
                            let found = CallRef { message_index, part_index, call };
                            if calls.insert(&call.tool_call_id, found).is_some() {
                                return Err(EngineError::DuplicateToolCallId {
                                    tool_call_id: call.tool_call_id.clone(),
                                });
                            }
                        }
                        AssistantPart::ToolResult(result) => {
                            results.insert(&result.tool_call_id);
                        }
                        AssistantPart::ToolApprovalRequest(request) => {
                            requests.push(RequestRef { message_index, request });
                        }
                        AssistantPart::Text(_) | AssistantPart::Reasoning(_) | AssistantPart::File(_) => {}
                    }
                }
            }
            ModelMessage::Tool(tool) => {
                for part in &tool.content {
                    match part {
                        ToolPart::ToolResult(result) => {
                            results.insert(&result.tool_call_id);
                        }
                        ToolPart::ToolApprovalResponse(response) => responses.push(response),
                    }
                }
            }
            ModelMessage::User(_) => last_user_message = Some(message_index),
            ModelMessage::System(_) => {}
        }
    }

    let mut requests_by_id: HashMap<&str, &RequestRef<'_>> = HashMap::with_capacity(requests.len());
    let mut request_of_call: HashMap<&str, &str> = HashMap::with_capacity(requests.len());
    for request in &requests {
        let RequestRef { request: part, .. } = request;
        if requests_by_id.insert(&part.approval_id, request).is_some() {
            return Err(EngineError::DuplicateApprovalId { approval_id: part.approval_id.clone() });
        }
        if let Some(first) = request_of_call.insert(&part.tool_call_id, &part.approval_id) {
            return Err(EngineError::DuplicateApprovalRequest {
                tool_call_id: part.tool_call_id.clone(),
                approval_ids: vec![first.to_owned(), part.approval_id.clone()],
            });
        }
    }

    let mut answers: HashMap<&str, &ToolApprovalResponsePart> = HashMap::with_capacity(responses.len());
    for response in responses {
        let request = requests_by_id
            .get(response.approval_id.as_str())
            .ok_or_else(|| EngineError::UnknownApprovalId { approval_id: response.approval_id.clone() })?;
        let call = calls.get(request.request.tool_call_id.as_str()).ok_or_else(|| {
            EngineError::ToolCallNotFoundForApproval {
                approval_id: response.approval_id.clone(),
                tool_call_id: request.request.tool_call_id.clone(),
            }
        })?;
        if response.approved && response.edited_input.is_some() && call.call.is_provider_executed() {
            return Err(EngineError::EditNotSupported { approval_id: response.approval_id.clone() });
        }
        match answers.get(response.approval_id.as_str()) {
            None => {
                answers.insert(&response.approval_id, response);
            }
            Some(first) if !Decision::of(first).contradicts(&Decision::of(response)) => {}
            Some(first) => {
                return Err(EngineError::ConflictingApprovalResponses {
                    approval_id: response.approval_id.clone(),
                    first: Box::new(Decision::of(first)),
                    later: Box::new(Decision::of(response)),
                });
            }
        }
    }

    let mut collected = Collected::default();
    let mut resolving_messages: Vec<usize> = Vec::new();
    for RequestRef { message_index, request } in &requests {
        let answer = answers.get(request.approval_id.as_str());
        let Some(&call) = calls.get(request.tool_call_id.as_str()) else {
            // An unanswered request for a call that does not exist asks nothing; the prompt drops it.
            continue;
        };
        if results.contains(request.tool_call_id.as_str()) {
            continue;
        }
        match answer {
            Some(response) => {
                let decision = if response.approved {
                    DecisionRef::Approve { edited_input: response.edited_input.as_ref() }
                } else {
                    DecisionRef::Deny { reason: response.reason.as_deref() }
                };
                resolving_messages.push(call.message_index);
                collected.answered.push(Answered { request, call, decision });
            }
            None if last_user_message.is_some_and(|user| user > *message_index) => {
                resolving_messages.push(call.message_index);
                collected.unanswered.push((request, call));
            }
            None => collected.open.push(request),
        }
    }

    resolving_messages.sort_unstable();
    resolving_messages.dedup();
    for message_index in resolving_messages {
        let ModelMessage::Assistant(assistant) = &history[message_index] else { continue };
        let mut group = HeldCandidates { calls: Vec::new(), requests: Vec::new() };
        for (part_index, part) in assistant.part_slice().iter().enumerate() {
            match part {
                AssistantPart::ToolCall(call)
                    if !call.is_provider_executed()
                        && !results.contains(call.tool_call_id.as_str())
                        && !request_of_call.contains_key(call.tool_call_id.as_str()) =>
                {
                    group.calls.push(CallRef { message_index, part_index, call });
                }
                AssistantPart::ToolApprovalRequest(request) => {
                    if let Some(call) = calls.get(request.tool_call_id.as_str())
                        && !call.call.is_provider_executed()
                    {
                        group.requests.push((request, *call));
                    }
                }
                AssistantPart::ToolCall(_)
                | AssistantPart::ToolResult(_)
                | AssistantPart::Text(_)
                | AssistantPart::Reasoning(_)
                | AssistantPart::File(_) => {}
            }
        }
        if !group.calls.is_empty() {
            collected.held.push(group);
        }
    }
    Ok(collected)
}
