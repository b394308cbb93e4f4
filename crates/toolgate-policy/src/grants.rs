//! Grants as the gate sees them: which stored grants (allowing sticky
//! decisions, see [`crate::sticky`]) cover a call, and the one check of a
//! grant's input predicates every path makes before it saves one
//! ([`check_spec`]).
//!
//! Whether a covering grant may lift the call's verdict, and spending its
//! uses, belong to the approval lifecycle
//! ([`toolgate::approval::lifecycle::grant`]); a gate only offers the grants
//! that cover a call ([`toolgate::tool::CallGate::grants`]).

use std::collections::BTreeMap;

use serde_json::Value;
use toolgate::approval::lifecycle::grant::{GrantOffer, GrantRefusal, GrantSpec};
use toolgate::approval::lifecycle::{self, Voter};
use toolgate::ledger::{ApprovalRecord, Millis, StoredDecision};
use toolgate::tool::GateCall;

use crate::config::PredicateConfig;
use crate::error::RuleRef;
use crate::predicate::Predicate;
use crate::sticky::{StickyAction, StickyDecision};

/// Checks a grant's spec: [`GrantSpec::check`], then each input predicate
/// as the rules' would be compiled (known operators, valid regexes and
/// globs, JSON pointers). The error names what is wrong.
pub fn check_spec(spec: &GrantSpec) -> Result<(), GrantRefusal> {
    spec.check()?;
    compile(&spec.input).map(|_| ())
}

/// Makes the grant an approver gives with `voter`'s approval of `record` at
/// `now`: the spec checked ([`check_spec`]), then made by the lifecycle's
/// rules ([`lifecycle::grant::issue`]: an approval, one approver's quorum),
/// under a new id. Every path that takes a grant (inbox, chat, CLI, link)
/// makes it here, so none skips a check.
pub fn issue(
    record: &ApprovalRecord,
    voter: &Voter,
    spec: &GrantSpec,
    now: Millis,
) -> Result<StoredDecision, GrantRefusal> {
    check_spec(spec)?;
    lifecycle::grant::issue(record, voter, spec, now, lifecycle::grant::new_id())
}

/// The predicates compiled, or why not.
fn compile(input: &BTreeMap<String, Value>) -> Result<Vec<Predicate>, GrantRefusal> {
    let rule = RuleRef::new(1, Some("grant".into()));
    input
        .iter()
        .map(|(pointer, predicate)| {
            let config: PredicateConfig = serde_json::from_value(predicate.clone())
                .map_err(|error| GrantRefusal::Invalid(format!("`input` {pointer:?}: {error}")))?;
            Predicate::compile(&rule, pointer, &config)
                .map_err(|error| GrantRefusal::Invalid(format!("`input` {pointer:?}: {error}")))
        })
        .collect()
}

/// The grant as the lifecycle takes it.
pub fn offer(grant: &StickyDecision) -> GrantOffer {
    GrantOffer {
        id: grant.id.clone(),
        granted_by: grant.created_by.clone(),
        granter_groups: grant.granter_groups.clone(),
        unlimited: grant.uses.is_none() && grant.uses_left.is_none(),
        description: grant.describe(),
    }
}

/// The grants among `decisions` that cover `call` at `now` (allowing, live,
/// same tool, scope and input), in order.
pub fn covering(decisions: &[StickyDecision], call: &GateCall<'_>, now: Millis) -> Vec<GrantOffer> {
    decisions
        .iter()
        .filter(|decision| decision.action == StickyAction::Allow && decision.matches(call, now))
        .map(offer)
        .collect()
}
