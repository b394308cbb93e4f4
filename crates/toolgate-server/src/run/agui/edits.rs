//! A resume whose edit the rules route to other approvers.
//!
//! As in the chat ([`crate::run::step`]): an AG-UI client that resumes an
//! interrupt with `editedArgs` the rules route to approvers the requester
//! is not does not get a refusal for a decision that is not hers to make.
//! Its approval is superseded by a new one of the edited arguments, routed
//! to them ([`crate::run::vote::vote`], [`toolgate::approval::lifecycle::supersede`]);
//! the resume's other answers count as the requester's votes; and the run
//! reports the open interrupts instead of running. The server continues the
//! thread once every interrupt is decided ([`super::continue_thread`]),
//! reading a superseded interrupt as its successor.

use toolgate::Decision;
use toolgate::approval::lifecycle::{VoteOptions, Voter};
use toolgate::ledger::Ledger;
use toolgate_agui::resume::{self, decide};
use toolgate_agui::{ResumeEntry, RunAgentInput};

use crate::error::ApiError;
use crate::run::context::RunContext;

/// Supersedes the approvals whose resumed edit needs other approvers and,
/// when one was, casts the rest of the resume as the requester's votes;
/// returns whether it did (the run then reports its interrupts and runs
/// nothing). An approval routed to others is left to the engine, which
/// refuses an answer to it as always.
pub(crate) async fn supersede_resumed_edits(
    context: &RunContext,
    ledger: &Ledger,
    voter: &Voter,
    input: &RunAgentInput,
) -> Result<bool, ApiError> {
    let Some(resume) = input.resume.as_deref().filter(|resume| !resume.is_empty()) else { return Ok(false) };
    let answers: Vec<(String, Decision)> =
        resume.iter().enumerate().map(|(index, entry)| (entry.interrupt_id.clone(), answer(index, entry))).collect();
    let config = &ledger.config;
    let superseded = crate::run::vote::supersede_own_edits(context, config, voter, &answers).await?;
    if superseded.is_empty() {
        return Ok(false);
    }
    for (id, decision) in answers.into_iter().filter(|(id, _)| !superseded.contains(id)) {
        let options = VoteOptions { continuation: true, note: None };
        crate::run::vote::vote(context, config, &id, voter, decision, options).await?;
    }
    context.signals().approvals_changed();
    Ok(true)
}

/// A resume entry's answer as the lifecycle's decision (a malformed entry is
/// a denial, as the resume reads it).
fn answer(index: usize, entry: &ResumeEntry) -> Decision {
    match decide(index, entry) {
        resume::Decision::Approve { edited_args, .. } => Decision::Approve { edited_input: edited_args },
        resume::Decision::Deny { reason } => Decision::Deny { reason },
    }
}
