//! Builds the clean prompt a model receives from a history.
//!
//! Contract of [`build_prompt`]:
//! - Approval requests are removed; approval responses are removed except
//!   for provider-executed calls, which the provider must see.
//! - Every tool result is moved into one tool message right after the
//!   assistant message holding its call, in call order, so consecutive tool
//!   messages merge and results that arrived later in the history (e.g. an
//!   approval answered after more messages) sit where providers expect them.
//! - An approved call whose input the person edited shows the edited input,
//!   so the model sees the call that actually ran; a call that did not run
//!   after all (its result is `execution-denied`, e.g. a policy refused it)
//!   keeps the model's input. The first answer to an approval decides, here
//!   as in the engine (which refuses a history whose later answers contradict it).
//! - Every local (non-provider) call must end up with exactly one result;
//!   otherwise [`EngineError::MissingToolResults`] names the calls. Duplicate
//!   results keep the first; results for unknown calls are dropped.
//! - Messages left empty are dropped.
//! - Two tool calls with one id are [`EngineError::DuplicateToolCallId`]:
//!   providers reject them, and results would be ambiguous.
//!
//! [`into_prompt`] builds the same prompt by moving the history's parts
//! instead of copying them; the engine builds its prompt once that way and
//! then appends each step's messages (`CallIds::append`). Both run in time
//! linear in the size of what they are given.

use std::collections::{HashMap, HashSet};

use toolgate_protocol::{
    AssistantContent, AssistantMessage, AssistantPart, ModelMessage, ToolApprovalResponsePart, ToolMessage, ToolPart,
    UserContent, UserMessage, UserPart,
};

use crate::EngineError;

/// Builds the model prompt from a normalized history (see the module docs).
pub fn build_prompt(history: &[ModelMessage]) -> Result<Vec<ModelMessage>, EngineError> {
    into_prompt(history.to_vec())
}

/// [`build_prompt`], taking the history and moving its parts into the prompt.
pub fn into_prompt(history: Vec<ModelMessage>) -> Result<Vec<ModelMessage>, EngineError> {
    let mut prompt = Vec::with_capacity(history.len());
    CallIds::default().append(history, &mut prompt)?;
    Ok(prompt)
}

/// Fails as [`build_prompt`] would on missing results over `history` then `more`, without building the prompt.
pub(crate) fn check_results(history: &[ModelMessage], more: &[ModelMessage]) -> Result<(), EngineError> {
    let messages = || history.iter().chain(more);
    let mut results = HashSet::with_capacity(history.len() + more.len());
    for message in messages() {
        if let ModelMessage::Tool(tool) = message {
            results.extend(tool.content.iter().filter_map(|part| match part {
                ToolPart::ToolResult(result) => Some(result.tool_call_id.as_str()),
                ToolPart::ToolApprovalResponse(_) => None,
            }));
        }
    }
    let missing: Vec<String> = messages()
        .filter_map(|message| match message {
            ModelMessage::Assistant(assistant) => Some(assistant.part_slice()),
            _ => None,
        })
        .flatten()
        .filter_map(|part| match part {
            AssistantPart::ToolCall(call)
                if !call.is_provider_executed() && !results.contains(call.tool_call_id.as_str()) =>
            {
                Some(call.tool_call_id.clone())
            }
            _ => None,
        })
        .collect();
    if missing.is_empty() { Ok(()) } else { Err(EngineError::MissingToolResults { tool_call_ids: missing }) }
}

/// The tool call ids of a prompt being built, so that messages appended to it
/// later are checked against every call it already holds.
#[derive(Debug, Default)]
pub(crate) struct CallIds(HashSet<String>);

impl CallIds {
    /// Appends `messages` to `prompt` in prompt form (see the module docs),
    /// moving their parts. Appending a history in pieces gives what building
    /// it whole gives as long as no piece answers a call of an earlier one,
    /// which holds for the engine's steps: each step's results and answers
    /// are for its own calls. Nothing is appended on an error; the ids are
    /// then unspecified (the prompt is not used again).
    pub(crate) fn append(
        &mut self,
        mut messages: Vec<ModelMessage>,
        prompt: &mut Vec<ModelMessage>,
    ) -> Result<(), EngineError> {
        let plans = self.plan(&messages)?;
        let mut plans = plans.into_iter();
        let mut results = Vec::new();
        prompt.reserve(messages.len());
        for at in 0..messages.len() {
            if matches!(messages[at], ModelMessage::Tool(_)) {
                // Its results and answers are taken by the calls they belong to; the rest is dropped.
                continue;
            }
            match std::mem::replace(&mut messages[at], empty_tool_message()) {
                system @ ModelMessage::System(_) => prompt.push(system),
                ModelMessage::User(user) => prompt.extend(without_approval_parts(user).map(ModelMessage::User)),
                ModelMessage::Assistant(assistant) => {
                    let assistant = rewrite_assistant(assistant, &mut plans, &mut messages, &mut results);
                    prompt.extend(assistant.map(ModelMessage::Assistant));
                    if !results.is_empty() {
                        // Moved into a vector of exactly its length; the buffer keeps its room for the next one.
                        #[allow(clippy::drain_collect, reason = "`mem::take` would hand over the spare room too")]
                        let content = results.drain(..).collect();
                        prompt.push(ModelMessage::Tool(ToolMessage { content, provider_options: None }));
                    }
                }
                ModelMessage::Tool(_) => {}
            }
        }
        Ok(())
    }

    /// Where each call's result and first answer are, in call order; or why
    /// the messages make no prompt. Records the calls' ids.
    fn plan(&mut self, messages: &[ModelMessage]) -> Result<Vec<CallPlan>, EngineError> {
        let mut results: HashMap<&str, Slot> = HashMap::with_capacity(messages.len());
        let mut call_of_approval: HashMap<&str, &str> = HashMap::with_capacity(messages.len());
        let mut responses: Vec<(Slot, &ToolApprovalResponsePart)> = Vec::new();
        let mut duplicate = None;
        for (message_index, message) in messages.iter().enumerate() {
            match message {
                ModelMessage::Assistant(assistant) => {
                    for part in assistant.part_slice() {
                        match part {
                            AssistantPart::ToolApprovalRequest(request) => {
                                call_of_approval.entry(&request.approval_id).or_insert(&request.tool_call_id);
                            }
                            AssistantPart::ToolCall(call) => {
                                if !self.0.insert(call.tool_call_id.clone()) {
                                    duplicate.get_or_insert(&call.tool_call_id);
                                }
                            }
                            AssistantPart::Text(_)
                            | AssistantPart::Reasoning(_)
                            | AssistantPart::File(_)
                            | AssistantPart::ToolResult(_) => {}
                        }
                    }
                }
                ModelMessage::Tool(tool) => {
                    for (part_index, part) in tool.content.iter().enumerate() {
                        let slot = Slot { message_index, part_index };
                        match part {
                            ToolPart::ToolResult(result) => {
                                results.entry(&result.tool_call_id).or_insert(slot);
                            }
                            ToolPart::ToolApprovalResponse(response) => responses.push((slot, response)),
                        }
                    }
                }
                ModelMessage::System(_) | ModelMessage::User(_) => {}
            }
        }
        if let Some(tool_call_id) = duplicate {
            return Err(EngineError::DuplicateToolCallId { tool_call_id: tool_call_id.clone() });
        }
        let mut first_response: HashMap<&str, Slot> = HashMap::with_capacity(responses.len());
        for (slot, response) in responses {
            if let Some(&call_id) = call_of_approval.get(response.approval_id.as_str()) {
                first_response.entry(call_id).or_insert(slot);
            }
        }
        let mut plans = Vec::new();
        let mut missing = Vec::new();
        let calls = messages.iter().filter_map(|message| match message {
            ModelMessage::Assistant(assistant) => Some(assistant.part_slice()),
            _ => None,
        });
        for part in calls.flatten() {
            let AssistantPart::ToolCall(call) = part else { continue };
            let id = call.tool_call_id.as_str();
            let result = if call.is_provider_executed() { None } else { results.get(id).copied() };
            if result.is_none() && !call.is_provider_executed() {
                missing.push(call.tool_call_id.clone());
            }
            plans.push(CallPlan { result, response: first_response.get(id).copied() });
        }
        if missing.is_empty() { Ok(plans) } else { Err(EngineError::MissingToolResults { tool_call_ids: missing }) }
    }
}

/// Where a part of a tool message is.
#[derive(Debug, Clone, Copy)]
struct Slot {
    message_index: usize,
    part_index: usize,
}

/// What one call takes along into the prompt.
#[derive(Debug)]
struct CallPlan {
    /// Its first result (local calls only).
    result: Option<Slot>,
    /// The first answer to its approval request.
    response: Option<Slot>,
}

/// The assistant message as the model sees it (its approval requests
/// removed, edited inputs in place); the tool parts that follow it are left in `results`.
fn rewrite_assistant(
    assistant: AssistantMessage,
    plans: &mut impl Iterator<Item = CallPlan>,
    messages: &mut [ModelMessage],
    results: &mut Vec<ToolPart>,
) -> Option<AssistantMessage> {
    let AssistantMessage { content, provider_options } = assistant;
    let mut parts = match content {
        AssistantContent::Text(text) if text.is_empty() => return None,
        AssistantContent::Text(text) => {
            return Some(AssistantMessage { content: AssistantContent::Text(text), provider_options });
        }
        AssistantContent::Parts(parts) => parts,
    };
    let mut requests = false;
    for part in &mut parts {
        match part {
            AssistantPart::ToolApprovalRequest(_) => requests = true,
            AssistantPart::ToolCall(call) => {
                let Some(plan) = plans.next() else { continue };
                let response = plan.response.and_then(|slot| match take(messages, slot) {
                    Some(ToolPart::ToolApprovalResponse(response)) => Some(response),
                    _ => None,
                });
                if call.is_provider_executed() {
                    results.extend(response.map(|response| {
                        ToolPart::ToolApprovalResponse(ToolApprovalResponsePart {
                            edited_input: None,
                            provider_executed: Some(true),
                            ..response
                        })
                    }));
                } else if let Some(ToolPart::ToolResult(result)) = plan.result.and_then(|slot| take(messages, slot)) {
                    if !result.output.is_denied()
                        && let Some(ToolApprovalResponsePart { approved: true, edited_input: Some(edited), .. }) =
                            response
                    {
                        call.input = edited;
                    }
                    results.push(ToolPart::ToolResult(result));
                }
            }
            AssistantPart::Text(_)
            | AssistantPart::Reasoning(_)
            | AssistantPart::File(_)
            | AssistantPart::ToolResult(_) => {}
        }
    }
    if requests {
        parts.retain(|part| !matches!(part, AssistantPart::ToolApprovalRequest(_)));
        parts.shrink_to_fit();
    }
    (!parts.is_empty()).then_some(AssistantMessage { content: AssistantContent::Parts(parts), provider_options })
}

/// Takes the tool part at `slot` out of its message, leaving an empty answer in its place.
fn take(messages: &mut [ModelMessage], slot: Slot) -> Option<ToolPart> {
    let ModelMessage::Tool(tool) = messages.get_mut(slot.message_index)? else { return None };
    let part = tool.content.get_mut(slot.part_index)?;
    Some(std::mem::replace(part, ToolPart::ToolApprovalResponse(empty_response())))
}

fn empty_response() -> ToolApprovalResponsePart {
    ToolApprovalResponsePart {
        approval_id: String::new(),
        approved: false,
        reason: None,
        provider_executed: None,
        edited_input: None,
    }
}

fn empty_tool_message() -> ModelMessage {
    ModelMessage::Tool(ToolMessage { content: Vec::new(), provider_options: None })
}

/// A user message without leftover approval parts; `None` if nothing is left.
fn without_approval_parts(mut user: UserMessage) -> Option<UserMessage> {
    let approvals = user.has_approval_parts();
    if let UserContent::Parts(parts) = &mut user.content {
        if approvals {
            parts.retain(|part| !matches!(part, UserPart::ToolApproval(_)));
            parts.shrink_to_fit();
        }
        if parts.is_empty() {
            return None;
        }
    }
    Some(user)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};
    use toolgate_protocol::parse_messages;

    fn prompt_of(history: Value) -> Result<Value, EngineError> {
        build_prompt(&parse_messages(history).unwrap()).map(|prompt| serde_json::to_value(prompt).unwrap())
    }

    #[test]
    fn strips_approval_parts_moves_results_and_drops_leftovers() {
        let prompt = prompt_of(json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "tool-approval-request", "approvalId": "orphan", "toolCallId": "nothing"}
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "working"},
                {"type": "tool-call", "toolCallId": "a", "toolName": "t", "input": {}},
                {"type": "tool-call", "toolCallId": "b", "toolName": "t", "input": {}},
                {"type": "tool-approval-request", "approvalId": "ap", "toolCallId": "b"}
            ]},
            {"role": "tool", "content": [
                {"type": "tool-result", "toolCallId": "a", "toolName": "t", "output": {"type": "text", "value": "A"}},
                {"type": "tool-result", "toolCallId": "ghost", "toolName": "t", "output": {"type": "text", "value": "?"}}
            ]},
            {"role": "user", "content": "and?"},
            {"role": "tool", "content": [
                {"type": "tool-approval-response", "approvalId": "ap", "approved": false},
                {"type": "tool-result", "toolCallId": "b", "toolName": "t", "output": {"type": "execution-denied"}},
                {"type": "tool-result", "toolCallId": "a", "toolName": "t", "output": {"type": "text", "value": "dup"}}
            ]},
            {"role": "assistant", "content": ""}
        ]))
        .unwrap();
        assert_eq!(
            prompt,
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "working"},
                    {"type": "tool-call", "toolCallId": "a", "toolName": "t", "input": {}},
                    {"type": "tool-call", "toolCallId": "b", "toolName": "t", "input": {}}
                ]},
                {"role": "tool", "content": [
                    {"type": "tool-result", "toolCallId": "a", "toolName": "t", "output": {"type": "text", "value": "A"}},
                    {"type": "tool-result", "toolCallId": "b", "toolName": "t", "output": {"type": "execution-denied"}}
                ]},
                {"role": "user", "content": "and?"}
            ])
        );
    }

    #[test]
    fn prompt_messages_hold_their_parts_without_spare_room() {
        let history = parse_messages(json!([
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [
                {"type": "tool-call", "toolCallId": "a", "toolName": "t", "input": {}},
                {"type": "tool-approval-request", "approvalId": "ap", "toolCallId": "a"}
            ]},
            {"role": "tool", "content": [
                {"type": "tool-approval-response", "approvalId": "ap", "approved": true},
                {"type": "tool-result", "toolCallId": "a", "toolName": "t", "output": {"type": "text", "value": "A"}}
            ]}
        ]))
        .unwrap();
        let prompt = build_prompt(&history).unwrap();
        assert_eq!(prompt.len(), 3);
        for message in &prompt {
            let (len, capacity) = match message {
                ModelMessage::Assistant(AssistantMessage { content: AssistantContent::Parts(parts), .. }) => {
                    (parts.len(), parts.capacity())
                }
                ModelMessage::Tool(tool) => (tool.content.len(), tool.content.capacity()),
                ModelMessage::User(UserMessage { content: UserContent::Parts(parts), .. }) => {
                    (parts.len(), parts.capacity())
                }
                other => panic!("unexpected {other:?}"),
            };
            assert_eq!((len, capacity), (1, 1), "one part each, and room for no more: {message:?}");
        }
    }

    /// The text of the user message at `index` of `messages`.
    fn user_text(messages: &[ModelMessage], index: usize) -> &str {
        let ModelMessage::User(UserMessage { content: UserContent::Text(text), .. }) = &messages[index] else {
            panic!("a user message at {index}: {messages:?}")
        };
        text
    }

    #[test]
    fn into_prompt_builds_the_same_prompt_by_moving_the_history() {
        let history = parse_messages(json!([
            {"role": "user", "content": "delete a and b"},
            {"role": "assistant", "content": [
                {"type": "tool-call", "toolCallId": "a", "toolName": "t", "input": {"path": "a"}},
                {"type": "tool-approval-request", "approvalId": "ap", "toolCallId": "a"},
                {"type": "tool-call", "toolCallId": "p", "toolName": "mcp", "input": {}, "providerExecuted": true},
                {"type": "tool-approval-request", "approvalId": "pp", "toolCallId": "p"}
            ]},
            {"role": "tool", "content": [
                {"type": "tool-approval-response", "approvalId": "ap", "approved": true, "editedInput": {"path": "b"}},
                {"type": "tool-approval-response", "approvalId": "pp", "approved": false, "reason": "no"},
                {"type": "tool-result", "toolCallId": "a", "toolName": "t", "output": {"type": "json", "value": "gone"}}
            ]}
        ]))
        .unwrap();
        let text = user_text(&history, 0).as_ptr();
        let copied = build_prompt(&history).unwrap();
        let moved = into_prompt(history).unwrap();
        assert_eq!(moved, copied);
        assert_eq!(user_text(&moved, 0).as_ptr(), text, "the history's own text, not a copy");
        assert_eq!(
            serde_json::to_value(&moved).unwrap(),
            json!([
                {"role": "user", "content": "delete a and b"},
                {"role": "assistant", "content": [
                    {"type": "tool-call", "toolCallId": "a", "toolName": "t", "input": {"path": "b"}},
                    {"type": "tool-call", "toolCallId": "p", "toolName": "mcp", "input": {}, "providerExecuted": true}
                ]},
                {"role": "tool", "content": [
                    {"type": "tool-result", "toolCallId": "a", "toolName": "t", "output": {"type": "json", "value": "gone"}},
                    {"type": "tool-approval-response", "approvalId": "pp", "approved": false, "reason": "no",
                     "providerExecuted": true}
                ]}
            ])
        );
    }

    #[test]
    fn appending_in_pieces_checks_every_call_against_the_whole_prompt() {
        let turn = |id: &str, text: &str| {
            parse_messages(json!([
                {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": id, "toolName": "t", "input": {}}]},
                {"role": "tool", "content": [
                    {"type": "tool-result", "toolCallId": id, "toolName": "t", "output": {"type": "text", "value": text}}
                ]}
            ]))
            .unwrap()
        };
        let first = [vec![ModelMessage::user("go")], turn("a", "A")].concat();
        let whole = build_prompt(&[first.clone(), turn("b", "B")].concat()).unwrap();
        let mut calls = CallIds::default();
        let mut prompt = Vec::new();
        calls.append(first, &mut prompt).unwrap();
        calls.append(turn("b", "B"), &mut prompt).unwrap();
        assert_eq!(prompt, whole, "in pieces as in one");

        let before = prompt.clone();
        let error = calls.append(turn("a", "again"), &mut prompt).unwrap_err();
        assert_eq!(error, EngineError::DuplicateToolCallId { tool_call_id: "a".into() }, "a call of an earlier piece");
        let unanswered = parse_messages(json!([
            {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "c", "toolName": "t", "input": {}}]}
        ]))
        .unwrap();
        let error = calls.append(unanswered, &mut prompt).unwrap_err();
        assert_eq!(error, EngineError::MissingToolResults { tool_call_ids: vec!["c".into()] });
        assert_eq!(prompt, before, "nothing appended on an error");
    }

    #[test]
    fn provider_results_stay_with_the_assistant_and_missing_results_are_named() {
        let prompt = prompt_of(json!([
            {"role": "assistant", "content": [
                {"type": "tool-call", "toolCallId": "p", "toolName": "web_search", "input": {}, "providerExecuted": true},
                {"type": "tool-result", "toolCallId": "p", "toolName": "web_search", "output": {"type": "json", "value": []}}
            ]}
        ]))
        .unwrap();
        assert_eq!(prompt.as_array().unwrap().len(), 1);
        let missing = prompt_of(json!([
            {"role": "assistant", "content": [
                {"type": "tool-call", "toolCallId": "x", "toolName": "t", "input": {}},
                {"type": "tool-call", "toolCallId": "y", "toolName": "t", "input": {}}
            ]}
        ]));
        assert_eq!(
            missing.unwrap_err(),
            EngineError::MissingToolResults { tool_call_ids: vec!["x".into(), "y".into()] }
        );
    }
}
