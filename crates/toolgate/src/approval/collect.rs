//! Finds, anywhere in a history, the approval answers that still need acting on.
//!
//! Rules (one pass over the history, then lookups, so linear in its size):
//! - Calls, approval requests and results are gathered from every message,
//!   not only the last one: an answer followed by more messages still counts.
//! - An answer naming an unknown approval, or a request naming an unknown
//!   call, is an error. Two different answers to one approval are an error.
//! - A call that already has a result is resolved and is never acted on again.
//! - A request with no answer is *unanswered* when a user message comes after
//!   it (it will resolve as denied) and *open* otherwise.
//! - Calls with no result and no request that sit in the same assistant
//!   message as a request being resolved are *held siblings* (calls held back
//!   while the batch waited for the decision).

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use toolgate_protocol::{
    AssistantPart, ModelMessage, ToolApprovalRequestPart, ToolApprovalResponsePart, ToolCallPart, ToolPart,
};

use crate::EngineError;

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

/// A person's answer.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// Run it, with the person's edit of the input if any.
    Approved { edited_input: Option<Value> },
    /// Do not run it.
    Denied { reason: Option<String> },
}

/// An answered request whose call has no result yet.
#[derive(Debug, Clone)]
pub(crate) struct Answered<'h> {
    pub request: &'h ToolApprovalRequestPart,
    pub call: CallRef<'h>,
    pub answer: Answer,
}

/// What the history asks the engine to act on.
#[derive(Debug, Default)]
pub(crate) struct Collected<'h> {
    pub answered: Vec<Answered<'h>>,
    pub unanswered: Vec<(&'h ToolApprovalRequestPart, CallRef<'h>)>,
    pub open: Vec<&'h ToolApprovalRequestPart>,
    pub held_siblings: Vec<CallRef<'h>>,
}

struct RequestRef<'h> {
    message_index: usize,
    request: &'h ToolApprovalRequestPart,
}

/// Collects approval state from a normalized history (see the module docs).
pub(crate) fn collect(history: &[ModelMessage]) -> Result<Collected<'_>, EngineError> {
    let mut calls: HashMap<&str, CallRef<'_>> = HashMap::new();
    let mut requests: Vec<RequestRef<'_>> = Vec::new();
    let mut results: HashSet<&str> = HashSet::new();
    let mut responses: Vec<&ToolApprovalResponsePart> = Vec::new();
    let mut last_user_message = None;

    for (message_index, message) in history.iter().enumerate() {
        match message {
            ModelMessage::Assistant(assistant) => {
                for (part_index, part) in assistant.part_slice().iter().enumerate() {
                    match part {
                        AssistantPart::ToolCall(call) => {
                            calls.insert(&call.tool_call_id, CallRef { message_index, part_index, call });
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

    let requests_by_id: HashMap<&str, &RequestRef<'_>> =
        requests.iter().map(|r| (r.request.approval_id.as_str(), r)).collect();

    let mut collected = Collected::default();
    let mut answers: HashMap<&str, &ToolApprovalResponsePart> = HashMap::new();
    let mut decided_calls: HashSet<&str> = HashSet::new();
    let mut resolving_messages: HashSet<usize> = HashSet::new();

    for response in responses {
        if let Some(previous) = answers.get(response.approval_id.as_str()) {
            if previous.approved != response.approved || previous.edited_input != response.edited_input {
                return Err(EngineError::ConflictingApprovalResponses { approval_id: response.approval_id.clone() });
            }
            continue;
        }
        answers.insert(&response.approval_id, response);
        let request = requests_by_id
            .get(response.approval_id.as_str())
            .ok_or_else(|| EngineError::UnknownApprovalId { approval_id: response.approval_id.clone() })?;
        let call = *calls.get(request.request.tool_call_id.as_str()).ok_or_else(|| {
            EngineError::ToolCallNotFoundForApproval {
                approval_id: response.approval_id.clone(),
                tool_call_id: request.request.tool_call_id.clone(),
            }
        })?;
        if !decided_calls.insert(&call.call.tool_call_id) || results.contains(call.call.tool_call_id.as_str()) {
            continue;
        }
        resolving_messages.insert(call.message_index);
        let answer = if response.approved {
            Answer::Approved { edited_input: response.edited_input.clone() }
        } else {
            Answer::Denied { reason: response.reason.clone() }
        };
        collected.answered.push(Answered { request: request.request, call, answer });
    }

    for RequestRef { message_index, request } in &requests {
        let Some(call) = calls.get(request.tool_call_id.as_str()) else { continue };
        let call_id = call.call.tool_call_id.as_str();
        if answers.contains_key(request.approval_id.as_str())
            || decided_calls.contains(call_id)
            || results.contains(call_id)
        {
            continue;
        }
        decided_calls.insert(call_id);
        if last_user_message.is_some_and(|user| user > *message_index) {
            resolving_messages.insert(call.message_index);
            collected.unanswered.push((request, *call));
        } else {
            collected.open.push(request);
        }
    }

    let requested_calls: HashSet<&str> = requests.iter().map(|r| r.request.tool_call_id.as_str()).collect();
    let mut siblings: Vec<CallRef<'_>> = calls
        .values()
        .filter(|call| {
            resolving_messages.contains(&call.message_index)
                && !call.call.is_provider_executed()
                && !results.contains(call.call.tool_call_id.as_str())
                && !requested_calls.contains(call.call.tool_call_id.as_str())
        })
        .copied()
        .collect();
    siblings.sort_by_key(|call| (call.message_index, call.part_index));
    collected.held_siblings = siblings;
    Ok(collected)
}
