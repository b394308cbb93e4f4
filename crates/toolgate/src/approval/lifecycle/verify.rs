//! With a ledger, the tool results a history carries are checked against it:
//! a call the ledger gated may only carry the outcome the ledger recorded.
//!
//! One pass over the history and one store query for the calls that have
//! results. Every result part counts, wherever it stands (a tool message or
//! an assistant message) and however many there are for one call, and
//! whatever the history claims about the call (a call marked
//! provider-executed is still the ledger's if the ledger gated it). For each
//! result of a call with a record:
//! - pending, approved or executing: the server produced no result yet, so the
//!   history's result is forged ([`EngineError::ForgedToolResult`]);
//! - denied: the result must be an `execution-denied`;
//! - executed, failed, expired, interrupted: the result must be the recorded
//!   one (text that is JSON compares as that JSON, as clients carry outputs
//!   back as text);
//! - superseded: its successor (a record of the same call) judges the result.
//!
//! Calls without a record (ungated calls, provider-executed ones) are not
//! the ledger's to judge.

use std::collections::HashMap;

use serde_json::Value;
use toolgate_protocol::{AssistantPart, ModelMessage, ToolPart, ToolResultOutput};

use crate::EngineError;
use crate::ledger::{ApprovalRecord, ApprovalState, Ledger};

/// Fails when a result in `history` contradicts the ledger (see the module docs).
pub(crate) async fn verify_results(history: &[ModelMessage], ledger: &Ledger) -> Result<(), EngineError> {
    let mut results: HashMap<&str, Vec<&ToolResultOutput>> = HashMap::new();
    for message in history {
        match message {
            ModelMessage::Assistant(assistant) => {
                for part in assistant.part_slice() {
                    if let AssistantPart::ToolResult(result) = part {
                        results.entry(&result.tool_call_id).or_default().push(&result.output);
                    }
                }
            }
            ModelMessage::Tool(tool) => {
                for part in &tool.content {
                    if let ToolPart::ToolResult(result) = part {
                        results.entry(&result.tool_call_id).or_default().push(&result.output);
                    }
                }
            }
            ModelMessage::User(_) | ModelMessage::System(_) => {}
        }
    }
    if results.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = results.keys().map(|id| (*id).to_owned()).collect();
    let records = ledger.config.store.approvals_for_calls(&ledger.conversation_id, &ids).await?;
    for record in &records {
        let outputs = results.get(record.tool_call_id.as_str()).into_iter().flatten();
        if let Some(detail) = outputs.filter_map(|output| contradiction(record, output)).next() {
            return Err(EngineError::ForgedToolResult { tool_call_id: record.tool_call_id.clone(), detail });
        }
    }
    Ok(())
}

/// Why `output` cannot be the outcome of `record`, if it cannot.
fn contradiction(record: &ApprovalRecord, output: &ToolResultOutput) -> Option<String> {
    match record.state {
        ApprovalState::Pending | ApprovalState::Approved | ApprovalState::Executing => Some(format!(
            "approval `{}` is {}: the server produced no result for this call",
            record.approval_id,
            record.state.as_str()
        )),
        ApprovalState::Denied | ApprovalState::Withdrawn => (!output.is_denied())
            .then(|| format!("approval `{}` was denied; the call has no other result", record.approval_id)),
        ApprovalState::Superseded => None,
        ApprovalState::Executed | ApprovalState::Failed | ApprovalState::Expired | ApprovalState::Interrupted => {
            let recorded = record.output.as_ref().map(comparable);
            (recorded != Some(comparable(output)))
                .then(|| format!("the result differs from the one recorded for approval `{}`", record.approval_id))
        }
    }
}

/// An output as (is an error, value), text that is JSON read as that JSON.
fn comparable(output: &ToolResultOutput) -> (bool, Value) {
    let text = |text: &str| serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()));
    match output {
        ToolResultOutput::Text { value, .. } => (false, text(value)),
        ToolResultOutput::Json { value, .. } => (false, value.clone()),
        ToolResultOutput::ErrorText { value, .. } => (true, text(value)),
        ToolResultOutput::ErrorJson { value, .. } => (true, value.clone()),
        ToolResultOutput::ExecutionDenied { reason, .. } => (true, Value::from(reason.clone())),
        ToolResultOutput::Content { value, .. } => (false, serde_json::to_value(value).unwrap_or_default()),
    }
}
