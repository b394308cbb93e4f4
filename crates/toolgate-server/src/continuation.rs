//! Server-side continuation: when the last pending approval of a
//! conversation's step is decided out of band (the inbox, a link, the CLI on
//! the store), the server runs the rest of the step itself, without a client.
//!
//! - A deciding vote marks the conversation due in the store, in the vote's
//!   transaction ([`toolgate::ledger::Update::continuation`]); so does a
//!   withdrawal. The mark survives any crash.
//! - Every process runs [`worker`] (`serve_listener` starts it): it looks
//!   for due conversations every [`POLL`] (another replica's decision, the
//!   CLI's) and at once when a decision is made here, and claims each one for
//!   [`crate::ServerConfig::continuation_lease`] (default [`LEASE`], renewed
//!   while it runs): two replicas never continue the same conversation at once, and
//!   a claim whose process died is taken over once it lapses.
//! - Continuing means: read the stored conversation; if an approval of its
//!   step is still pending, stop (a later decision marks it again); else turn
//!   the decisions on record into the step's answers and run it as a chat
//!   request of the conversation's owner would run (their rules, sticky
//!   decisions and ledger claims: each approved call runs exactly once),
//!   recorded for `GET /api/chat/{id}/stream` and stored at the end. A
//!   `continued` audit event names the replica.
//! - The mark is cleared only if no decision came while it ran; otherwise
//!   the conversation is continued again.
//! - An AG-UI thread is continued the same way, as a resume of its open
//!   interrupts with the decisions on record (the `agui` module); its client's
//!   next run is caught up with what the continuation added (its
//!   `MESSAGES_SNAPSHOT` carries it).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use toolgate::ledger::{AuditEvent, AuditKind, ContinuationClaim, LedgerConfig, Millis, conversation_name};
use toolgate_ui::parse_ui_messages;

use crate::app::AppState;
use crate::error::ApiError;
use crate::run::step::{Step, answer_from_records, open_step};
use crate::run::{StoredRun, holder, run_stored};

/// How often a worker looks for conversations decided elsewhere.
pub const POLL: Duration = Duration::from_millis(500);
/// How long a continuation claim lasts without renewal (the state's default,
/// [`crate::ServerConfig::continuation_lease`]).
pub use crate::app::CONTINUATION_LEASE as LEASE;
/// Conversations one look claims at most.
const BATCH: usize = 16;

/// Continues due conversations until the server stops (see the module docs).
/// `serve_listener` runs it; a server built on [`crate::router`] alone runs it itself.
pub async fn worker(state: AppState) {
    let Some(ledger) = state.config().ledger.clone() else { return };
    let wake = Arc::clone(state.continuations());
    loop {
        match ledger.store.due_continuations(ledger.clock.now(), BATCH).await {
            Ok(due) => {
                for key in due {
                    tokio::spawn(continue_one(state.clone(), ledger.clone(), key));
                }
            }
            Err(error) => tracing::warn!(%error, "cannot list the conversations due to continue"),
        }
        let _ = tokio::time::timeout(POLL, wake.notified()).await;
    }
}

/// Claims one conversation, continues it while renewing the claim, and ends the claim.
async fn continue_one(state: AppState, ledger: LedgerConfig, key: String) {
    let store = &ledger.store;
    let lease = state.config().continuation_lease;
    let lease_millis = Millis::try_from(lease.as_millis()).unwrap_or(Millis::MAX);
    // One holder per attempt: two attempts of this process exclude each other too.
    let holder = holder(&ledger);
    let claim = |now: Millis| {
        let until = now.saturating_add(lease_millis);
        store.claim_continuation(&key, &holder, until, now, false)
    };
    let claimed = match claim(ledger.clock.now()).await {
        Ok(Some(claimed)) => claimed,
        Ok(None) => return,
        Err(error) => return tracing::warn!(%error, conversation = %key, "cannot claim a continuation"),
    };
    let renew = async {
        loop {
            tokio::time::sleep(lease / 3).await;
            if let Err(error) = claim(ledger.clock.now()).await {
                tracing::warn!(%error, conversation = %key, "cannot renew a continuation claim");
            }
        }
    };
    let outcome = tokio::select! {
        outcome = continue_conversation(&state, &ledger, &key, &claimed) => outcome,
        () = renew => unreachable!("the renewal loop never ends"),
    };
    if let Err(error) = outcome {
        tracing::warn!(conversation = %key, %error, "the continuation failed");
    }
    match store.finish_continuation(&claimed, &holder).await {
        Ok(true) => {}
        // Settled again meanwhile: the next look continues it again.
        Ok(false) => state.continuations().notify_one(),
        Err(error) => tracing::warn!(%error, conversation = %key, "cannot end a continuation claim"),
    }
}

/// Runs the rest of the conversation's step, if every approval of it is decided.
async fn continue_conversation(
    state: &AppState,
    ledger: &LedgerConfig,
    key: &str,
    claim: &ContinuationClaim,
) -> Result<(), ApiError> {
    let store = &ledger.store;
    let Some(stored) = store.conversation(key).await? else { return Ok(()) };
    // Whose conversation it is, as stored with it: the run is theirs.
    let owner = stored.owner.clone();
    let name = conversation_name(key, owner.as_deref());
    if name.starts_with(crate::agui::AGUI_PREFIX) {
        return crate::agui::continue_thread(state, ledger.owned(owner.as_deref(), name), &stored, claim).await;
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
    let mut conversation = ledger.owned(owner.as_deref(), name);
    conversation.principal.clone_from(&owner);
    let principal = owner;
    let first = &records[0];
    let data = json!({"executor": ledger.executor, "generation": claim.generation, "approvals": ids});
    store.append(&[continued_event(&first.1, &principal, ledger.clock.now(), data)]).await?;
    tracing::info!(conversation = %key, approvals = ids.len(), "continuing the conversation on the server");
    let run = StoredRun {
        key: key.to_owned(),
        groups: state.configured_groups(principal.as_deref()),
        principal,
        ledger: conversation,
        gate: None,
        messages,
        version: Some(stored.version),
        step: Step::Ready { approval_ids: ids, claim: None },
    };
    let frames = run_stored(state, run).await?;
    frames.for_each(|_| async {}).await;
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
