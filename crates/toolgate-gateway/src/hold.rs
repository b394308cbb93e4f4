//! A call that needs a person: ask the client (elicitation), or hold it for
//! an out-of-band decision, then tell the caller what to do with it.
//!
//! The call is decided and its approval found or issued by what the call
//! asks, through the lifecycle's one path
//! ([`toolgate::approval::lifecycle::held::admit_asked`], called by
//! [`Gateway::admit`]): a question is issued only while the history it was
//! judged on stands. So a retry of a held call
//! (after the pending result, a reconnect, or a gateway restart) attaches to
//! its approval instead of asking again, and a call already run gets its
//! stored outcome. [`settle`] asks the client when it can (the answer's
//! approval claims the call judged again on the history as it is then, as
//! every claim is: [`held::decide`] with the session's rules), and otherwise lets
//! the lifecycle drive the record ([`held::drive`]) until this process may
//! run the call ([`Settled::Run`], the claim is held), it is final, or the
//! hold is over; the gateway never walks the approval states itself.

use std::time::Duration;

use rmcp::Peer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ProgressNotificationParam, ProgressToken};
use rmcp::service::RoleServer;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate::approval::lifecycle::counted::Rejudge;
use toolgate::approval::lifecycle::held::{self, Attached, HeldError, Hold};
use toolgate::approval::lifecycle::{Decision, waiting_for};
use toolgate::ledger::{ApprovalRecord, ApprovalState, Millis};

use crate::gateway::{Gateway, Session, requester};

/// Where a held call ended up: the lifecycle's [`held::Driven`] (run it
/// now, final, or still waiting when the hold ended).
pub type Settled = held::Driven;

/// The request the call came in: who to ask and how, where to report
/// progress, and when the client gave up.
pub struct Request<'a> {
    /// The client.
    pub peer: &'a Peer<RoleServer>,
    /// The progress token the client gave, if any.
    pub progress: Option<ProgressToken>,
    /// Cancelled when the client cancels the request.
    pub cancel: &'a CancellationToken,
    /// The client may be asked by a form elicitation now: it declared the
    /// capability and its protocol (before 2026-07-28) allows a server's requests.
    pub form: bool,
    /// The client is on the stateless protocol (2026-07-28) and declared URL
    /// elicitation: it may be answered with `input_required` pointing at a page.
    pub url: bool,
    /// The request is a retry that carries the answers to an `input_required`.
    pub answered: bool,
}

/// What the client is asked, when it may be.
pub struct Ask<'a> {
    /// The tool's name as the client sees it.
    pub tool_name: &'a str,
    /// Why a person is asked.
    pub reason: &'a str,
}

/// Drives an attached approval of a call of `tool` as far as it goes within
/// the hold (see the module docs).
pub async fn settle(
    gateway: &Gateway,
    session: &Session,
    request: &Request<'_>,
    tool: &toolgate::Tool,
    attached: Attached,
    ask: Option<Ask<'_>>,
    idempotent: bool,
) -> Result<Settled, HeldError> {
    let ledger = gateway.ledger(session);
    let mut record = attached.into_record();
    // An approved call is judged again on the history as it is claimed (the session's rules, `tool`).
    let (gate, key) = (gateway.gate(session), session.conversation_key());
    let context = toolgate::tool::ApprovalContext::new(record.tool_call_id.clone(), Vec::new());
    let judge = Rejudge { caller: requester(session, &gate, &key), tool, context };
    if let Some(ask) = ask
        && record.state == ApprovalState::Pending
        && record.routing.is_none()
        && request.form
        && let Some((decision, always)) = elicit(request, &ask, &record).await
    {
        match held::decide(&ledger, &record, decision, Some(&judge)).await? {
            toolgate::ledger::TransitionOutcome::Moved(moved) => {
                if always
                    && moved.state == ApprovalState::Executing
                    && let Err(error) = gateway.allow_always(session, ask.tool_name).await
                {
                    tracing::warn!(%error, tool = ask.tool_name, "cannot save the sticky decision");
                }
                return Ok(match moved.state {
                    ApprovalState::Executing => Settled::Run(moved),
                    _ => Settled::Final(moved),
                });
            }
            toolgate::ledger::TransitionOutcome::Unmoved(current) => record = current,
            toolgate::ledger::TransitionOutcome::Missing => return Err(HeldError::Missing(record.approval_id)),
        }
    }
    let hold = gateway.options().hold;
    let deadline = ledger.config.clock.now().saturating_add(millis(hold));
    tokio::select! {
        settled = drive(gateway, session, request, &judge, record.clone(), (deadline, idempotent)) => settled,
        () = request.cancel.cancelled() => Ok(Settled::Waiting(record)),
    }
}

/// The out-of-band hold: the lifecycle drives the record
/// ([`held::drive`]), and judges an approved call again on the history as
/// it is claimed (`judge`); the gateway only reports progress to its client.
async fn drive(
    gateway: &Gateway,
    session: &Session,
    request: &Request<'_>,
    judge: &Rejudge<'_>,
    record: ApprovalRecord,
    (deadline, idempotent): (Millis, bool),
) -> Result<Settled, HeldError> {
    let options = gateway.options();
    let hold = Hold { deadline, idempotent, poll: options.poll, progress_every: options.progress_every };
    let ledger = gateway.ledger(session);
    held::drive(&ledger, record, hold, Some(judge), |record, held_for| async move {
        report(request, &record, held_for, options.hold).await;
    })
    .await
}

/// Sends `notifications/progress` for a held call, when the client asked for progress.
async fn report(request: &Request<'_>, record: &ApprovalRecord, held_for: Millis, hold: Duration) {
    let Some(token) = request.progress.clone() else { return };
    let mut param = ProgressNotificationParam::new(token, held_for as f64 / 1000.0);
    param.total = Some(hold.as_secs_f64());
    param.message =
        Some(format!("approval {} of `{}` waits for {}", record.approval_id, record.tool_name, waiting_for(record)));
    if let Err(error) = request.peer.notify_progress(param).await {
        tracing::debug!(%error, "cannot send progress for a held call");
    }
}

/// The decisions the client's form offers.
pub const DECISIONS: [&str; 3] = ["approve", "approve_always", "deny"];

/// Asks the person in the client; `None` when the client could not ask
/// (then the call is decided out of band). The second value is `approve_always`.
async fn elicit(request: &Request<'_>, ask: &Ask<'_>, record: &ApprovalRecord) -> Option<(Decision, bool)> {
    let params = form(ask, record)?;
    let answer = tokio::select! {
        answer = request.peer.create_elicitation(params) => answer,
        () = request.cancel.cancelled() => return None,
    };
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            tracing::info!(%error, approval = %record.approval_id, "the client could not ask; deciding out of band");
            return None;
        }
    };
    Some(match answer.action {
        ElicitationAction::Accept => read_answer(answer.content.as_ref()),
        // Decline, cancel, and any action a later protocol adds: not an approval.
        _ => (Decision::Deny { reason: None }, false),
    })
}

/// The decision a form's content holds; anything but a valid approval denies (fail closed).
pub fn read_answer(content: Option<&Value>) -> (Decision, bool) {
    let decision = content.and_then(|content| content.get("decision")).and_then(Value::as_str);
    let reason = content
        .and_then(|content| content.get("reason"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|reason| !reason.is_empty())
        .map(str::to_owned);
    match decision {
        Some("approve") => (Decision::Approve { edited_input: None }, false),
        Some("approve_always") => (Decision::Approve { edited_input: None }, true),
        _ => (Decision::Deny { reason }, false),
    }
}

/// The form: which tool, with which input, why; a required `decision` and an optional `reason`.
fn form(ask: &Ask<'_>, record: &ApprovalRecord) -> Option<ElicitRequestParams> {
    let input = serde_json::to_string_pretty(&record.input).unwrap_or_else(|_| record.input.to_string());
    let message =
        format!("Allow `{}` to run with this input?\n\n{input}\n\nWhy you are asked: {}", ask.tool_name, ask.reason);
    let params = json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "title": "Decision",
                    "description": "approve: run it once; approve_always: run it and stop asking for this tool in this session; deny: do not run it",
                    "enum": DECISIONS,
                },
                "reason": {
                    "type": "string",
                    "title": "Reason",
                    "description": "Why (optional; the model reads it with a denial)",
                },
            },
            "required": ["decision"],
        },
    });
    match serde_json::from_value(params) {
        Ok(params) => Some(params),
        Err(error) => {
            tracing::error!(%error, "the approval form does not build");
            None
        }
    }
}

/// Milliseconds of a duration (saturating).
pub fn millis(duration: Duration) -> Millis {
    Millis::try_from(duration.as_millis()).unwrap_or(Millis::MAX)
}
