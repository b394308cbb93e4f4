//! Server-side continuation of an AG-UI thread (see [`crate::continuation`]):
//! once every interrupt the thread paused on is decided out of band, the
//! server continues it itself, as its owner's client would with a resume
//! run (AG-UI's answer to interrupts), the decisions on record as its
//! resume entries, and stores the thread with the mark of where its
//! client's view ends (the client's next run is caught up, see
//! [`super::thread`]).

use futures::StreamExt;
use serde_json::{Value, json};
use toolgate::ledger::{ApprovalRecord, ApprovalState, ContinuationClaim, Ledger, StoredConversation};
use toolgate_agui::{ResumeEntry, RunAgentInput, STATE_KEY};
use tracing::Instrument;

use super::thread::StoredThread;
use super::{AGUI_PREFIX, ThreadRun, stored_frames};
use crate::error::ApiError;
use crate::run::context::RunContext;
use crate::run::continuation::{continued_event, observe_lag};

/// Resumes the thread `stored` of `conversation` (its owner's, as stored)
/// on the server, when its open interrupts are all decided.
pub(crate) async fn continue_thread(
    context: &RunContext,
    mut conversation: Ledger,
    stored: &StoredConversation,
    claim: &ContinuationClaim,
) -> Result<(), ApiError> {
    let ledger = conversation.config.clone();
    let key = conversation.conversation_id.clone();
    let store = &ledger.store;
    let mut thread = StoredThread::read(stored)?;
    let Some(messages) = thread.messages.clone() else { return Ok(()) };
    let pending = thread.pending();
    if pending.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = pending.iter().map(|approval| approval.interrupt_id.clone()).collect();
    // Each as it stands now: a superseded approval as its successor.
    let records = crate::run::step::current(store.as_ref(), &ids).await?;
    if records.len() != ids.len() || records.iter().any(|(_, record)| record.state == ApprovalState::Pending) {
        return Ok(());
    }
    let id = conversation.name();
    let thread_id = id.strip_prefix(AGUI_PREFIX).unwrap_or(id).to_owned();
    let mut input = RunAgentInput::new(thread_id, format!("continuation-{}", uuid::Uuid::now_v7().simple()), messages);
    input.state = Some(json!({ STATE_KEY: thread.interrupts.clone() }));
    input.resume = Some(records.iter().map(resume_entry).collect());
    let principal = conversation.owner.clone();
    let data = json!({"executor": ledger.executor, "generation": claim.generation, "approvals": ids});
    observe_lag(context, &records);
    // Linked to the traces that asked (when traces are exported).
    let span = crate::telemetry::approval::continuation(store.as_ref(), id, &records).await;
    store.append(&[continued_event(&records[0].1, &principal, ledger.clock.now(), data)]).await?;
    tracing::info!(thread = %key, approvals = ids.len(), "continuing the AG-UI thread on the server");
    // The client's view ends where it paused, unless an earlier continuation already marked it.
    thread.continued_at = thread.continued_at.or(Some(input.messages.len()));
    conversation.principal.clone_from(&principal);
    let run = ThreadRun {
        key,
        groups: context.configured_groups(principal.as_deref()),
        principal,
        ledger: conversation,
        thread,
    };
    stored_frames(context.clone(), run, input, None).for_each(|_| async {}).instrument(span).await;
    Ok(())
}

/// The resume entry of a decided approval: its decision on record (an
/// approval with none, e.g. expired, is answered with a denial the ledger
/// then settles as it stands).
fn resume_entry((interrupt_id, record): &(String, ApprovalRecord)) -> ResumeEntry {
    let payload = match &record.decision {
        Some(decision) if decision.approved => {
            let mut payload = json!({"approved": true});
            // A successor's input is the edit that superseded the interrupt's approval.
            let edit = decision.edited_input.as_ref().or(record.supersedes.as_ref().map(|_| &record.input));
            if let Some(edit) = edit {
                payload["editedArgs"] = edit.clone();
            }
            payload
        }
        Some(decision) => {
            json!({"approved": false, "reason": decision.reason.clone().map_or(Value::Null, Value::String)})
        }
        None => json!({"approved": false, "reason": record.state.as_str()}),
    };
    ResumeEntry::resolved(interrupt_id.clone(), payload)
}
