//! A chat step that holds approvals decided outside the chat: routed to
//! named approvers (a rule's `approvers`), or decided in the inbox.
//!
//! Before a stored chat request runs, the step it continues (its last
//! assistant message with approvals) is read against the ledger:
//! - No approval of the step is routed or was decided out of band: nothing
//!   changes ([`Step::None`]), the engine settles the answers as always.
//! - A new user message while routed approvals are pending is refused with
//!   409 `approvals_pending`: the requester cannot cancel someone else's
//!   decision (unrouted ones still resolve as unanswered).
//! - The requester's answers count as their votes ([`lifecycle::cast`]): on
//!   their own approvals they decide; on routed ones the routing's checks
//!   apply (403 `not_an_approver`, `self_approval_forbidden`, 409
//!   `already_voted`, ...). Nothing runs yet.
//! - An answer whose edit the rules route to other approvers supersedes its
//!   approval ([`lifecycle::supersede`]), its own or a routed one: the step
//!   then waits for the new approval like any routed one. Every approval is
//!   read as it stands now, a superseded one as its successor
//!   ([`lifecycle::current`]).
//! - While any approval of the step is pending the response only reports
//!   where each approval stands ([`Step::Waiting`]: `data-toolgate-approval`
//!   parts, no model call); the conversation is stored with the answers.
//! - Once none is pending, the decisions on record become the step's
//!   answers and the run goes on, under the conversation's continuation
//!   claim, so the server's own continuation ([`crate::continuation`]) does
//!   not run it a second time ([`Step::Ready`]).

use std::collections::HashMap;

use serde_json::json;
use toolgate::Decision;
use toolgate::approval::lifecycle::{self, VoteOptions, Voter, waiting_for};
use toolgate::ledger::{ApprovalRecord, ApprovalState, ContinuationClaim, Ledger, LedgerStore, StoreError};
use toolgate_ui::{ToolState, UiApproval, UiChunk, UiMessage, UiMessageBuilder, UiPart, UiRole};

use super::StoredRun;
use super::context::RunContext;
use crate::approval_item::approval_part;
use crate::error::ApiError;

/// What the step's approvals say about the run.
#[derive(Debug, Default)]
pub(crate) enum Step {
    /// Nothing routed or decided out of band: the usual run.
    #[default]
    None,
    /// Every approval is decided and the run is this request's (under `claim`,
    /// with its holder); the approvals are reported when it ends.
    Ready { approval_ids: Vec<String>, claim: Option<(ContinuationClaim, String)> },
    /// Some approvals still wait for votes, or the server is continuing the
    /// step right now: report them, run nothing. `save`: store the
    /// conversation with the requester's answers (not while the server's own
    /// continuation holds it, whose save must not be overtaken).
    Waiting { approval_ids: Vec<String>, save: bool },
}

impl Step {
    /// The approvals to report in the response.
    pub(crate) fn approval_ids(&self) -> Vec<String> {
        match self {
            Self::None => Vec::new(),
            Self::Ready { approval_ids, .. } | Self::Waiting { approval_ids, .. } => approval_ids.clone(),
        }
    }
}

/// The last assistant message's tool parts that wait for (or hold) an
/// answer: (message index, approval ids).
pub(crate) fn open_step(messages: &[UiMessage]) -> Option<(usize, Vec<String>)> {
    let index = messages.iter().rposition(|message| message.role == UiRole::Assistant)?;
    let mut ids: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for part in &messages[index].parts {
        if let UiPart::Tool(tool) = part
            && matches!(tool.state, ToolState::ApprovalRequested | ToolState::ApprovalResponded)
            && let Some(approval) = &tool.approval
            // A sub-agent's approval shows on its surfaced call and on the agent call waiting for it: one approval.
            && seen.insert(approval.id.as_str())
        {
            ids.push(approval.id.clone());
        }
    }
    (!ids.is_empty()).then_some((index, ids))
}

/// Reads the step against the ledger, counts the requester's answers as
/// votes, and says how the request goes on (see the module docs).
pub(crate) async fn settle_step(
    context: &RunContext,
    ledger: &Ledger,
    voter: &Voter,
    messages: &mut [UiMessage],
    new_message: bool,
) -> Result<Step, ApiError> {
    let Some((index, ids)) = open_step(messages) else { return Ok(Step::None) };
    let store = ledger.config.store.as_ref();
    let answers = answers_in(&messages[index]);
    if !new_message {
        grants_with_answers(ledger, voter, &messages[index], &ids).await?;
    }
    if !new_message {
        let answered: Vec<(String, Decision)> =
            ids.iter().filter_map(|id| answers.get(id).map(|decision| (id.clone(), decision.clone()))).collect();
        super::vote::supersede_own_edits(context, &ledger.config, voter, &answered).await?;
    }
    let records = current(store, &ids).await?;
    let involved = records.iter().any(|(asked, record)| {
        record.routing.is_some()
            || record.supersedes.is_some()
            || (record.state != ApprovalState::Pending && !answers.contains_key(asked))
    });
    if !involved {
        return Ok(Step::None);
    }
    let pending: Vec<String> = records
        .iter()
        .map(|(_, record)| record)
        .filter(|record| record.state == ApprovalState::Pending && record.routing.is_some())
        .map(|record| format!("`{}` ({}) waits for {}", record.approval_id, record.tool_name, waiting_for(record)))
        .collect();
    if new_message && !pending.is_empty() {
        return Err(toolgate::EngineError::ApprovalsPending { pending }.into());
    }
    if !new_message {
        vote_answers(context, ledger, voter, answers, &records).await?;
    }
    let records = current(store, &ids).await?;
    if records.iter().any(|(_, record)| record.state == ApprovalState::Pending) {
        if new_message {
            // Only unrouted approvals are pending: the engine denies them as unanswered.
            answer_from_records(&mut messages[index], &records);
            return Ok(Step::None);
        }
        return Ok(Step::Waiting { approval_ids: ids, save: true });
    }
    answer_from_records(&mut messages[index], &records);
    let config = &ledger.config;
    let now = config.clock.now();
    // The server's continuation lease: renewed while the request runs (`run_stored`), so a
    // request that dies lets the server's continuation take over once it lapses.
    let lease = context.continuation_lease();
    let until = now.saturating_add(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX));
    let holder = super::holder(config);
    match store.claim_continuation(&ledger.conversation_id, &holder, until, now, true).await? {
        Some(claim) => Ok(Step::Ready { approval_ids: ids, claim: Some((claim, holder)) }),
        // The server is continuing it right now: report where it stands; the client resumes the stream.
        None => Ok(Step::Waiting { approval_ids: ids, save: false }),
    }
}

/// Keeps the grants the requester's approving answers carry (the UI
/// approval's `grant`): each checked as every path checks one
/// ([`toolgate_policy::grants::check_spec`], [`lifecycle::grant::issue`])
/// and saved only for an approval still pending that this answer may decide
/// ([`lifecycle::check_vote`]), so a repeated request keeps nothing twice.
async fn grants_with_answers(
    ledger: &Ledger,
    voter: &Voter,
    message: &UiMessage,
    ids: &[String],
) -> Result<(), ApiError> {
    let carried: Vec<(&str, &serde_json::Value)> = message
        .parts
        .iter()
        .filter_map(|part| match part {
            UiPart::Tool(tool) if tool.state == ToolState::ApprovalResponded => {
                let approval = tool.approval.as_ref()?;
                Some((approval.id.as_str(), approval.grant.as_ref()?, approval.approved?))
            }
            _ => None,
        })
        .map(|(id, grant, approved)| match approved {
            true => Ok((id, grant)),
            false => Err(super::vote::grant_refused(lifecycle::grant::GrantRefusal::NotApproving)),
        })
        .collect::<Result<_, _>>()?;
    keep_grants(ledger, voter, &carried, ids).await
}

/// Keeps the grants approving answers carry (`(approval id, grant object)`,
/// the inbox's shape): each parsed and checked as every path checks one
/// ([`toolgate_policy::grants::check_spec`], then
/// [`toolgate_policy::grants::issue`]: an invalid one is `invalid_grant`, one
/// on a quorum `grant_not_allowed`) and saved only for an approval of `ids`
/// still pending that this answer may decide ([`lifecycle::check_vote`]), so
/// a repeated request keeps nothing twice. The chat's answers and the AG-UI
/// resume's come through here.
pub(crate) async fn keep_grants(
    ledger: &Ledger,
    voter: &Voter,
    carried: &[(&str, &serde_json::Value)],
    ids: &[String],
) -> Result<(), ApiError> {
    if carried.is_empty() {
        return Ok(());
    }
    let config = &ledger.config;
    let records = current(config.store.as_ref(), ids).await?;
    for &(id, grant) in carried {
        let spec: lifecycle::grant::GrantSpec = serde_json::from_value(grant.clone()).map_err(|error| {
            super::vote::grant_refused(lifecycle::grant::GrantRefusal::Invalid(format!("approval `{id}`: {error}")))
        })?;
        toolgate_policy::grants::check_spec(&spec).map_err(super::vote::grant_refused)?;
        let Some((_, record)) = records.iter().find(|(asked, record)| asked == id && record.approval_id == id) else {
            continue;
        };
        let now = config.clock.now();
        if record.state != ApprovalState::Pending
            || lifecycle::check_vote(record, voter, &Decision::APPROVE, now).is_err()
        {
            continue;
        }
        let made = toolgate_policy::grants::issue(record, voter, &spec, now).map_err(super::vote::grant_refused)?;
        lifecycle::grant::save(config.store.as_ref(), &made).await?;
        tracing::info!(grant = %made.id, approval = %id, "grant made with an answer");
    }
    Ok(())
}

/// The answers the message carries, by approval id (those its client gave).
fn answers_in(message: &UiMessage) -> HashMap<String, Decision> {
    message
        .parts
        .iter()
        .filter_map(|part| match part {
            UiPart::Tool(tool) if tool.state == ToolState::ApprovalResponded => {
                let approval = tool.approval.as_ref()?;
                let decision = match approval.approved? {
                    true => Decision::Approve { edited_input: approval.edited_input.clone() },
                    false => Decision::Deny { reason: approval.reason.clone() },
                };
                Some((approval.id.clone(), decision))
            }
            _ => None,
        })
        .collect()
}

/// The step's approvals as they stand now, each with the id the step names
/// it by, in the order asked: a superseded one as its successor
/// ([`lifecycle::current`]); unknown ids left out.
pub(crate) async fn current(
    store: &dyn LedgerStore,
    ids: &[String],
) -> Result<Vec<(String, ApprovalRecord)>, StoreError> {
    let mut found = lifecycle::current(store, ids).await?;
    Ok(ids.iter().filter_map(|id| found.remove(id).map(|record| (id.clone(), record))).collect())
}

/// Casts the requester's answers to pending approvals as their votes. A
/// successor gets none: the answer in the message is the edit that made it,
/// spoken to the original (the requester withdraws a successor in the inbox).
async fn vote_answers(
    context: &RunContext,
    ledger: &Ledger,
    voter: &Voter,
    mut answers: HashMap<String, Decision>,
    records: &[(String, ApprovalRecord)],
) -> Result<(), ApiError> {
    let config = &ledger.config;
    let pending = records
        .iter()
        .map(|(_, record)| record)
        .filter(|record| record.state == ApprovalState::Pending && record.supersedes.is_none());
    for record in pending {
        let Some(decision) = answers.remove(&record.approval_id) else { continue };
        let options = VoteOptions { continuation: false, note: None };
        super::vote::vote(context, config, &record.approval_id, voter, decision, options).await?;
    }
    context.signals().approvals_changed();
    Ok(())
}

/// Writes the decisions on record into the step's tool parts as their
/// answers (what the engine settles: approved ones run under the ledger's
/// claim, denied and withdrawn ones are denied with their reason).
///
/// `records` pairs each approval the message names with its record now (a
/// superseded one's successor, whose input, the edit, is the answer's).
pub(crate) fn answer_from_records(message: &mut UiMessage, records: &[(String, ApprovalRecord)]) {
    let records: HashMap<&str, &ApprovalRecord> =
        records.iter().map(|(asked, record)| (asked.as_str(), record)).collect();
    for part in &mut message.parts {
        let UiPart::Tool(tool) = part else { continue };
        if !matches!(tool.state, ToolState::ApprovalRequested | ToolState::ApprovalResponded) {
            continue;
        }
        let Some(approval) = tool.approval.as_mut() else { continue };
        let Some(record) = records.get(approval.id.as_str()) else { continue };
        let Some(decided) = &record.decision else { continue };
        *approval = UiApproval {
            id: approval.id.clone(),
            approved: Some(decided.approved),
            reason: decided.reason.clone(),
            signature: approval.signature.clone(),
            edited_input: match record.supersedes {
                None => decided.edited_input.clone(),
                Some(_) => decided.edited_input.clone().or_else(|| Some(record.input.clone())),
            },
            grant: None,
        };
        tool.state = ToolState::ApprovalResponded;
    }
}

/// `data-toolgate-approval` chunks for these approvals as they are now, and
/// for the successors of those an edit superseded.
pub(crate) async fn report(store: &dyn LedgerStore, approval_ids: &[String]) -> Vec<UiChunk> {
    if approval_ids.is_empty() {
        return Vec::new();
    }
    let read = async {
        let mut records = store.approvals(approval_ids).await?;
        for (_, successor) in current(store, approval_ids).await? {
            if !records.iter().any(|record| record.approval_id == successor.approval_id) {
                records.push(successor);
            }
        }
        Ok::<_, StoreError>(records)
    };
    match read.await {
        Ok(records) => records
            .iter()
            .map(|record| UiChunk::Approval { id: record.approval_id.clone(), data: approval_part(record) })
            .collect(),
        Err(error) => {
            tracing::warn!(%error, "cannot read the approvals to report");
            Vec::new()
        }
    }
}

/// The response of a step that waits for votes: where each approval stands,
/// no model call. The conversation is stored with the requester's answers.
pub(crate) async fn waiting(
    context: &RunContext,
    run: StoredRun,
) -> Result<impl futures::Stream<Item = axum::body::Bytes> + Send + 'static, ApiError> {
    let StoredRun { key, principal, ledger, mut messages, version, step, .. } = run;
    let store = ledger.config.store.clone();
    let last = messages.pop().filter(|message| message.role == UiRole::Assistant);
    let Some(last) = last else {
        return Err(ApiError::new(axum::http::StatusCode::CONFLICT, "approvals_pending", "the step waits for votes"));
    };
    let prefix = super::replay::resume_prefix(&last);
    let mut builder = UiMessageBuilder::continuing(last);
    let mut chunks = vec![UiChunk::Start { message_id: Some(builder.message().id.clone()) }];
    chunks.extend(report(store.as_ref(), &step.approval_ids()).await);
    chunks.push(UiChunk::Finish { finish_reason: None });
    for chunk in &chunks {
        builder.apply(chunk);
    }
    messages.push(builder.finish());
    if matches!(step, Step::Waiting { save: true, .. }) {
        super::conversation::save(
            store.as_ref(),
            (&key, ledger.owner.as_deref()),
            &messages,
            version,
            ledger.config.clock.now(),
        )
        .await;
    }
    let frames: Vec<axum::body::Bytes> = chunks
        .iter()
        .map(|chunk| axum::body::Bytes::from(toolgate_ui::sse_frame(chunk)))
        .chain([axum::body::Bytes::from_static(toolgate_ui::SSE_DONE.as_bytes())])
        .collect();
    // While the server's own continuation runs, its response is the one to resume.
    if matches!(step, Step::Waiting { save: true, .. }) {
        let running = context.running().start(&key, principal);
        // A client resuming gets the message as it stood first (see `resume_prefix`).
        for chunk in &prefix {
            running.push(&axum::body::Bytes::from(toolgate_ui::sse_frame(chunk)));
        }
        for frame in &frames {
            running.push(frame);
        }
    }
    tracing::info!(conversation = %key, data = %json!(step.approval_ids()), "the step waits for votes");
    Ok(futures::stream::iter(frames))
}
