//! The UI chunks that bring a client's copy of a stored assistant message up
//! to date, so a repeated request is answered from the record, exactly as the
//! first answer streamed it, without running anything again.

use toolgate_ui::{ToolState, UiChunk, UiMessage, UiPart, UiToolPart};

/// Chunks that turn `client` (the client's copy, `None` when it has none)
/// into `stored`: the outcome of each tool part the client has in an earlier
/// state, then every part the client lacks.
pub(crate) fn replay_chunks(client: Option<&UiMessage>, stored: &UiMessage) -> Vec<UiChunk> {
    replay(client, stored, false)
}

/// [`replay_chunks`]; with `answered_requests`, a tool part whose approval
/// was answered (and is being acted on) comes back as its request.
fn replay(client: Option<&UiMessage>, stored: &UiMessage, answered_requests: bool) -> Vec<UiChunk> {
    let mut chunks = vec![UiChunk::Start { message_id: Some(stored.id.clone()) }];
    let known = client.map_or(0, |client| client.parts.len().min(stored.parts.len()));
    if let Some(client) = client {
        for part in &client.parts {
            let UiPart::Tool(theirs) = part else { continue };
            let ours = stored.parts.iter().find_map(|part| match part {
                UiPart::Tool(tool) if tool.tool_call_id == theirs.tool_call_id => Some(tool),
                _ => None,
            });
            if let Some(ours) = ours.filter(|ours| ours.state != theirs.state) {
                chunks.extend(outcome(ours));
            }
        }
    }
    let mut in_step = false;
    for (index, part) in stored.parts.iter().enumerate().skip(known) {
        let id = format!("replay-{index}");
        match part {
            UiPart::StepStart => {
                if in_step {
                    chunks.push(UiChunk::FinishStep);
                }
                chunks.push(UiChunk::StartStep);
                in_step = true;
            }
            UiPart::Text { text } => chunks.extend([
                UiChunk::TextStart { id: id.clone() },
                UiChunk::TextDelta { id: id.clone(), delta: text.clone() },
                UiChunk::TextEnd { id },
            ]),
            UiPart::Reasoning { text } => chunks.extend([
                UiChunk::ReasoningStart { id: id.clone() },
                UiChunk::ReasoningDelta { id: id.clone(), delta: text.clone() },
                UiChunk::ReasoningEnd { id },
            ]),
            UiPart::Tool(tool) => {
                chunks.push(UiChunk::ToolInputAvailable {
                    tool_call_id: tool.tool_call_id.clone(),
                    tool_name: tool.tool_name.clone(),
                    input: tool.input.clone().unwrap_or_default(),
                    provider_executed: tool.provider_executed,
                    dynamic: tool.dynamic.then_some(true),
                    provider_metadata: tool.call_provider_metadata.clone(),
                });
                match (tool.state, &tool.approval) {
                    (ToolState::ApprovalResponded, Some(approval)) if answered_requests => {
                        chunks.push(UiChunk::ToolApprovalRequest {
                            approval_id: approval.id.clone(),
                            tool_call_id: tool.tool_call_id.clone(),
                            signature: approval.signature.clone(),
                        });
                    }
                    _ => chunks.extend(outcome(tool)),
                }
            }
            UiPart::Other(raw) => chunks.extend(data_part(raw)),
            UiPart::File { .. } | UiPart::ToolApproval { .. } => {}
        }
    }
    if in_step {
        chunks.push(UiChunk::FinishStep);
    }
    chunks.push(UiChunk::Finish { finish_reason: None });
    chunks
}

/// The chunks a client that resumes the stream of a running continuation of `message`
/// needs first: the message as it stood when the continuation started (the
/// AI SDK's default `resumeStream` treats the resumed stream as a replay of
/// the whole message and starts it over at its first `start` chunk; the
/// continuation's own frames follow).
pub(crate) fn resume_prefix(message: &UiMessage) -> Vec<UiChunk> {
    let mut chunks = replay(None, message, true);
    chunks.pop(); // the `finish`: the continuation goes on
    chunks
}

/// toolgate's data parts (why a call waits, where an approval stands), as the chunks that made them.
fn data_part(raw: &serde_json::Value) -> Option<UiChunk> {
    let id = raw["id"].as_str()?.to_owned();
    let data = raw.get("data")?.clone();
    match raw["type"].as_str()? {
        toolgate_ui::REASON_PART => Some(UiChunk::Reason { id, data }),
        toolgate_ui::APPROVAL_PART => Some(UiChunk::Approval { id, data }),
        _ => None,
    }
}

/// The chunk that puts a tool part in its stored state (none for the input states).
fn outcome(tool: &UiToolPart) -> Option<UiChunk> {
    let tool_call_id = tool.tool_call_id.clone();
    let dynamic = tool.dynamic.then_some(true);
    match tool.state {
        ToolState::InputStreaming | ToolState::InputAvailable | ToolState::ApprovalResponded => None,
        ToolState::ApprovalRequested => tool.approval.as_ref().map(|approval| UiChunk::ToolApprovalRequest {
            approval_id: approval.id.clone(),
            tool_call_id,
            signature: approval.signature.clone(),
        }),
        ToolState::OutputAvailable => Some(UiChunk::ToolOutputAvailable {
            tool_call_id,
            output: tool.output.clone().unwrap_or_default(),
            provider_executed: tool.provider_executed,
            dynamic,
            preliminary: None,
        }),
        ToolState::OutputError => Some(UiChunk::ToolOutputError {
            tool_call_id,
            error_text: tool.error_text.clone().unwrap_or_default(),
            provider_executed: tool.provider_executed,
            dynamic,
        }),
        ToolState::OutputDenied => Some(UiChunk::ToolOutputDenied { tool_call_id }),
    }
}
