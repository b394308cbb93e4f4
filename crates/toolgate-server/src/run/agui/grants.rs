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

use toolgate::approval::lifecycle::Voter;
use toolgate::approval::lifecycle::grant::GrantRefusal;
use toolgate::ledger::Ledger;
use toolgate_agui::RunAgentInput;
use toolgate_agui::resume::{self, decide, grant_of};

use crate::error::ApiError;
use crate::run::vote::grant_refused;

/// Keeps the grants the resume's approving entries carry (see the module docs).
pub(crate) async fn keep_resumed_grants(ledger: &Ledger, voter: &Voter, input: &RunAgentInput) -> Result<(), ApiError> {
    let carried = carried_grants(input)?;
    let ids: Vec<String> = carried.iter().map(|(id, _)| (*id).to_owned()).collect();
    crate::run::step::keep_grants(ledger, voter, &carried, &ids).await
}

/// The resume's grants, by the interrupt each answers; one with a denial (or
/// a malformed entry, which is one) is refused.
pub(crate) fn carried_grants(input: &RunAgentInput) -> Result<Vec<(&str, &serde_json::Value)>, ApiError> {
    let Some(resume) = input.resume.as_deref() else { return Ok(Vec::new()) };
    let mut carried = Vec::new();
    for (index, entry) in resume.iter().enumerate() {
        let Some(grant) = grant_of(entry) else { continue };
        match decide(index, entry) {
            resume::Decision::Approve { .. } => carried.push((entry.interrupt_id.as_str(), grant)),
            resume::Decision::Deny { .. } => return Err(grant_refused(GrantRefusal::NotApproving)),
        }
    }
    Ok(carried)
}
