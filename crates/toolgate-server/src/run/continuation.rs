//! Continuing one stored conversation on the server, under the claim the
//! continuation worker ([`crate::continuation`]) took:
//!
//! - Continuing means: read the stored conversation; if an approval of its
//!   step is still pending, stop (a later decision marks it again); else turn
//!   the decisions on record into the step's answers and run it as a chat
//!   request of the conversation's owner would run (their rules, sticky
//!   decisions and ledger claims: each approved call runs exactly once),
//!   recorded for `GET /api/chat/{id}/stream` and stored at the end. A
//!   `continued` audit event names the replica.
//! - A step whose approvals are gone from the store is not run: each missing
//!   one is audited as `interrupted`.
//! - An AG-UI thread is continued the same way, as a resume of its open
//!   interrupts with the decisions on record ([`super::agui`]); its client's
//!   next run is caught up with what the continuation added (its
//!   `MESSAGES_SNAPSHOT` carries it).

use futures::StreamExt;
use serde_json::json;
use toolgate::ledger::{
    ApprovalRecord, AuditEvent, AuditKind, ContinuationClaim, LedgerConfig, Millis, conversation_name,
};
use toolgate_ui::parse_ui_messages;
use tracing::Instrument;

use super::context::RunContext;
use super::step::{Step, answer_from_records, open_step};
use super::{StoredRun, run_stored};
use crate::error::ApiError;

/// Runs the rest of the conversation's step, if every approval of it is decided.
pub(crate) async fn continue_conversation(
    context: &RunContext,
    ledger: &LedgerConfig,
    key: &str,
    claim: &ContinuationClaim,
) -> Result<(), ApiError> {
    let store = &ledger.store;
    let Some(mut stored) = store.conversation(key).await? else { return Ok(()) };
    // A sub-agent's approval was decided: its root conversation continues, and resumes it.
    let root = toolgate::agent::sub_run_root(&stored.messages).map(str::to_owned);
    let key = match root {
        Some(root) => {
            let Some(root_stored) = store.conversation(&root).await? else { return Ok(()) };
            stored = root_stored;
            root
        }
        None => key.to_owned(),
    };
    let key = key.as_str();
    // Whose conversation it is, as stored with it: the run is theirs.
    let owner = stored.owner.clone();
    let name = conversation_name(key, owner.as_deref());
    if name.starts_with(super::agui::AGUI_PREFIX) {
        return super::agui::continue_thread(context, ledger.owned(owner.as_deref(), name), &stored, claim).await;
    }
    let mut messages = parse_ui_messages(stored.messages).map_err(|error| {
        ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, "corrupt_conversation", error.to_string())
    })?;
    // Only a step that ends the conversation: a later message means it went on without it.
    let Some((index, ids)) = open_step(&messages).filter(|(index, _)| index + 1 == messages.len()) else {
        return Ok(());
    };
    // Each as it stands now: a superseded approval as its successor.
    let records = crate::run::step::current(store.as_ref(), &ids).await?;
    if records.len() != ids.len() {
        // Pruned, or never issued here: nothing can be continued; say so instead of guessing.
        let conversation = ledger.owned(owner.as_deref(), name);
        let events = missing(&conversation, &messages[index], &ids, &records, ledger.clock.now());
        tracing::warn!(conversation = %key, missing = events.len(), "a due step's approvals are gone; not continued");
        store.append(&events).await?;
        return Ok(());
    }
    if records.iter().any(|(_, record)| record.state == toolgate::ledger::ApprovalState::Pending) {
        return Ok(());
    }
    answer_from_records(&mut messages[index], &records);
    observe_lag(context, &records);
    // Linked to the traces that asked (when traces are exported).
    let span = crate::telemetry::approval::continuation(store.as_ref(), name, &records).await;
    let mut conversation = ledger.owned(owner.as_deref(), name);
    conversation.principal.clone_from(&owner);
    let principal = owner;
    let first = &records[0];
    let data = json!({"executor": ledger.executor, "generation": claim.generation, "approvals": ids});
    store.append(&[continued_event(&first.1, &principal, ledger.clock.now(), data)]).await?;
    tracing::info!(conversation = %key, approvals = ids.len(), "continuing the conversation on the server");
    let run = StoredRun {
        key: key.to_owned(),
        groups: context.configured_groups(principal.as_deref()),
        principal,
        ledger: conversation,
        gate: None,
        messages,
        version: Some(stored.version),
        step: Step::Ready { approval_ids: ids, claim: None },
    };
    let frames = run_stored(context, run).instrument(span.clone()).await?;
    frames.for_each(|_| async {}).instrument(span).await;
    Ok(())
}

/// `interrupted` events for the step's approvals that the store no longer has.
fn missing(
    conversation: &toolgate::ledger::Ledger,
    step: &toolgate_ui::UiMessage,
    ids: &[String],
    records: &[(String, toolgate::ledger::ApprovalRecord)],
    at: Millis,
) -> Vec<AuditEvent> {
    let call_of = |id: &str| {
        step.parts.iter().find_map(|part| match part {
            toolgate_ui::UiPart::Tool(tool) if tool.approval.as_ref().is_some_and(|approval| approval.id == id) => {
                Some(tool.tool_call_id.clone())
            }
            _ => None,
        })
    };
    ids.iter()
        .filter(|id| !records.iter().any(|(asked, _)| asked == *id))
        .map(|id| {
            let data = json!({"reason": "the step's approval is gone from the store, so the step was not continued"});
            conversation.event(AuditKind::Interrupted, id, &call_of(id).unwrap_or_default(), at, data)
        })
        .collect()
}

/// Reports how long after its step's last decision a continuation starts
/// (`toolgate_continuation_seconds`).
pub(crate) fn observe_lag(context: &RunContext, records: &[(String, ApprovalRecord)]) {
    let decided = records.iter().filter_map(|(_, record)| record.decision.as_ref().map(|decision| decision.decided_at));
    if let Some(last) = decided.max() {
        let lag = u64::try_from(context.now().saturating_sub(last)).unwrap_or(0);
        context.metrics().continued(std::time::Duration::from_millis(lag));
    }
}

/// The `continued` event of a continuation, on the step's first approval.
pub(crate) fn continued_event(
    record: &toolgate::ledger::ApprovalRecord,
    principal: &Option<String>,
    at: Millis,
    data: serde_json::Value,
) -> AuditEvent {
    AuditEvent {
        seq: 0,
        at,
        kind: AuditKind::Continued,
        approval_id: record.approval_id.clone(),
        tool_call_id: record.tool_call_id.clone(),
        conversation_id: record.conversation_name().to_owned(),
        owner: record.owner.clone(),
        principal: principal.clone(),
        data,
    }
}
