//! Grants given with an AG-UI resume.
//!
//! An approving resume entry may carry a grant in its payload
//! (`{approved: true, grant: {uses, within, input, scope}}`, the inbox's
//! grant object, [`toolgate_agui::resume::grant_of`]). Before the run, each
//! is checked and kept as the chat's answers keep theirs
//! ([`crate::run::step::keep_grants`]: the policy's predicates, then the
//! lifecycle's rules through [`toolgate_policy::grants::issue`]), for the
//! interrupt it answers while that approval is still pending and the
//! requester may decide it. A grant with a denial, or one that does not
//! check, is refused (`invalid_grant`, `grant_not_allowed`) and nothing runs.
//!
//! Only a resume that answers the pending interrupts exactly once
//! ([`resolve_entries`], the check the run itself makes) keeps any grant: one
//! that the run will refuse (an interrupt answered twice, one not pending,
//! one left unanswered) keeps none, so no grant outlives an answer that was
//! never given.

use serde_json::Value;
use toolgate::approval::lifecycle::Voter;
use toolgate::approval::lifecycle::grant::GrantRefusal;
use toolgate::ledger::Ledger;
use toolgate_agui::RunAgentInput;
use toolgate_agui::resume::{self, PendingApproval, STATE_KEY, grant_of, pending_approvals, resolve_entries};

use crate::error::ApiError;
use crate::run::vote::grant_refused;

/// Keeps the grants the resume's approving entries carry (see the module
/// docs); `stored`: the thread's pending interrupts, which a resume without
/// toolgate's state answers.
pub(crate) async fn keep_resumed_grants(
    ledger: &Ledger,
    voter: &Voter,
    input: &RunAgentInput,
    stored: &[PendingApproval],
) -> Result<(), ApiError> {
    let carried = carried_grants(input, stored)?;
    let ids: Vec<String> = carried.iter().map(|(id, _)| (*id).to_owned()).collect();
    crate::run::step::keep_grants(ledger, voter, &carried, &ids).await
}

/// Whether any resume entry carries a grant.
pub(crate) fn carries_grant(input: &RunAgentInput) -> bool {
    input.resume.as_deref().is_some_and(|resume| resume.iter().any(|entry| grant_of(entry).is_some()))
}

/// The resume's grants, by the interrupt each answers, when the resume
/// answers the pending interrupts exactly once (none otherwise); one with a
/// denial (or a malformed entry, which is one) is refused.
fn carried_grants<'a>(
    input: &'a RunAgentInput,
    stored: &[PendingApproval],
) -> Result<Vec<(&'a str, &'a Value)>, ApiError> {
    let Some(resume) = input.resume.as_deref() else { return Ok(Vec::new()) };
    let state = input.state.as_ref().filter(|state| state.get(STATE_KEY).is_some());
    let pending = match state {
        Some(state) => pending_approvals(Some(state)).unwrap_or_default(),
        None => stored.to_vec(),
    };
    let Ok(resolutions) = resolve_entries(&pending, resume) else { return Ok(Vec::new()) };
    let mut carried = Vec::new();
    for resolution in resolutions {
        let entry = &resume[resolution.entry_index];
        let Some(grant) = grant_of(entry) else { continue };
        match resolution.decision {
            resume::Decision::Approve { .. } => carried.push((entry.interrupt_id.as_str(), grant)),
            resume::Decision::Deny { .. } => return Err(grant_refused(GrantRefusal::NotApproving)),
        }
    }
    Ok(carried)
}
