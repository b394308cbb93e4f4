//! One `tools/call` of an upstream tool through the gate: rules, trusted
//! annotations, sticky decisions and grants decide, through the lifecycle
//! ([`Gateway::admit`]: a call a history term lets through is counted as it
//! is let through, a question issued only on the history it was judged on);
//! a denial answers at once, an
//! allowed call is relayed (both on record, as `denied` and `executed`
//! events: `toolgate::approval::lifecycle::direct`), and a call that needs a person is held
//! ([`crate::hold`]); an approved call runs once, under the ledger's claim,
//! and its outcome is recorded for retries.

use rmcp::model::{CallToolResponse, CallToolResult, ProgressNotificationParam};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate::approval::lifecycle::direct::{self, DirectCall};
use toolgate::approval::lifecycle::held::{self, Admitted, Attached, HeldCall, HeldError};
use toolgate::ledger::{ApprovalRecord, ApprovalState, Ledger};
use toolgate::tool::{GateAction, Verdict};
use toolgate_mcp::RelayedTool;
use toolgate_protocol::ToolResultOutput;

use crate::gateway::{Gateway, Session};
use crate::hold::{Ask, Request, Settled, settle};
use crate::outcome;

/// Answers one call of an upstream tool (see the module docs).
pub async fn call(
    gateway: &Gateway,
    session: &Session,
    request: &Request<'_>,
    tool: &RelayedTool,
    input: Value,
) -> CallToolResponse {
    if let Err(detail) = tool.tool.validate_input(&input) {
        return outcome::error_text(format!("invalid input for `{}`: {detail}", tool.info.name)).into();
    }
    let call_id = match held::call_id_of(&session.conversation_key(), &tool.info.name, &input) {
        Ok(call_id) => call_id,
        Err(error) => return outcome::error_text(error.to_string()).into(),
    };
    let reason = tool.tool.ask_reason();
    // The MCP tool's definition (description and input schema) as listed, for the receipts.
    let tool_digest = toolgate::receipt::tool_digest(&tool.tool);
    let config_digest = gateway.config_digest();
    let held_call = HeldCall {
        tool_name: &tool.info.name,
        input: &input,
        reason: Some(&reason),
        route: None,
        ttl: tool.tool.approval_ttl_override(),
        single_use: false,
        key: None,
        decided: None,
        note: None,
        input_schema: None,
        tool_digest: tool_digest.as_deref(),
        config_digest: config_digest.as_deref(),
    };
    let attached = match gateway.admit(session, &tool.tool, held_call, &call_id).await {
        Ok((Admitted::Held(attached), _)) => *attached,
        Ok((Admitted::Decided(verdict), rule)) => {
            let call = Decided { call_id: &call_id, verdict, rule };
            return decided(gateway, session, request, tool, input, call).await;
        }
        Ok((Admitted::Refused(refusal), _)) => return outcome::error_text(refusal).into(),
        Err(error) => return not_held(tool, &error),
    };
    match hold(gateway, session, request, tool, attached).await {
        Ok(result) => result,
        Err(error) => not_held(tool, &error),
    }
}

/// A call decided without a person: its id, the verdict, and the rule that allowed it, when one did.
struct Decided<'a> {
    call_id: &'a str,
    verdict: Verdict,
    rule: Option<String>,
}

/// Answers a call decided without a person: a denial at once, an allowed
/// call relayed; either put on record.
async fn decided(
    gateway: &Gateway,
    session: &Session,
    request: &Request<'_>,
    tool: &RelayedTool,
    input: Value,
    Decided { call_id, verdict, rule }: Decided<'_>,
) -> CallToolResponse {
    let ledger = gateway.ledger(session);
    let direct = DirectCall { tool_call_id: call_id, tool_name: &tool.info.name, input: &input };
    // The definition as listed and the rules that decided, for the events' receipts.
    let described = direct::Described {
        tool_digest: toolgate::receipt::tool_digest(&tool.tool),
        config_digest: gateway.config_digest(),
        rule,
    };
    if verdict.action == GateAction::Deny {
        let reason = verdict.reason.as_deref().unwrap_or("denied");
        let event = direct::refused(&ledger, direct, reason, ledger.config.clock.now());
        on_record(&ledger, described.described(event)).await;
        return outcome::denied_by_policy(reason).into();
    }
    let result = relay(gateway, request, tool, input.clone()).await;
    let value = serde_json::to_value(&result).unwrap_or(Value::Null);
    let outcome = if result.is_error == Some(true) { Err(&value) } else { Ok(&value) };
    on_record(&ledger, described.described(direct::ran(&ledger, direct, outcome, ledger.config.clock.now()))).await;
    result.into()
}

/// The answer to a call that needed approval when its approval could not be recorded.
fn not_held(tool: &RelayedTool, error: &HeldError) -> CallToolResponse {
    tracing::error!(%error, tool = %tool.info.name, "cannot hold the call for approval");
    outcome::error_text(format!(
        "`{}` needs approval, but the approval could not be recorded, so it did not run: {error}",
        tool.info.name
    ))
    .into()
}

/// Puts a call decided without an approval on record; a store that fails is
/// logged (the call was answered already).
async fn on_record(ledger: &Ledger, event: toolgate::ledger::AuditEvent) {
    if let Err(error) = direct::record(ledger, std::slice::from_ref(&event)).await {
        tracing::error!(%error, tool_call_id = %event.tool_call_id, "cannot record a call decided without approval");
    }
}

/// Holds a call for approval, and runs it if this process wins the claim.
async fn hold(
    gateway: &Gateway,
    session: &Session,
    request: &Request<'_>,
    tool: &RelayedTool,
    attached: Attached,
) -> Result<CallToolResponse, HeldError> {
    let ledger = gateway.ledger(session);
    if let Some(response) = input_required(gateway, request, attached.record()) {
        return Ok(response);
    }
    let reason = attached.record().reason.clone().unwrap_or_else(|| tool.tool.ask_reason());
    let ask = Ask { tool_name: &tool.info.name, reason: &reason };
    let idempotent = tool.tool.is_idempotent();
    let public_url = gateway.options().public_url.as_deref();
    let result = match settle(gateway, session, request, &tool.tool, attached, Some(ask), idempotent).await? {
        Settled::Run(record) => run(gateway, session, &ledger, request, tool, &record).await,
        Settled::Final(record) => {
            outcome::from_record(&record).unwrap_or_else(|| outcome::pending(&record, public_url))
        }
        Settled::Waiting(record) => outcome::pending(&record, public_url),
    };
    Ok(result.into())
}

/// The stateless protocol's way to ask (2026-07-28): an `input_required`
/// result whose URL elicitation opens the approval's page, for a pending
/// approval the client's own user decides, when the gateway knows the page's
/// public URL and the request is not already the retry that answers it
/// (that one is held for the decision like any other).
fn input_required(gateway: &Gateway, request: &Request<'_>, record: &ApprovalRecord) -> Option<CallToolResponse> {
    let pending = record.state == ApprovalState::Pending && record.routing.is_none();
    if !(request.url && !request.answered && pending) {
        return None;
    }
    let url = outcome::approval_url(gateway.options().public_url.as_deref(), &record.approval_id)?;
    let value = json!({
        "resultType": "input_required",
        "inputRequests": {
            "approval": {
                "method": "elicitation/create",
                "params": {
                    "mode": "url",
                    "message": format!("Approve or deny `{}` on its approval page", record.tool_name),
                    "url": url,
                    "elicitationId": record.approval_id,
                },
            },
        },
        "requestState": record.approval_id,
    });
    match serde_json::from_value(value) {
        Ok(result) => Some(CallToolResponse::InputRequired(result)),
        Err(error) => {
            tracing::error!(%error, "the input_required result does not build; holding the call instead");
            None
        }
    }
}

/// Runs an approved call under this process's claim and records its outcome.
async fn run(
    gateway: &Gateway,
    session: &Session,
    ledger: &Ledger,
    request: &Request<'_>,
    tool: &RelayedTool,
    record: &ApprovalRecord,
) -> CallToolResult {
    let edited = record.decision.as_ref().and_then(|decision| decision.edited_input.clone());
    let checked = match &edited {
        Some(edit) => gateway.check_edit(session, &tool.tool, record, edit).await,
        None => Ok(()),
    };
    let input = edited.unwrap_or_else(|| record.input.clone());
    let result = match (checked, tool.tool.validate_input(&input)) {
        (Err(refusal), _) => Err(format!("the approved edit of `{}` does not run: {refusal}", tool.info.name)),
        (Ok(()), Err(detail)) => Err(format!("the approved input of `{}` is invalid: {detail}", tool.info.name)),
        // The claim is ours: the call runs to its end even if the client goes
        // away, so its outcome is recorded for the retry.
        (Ok(()), Ok(())) => {
            let never = CancellationToken::new();
            held::with_renewed_leases(ledger, relay_raw(gateway, request, tool, input, &never)).await
        }
    };
    let (output, failed, detail, answer) = match result {
        Ok(result) => {
            let value = serde_json::to_value(&result).unwrap_or(Value::Null);
            let failed = result.is_error == Some(true);
            (ToolResultOutput::Json { value: value.clone(), provider_options: None }, failed, value, result)
        }
        Err(error) => (
            ToolResultOutput::ErrorText { value: error.clone(), provider_options: None },
            true,
            json!({"message": error}),
            outcome::error_text(error),
        ),
    };
    if let Err(error) = held::finish(ledger, record, output, failed, detail).await {
        tracing::error!(%error, approval = %record.approval_id, "cannot record the outcome of an approved call");
    }
    answer
}

/// Relays a call that needs no approval.
async fn relay(gateway: &Gateway, request: &Request<'_>, tool: &RelayedTool, input: Value) -> CallToolResult {
    relay_raw(gateway, request, tool, input, request.cancel).await.unwrap_or_else(outcome::error_text)
}

/// Sends the call upstream, passing its progress on to the client.
async fn relay_raw(
    gateway: &Gateway,
    request: &Request<'_>,
    tool: &RelayedTool,
    input: Value,
    cancel: &CancellationToken,
) -> Result<CallToolResult, String> {
    let peer = request.peer.clone();
    let token = request.progress.clone();
    let progress = move |update: Value| {
        let Some(token) = token.clone() else { return };
        let mut param = ProgressNotificationParam::new(token, update["progress"].as_f64().unwrap_or(0.0));
        param.total = update["total"].as_f64();
        param.message = update["message"].as_str().map(str::to_owned);
        let peer = peer.clone();
        tokio::spawn(async move {
            let _ = peer.notify_progress(param).await;
        });
    };
    gateway.mcp().call_relayed(&tool.info.name, input, cancel, &progress).await.map_err(|error| error.to_string())
}
