//! Server-side conversations: with a store, the server keeps each chat's UI
//! messages and its copy is the truth.
//!
//! A request is reconciled with the stored conversation before anything runs:
//! - A client may send only its newest message(s) (the AI SDK's
//!   `prepareSendMessagesRequest` pattern): messages whose ids the server
//!   does not know are appended after the stored ones.
//! - A message the server stored is taken from the server's copy. The client's
//!   version of it is checked: its tool parts must be ones the server
//!   produced (same call id, tool and input, and the same approval id,
//!   output or error where the client repeats them). The only changes a
//!   client may make are its answers: an approval request answered
//!   (`approval-requested` → `approval-responded`, same approval id) and the
//!   result of a client-executed tool (`input-available` → `output-*`). Anything
//!   else is refused with 400 `history_mismatch`, naming the message and call.
//! - New messages come after every stored one the client repeats, and a new
//!   assistant message may not hold tool parts (the server never produced them).
//! - `trigger: "regenerate-message"` drops the stored messages after the last
//!   one the client repeats, as the client did.
//!
//! After the response, the server stores the conversation with the assistant
//! message the client assembled from the stream (optimistically: when another
//! request saved the same chat meanwhile, the first save stands).

use std::collections::{HashMap, HashSet};

use axum::http::StatusCode;
use serde_json::Value;
use serde_json::json;
use toolgate::ledger::{AuditEvent, AuditKind, Ledger, LedgerStore, Millis, StoredConversation};
use toolgate::{Decision, Toolkit};
use toolgate_ui::{ChatRequest, ToolState, UiChunk, UiMessage, UiPart, UiRole, UiToolPart, parse_ui_messages};

use super::replay::replay_chunks;
use crate::error::ApiError;

/// A request's history after reconciliation, and the stored version it extends.
pub(crate) struct Reconciled {
    /// The history to run: the stored messages with the client's answers, then its new messages.
    pub messages: Vec<UiMessage>,
    /// The stored version (`None` for a new conversation).
    pub version: Option<i64>,
    /// Set when the request repeats one the server already answered: stream
    /// this instead of running anything.
    pub replay: Option<Vec<UiChunk>>,
}

/// Reconciles a request with its stored conversation, as read before (see the module docs).
pub(crate) async fn reconcile(
    ledger: &Ledger,
    request: ChatRequest,
    stored: Option<StoredConversation>,
    toolkit: &Toolkit,
) -> Result<Reconciled, ApiError> {
    let store = ledger.config.store.as_ref();
    let (stored, version) = match stored {
        Some(stored) => {
            let messages = parse_ui_messages(stored.messages).map_err(|error| {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "corrupt_conversation", error.to_string())
            })?;
            (messages, Some(stored.version))
        }
        None => (Vec::new(), None),
    };
    let regenerate = request.trigger.as_deref() == Some("regenerate-message");
    let now = ledger.config.clock.now();
    let rejected = |approval_id: &str, tool_call_id: &str, why: String, answer: &str| {
        let data = json!({"why": why, "answer": answer});
        ledger.event(AuditKind::Rejected, approval_id, tool_call_id, now, data)
    };
    match merge(stored, request.messages, regenerate, toolkit) {
        Ok(merged) => {
            let events: Vec<AuditEvent> = merged
                .repeated
                .iter()
                .filter(|_| merged.replay.is_some())
                .map(|r| rejected(&r.approval_id, &r.tool_call_id, "replayed: already acted on".into(), &r.answer))
                .collect();
            if !events.is_empty() {
                store.append(&events).await?;
            }
            Ok(Reconciled { replay: merged.replay, messages: merged.messages, version })
        }
        Err(Refusal::Mismatch(detail)) => Err(ApiError::new(StatusCode::BAD_REQUEST, "history_mismatch", detail)),
        Err(Refusal::AlreadyDecided { approval_id, tool_call_id, recorded, received }) => {
            let message =
                format!("approval `{approval_id}` was already decided: recorded {recorded}, received {received}");
            store.append(&[rejected(&approval_id, &tool_call_id, message.clone(), &received.to_string())]).await?;
            Err(ApiError::new(StatusCode::CONFLICT, "approval_already_decided", message))
        }
    }
}

/// Stores the conversation (its key, and its owner when it is created) if
/// nobody saved it since `version`.
pub(crate) async fn save(
    store: &dyn LedgerStore,
    (chat_id, owner): (&str, Option<&str>),
    messages: &[UiMessage],
    version: Option<i64>,
    at: Millis,
) {
    let value = match serde_json::to_value(messages) {
        Ok(value) => value,
        Err(error) => {
            tracing::error!(chat = %chat_id, %error, "cannot encode the conversation");
            return;
        }
    };
    match store.save_conversation(chat_id, owner, &value, version, at).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            tracing::warn!(chat = %chat_id, "the conversation was saved by another request meanwhile; kept theirs")
        }
        Err(error) => tracing::error!(chat = %chat_id, %error, "cannot store the conversation"),
    }
}

/// Why a client's history is refused.
enum Refusal {
    /// It holds something the server never produced, or changed what it did.
    Mismatch(String),
    /// It answers an approval the server already decided otherwise.
    AlreadyDecided { approval_id: String, tool_call_id: String, recorded: Box<Decision>, received: Box<Decision> },
}

impl From<String> for Refusal {
    fn from(detail: String) -> Self {
        Self::Mismatch(detail)
    }
}

/// An answer the client repeated for an approval the server already acted on.
struct Repeated {
    approval_id: String,
    tool_call_id: String,
    answer: String,
}

/// What a client's tool part adds to the stored one.
enum ToolMerge {
    /// Nothing: the stored part stands.
    Unchanged,
    /// A new answer (or a client tool's result).
    Answered(Box<UiToolPart>),
    /// An answer the server already acted on, with the same decision.
    Repeated(Repeated),
}

/// The decision an approval object carries (edits compare as JSON values, whatever their key order).
fn decision(approval: &toolgate_ui::UiApproval) -> Option<Decision> {
    Some(match approval.approved? {
        false => Decision::Deny { reason: approval.reason.clone() },
        true => Decision::Approve { edited_input: approval.edited_input.clone() },
    })
}

/// The merged history, and the replay when the request adds nothing new.
struct Merged {
    messages: Vec<UiMessage>,
    replay: Option<Vec<UiChunk>>,
    repeated: Vec<Repeated>,
}

fn merge(
    mut stored: Vec<UiMessage>,
    client: Vec<UiMessage>,
    regenerate: bool,
    toolkit: &Toolkit,
) -> Result<Merged, Refusal> {
    let mut advanced = false;
    let mut repeated = Vec::new();
    let mut last_client: Option<UiMessage> = None;
    let positions: HashMap<String, usize> =
        stored.iter().enumerate().map(|(index, message)| (message.id.clone(), index)).collect();
    let mut last_repeated: Option<usize> = None;
    let mut fresh: Vec<UiMessage> = Vec::new();
    for message in client {
        match positions.get(&message.id).filter(|_| !message.id.is_empty()) {
            Some(&index) => {
                if !fresh.is_empty() {
                    return Err(Refusal::Mismatch(format!(
                        "message `{}` is not in the stored conversation but comes before stored message `{}`",
                        fresh[0].id, message.id
                    )));
                }
                if last_repeated.is_some_and(|last| last >= index) {
                    return Err(Refusal::Mismatch(format!("message `{}` is out of order", message.id)));
                }
                last_repeated = Some(index);
                let (merged, answered) = merge_message(&stored[index], &message, toolkit, &mut repeated)?;
                advanced |= answered;
                stored[index] = merged;
                last_client = Some(message);
            }
            None => {
                if message.role == UiRole::Assistant
                    && let Some(UiPart::Tool(part)) = message.parts.iter().find(|p| matches!(p, UiPart::Tool(_)))
                {
                    return Err(Refusal::Mismatch(format!(
                        "message `{}` holds tool call `{}`, which this server never produced",
                        message.id, part.tool_call_id
                    )));
                }
                fresh.push(message);
            }
        }
    }
    if regenerate {
        stored.truncate(last_repeated.map_or(0, |last| last + 1));
    }
    let replay = match (last_repeated, &last_client) {
        (Some(index), Some(client)) if fresh.is_empty() && !advanced && !regenerate => {
            replay_of(&stored, index, client)
        }
        _ => None,
    };
    stored.extend(fresh);
    Ok(Merged { messages: stored, replay, repeated })
}

/// The stream that brings a client that resent an answered request up to
/// date, when the request adds nothing: its last message is the stored
/// assistant message with fewer parts or earlier tool states (an answer
/// already acted on), or a user message the stored response follows.
fn replay_of(stored: &[UiMessage], index: usize, client: &UiMessage) -> Option<Vec<UiChunk>> {
    let last = stored.len() - 1;
    match client.role {
        UiRole::Assistant if index == last && is_behind(client, &stored[index]) => {
            Some(replay_chunks(Some(client), &stored[index]))
        }
        UiRole::User if index + 1 == last && stored[last].role == UiRole::Assistant => {
            Some(replay_chunks(None, &stored[last]))
        }
        _ => None,
    }
}

/// True when the client's copy of a stored message lacks parts or has tools in earlier states.
fn is_behind(client: &UiMessage, stored: &UiMessage) -> bool {
    let states: HashMap<&str, ToolState> =
        stored.tool_parts().map(|(_, tool)| (tool.tool_call_id.as_str(), tool.state)).collect();
    client.parts.len() < stored.parts.len()
        || client.parts.iter().any(|part| match part {
            UiPart::Tool(tool) => states.get(tool.tool_call_id.as_str()).is_some_and(|s| rank(tool.state) < rank(*s)),
            _ => false,
        })
}

/// The stored message with the client's answers applied, and whether it had any.
fn merge_message(
    stored: &UiMessage,
    client: &UiMessage,
    toolkit: &Toolkit,
    repeated: &mut Vec<Repeated>,
) -> Result<(UiMessage, bool), Refusal> {
    if stored.role != client.role {
        return Err(Refusal::Mismatch(format!("message `{}` has another role than the stored one", client.id)));
    }
    let mut merged = stored.clone();
    let mut answered_any = false;
    let tools: HashMap<&str, usize> =
        stored.tool_parts().map(|(index, tool)| (tool.tool_call_id.as_str(), index)).collect();
    let mut seen = HashSet::with_capacity(tools.len());
    for (_, theirs) in client.tool_parts() {
        let at = |detail: &str| format!("message `{}`, tool call `{}`: {detail}", client.id, theirs.tool_call_id);
        if !seen.insert(theirs.tool_call_id.as_str()) {
            // Two copies could carry two answers; the stored message has one part per call.
            return Err(Refusal::Mismatch(at("the message holds this tool call twice")));
        }
        let Some(&index) = tools.get(theirs.tool_call_id.as_str()) else {
            return Err(Refusal::Mismatch(at("this server never produced this tool call")));
        };
        let UiPart::Tool(ours) = &stored.parts[index] else { continue };
        let merge = merge_tool(ours, theirs, toolkit).map_err(|refusal| match refusal {
            Refusal::Mismatch(detail) => Refusal::Mismatch(at(&detail)),
            conflict => conflict,
        })?;
        match merge {
            ToolMerge::Unchanged => {}
            ToolMerge::Answered(answered) => {
                merged.parts[index] = UiPart::Tool(answered);
                answered_any = true;
            }
            ToolMerge::Repeated(answer) => repeated.push(answer),
        }
    }
    Ok((merged, answered_any))
}

/// How far a tool part is in its life.
fn rank(state: ToolState) -> u8 {
    match state {
        ToolState::InputStreaming => 0,
        ToolState::InputAvailable => 1,
        ToolState::ApprovalRequested => 2,
        ToolState::ApprovalResponded => 3,
        ToolState::OutputAvailable | ToolState::OutputError | ToolState::OutputDenied => 4,
    }
}

/// What the client's part adds to the stored one, or why it is refused.
fn merge_tool(ours: &UiToolPart, theirs: &UiToolPart, toolkit: &Toolkit) -> Result<ToolMerge, Refusal> {
    if ours.tool_name != theirs.tool_name {
        return Err(format!("it calls `{}` where the server has `{}`", theirs.tool_name, ours.tool_name).into());
    }
    if theirs.input.is_some() && theirs.input != ours.input && theirs.state != ToolState::InputStreaming {
        return Err(Refusal::Mismatch("its input differs from the input the model gave".into()));
    }
    let approval_id = |part: &UiToolPart| part.approval.as_ref().map(|approval| approval.id.clone());
    if approval_id(theirs).is_some() && approval_id(theirs) != approval_id(ours) {
        return Err(Refusal::Mismatch("its approval id is not the one the server issued".into()));
    }
    // An answer to an approval the server already decided: the same decision is a
    // repeat, another one a conflict.
    if let (Some(received), Some(recorded)) =
        (theirs.approval.as_ref().and_then(decision), ours.approval.as_ref().and_then(decision))
    {
        let approval_id = approval_id(ours).unwrap_or_default();
        if received.contradicts(&recorded) {
            let tool_call_id = ours.tool_call_id.clone();
            let (recorded, received) = (Box::new(recorded), Box::new(received));
            return Err(Refusal::AlreadyDecided { approval_id, tool_call_id, recorded, received });
        }
        if rank(theirs.state) < rank(ours.state) {
            let tool_call_id = ours.tool_call_id.clone();
            let answer = received.to_string();
            return Ok(ToolMerge::Repeated(Repeated { approval_id, tool_call_id, answer }));
        }
    }
    match (ours.state, theirs.state) {
        (ToolState::ApprovalRequested, ToolState::ApprovalResponded) => {
            let answer = theirs.approval.as_ref().filter(|approval| approval.approved.is_some());
            let Some(answer) = answer else {
                return Err(Refusal::Mismatch("it is approval-responded without a decision".into()));
            };
            let mut answered = ours.clone();
            answered.state = ToolState::ApprovalResponded;
            if let Some(approval) = answered.approval.as_mut() {
                approval.approved = answer.approved;
                approval.reason.clone_from(&answer.reason);
                approval.edited_input.clone_from(&answer.edited_input);
                // A grant with the answer (checked and kept by the step, `run::step`).
                approval.grant.clone_from(&answer.grant);
            }
            Ok(ToolMerge::Answered(Box::new(answered)))
        }
        (ToolState::InputAvailable, ToolState::OutputAvailable | ToolState::OutputError)
            if toolkit.get(&ours.tool_name).is_some_and(|tool| tool.is_client_executed()) =>
        {
            let mut answered = ours.clone();
            answered.state = theirs.state;
            answered.output.clone_from(&theirs.output);
            answered.error_text.clone_from(&theirs.error_text);
            Ok(ToolMerge::Answered(Box::new(answered)))
        }
        // A preliminary output (a paused sub-agent's progress) is no result: the client is behind.
        (ToolState::OutputAvailable | ToolState::OutputError | ToolState::OutputDenied, ToolState::OutputAvailable)
            if theirs.preliminary == Some(true) =>
        {
            Ok(ToolMerge::Unchanged)
        }
        (stored, client) if client == stored => {
            let same = |a: &Option<Value>, b: &Option<Value>| a.is_none() || a == b;
            let same_error = theirs.error_text.is_none() || theirs.error_text == ours.error_text;
            if same(&theirs.output, &ours.output) && same_error {
                Ok(ToolMerge::Unchanged)
            } else {
                Err(Refusal::Mismatch("its result differs from the result the server recorded".into()))
            }
        }
        (stored, client) if rank(client) < rank(stored) => Ok(ToolMerge::Unchanged),
        (stored, client) => {
            Err(format!("it is `{}` where the server has `{}`", client.as_str(), stored.as_str()).into())
        }
    }
}
