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
//! It runs in time linear in the history size.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use toolgate_protocol::{
    AssistantContent, AssistantMessage, AssistantPart, ModelMessage, ToolApprovalResponsePart, ToolMessage, ToolPart,
    ToolResultPart, UserContent, UserMessage, UserPart,
};

use crate::EngineError;

/// Builds the model prompt from a normalized history (see the module docs).
pub fn build_prompt(history: &[ModelMessage]) -> Result<Vec<ModelMessage>, EngineError> {
    let index = HistoryIndex::new(history);
    if let Some(tool_call_id) = index.duplicate_call {
        return Err(EngineError::DuplicateToolCallId { tool_call_id: tool_call_id.to_owned() });
    }
    let mut prompt = Vec::with_capacity(history.len());
    let mut missing = Vec::new();
    let mut buffers = Buffers::default();
    for message in history {
        match message {
            ModelMessage::System(_) => prompt.push(message.clone()),
            ModelMessage::User(user) => {
                if let Some(user) = without_approval_parts(user) {
                    prompt.push(ModelMessage::User(user));
                }
            }
            ModelMessage::Tool(_) => {}
            ModelMessage::Assistant(assistant) => {
                if let Some(assistant) = index.rewrite_assistant(assistant, &mut missing, &mut buffers) {
                    prompt.push(ModelMessage::Assistant(assistant));
                }
                if !buffers.tool.is_empty() {
                    prompt.push(ModelMessage::Tool(ToolMessage {
                        content: exact(&mut buffers.tool),
                        provider_options: None,
                    }));
                }
            }
        }
    }
    if missing.is_empty() { Ok(prompt) } else { Err(EngineError::MissingToolResults { tool_call_ids: missing }) }
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

struct HistoryIndex<'h> {
    results: HashMap<&'h str, &'h ToolResultPart>,
    call_of_approval: HashMap<&'h str, &'h str>,
    first_response: HashMap<&'h str, &'h ToolApprovalResponsePart>,
    edited_inputs: HashMap<&'h str, &'h Value>,
    duplicate_call: Option<&'h str>,
}

impl<'h> HistoryIndex<'h> {
    /// Indexes `history`; its length sizes the maps, so they seldom grow by rehashing.
    fn new(history: &'h [ModelMessage]) -> Self {
        let mut index = Self {
            results: HashMap::with_capacity(history.len()),
            call_of_approval: HashMap::with_capacity(history.len()),
            first_response: HashMap::new(),
            edited_inputs: HashMap::new(),
            duplicate_call: None,
        };
        let mut responses = Vec::new();
        let mut calls = HashSet::with_capacity(history.len());
        for message in history {
            match message {
                ModelMessage::Assistant(assistant) => {
                    for part in assistant.part_slice() {
                        match part {
                            AssistantPart::ToolApprovalRequest(request) => {
                                index.call_of_approval.entry(&request.approval_id).or_insert(&request.tool_call_id);
                            }
                            AssistantPart::ToolCall(call) => {
                                if !calls.insert(call.tool_call_id.as_str()) {
                                    index.duplicate_call.get_or_insert(&call.tool_call_id);
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
                    for part in &tool.content {
                        match part {
                            ToolPart::ToolResult(result) => {
                                index.results.entry(&result.tool_call_id).or_insert(result);
                            }
                            ToolPart::ToolApprovalResponse(response) => responses.push(response),
                        }
                    }
                }
                ModelMessage::System(_) | ModelMessage::User(_) => {}
            }
        }
        for response in responses {
            let Some(&call_id) = index.call_of_approval.get(response.approval_id.as_str()) else { continue };
            if index.first_response.contains_key(call_id) {
                continue;
            }
            index.first_response.insert(call_id, response);
            if response.approved
                && let Some(edited) = &response.edited_input
            {
                index.edited_inputs.insert(call_id, edited);
            }
        }
        index
    }

    /// The assistant message as the model sees it; the tool parts that follow it are left in `buffers.tool`.
    fn rewrite_assistant(
        &self,
        assistant: &AssistantMessage,
        missing: &mut Vec<String>,
        buffers: &mut Buffers,
    ) -> Option<AssistantMessage> {
        let parts = match &assistant.content {
            AssistantContent::Text(text) if text.is_empty() => return None,
            AssistantContent::Text(_) => return Some(assistant.clone()),
            AssistantContent::Parts(parts) => parts,
        };
        let Buffers { assistant: kept, tool: tool_parts } = buffers;
        for part in parts {
            match part {
                AssistantPart::ToolApprovalRequest(_) => {}
                AssistantPart::ToolCall(call) => {
                    let mut call = call.clone();
                    if call.is_provider_executed() {
                        let response = self.first_response.get(call.tool_call_id.as_str());
                        tool_parts.extend(response.map(|response| {
                            ToolPart::ToolApprovalResponse(ToolApprovalResponsePart {
                                edited_input: None,
                                provider_executed: Some(true),
                                ..(*response).clone()
                            })
                        }));
                    } else {
                        let result = self.results.get(call.tool_call_id.as_str());
                        let ran = result.is_some_and(|result| !result.output.is_denied());
                        if let Some(&edited) = self.edited_inputs.get(call.tool_call_id.as_str())
                            && ran
                        {
                            call.input = edited.clone();
                        }
                        match result {
                            Some(&result) => tool_parts.push(ToolPart::ToolResult(result.clone())),
                            None => missing.push(call.tool_call_id.clone()),
                        }
                    }
                    kept.push(AssistantPart::ToolCall(call));
                }
                other => kept.push(other.clone()),
            }
        }
        (!kept.is_empty()).then(|| AssistantMessage {
            content: AssistantContent::Parts(exact(kept)),
            provider_options: assistant.provider_options.clone(),
        })
    }
}

/// Where a rewritten assistant message's parts gather before they move into
/// vectors of their exact size (pushed one at a time, a message's few parts
/// would hold room for four or more).
#[derive(Default)]
struct Buffers {
    assistant: Vec<AssistantPart>,
    tool: Vec<ToolPart>,
}

/// Moves what `buffer` holds into a vector of exactly its length, keeping the buffer's room.
#[allow(clippy::drain_collect, reason = "`mem::take` would hand over the buffer's spare room too")]
fn exact<T>(buffer: &mut Vec<T>) -> Vec<T> {
    buffer.drain(..).collect()
}

/// A user message without leftover approval parts; `None` if nothing is left.
fn without_approval_parts(user: &UserMessage) -> Option<UserMessage> {
    let UserContent::Parts(parts) = &user.content else {
        return Some(user.clone());
    };
    if !user.has_approval_parts() {
        return (!parts.is_empty()).then(|| user.clone());
    }
    let kept: Vec<UserPart> = parts.iter().filter(|p| !matches!(p, UserPart::ToolApproval(_))).cloned().collect();
    (!kept.is_empty())
        .then(|| UserMessage { content: UserContent::Parts(kept), provider_options: user.provider_options.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;
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
