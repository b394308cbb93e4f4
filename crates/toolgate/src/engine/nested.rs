//! How a sub-agent's approvals travel through the engine call above it.
//!
//! **Up.** A sub-agent that pauses on approvals ends its tool call with its
//! approval requests instead of a result (`ToolError::paused`, which only
//! the engine builds). The step above does not give the call a result: it
//! *surfaces* each request in its own assistant message as a marked call (a
//! `tool-call` part whose id is the agent call's id, `/`, the inner call's
//! id, whose `providerOptions.toolgate.subAgent.lineage` names the agent
//! calls down to the one that made it) followed by the approval request, the
//! same approval id. So every level holds the request, and the root's
//! response holds it as a call a stock client can answer.
//!
//! **Down.** Before anything else, each engine call [`split`]s its history:
//! every marked part (the calls, their requests, the answers to them and any
//! results) is taken out, so neither the model, the prompt checks nor the
//! answer checks of this level ever see a call this level did not make. The
//! answers to marked requests are grouped by the agent call at this level
//! that leads to them (`lineage[0]`): each such call without a result is
//! *resumed* with its answers (see `super::agent`), which hands them one
//! level down, where they are ordinary answers again, checked and claimed
//! where the call was made. A marked request with no answer is open (the
//! request fails as for any open approval) or, when a user message follows
//! it, passed down as a denial nobody gave ([`NO_ANSWER_REASON`]).
//!
//! The marks only route: what decides is the record the answer claims at
//! the depth of its call. A forged or moved mark sends an answer to a
//! sub-run whose history does not hold that approval, which refuses it.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};
use toolgate_protocol::{
    AssistantContent, AssistantMessage, AssistantPart, ModelMessage, StreamPart, ToolApprovalRequestPart,
    ToolApprovalResponsePart, ToolCallInfo, ToolCallPart, ToolPart,
};

use super::stream::Emitter;
use super::{ApprovalRequest, LineageStep};
use crate::EngineError;
use crate::approval::NO_ANSWER_REASON;

/// The key of toolgate's own entry in a call's `providerOptions`.
const OPTIONS_KEY: &str = "toolgate";
/// The key of the sub-agent mark under it.
const MARK_KEY: &str = "subAgent";

/// An agent call of this level to resume, with the answers for approvals below it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Resume {
    /// The agent call (at this level) that leads to the answered approvals.
    pub call_id: String,
    /// The answers, in the order their requests appear.
    pub answers: Vec<ToolApprovalResponsePart>,
}

/// The lineage a call's mark names, when it is a surfaced sub-agent call.
pub(crate) fn mark_of(call: &ToolCallPart) -> Option<Vec<LineageStep>> {
    let mark = call.provider_options.as_ref()?.get(OPTIONS_KEY)?.get(MARK_KEY)?.get("lineage")?;
    serde_json::from_value::<Vec<LineageStep>>(mark.clone()).ok().filter(|lineage| !lineage.is_empty())
}

/// `requests` of a sub-agent run by the call `step`, as the level above surfaces them.
pub(crate) fn lift(requests: &[ApprovalRequest], step: &LineageStep) -> Vec<ApprovalRequest> {
    requests
        .iter()
        .map(|request| {
            let mut lineage = Vec::with_capacity(request.lineage.len() + 1);
            lineage.push(step.clone());
            lineage.extend(request.lineage.iter().cloned());
            let mut call = request.tool_call.clone();
            call.tool_call_id = format!("{}/{}", step.tool_call_id, call.tool_call_id);
            let mut options = call.provider_options.take().unwrap_or_default();
            options.insert(OPTIONS_KEY.to_owned(), json!({ MARK_KEY: { "lineage": lineage } }));
            call.provider_options = Some(options);
            ApprovalRequest { tool_call: call, lineage, ..request.clone() }
        })
        .collect()
}

/// The preliminary result of an agent call that paused on `requests`: what
/// it waits for (`{"status": "awaiting-approval", "agent", "pending": [...]}`).
/// Clients read the call as answered for now (a stock AI SDK client then
/// sends the batch once the surfaced requests are answered); the history
/// never keeps a preliminary output as a result.
pub(crate) fn waiting_part(call: &ToolCallPart, requests: &[ApprovalRequest]) -> StreamPart {
    let pending: Vec<Value> = requests
        .iter()
        .map(|request| {
            json!({
                "approvalId": request.approval_id,
                "toolCallId": request.tool_call.tool_call_id,
                "toolName": request.tool_call.tool_name,
                "lineage": request.lineage,
            })
        })
        .collect();
    StreamPart::ToolResult {
        tool_call_id: call.tool_call_id.clone(),
        tool_name: call.tool_name.clone(),
        input: call.input.clone(),
        output: json!({ "status": "awaiting-approval", "agent": call.tool_name, "pending": pending }),
        provider_executed: None,
        preliminary: Some(true),
        dynamic: Some(true),
    }
}

/// Emits surfaced requests (each call, then its request) and returns their assistant parts.
pub(crate) async fn surface(requests: &[ApprovalRequest], out: &Emitter) -> Vec<AssistantPart> {
    let mut parts = Vec::with_capacity(requests.len() * 2);
    for request in requests {
        let call = &request.tool_call;
        let info = ToolCallInfo {
            tool_call_id: call.tool_call_id.clone(),
            tool_name: call.tool_name.clone(),
            input: call.input.clone(),
            provider_executed: None,
            dynamic: Some(true),
            invalid: None,
            error: None,
            provider_metadata: call.provider_options.clone(),
        };
        out.emit(StreamPart::ToolCall(info.clone())).await;
        out.emit(StreamPart::ToolApprovalRequest {
            approval_id: request.approval_id.clone(),
            tool_call: info,
            signature: request.signature.clone(),
            reason: request.reason.clone(),
            routing: request.route.as_ref().map(|route| toolgate_protocol::ApprovalRouting {
                approvers: route.approvers.clone(),
                quorum: route.quorum,
            }),
        })
        .await;
        parts.push(AssistantPart::ToolCall(call.clone()));
        parts.push(AssistantPart::ToolApprovalRequest(ToolApprovalRequestPart {
            approval_id: request.approval_id.clone(),
            tool_call_id: call.tool_call_id.clone(),
            signature: request.signature.clone(),
        }));
    }
    parts
}

/// What [`split`] found in a history's marked parts.
#[derive(Default)]
struct Marks {
    /// Marked call id -> the agent call of this level that leads to it.
    calls: HashMap<String, String>,
    /// Requests of marked calls: (approval id, agent call, index of the message holding it).
    requests: Vec<(String, String, usize)>,
    /// The first answer to each of them.
    answers: HashMap<String, ToolApprovalResponsePart>,
    /// Calls with a result.
    results: HashSet<String>,
    last_user_message: Option<usize>,
}

impl Marks {
    fn of(history: &[ModelMessage]) -> Self {
        let mut marks = Marks::default();
        for message in history {
            if let ModelMessage::Assistant(assistant) = message {
                for part in assistant.part_slice() {
                    if let AssistantPart::ToolCall(call) = part
                        && let Some(lineage) = mark_of(call)
                    {
                        marks.calls.insert(call.tool_call_id.clone(), lineage[0].tool_call_id.clone());
                    }
                }
            }
        }
        if marks.calls.is_empty() {
            return marks;
        }
        for (index, message) in history.iter().enumerate() {
            match message {
                ModelMessage::Assistant(assistant) => {
                    for part in assistant.part_slice() {
                        match part {
                            AssistantPart::ToolApprovalRequest(request) => {
                                if let Some(top) = marks.calls.get(&request.tool_call_id) {
                                    marks.requests.push((request.approval_id.clone(), top.clone(), index));
                                }
                            }
                            AssistantPart::ToolResult(result) => {
                                marks.results.insert(result.tool_call_id.clone());
                            }
                            _ => {}
                        }
                    }
                }
                ModelMessage::Tool(tool) => {
                    for part in &tool.content {
                        match part {
                            ToolPart::ToolResult(result) => {
                                marks.results.insert(result.tool_call_id.clone());
                            }
                            ToolPart::ToolApprovalResponse(response) => {
                                marks.answers.entry(response.approval_id.clone()).or_insert_with(|| response.clone());
                            }
                        }
                    }
                }
                ModelMessage::User(_) => marks.last_user_message = Some(index),
                ModelMessage::System(_) => {}
            }
        }
        marks
    }
}

/// Takes the marked parts out of `history` and groups their answers by the
/// agent call to resume (see the module docs). Linear in the history.
pub(crate) fn split(history: Vec<ModelMessage>) -> Result<(Vec<ModelMessage>, Vec<Resume>), EngineError> {
    let marks = Marks::of(&history);
    if marks.calls.is_empty() {
        return Ok((history, Vec::new()));
    }
    let marked_approvals: HashSet<&str> = marks.requests.iter().map(|(id, _, _)| id.as_str()).collect();
    let mut resumes: Vec<Resume> = Vec::new();
    let mut open = Vec::new();
    for (approval_id, top, index) in &marks.requests {
        if marks.results.contains(top) {
            continue;
        }
        let answer = match marks.answers.get(approval_id) {
            Some(answer) => answer.clone(),
            None if marks.last_user_message.is_some_and(|user| user > *index) => ToolApprovalResponsePart {
                approval_id: approval_id.clone(),
                approved: false,
                reason: Some(NO_ANSWER_REASON.to_owned()),
                provider_executed: None,
                edited_input: None,
            },
            None => {
                open.push(approval_id.clone());
                continue;
            }
        };
        match resumes.iter_mut().find(|resume| &resume.call_id == top) {
            Some(resume) => resume.answers.push(answer),
            None => resumes.push(Resume { call_id: top.clone(), answers: vec![answer] }),
        }
    }
    if !open.is_empty() {
        return Err(EngineError::UnansweredApprovals { approval_ids: open });
    }
    let history = history.into_iter().filter_map(|message| strip(message, &marks, &marked_approvals)).collect();
    Ok((history, resumes))
}

/// The message without marked parts (`None` when nothing is left of it).
fn strip(message: ModelMessage, marks: &Marks, approvals: &HashSet<&str>) -> Option<ModelMessage> {
    match message {
        ModelMessage::Assistant(AssistantMessage { content: AssistantContent::Parts(parts), provider_options }) => {
            let parts: Vec<AssistantPart> = parts
                .into_iter()
                .filter(|part| match part {
                    AssistantPart::ToolCall(call) => !marks.calls.contains_key(&call.tool_call_id),
                    AssistantPart::ToolApprovalRequest(request) => !marks.calls.contains_key(&request.tool_call_id),
                    AssistantPart::ToolResult(result) => !marks.calls.contains_key(&result.tool_call_id),
                    _ => true,
                })
                .collect();
            (!parts.is_empty()).then(|| {
                ModelMessage::Assistant(AssistantMessage { content: AssistantContent::Parts(parts), provider_options })
            })
        }
        ModelMessage::Tool(mut tool) => {
            tool.content.retain(|part| match part {
                ToolPart::ToolResult(result) => !marks.calls.contains_key(&result.tool_call_id),
                ToolPart::ToolApprovalResponse(response) => !approvals.contains(response.approval_id.as_str()),
            });
            (!tool.content.is_empty()).then_some(ModelMessage::Tool(tool))
        }
        other => Some(other),
    }
}

/// The answers as the tool message a resumed sub-run's history gets.
pub(crate) fn answers_message(answers: Vec<ToolApprovalResponsePart>) -> ModelMessage {
    ModelMessage::tool(answers.into_iter().map(ToolPart::ToolApprovalResponse).collect())
}

/// A failure of a sub-agent as its parent's tool reads it.
pub(crate) fn failure(agent: &str, code: &str, message: impl Into<String>) -> Value {
    json!({ "error": code, "agent": agent, "message": message.into() })
}
