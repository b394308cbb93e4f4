//! What the engine writes to the ledger around a step: the approval requests
//! it issues (before the client sees them), the outcomes of the calls it ran
//! under a claim, the calls it ran or refused without an approval, and the lease renewals while they run. The states and
//! transitions are [`crate::approval::lifecycle`]'s.

use serde_json::json;
use toolgate_protocol::{StreamPart, ToolCallPart};

use super::ApprovalRequest;
use super::TextRequest;
use super::execute::ToolOutcome;
use crate::EngineError;
use crate::approval::lifecycle::direct::{Described, DirectCall};
use crate::approval::{canonical_digest, canonical_json, lifecycle};
use crate::ledger::{AuditEvent, AuditKind, HistoryGuard, Ledger, Transition, WARNING_NOT_RECORDED};
use crate::tool::Toolkit;

/// Records issued approval requests as `pending`, with their `issued` events, in one transaction,
/// only if every guard (the history their verdicts rested on) still holds, atomically with that
/// check ([`crate::ledger::HistoryStore::issue_if`]); returns whether it recorded them.
/// `config_digest`: the request's gate's ([`crate::CallGate::config_digest`]).
pub(crate) async fn record_issued(
    ledger: &Ledger,
    toolkit: Option<&Toolkit>,
    requests: &[ApprovalRequest],
    config_digest: Option<&str>,
    guards: &[HistoryGuard],
) -> Result<bool, EngineError> {
    let now = ledger.config.clock.now();
    let mut records = Vec::with_capacity(requests.len());
    let mut input_sizes = Vec::with_capacity(requests.len());
    let mut events = Vec::with_capacity(requests.len());
    for request in requests {
        let call = &request.tool_call;
        let invalid = |error: crate::approval::CanonicalError| EngineError::InvalidToolInput {
            tool_name: call.tool_name.clone(),
            tool_call_id: call.tool_call_id.clone(),
            detail: error.to_string(),
        };
        let canonical = canonical_json(&call.input).map_err(invalid)?;
        let input = serde_json::from_str(&canonical).unwrap_or_else(|_| call.input.clone());
        let tool = toolkit.and_then(|toolkit| toolkit.get(&call.tool_name));
        // The definition the model was offered, for the approval's receipts.
        let tool_digest = tool.and_then(crate::receipt::tool_digest);
        let ttl = tool.and_then(|tool| tool.approval_ttl_override()).unwrap_or(ledger.config.ttl);
        let held = lifecycle::held::HeldCall {
            tool_name: &call.tool_name,
            input: &call.input,
            reason: request.reason.as_deref(),
            route: request.route.as_ref(),
            ttl: Some(ttl),
            single_use: false,
            key: None,
            decided: None,
            note: None,
            input_schema: None,
            tool_digest: tool_digest.as_deref(),
            config_digest,
        };
        let ids = (request.approval_id.clone(), call.tool_call_id.clone());
        let record = lifecycle::held::pending_record(ledger, ids, held, (input, canonical_digest(&canonical)), now);
        events.push(lifecycle::held::issued_event_of(ledger, &record, &held, now));
        records.push(record);
        input_sizes.push(canonical.len());
    }
    let store = &ledger.config.store;
    let issued = match guards {
        [] => store.issue(&records, &events).await.map(|()| true)?,
        guards => store.issue_if(guards, &records, &events).await?,
    };
    if issued {
        ledger.config.issued.remember(records.into_iter().zip(input_sizes));
    }
    Ok(issued)
}

/// Stores the outcomes of calls run under this request's claims
/// (`executing → executed | failed`) and the `direct` events of calls decided
/// without an approval ([`direct_events`]), in one transaction. A failure to
/// store is a warning: the results are real and go to the client; the
/// records stay `executing` and later resolve as interrupted.
pub(crate) async fn record_outcomes(
    ledger: &Ledger,
    finished: &[(&str, &ToolOutcome)],
    direct: &[AuditEvent],
) -> Option<StreamPart> {
    if finished.is_empty() && direct.is_empty() {
        return None;
    }
    let now = ledger.config.clock.now();
    let transitions: Vec<Transition> = finished
        .iter()
        .map(|(approval_id, outcome)| {
            let output = outcome.to_result_part().output;
            let (tool_name, input) = (&outcome.call.tool_name, &outcome.call.input);
            let (failed, kind, data) = match &outcome.output {
                Ok(_) => (false, AuditKind::Executed, json!({"toolName": tool_name, "input": input, "result": output})),
                Err(error) => {
                    (true, AuditKind::Failed, json!({"toolName": tool_name, "input": input, "error": error.to_value()}))
                }
            };
            let events = vec![ledger.event(kind, approval_id, &outcome.call.tool_call_id, now, data)];
            lifecycle::finish(approval_id, output, failed, now, events)
        })
        .collect();
    match ledger.config.store.apply(&transitions, direct).await {
        Ok(_) => None,
        Err(error) => {
            tracing::error!(%error, "cannot record tool outcomes in the approval ledger");
            Some(StreamPart::Warning {
                code: WARNING_NOT_RECORDED.to_owned(),
                message: format!("the outcome of a call could not be recorded: {error}"),
            })
        }
    }
}

/// The events of calls decided without an approval: those that `ran` (a
/// rule or their policy allowed them) and those `refused`, with the reason
/// (see [`lifecycle::direct`]), each naming its tool's definition digest,
/// the request's gate's config digest and, for a call a rule allowed, the
/// rule ([`Described`]).
pub(crate) fn direct_events(
    request: &TextRequest,
    ledger: &Ledger,
    ran: &[&ToolOutcome],
    refused: &[(&ToolCallPart, &str)],
) -> Vec<AuditEvent> {
    let now = ledger.config.clock.now();
    let described = |name: &str| {
        let tool = request.toolkit.as_ref().and_then(|toolkit| toolkit.get(name));
        Described::of(tool, request.gate.as_deref())
    };
    let mut events = Vec::with_capacity(ran.len() + refused.len());
    for outcome in ran {
        let detail = match &outcome.output {
            Ok(_) => Ok(serde_json::to_value(outcome.to_result_part().output).unwrap_or_default()),
            Err(error) => Err(error.to_value()),
        };
        let event = lifecycle::direct::ran(ledger, DirectCall::of(&outcome.call), detail.as_ref(), now);
        let call = &outcome.call;
        let described = described(&call.tool_name).allowed_by(request.gate.as_deref(), &call.tool_call_id);
        events.push(described.described(event));
    }
    for (part, reason) in refused {
        let event = lifecycle::direct::refused(ledger, DirectCall::of(part), reason, now);
        events.push(described(&part.tool_name).described(event));
    }
    events
}
