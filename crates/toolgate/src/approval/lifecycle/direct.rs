//! Calls decided without an approval: those a rule or the tool's own policy
//! allows (they run at once) and those it denies (they never run).
//!
//! No approval is issued for them, so no record moves; with a ledger each is
//! still on record, as one audit event, so the log holds every call that ran
//! and every call a policy refused, not only those somebody was asked about:
//!
//! | what happened | kind | data |
//! |---|---|---|
//! | the call ran | `executed` | `toolName`, `input`, `result`, `decidedBy` |
//! | the call ran and failed | `failed` | `toolName`, `input`, `error`, `decidedBy` |
//! | a rule or policy refused it | `denied` | `toolName`, `input`, `reason`, `decidedBy` |
//!
//! `decidedBy` is [`DECIDED_BY_POLICY`]. The event's approval id is empty
//! (none was issued); its tool call id, conversation, owner and principal are
//! the ledger's and the call's. An approved call's own `executed` event (see
//! [`super::held::finish`] and the engine's outcomes) carries `toolName` and
//! `input` too, so one query over `executed` events finds every call that ran.
//!
//! Every path that runs or refuses calls without an approval (the engine's
//! step loop and its pre-resolution of held batches, a gateway's allowed and
//! denied calls, and any edge built on the held-call path) writes these
//! events through [`ran`], [`refused`] and [`record`].

use serde_json::{Value, json};
use toolgate_protocol::ToolCallPart;

use crate::ledger::{AuditEvent, AuditKind, Ledger, Millis, StoreError};

/// The `decidedBy` of an event recorded here: no person decided, a rule or the tool's policy did.
pub const DECIDED_BY_POLICY: &str = "policy";

/// One call decided without an approval.
#[derive(Debug, Clone, Copy)]
pub struct DirectCall<'a> {
    /// The call's id (a gateway's held call id).
    pub tool_call_id: &'a str,
    /// The tool's name.
    pub tool_name: &'a str,
    /// The input it ran (or would have run) with.
    pub input: &'a Value,
}

impl<'a> DirectCall<'a> {
    /// The call a model's tool call part names.
    pub fn of(part: &'a ToolCallPart) -> Self {
        Self { tool_call_id: &part.tool_call_id, tool_name: &part.tool_name, input: &part.input }
    }
}

/// The `executed` event of a call that ran (`Ok`: its result) or the
/// `failed` event of one that ran and failed (`Err`: its error), at `at`.
pub fn ran(ledger: &Ledger, call: DirectCall<'_>, outcome: Result<&Value, &Value>, at: Millis) -> AuditEvent {
    let (kind, key, detail) = match outcome {
        Ok(result) => (AuditKind::Executed, "result", result),
        Err(error) => (AuditKind::Failed, "error", error),
    };
    let data = json!({
        "toolName": call.tool_name,
        "input": call.input,
        key: detail,
        "decidedBy": DECIDED_BY_POLICY,
    });
    ledger.event(kind, "", call.tool_call_id, at, data)
}

/// The `denied` event of a call a rule or the tool's policy refused, with why.
pub fn refused(ledger: &Ledger, call: DirectCall<'_>, reason: &str, at: Millis) -> AuditEvent {
    let data = json!({
        "toolName": call.tool_name,
        "input": call.input,
        "reason": reason,
        "decidedBy": DECIDED_BY_POLICY,
    });
    ledger.event(AuditKind::Denied, "", call.tool_call_id, at, data)
}

/// Appends the events in one transaction (nothing when there are none).
pub async fn record(ledger: &Ledger, events: &[AuditEvent]) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    ledger.config.store.append(events).await
}
