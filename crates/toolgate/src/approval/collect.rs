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
    let index = Index::of(history)?;
    let requests = index_requests(&index.requests)?;
    let answers = first_answers(&index, &requests.by_id)?;
    let (mut collected, mut resolving_messages) = sort_requests(&index, &answers);
    resolving_messages.sort_unstable();
    resolving_messages.dedup();
    for message_index in resolving_messages {
        if let Some(group) = held_candidates(history, message_index, &index, &requests.of_call) {
            collected.held.push(group);
        }
    }
    Ok(collected)
}

/// Every call, request, result and response of a history, found in one pass.
struct Index<'h> {
    calls: HashMap<&'h str, CallRef<'h>>,
    requests: Vec<RequestRef<'h>>,
    results: HashSet<&'h str>,
    responses: Vec<&'h ToolApprovalResponsePart>,
    last_user_message: Option<usize>,
}

impl<'h> Index<'h> {
    /// Fails on two calls with one id.
    fn of(history: &'h [ModelMessage]) -> Result<Self, EngineError> {
        // Sized by the message count (linear in the body), so the maps rarely grow by rehashing every key.
        let mut index = Index {
            calls: HashMap::with_capacity(history.len()),
            requests: Vec::new(),
            results: HashSet::with_capacity(history.len()),
            responses: Vec::new(),
            last_user_message: None,
        };
        for (message_index, message) in history.iter().enumerate() {
            match message {
                ModelMessage::Assistant(assistant) => {
                    for (part_index, part) in assistant.part_slice().iter().enumerate() {
                        index.add_assistant_part(message_index, part_index, part)?;
                    }
                }
                ModelMessage::Tool(tool) => {
                    for part in &tool.content {
                        match part {
                            ToolPart::ToolResult(result) => {
                                index.results.insert(&result.tool_call_id);
                            }
                            ToolPart::ToolApprovalResponse(response) => index.responses.push(response),
                        }
                    }
                }
                ModelMessage::User(_) => index.last_user_message = Some(message_index),
                ModelMessage::System(_) => {}
            }
        }
        Ok(index)
    }

    fn add_assistant_part(
        &mut self,
        message_index: usize,
        part_index: usize,
        part: &'h AssistantPart,
    ) -> Result<(), EngineError> {
        match part {
            AssistantPart::ToolCall(call) => {
                let found = CallRef { message_index, part_index, call };
                if self.calls.insert(&call.tool_call_id, found).is_some() {
                    return Err(EngineError::DuplicateToolCallId { tool_call_id: call.tool_call_id.clone() });
                }
            }
            AssistantPart::ToolResult(result) => {
                self.results.insert(&result.tool_call_id);
            }
            AssistantPart::ToolApprovalRequest(request) => {
                self.requests.push(RequestRef { message_index, request });
            }
            AssistantPart::Text(_) | AssistantPart::Reasoning(_) | AssistantPart::File(_) => {}
        }
        Ok(())
    }
}

/// The requests by approval id, and the approval id of each requested call.
struct RequestIndex<'r, 'h> {
    by_id: HashMap<&'h str, &'r RequestRef<'h>>,
    of_call: HashMap<&'h str, &'h str>,
}

/// Indexes the requests; fails on an approval id used twice or a call requested twice.
fn index_requests<'r, 'h>(requests: &'r [RequestRef<'h>]) -> Result<RequestIndex<'r, 'h>, EngineError> {
    let mut requests_by_id: HashMap<&str, &RequestRef<'_>> = HashMap::with_capacity(requests.len());
    let mut request_of_call: HashMap<&str, &str> = HashMap::with_capacity(requests.len());
    for request in requests {
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
    Ok(RequestIndex { by_id: requests_by_id, of_call: request_of_call })
}

/// The first response to each approval; fails on a response to an unknown
/// approval or call, an edit of a provider-executed call, or a later
/// response that contradicts the first.
fn first_answers<'h>(
    index: &Index<'h>,
    requests_by_id: &HashMap<&'h str, &RequestRef<'h>>,
) -> Result<HashMap<&'h str, &'h ToolApprovalResponsePart>, EngineError> {
    let mut answers: HashMap<&str, &ToolApprovalResponsePart> = HashMap::with_capacity(index.responses.len());
    for &response in &index.responses {
        let request = requests_by_id
            .get(response.approval_id.as_str())
            .ok_or_else(|| EngineError::UnknownApprovalId { approval_id: response.approval_id.clone() })?;
        let call = index.calls.get(request.request.tool_call_id.as_str()).ok_or_else(|| {
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
            // Compared in place: a repeat costs its own size, never a copy of the first answer.
            Some(first) if same_decision(first, response) => {}
            Some(first) => {
                return Err(EngineError::ConflictingApprovalResponses {
                    approval_id: response.approval_id.clone(),
                    first: Box::new(Decision::of(first)),
                    later: Box::new(Decision::of(response)),
                });
            }
        }
    }
    Ok(answers)
}

/// Sorts the requests whose calls have no result into answered, unanswered
/// (the person spoke after them) and open; with the messages whose calls
/// are being resolved.
fn sort_requests<'h>(
    index: &Index<'h>,
    answers: &HashMap<&'h str, &'h ToolApprovalResponsePart>,
) -> (Collected<'h>, Vec<usize>) {
    let mut collected = Collected::default();
    let mut resolving_messages: Vec<usize> = Vec::new();
    for RequestRef { message_index, request } in &index.requests {
        let Some(&call) = index.calls.get(request.tool_call_id.as_str()) else {
            // An unanswered request for a call that does not exist asks nothing; the prompt drops it.
            continue;
        };
        if index.results.contains(request.tool_call_id.as_str()) {
            continue;
        }
        match answers.get(request.approval_id.as_str()) {
            Some(response) => {
                let decision = if response.approved {
                    DecisionRef::Approve { edited_input: response.edited_input.as_ref() }
                } else {
                    DecisionRef::Deny { reason: response.reason.as_deref() }
                };
                resolving_messages.push(call.message_index);
                collected.answered.push(Answered { request, call, decision });
            }
            None if index.last_user_message.is_some_and(|user| user > *message_index) => {
                resolving_messages.push(call.message_index);
                collected.unanswered.push((request, call));
            }
            None => collected.open.push(request),
        }
    }
    (collected, resolving_messages)
}

/// The calls of a resolving assistant message that may have been held back
/// (no request, no result, not provider-executed), with its requests; `None`
/// when it has no such call.
fn held_candidates<'h>(
    history: &'h [ModelMessage],
    message_index: usize,
    index: &Index<'h>,
    request_of_call: &HashMap<&'h str, &'h str>,
) -> Option<HeldCandidates<'h>> {
    let ModelMessage::Assistant(assistant) = &history[message_index] else { return None };
    let mut group = HeldCandidates { calls: Vec::new(), requests: Vec::new() };
    for (part_index, part) in assistant.part_slice().iter().enumerate() {
        match part {
            AssistantPart::ToolCall(call)
                if !call.is_provider_executed()
                    && !index.results.contains(call.tool_call_id.as_str())
                    && !request_of_call.contains_key(call.tool_call_id.as_str()) =>
            {
                group.calls.push(CallRef { message_index, part_index, call });
            }
            AssistantPart::ToolApprovalRequest(request) => {
                if let Some(call) = index.calls.get(request.tool_call_id.as_str())
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
    (!group.calls.is_empty()).then_some(group)
}

/// Whether two responses decide alike: both deny (reasons do not count), or
/// both approve the same input (as [`Decision::contradicts`] judges, without copying).
fn same_decision(first: &ToolApprovalResponsePart, later: &ToolApprovalResponsePart) -> bool {
    first.approved == later.approved && (!first.approved || first.edited_input == later.edited_input)
}
