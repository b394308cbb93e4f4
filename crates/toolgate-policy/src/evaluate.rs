//! Evaluation: [`PolicyGate`], a [`CallGate`] over a policy snapshot and the
//! sticky decisions that apply to one request.
//!
//! Among all file rules and sticky decisions that match a call, the highest
//! action wins (deny > ask > allow); the verdict names the first match with
//! that action, file rules (in file order) before sticky decisions (in the
//! order given). Nothing matched: no verdict, and the engine uses the tool's
//! own policy (see [`toolgate::tool::CallGate`] for how verdicts combine).
//! Evaluation is synchronous, allocation-light and linear in the rules and
//! the input; it stops at the first matching deny.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use toolgate::ledger::Millis;
use toolgate::tool::{CallGate, GateAction, GateCall, Verdict};

use crate::compile::{Policy, Rule};
use crate::explain::{Explanation, MatchSource, RuleMatch};
use crate::sticky::StickyDecision;

/// A file rule or a sticky decision that matched.
#[derive(Clone, Copy)]
enum Candidate<'a> {
    Rule(&'a Rule),
    Sticky(&'a StickyDecision),
}

impl Candidate<'_> {
    fn action(self) -> GateAction {
        match self {
            Self::Rule(rule) => rule.action(),
            Self::Sticky(sticky) => sticky.action.into(),
        }
    }

    fn reason(self, call: &GateCall<'_>) -> String {
        match self {
            Self::Rule(rule) => rule.describe_match(call).unwrap_or_else(|| format!("rule `{}`", rule.name())),
            Self::Sticky(sticky) => sticky.describe(),
        }
    }

    fn route(self) -> Option<toolgate::approval::lifecycle::Route> {
        match self {
            Self::Rule(rule) => rule.route().cloned(),
            Self::Sticky(_) => None,
        }
    }

    fn source(self) -> MatchSource {
        match self {
            Self::Rule(rule) => MatchSource::Rule { name: rule.name().to_owned(), position: rule.position() },
            Self::Sticky(sticky) => MatchSource::Sticky { id: sticky.id.clone() },
        }
    }
}

/// Every match, file rules first.
fn matches<'a>(
    policy: &'a Policy,
    sticky: &'a [StickyDecision],
    call: &GateCall<'_>,
    now_ms: Millis,
) -> impl Iterator<Item = Candidate<'a>> {
    let rules = policy.rules().iter().filter(|rule| rule.matches(call)).map(Candidate::Rule);
    let sticky = sticky.iter().filter(move |decision| decision.matches(call, now_ms)).map(Candidate::Sticky);
    rules.chain(sticky)
}

/// The verdict for `call`; stops at the first deny.
pub(crate) fn decide(
    policy: &Policy,
    sticky: &[StickyDecision],
    call: &GateCall<'_>,
    now_ms: Millis,
) -> Option<Verdict> {
    let mut best: Option<Candidate<'_>> = None;
    for candidate in matches(policy, sticky, call, now_ms) {
        if best.is_none_or(|best| candidate.action() > best.action()) {
            best = Some(candidate);
            if candidate.action() == GateAction::Deny {
                break;
            }
        }
    }
    best.map(|best| Verdict { action: best.action(), reason: Some(best.reason(call)), route: best.route() })
}

/// The verdict for `call` with every match.
pub(crate) fn explain(policy: &Policy, sticky: &[StickyDecision], call: &GateCall<'_>, now_ms: Millis) -> Explanation {
    Explanation::from_matches(
        matches(policy, sticky, call, now_ms)
            .map(|candidate| RuleMatch {
                source: candidate.source(),
                action: candidate.action(),
                reason: candidate.reason(call),
                route: candidate.route(),
            })
            .collect(),
    )
}

/// A [`CallGate`]: one policy snapshot, the sticky decisions that apply to a
/// request, and the time to judge their expiry by. Build one per request.
#[derive(Debug, Clone)]
pub struct PolicyGate {
    policy: Arc<Policy>,
    sticky: Vec<StickyDecision>,
    now_ms: Millis,
}

impl PolicyGate {
    /// A gate over `policy` and `sticky` decisions, judging expiry at `now_ms` (unix milliseconds).
    pub fn new(policy: Arc<Policy>, sticky: Vec<StickyDecision>, now_ms: Millis) -> Self {
        Self { policy, sticky, now_ms }
    }

    /// The policy snapshot.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// The sticky decisions.
    pub fn sticky(&self) -> &[StickyDecision] {
        &self.sticky
    }

    /// The clock value expiry is judged by.
    pub fn now_ms(&self) -> Millis {
        self.now_ms
    }

    /// The verdict for one call (what [`CallGate::check`] returns).
    pub fn decide(&self, call: &GateCall<'_>) -> Option<Verdict> {
        decide(&self.policy, &self.sticky, call, self.now_ms)
    }

    /// The verdict for one call with every matching rule and sticky decision.
    pub fn explain(&self, call: &GateCall<'_>) -> Explanation {
        explain(&self.policy, &self.sticky, call, self.now_ms)
    }
}

impl CallGate for PolicyGate {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<Verdict>> {
        futures::future::ready(self.decide(&call)).boxed()
    }
}

impl CallGate for Policy {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<Verdict>> {
        futures::future::ready(self.decide(&call)).boxed()
    }
}

impl Policy {
    /// The verdict of the file's rules alone (no sticky decisions).
    pub fn decide(&self, call: &GateCall<'_>) -> Option<Verdict> {
        decide(self, &[], call, 0)
    }

    /// Every rule that matches the call and which one decides (no sticky decisions).
    pub fn explain(&self, call: &GateCall<'_>) -> Explanation {
        explain(self, &[], call, 0)
    }
}
