//! Stateless interrupts and resume.
//!
//! The server keeps nothing between runs. A run that pauses on approvals
//! writes the pending list into the AG-UI state it snapshots, under
//! [`STATE_KEY`]: `{"toolgate": {"pendingApprovals": [{interruptId, toolCallId,
//! toolName}]}}`. The interrupt id *is* the engine's approval id, signed when
//! signing is on. The client sends that state back with `resume` entries.
//!
//! **Exactly once.** Every pending interrupt needs exactly one entry. A
//! `resume` without pending approvals in the state, an entry naming an
//! interrupt that is not pending, two entries for one interrupt, a pending
//! interrupt without an entry, or a state listing one interrupt twice or two
//! interrupts for one tool call is a [`ResumeError`] naming the entries and
//! interrupts: nothing runs. Matching entries, interrupts and tool calls
//! goes through indexes, so the work is linear in the size of the input.
//!
//! **Decisions.** `status: "resolved"` with payload `{approved: true}`
//! approves; `{approved: true, editedArgs: {...}}` approves with the edit (a
//! full replacement of the arguments); `{approved: false, reason?}` denies.
//! `status: "cancelled"` denies with reason `cancelled`. An approval may
//! carry a grant, `{approved: true, grant: {uses, within, input, scope}}`
//! (the inbox's grant object, [`grant_of`]): "yes, and the next N calls like
//! this". The server checks and keeps it before the run (an invalid grant,
//! or one with a denial, fails the run: nothing runs). A *malformed* entry
//! (another status, no payload, `approved` missing or not a boolean,
//! `editedArgs` not an object, `reason` not a string) does not fail the run:
//! it resolves as a **denial** whose reason names the entry and the problem.
//! Structural problems (which interrupt is answered, how often) are errors;
//! content problems are denials. Both fail closed.
//!
//! **Client placeholders.** A tool result the client holds for a call whose
//! interrupt the resume answers is dropped: the resume decides that call, so
//! such a result is the client's placeholder (`@tanstack/ai-client` writes
//! `{approved, pendingExecution, message}` there), never an outcome.
//!
//! **Injection.** Each answer becomes, in the converted history, a
//! `tool-approval-request {approvalId: interruptId, toolCallId}` appended to
//! the assistant message holding the call, and one trailing tool message with
//! the `tool-approval-response` parts. The engine then checks the signature,
//! which binds interrupt id, call id, tool name and input: a tampered state or
//! tampered messages fail with `EngineError::InvalidApprovalSignature`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolgate::ModelMessage;
use toolgate_protocol::{AssistantContent, AssistantPart, ToolApprovalRequestPart, ToolApprovalResponsePart, ToolPart};

use crate::ResumeError;
use crate::input::{ResumeEntry, ResumeStatus};

/// The key toolgate owns in the AG-UI state.
pub const STATE_KEY: &str = "toolgate";
/// The field under [`STATE_KEY`] listing the pending approvals.
pub const PENDING_FIELD: &str = "pendingApprovals";
/// The denial reason for a `cancelled` resume entry.
pub const CANCELLED_REASON: &str = "cancelled";

/// One approval a paused run waits for, as kept in the state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    /// The interrupt id (the engine's approval id).
    pub interrupt_id: String,
    /// The call awaiting the decision.
    pub tool_call_id: String,
    /// The tool it calls.
    pub tool_name: String,
    /// The AI SDK separate signature, when the signer writes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// What a resume entry decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Run the call, with the person's replacement arguments if any.
    Approve {
        /// The replacement arguments (an object).
        edited_args: Option<Value>,
        /// A reason, if the person gave one.
        reason: Option<String>,
    },
    /// Do not run the call.
    Deny {
        /// Why; for malformed entries, which entry and what was wrong.
        reason: Option<String>,
    },
}

/// A pending approval with its decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    /// The resume entry's position in `resume`.
    pub entry_index: usize,
    /// The approval answered.
    pub pending: PendingApproval,
    /// The decision.
    pub decision: Decision,
}

/// The pending approvals the state lists; empty when it has no toolgate key.
pub fn pending_approvals(state: Option<&Value>) -> Result<Vec<PendingApproval>, ResumeError> {
    let Some(ours) = state.and_then(|state| state.get(STATE_KEY)) else {
        return Ok(Vec::new());
    };
    let invalid = |detail: String| ResumeError::InvalidState { detail };
    let list = ours.get(PENDING_FIELD).ok_or_else(|| invalid(format!("`{PENDING_FIELD}` is missing")))?;
    serde_json::from_value(list.clone()).map_err(|e| invalid(format!("`{PENDING_FIELD}`: {e}")))
}

/// The caller's state plus toolgate's pending list (the state must be an object or absent).
pub fn state_with_pending(state: Option<&Value>, pending: &[PendingApproval]) -> Value {
    let mut object = caller_state(state);
    let list = serde_json::to_value(pending).unwrap_or_default();
    object.insert(STATE_KEY.to_owned(), Value::Object(Map::from_iter([(PENDING_FIELD.to_owned(), list)])));
    Value::Object(object)
}

/// The caller's state without toolgate's key.
pub fn state_without_pending(state: Option<&Value>) -> Value {
    Value::Object(caller_state(state))
}

fn caller_state(state: Option<&Value>) -> Map<String, Value> {
    let mut object = match state {
        Some(Value::Object(object)) => object.clone(),
        _ => Map::new(),
    };
    object.remove(STATE_KEY);
    object
}

/// Matches resume entries to pending approvals, exactly once each (see the
/// module docs); returns the decisions in pending order.
pub fn resolve_entries(pending: &[PendingApproval], resume: &[ResumeEntry]) -> Result<Vec<Resolution>, ResumeError> {
    let mut by_interrupt: HashMap<&str, &PendingApproval> = HashMap::with_capacity(pending.len());
    let mut by_call: HashMap<&str, &str> = HashMap::with_capacity(pending.len());
    for entry in pending {
        let first = by_interrupt
            .insert(&entry.interrupt_id, entry)
            .map(|first| first.interrupt_id.as_str())
            .or_else(|| by_call.insert(&entry.tool_call_id, &entry.interrupt_id));
        if let Some(first) = first {
            return Err(ResumeError::DuplicatePending {
                first: first.to_owned(),
                second: entry.interrupt_id.clone(),
                tool_call_id: entry.tool_call_id.clone(),
            });
        }
    }
    let mut answered: HashMap<&str, usize> = HashMap::with_capacity(resume.len());
    for (index, entry) in resume.iter().enumerate() {
        let interrupt_id = entry.interrupt_id.as_str();
        if pending.is_empty() {
            return Err(ResumeError::NoPendingInterrupts { index, interrupt_id: interrupt_id.to_owned() });
        }
        if !by_interrupt.contains_key(interrupt_id) {
            return Err(ResumeError::UnknownInterrupt { index, interrupt_id: interrupt_id.to_owned() });
        }
        if let Some(&first_index) = answered.get(interrupt_id) {
            return Err(ResumeError::DuplicateEntry { index, first_index, interrupt_id: interrupt_id.to_owned() });
        }
        answered.insert(interrupt_id, index);
    }
    let missing: Vec<String> = pending
        .iter()
        .filter(|p| !answered.contains_key(p.interrupt_id.as_str()))
        .map(|p| p.interrupt_id.clone())
        .collect();
    if !missing.is_empty() {
        return Err(ResumeError::MissingEntries { interrupt_ids: missing });
    }
    Ok(pending
        .iter()
        .map(|p| {
            let entry_index = answered[p.interrupt_id.as_str()];
            Resolution { entry_index, pending: p.clone(), decision: decide(entry_index, &resume[entry_index]) }
        })
        .collect())
}

/// Reads one entry's decision; a malformed entry is a denial naming the problem.
pub fn decide(index: usize, entry: &ResumeEntry) -> Decision {
    match read_decision(entry) {
        Ok(decision) => decision,
        Err(problem) => Decision::Deny {
            reason: Some(format!(
                "resume entry {index} (interrupt `{}`) is malformed: {problem}; the call was denied",
                entry.interrupt_id
            )),
        },
    }
}

fn read_decision(entry: &ResumeEntry) -> Result<Decision, String> {
    match &entry.status {
        ResumeStatus::Resolved => {}
        ResumeStatus::Cancelled => return Ok(Decision::Deny { reason: Some(CANCELLED_REASON.to_owned()) }),
        ResumeStatus::Other(Value::Null) => return Err("`status` is missing".into()),
        ResumeStatus::Other(other) => {
            return Err(format!("`status` must be \"resolved\" or \"cancelled\", got {other}"));
        }
    }
    let payload = match &entry.payload {
        Some(Value::Object(payload)) => payload,
        Some(other) => return Err(format!("`payload` must be an object, got {other}")),
        None => return Err("`payload` is missing".into()),
    };
    let approved = match payload.get("approved") {
        Some(Value::Bool(approved)) => *approved,
        Some(other) => return Err(format!("`payload.approved` must be a boolean, got {other}")),
        None => return Err("`payload.approved` is missing".into()),
    };
    let reason = match payload.get("reason") {
        None => None,
        Some(Value::String(reason)) => Some(reason.clone()),
        Some(other) => return Err(format!("`payload.reason` must be a string, got {other}")),
    };
    let edited_args = match payload.get("editedArgs") {
        None => None,
        Some(args @ Value::Object(_)) => Some(args.clone()),
        Some(other) => return Err(format!("`payload.editedArgs` must be an object, got {other}")),
    };
    Ok(if approved { Decision::Approve { edited_args, reason } } else { Decision::Deny { reason } })
}

/// The grant an entry's payload carries (`payload.grant`: the inbox's grant
/// object, `{uses, within, input, scope}`), if any, as sent. The server
/// checks and keeps it with the approval the entry answers; one sent with a
/// denial, or one that does not check, refuses the run.
pub fn grant_of(entry: &ResumeEntry) -> Option<&Value> {
    entry.payload.as_ref()?.get("grant")
}

/// Writes the decisions into a converted history (see the module docs).
pub fn inject(history: &mut Vec<ModelMessage>, resolutions: &[Resolution]) -> Result<(), ResumeError> {
    if resolutions.is_empty() {
        return Ok(());
    }
    let holders = call_holders(history);
    let mut requests: Vec<(usize, ToolApprovalRequestPart)> = Vec::with_capacity(resolutions.len());
    let mut responses = Vec::with_capacity(resolutions.len());
    for Resolution { pending, decision, .. } in resolutions {
        let Some((message_index, tool_name)) = holders.get(pending.tool_call_id.as_str()) else {
            return Err(ResumeError::ToolCallNotFound {
                interrupt_id: pending.interrupt_id.clone(),
                tool_call_id: pending.tool_call_id.clone(),
            });
        };
        if *tool_name != pending.tool_name {
            return Err(ResumeError::ToolNameMismatch {
                interrupt_id: pending.interrupt_id.clone(),
                tool_call_id: pending.tool_call_id.clone(),
                pending: pending.tool_name.clone(),
                found: (*tool_name).to_owned(),
            });
        }
        requests.push((
            *message_index,
            ToolApprovalRequestPart {
                approval_id: pending.interrupt_id.clone(),
                tool_call_id: pending.tool_call_id.clone(),
                signature: pending.signature.clone(),
            },
        ));
        let (approved, reason, edited_input) = match decision {
            Decision::Approve { edited_args, reason } => (true, reason.clone(), edited_args.clone()),
            Decision::Deny { reason } => (false, reason.clone(), None),
        };
        responses.push(ToolPart::ToolApprovalResponse(ToolApprovalResponsePart {
            approval_id: pending.interrupt_id.clone(),
            approved,
            reason,
            provider_executed: None,
            edited_input,
        }));
    }
    drop(holders);
    for (message_index, request) in requests {
        if let Some(ModelMessage::Assistant(assistant)) = history.get_mut(message_index)
            && let AssistantContent::Parts(parts) = &mut assistant.content
        {
            parts.push(AssistantPart::ToolApprovalRequest(request));
        }
    }
    // After the requests: removing messages shifts the indexes they were placed by.
    drop_placeholder_results(history, resolutions);
    history.push(ModelMessage::tool(responses));
    Ok(())
}

/// Removes the tool results the client holds for the calls this resume answers:
/// the resume decides them, so such a result is the client's placeholder
/// (TanStack's client writes `{approved, pendingExecution}` there), never an
/// outcome. A tool message left empty is removed.
fn drop_placeholder_results(history: &mut Vec<ModelMessage>, resolutions: &[Resolution]) {
    let answered: std::collections::HashSet<&str> =
        resolutions.iter().map(|resolution| resolution.pending.tool_call_id.as_str()).collect();
    history.retain_mut(|message| {
        let ModelMessage::Tool(tool) = message else { return true };
        tool.content.retain(|part| match part {
            ToolPart::ToolResult(result) => !answered.contains(result.tool_call_id.as_str()),
            ToolPart::ToolApprovalResponse(_) => true,
        });
        !tool.content.is_empty()
    });
}

/// Every tool call of the history: call id -> (index of the assistant message holding it, tool name).
/// The first holder wins; the engine refuses a history where two calls share an id.
fn call_holders(history: &[ModelMessage]) -> HashMap<&str, (usize, &str)> {
    let mut holders = HashMap::new();
    for (message_index, message) in history.iter().enumerate() {
        let ModelMessage::Assistant(assistant) = message else { continue };
        for part in assistant.part_slice() {
            if let AssistantPart::ToolCall(call) = part {
                holders.entry(call.tool_call_id.as_str()).or_insert((message_index, call.tool_name.as_str()));
            }
        }
    }
    holders
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn entry(value: Value) -> ResumeEntry {
        ResumeEntry::from_value(0, value).unwrap()
    }

    #[test]
    fn well_formed_entries_decide_as_written() {
        let approve = entry(json!({"interruptId": "a", "status": "resolved", "payload": {"approved": true}}));
        assert_eq!(decide(0, &approve), Decision::Approve { edited_args: None, reason: None });
        let edit = entry(json!({"interruptId": "a", "status": "resolved",
            "payload": {"approved": true, "editedArgs": {"path": "b"}, "reason": "safer", "extra": 1}}));
        assert_eq!(
            decide(0, &edit),
            Decision::Approve { edited_args: Some(json!({"path": "b"})), reason: Some("safer".into()) }
        );
        let deny = entry(json!({"interruptId": "a", "status": "resolved", "payload": {"approved": false}}));
        assert_eq!(decide(0, &deny), Decision::Deny { reason: None });
        let cancel = entry(json!({"interruptId": "a", "status": "cancelled", "payload": {"approved": true}}));
        assert_eq!(decide(0, &cancel), Decision::Deny { reason: Some("cancelled".into()) });
    }

    #[test]
    fn malformed_entries_deny_with_the_entry_and_the_problem() {
        let cases = [
            (json!({"interruptId": "a"}), "`status` is missing"),
            (json!({"interruptId": "a", "status": "resolved"}), "`payload` is missing"),
            (json!({"interruptId": "a", "status": "resolved", "payload": null}), "`payload` is missing"),
            (
                json!({"interruptId": "a", "status": 1, "payload": {"approved": true}}),
                "`status` must be \"resolved\" or \"cancelled\", got 1",
            ),
            (
                json!({"interruptId": "a", "status": "resolved", "payload": {"approved": null}}),
                "`payload.approved` must be a boolean, got null",
            ),
            (
                json!({"interruptId": "a", "status": "resolved", "payload": {"approved": false, "editedArgs": "x"}}),
                "`payload.editedArgs` must be an object, got \"x\"",
            ),
        ];
        for (value, problem) in cases {
            let reason = format!("resume entry 3 (interrupt `a`) is malformed: {problem}; the call was denied");
            assert_eq!(decide(3, &entry(value)), Decision::Deny { reason: Some(reason) });
        }
    }

    #[test]
    fn state_helpers_keep_the_callers_keys() {
        let pending = [PendingApproval {
            interrupt_id: "i".into(),
            tool_call_id: "c".into(),
            tool_name: "t".into(),
            signature: None,
        }];
        let state = json!({"a": 1, "toolgate": {"old": true}});
        let with = state_with_pending(Some(&state), &pending);
        assert_eq!(
            with,
            json!({"a": 1, "toolgate": {"pendingApprovals": [{"interruptId": "i", "toolCallId": "c", "toolName": "t"}]}})
        );
        assert_eq!(pending_approvals(Some(&with)).unwrap(), pending);
        assert_eq!(state_without_pending(Some(&with)), json!({"a": 1}));
        assert_eq!(state_with_pending(None, &[])["toolgate"], json!({"pendingApprovals": []}));
        assert_eq!(pending_approvals(Some(&json!({"a": 1}))).unwrap(), []);
    }
}
