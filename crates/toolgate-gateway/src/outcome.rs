//! The tool results the gateway answers with when it does not relay the
//! upstream server's own: denials, pending approvals, and outcomes read back
//! from the ledger. Every one of them is `isError: true` unless the call ran
//! and succeeded, so a client or model never takes a refusal for the tool's
//! output, and a tool with an `outputSchema` stays valid (error results carry
//! no structured content).

use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::{Value, json};
use toolgate::approval::lifecycle::{requester, waiting_for};
use toolgate::ledger::{ApprovalRecord, ApprovalState};
use toolgate_protocol::ToolResultOutput;

/// The `_meta` key of a held call's approval.
pub const APPROVAL_META_KEY: &str = "toolgate/approval";
/// How a denial by the person in the client begins.
pub const DENIED_BY_USER: &str = "denied by the user";
/// The reason of a client's decline or cancel, or of a denial without one.
pub const USER_DECLINED: &str = "the user declined";
/// How a rule's denial begins.
pub const DENIED_BY_POLICY: &str = "denied by policy";

/// An error result with one text block.
pub fn error_text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// A rule (or a sticky decision) denied the call.
pub fn denied_by_policy(reason: &str) -> CallToolResult {
    error_text(format!("{DENIED_BY_POLICY}: {reason}"))
}

/// The person in the client denied (or declined, or cancelled) the call.
pub fn denied_by_user(reason: Option<&str>) -> CallToolResult {
    let reason = reason.map(str::trim).filter(|reason| !reason.is_empty()).unwrap_or(USER_DECLINED);
    error_text(format!("{DENIED_BY_USER}: {reason}"))
}

/// The approval's link on the server's page, when the gateway knows its public URL.
pub fn approval_url(public_url: Option<&str>, approval_id: &str) -> Option<String> {
    public_url.map(|base| format!("{}/approvals/{approval_id}", base.trim_end_matches('/')))
}

/// The `_meta["toolgate/approval"]` object of a held call.
pub fn approval_meta(record: &ApprovalRecord, public_url: Option<&str>) -> Value {
    let mut meta = json!({"id": record.approval_id, "state": record.state.as_str()});
    if let Some(url) = approval_url(public_url, &record.approval_id) {
        meta["url"] = json!(url);
    }
    meta
}

/// Nobody decided within the hold (or the call is still running elsewhere):
/// say so, who must decide, and how to get the outcome.
pub fn pending(record: &ApprovalRecord, public_url: Option<&str>) -> CallToolResult {
    let mut text = if record.state == ApprovalState::Executing {
        format!(
            "Approval {}: `{}` was approved and is running; its outcome is not recorded yet.",
            record.approval_id, record.tool_name
        )
    } else {
        format!(
            "Approval pending: `{}` has not run. It waits for {} to approve or deny it (approval {}).",
            record.tool_name,
            waiting_for(record),
            record.approval_id
        )
    };
    if let Some(url) = approval_url(public_url, &record.approval_id) {
        text.push_str(&format!(" Decide it at {url}."));
    }
    text.push_str(" Call the same tool again with the same arguments to get the outcome.");
    let mut result = error_text(text);
    let mut meta = MetaObject::default();
    meta.insert(APPROVAL_META_KEY.to_owned(), approval_meta(record, public_url));
    result.meta = Some(meta);
    result
}

/// The answer a final record gives: the stored result of a call that ran,
/// the denial, or why it did not run (expired, interrupted). `None` when the
/// record is not final.
pub fn from_record(record: &ApprovalRecord) -> Option<CallToolResult> {
    match record.state {
        // A superseded approval's successor (the edited call) decides it.
        ApprovalState::Pending | ApprovalState::Approved | ApprovalState::Executing | ApprovalState::Superseded => None,
        ApprovalState::Denied | ApprovalState::Withdrawn => Some(denied(record)),
        ApprovalState::Executed | ApprovalState::Failed | ApprovalState::Expired | ApprovalState::Interrupted => {
            Some(stored_output(record))
        }
    }
}

/// A denial read from the record: by the user when the requester decided it, else by whoever did.
fn denied(record: &ApprovalRecord) -> CallToolResult {
    let decision = record.decision.as_ref();
    let reason = decision.and_then(|decision| decision.reason.as_deref());
    let by = decision.and_then(|decision| decision.principal.as_deref());
    match by {
        Some(principal) if Some(principal) != requester(record) => {
            let reason = reason.map(str::trim).filter(|reason| !reason.is_empty()).unwrap_or("no reason given");
            error_text(format!("denied by {principal}: {reason}"))
        }
        _ => denied_by_user(reason),
    }
}

/// The stored output as a tool result: an MCP result the gateway stored as
/// JSON comes back as it was; anything else as text.
fn stored_output(record: &ApprovalRecord) -> CallToolResult {
    let failed = record.state != ApprovalState::Executed;
    match &record.output {
        Some(ToolResultOutput::Json { value, .. }) => match serde_json::from_value::<CallToolResult>(value.clone()) {
            Ok(result) => result,
            Err(_) => with_error(CallToolResult::success(vec![ContentBlock::text(value.to_string())]), failed),
        },
        Some(ToolResultOutput::Text { value, .. } | ToolResultOutput::ErrorText { value, .. }) => {
            with_error(CallToolResult::success(vec![ContentBlock::text(value.clone())]), failed)
        }
        Some(other) => with_error(
            CallToolResult::success(vec![ContentBlock::text(serde_json::to_string(other).unwrap_or_default())]),
            failed,
        ),
        None => error_text(format!(
            "approval {} ended as {} without a stored outcome",
            record.approval_id,
            record.state.as_str()
        )),
    }
}

fn with_error(mut result: CallToolResult, failed: bool) -> CallToolResult {
    if failed {
        result.is_error = Some(true);
    }
    result
}
