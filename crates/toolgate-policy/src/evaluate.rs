//! Evaluation: [`PolicyGate`], a [`CallGate`] over a policy snapshot and the
//! sticky decisions that apply to one request.
//!
//! Rules in shadow mode take no part in the verdict (`shadowed` lists what
//! they would have decided), nor do allowing sticky decisions: those are
//! grants, offered after the verdict ([`CallGate::grants`], see
//! [`crate::grants`]) to lift a question. Among all other file rules and sticky decisions that match a call, the highest
//! action wins (deny > ask > allow); the verdict names the first match with
//! that action, file rules (in file order) before sticky decisions (in the
//! order given). Nothing matched: no verdict, and the engine uses the tool's
//! own policy (see [`toolgate::tool::CallGate`] for how verdicts combine).
//! Evaluation is synchronous, allocation-light and linear in the rules and
//! the input; it stops at the first matching deny. A rule's history term is
//! judged before (by [`crate::StoredGate`], which reads the store): here,
//! without a store, every term is unknown, so such a rule asks where it
//! would deny or ask, and an `allow` rule with one does not match.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use toolgate::approval::lifecycle::grant::GrantOffer;
use toolgate::ledger::Millis;
use toolgate::tool::{CallGate, GateAction, GateCall, Shadowed, Verdict};

use crate::compile::{Policy, Rule};
use crate::explain::{Explanation, MatchSource, RuleMatch};
use crate::history::Fact;
use crate::sticky::StickyDecision;

/// What each rule's history term says about one call, by the rule's index
/// (`None`: the rule has no term, or its matchers do not match).
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts(Vec<Option<Fact>>);

impl Facts {
    /// No history read: every term whose rule's matchers match is unknown, for `why`.
    pub(crate) fn unknown(policy: &Policy, call: &GateCall<'_>, why: &str) -> Self {
        let fact =
            |rule: &Rule| (rule.history().is_some() && rule.matches(call)).then(|| Fact::Unknown(why.to_owned()));
        Self(policy.rules().iter().map(fact).collect())
    }

    /// The facts of each rule, in rule order.
    pub(crate) fn new(facts: Vec<Option<Fact>>) -> Self {
        Self(facts)
    }

    fn of(&self, index: usize) -> Option<&Fact> {
        self.0.get(index).and_then(Option::as_ref)
    }
}

/// Why a term is unknown where no store is read.
const NO_STORE: &str = "history terms need a store, and this gate reads none";

/// A file rule (with what its history term found) or a sticky decision that matched.
#[derive(Clone, Copy)]
enum Candidate<'a> {
    Rule(&'a Rule, Option<&'a Fact>),
    Sticky(&'a StickyDecision),
}

impl Candidate<'_> {
    fn action(self) -> GateAction {
        match self {
            // Fails closed: an unreadable history asks where the rule would deny or ask.
            Self::Rule(rule, Some(Fact::Unknown(_))) => rule.action().min(GateAction::Ask),
            Self::Rule(rule, _) => rule.action(),
            Self::Sticky(sticky) => sticky.action.into(),
        }
    }

    fn reason(self, call: &GateCall<'_>) -> String {
        match self {
            Self::Rule(rule, fact) => {
                let history = match fact {
                    Some(Fact::Holds(text)) => Some(text.clone()),
                    Some(Fact::Unknown(why)) => Some(format!("unknown ({why}); approval required")),
                    Some(Fact::Fails(_)) | None => None,
                };
                rule.describe_with(call, history.as_deref()).unwrap_or_else(|| format!("rule `{}`", rule.name()))
            }
            Self::Sticky(sticky) => sticky.describe(),
        }
    }

    fn route(self) -> Option<toolgate::approval::lifecycle::Route> {
        match self {
            Self::Rule(rule, _) => rule.route().cloned(),
            Self::Sticky(_) => None,
        }
    }

    fn source(self) -> MatchSource {
        match self {
            Self::Rule(rule, _) => MatchSource::Rule { name: rule.name().to_owned(), position: rule.position() },
            Self::Sticky(sticky) => MatchSource::Sticky { id: sticky.id.clone() },
        }
    }
}

/// Every match, file rules first: a rule with a history term matches when
/// its term holds, or, unknown, when it would deny or ask (then it asks).
fn matches<'a>(
    policy: &'a Policy,
    sticky: &'a [StickyDecision],
    call: &GateCall<'_>,
    now_ms: Millis,
    facts: &'a Facts,
) -> impl Iterator<Item = Candidate<'a>> {
    let enforced = policy.rules().iter().enumerate().filter(|(_, rule)| !rule.is_shadow());
    let rules = enforced.filter(|(_, rule)| rule.matches(call)).filter_map(|(index, rule)| {
        match (rule.history(), facts.of(index)) {
            (None, _) => Some(Candidate::Rule(rule, None)),
            (Some(_), Some(fact @ Fact::Holds(_))) => Some(Candidate::Rule(rule, Some(fact))),
            (Some(_), Some(fact @ Fact::Unknown(_))) if rule.action() != GateAction::Allow => {
                Some(Candidate::Rule(rule, Some(fact)))
            }
            (Some(_), _) => None,
        }
    });
    // An allowing decision is a grant: it lifts a question after the verdict (`crate::grants`), it ranks as no rule.
    let denies = sticky.iter().filter(|decision| decision.action == crate::sticky::StickyAction::Deny);
    let sticky = denies.filter(move |decision| decision.matches(call, now_ms)).map(Candidate::Sticky);
    rules.chain(sticky)
}

/// The rules in shadow mode that match `call` (a history term must hold;
/// unknown, the rule is left out): what each would have decided.
pub(crate) fn shadowed(policy: &Policy, call: &GateCall<'_>, facts: &Facts) -> Vec<Shadowed> {
    let shadows = policy.rules().iter().enumerate().filter(|(_, rule)| rule.is_shadow() && rule.matches(call));
    shadows
        .filter_map(|(index, rule)| {
            let fact = match (rule.history(), facts.of(index)) {
                (None, _) => None,
                (Some(_), Some(fact @ Fact::Holds(_))) => Some(fact),
                (Some(_), _) => return None,
            };
            let reason = Candidate::Rule(rule, fact).reason(call);
            Some(Shadowed { rule: rule.name().to_owned(), action: rule.action(), reason })
        })
        .collect()
}

/// The verdict for `call`; stops at the first deny.
pub(crate) fn decide(
    policy: &Policy,
    sticky: &[StickyDecision],
    call: &GateCall<'_>,
    now_ms: Millis,
    facts: &Facts,
) -> Option<Verdict> {
    let mut best: Option<Candidate<'_>> = None;
    for candidate in matches(policy, sticky, call, now_ms, facts) {
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
pub(crate) fn explain(
    policy: &Policy,
    sticky: &[StickyDecision],
    call: &GateCall<'_>,
    now_ms: Millis,
    facts: &Facts,
) -> Explanation {
    Explanation::from_matches(
        matches(policy, sticky, call, now_ms, facts)
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
    /// The grants that covered each call at its last verdict, by tool call id.
    offers: Arc<std::sync::Mutex<std::collections::HashMap<String, Vec<GrantOffer>>>>,
}

impl PolicyGate {
    /// A gate over `policy` and `sticky` decisions, judging expiry at `now_ms` (unix milliseconds).
    pub fn new(policy: Arc<Policy>, sticky: Vec<StickyDecision>, now_ms: Millis) -> Self {
        Self { policy, sticky, now_ms, offers: Arc::default() }
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
        decide(&self.policy, &self.sticky, call, self.now_ms, &Facts::unknown(&self.policy, call, NO_STORE))
    }

    /// The verdict for one call with every matching rule and sticky decision.
    pub fn explain(&self, call: &GateCall<'_>) -> Explanation {
        explain(&self.policy, &self.sticky, call, self.now_ms, &Facts::unknown(&self.policy, call, NO_STORE))
    }
}

impl CallGate for PolicyGate {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<Verdict>> {
        let offers = crate::grants::covering(&self.sticky, &call, self.now_ms);
        let mut held = self.offers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match offers.is_empty() {
            true => held.remove(call.tool_call_id),
            false => held.insert(call.tool_call_id.to_owned(), offers),
        };
        futures::future::ready(self.decide(&call)).boxed()
    }

    fn grants(&self, tool_call_id: &str) -> Vec<GrantOffer> {
        let mut held = self.offers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.remove(tool_call_id).unwrap_or_default()
    }

    fn config_digest(&self) -> Option<String> {
        self.policy.digest().map(str::to_owned)
    }
}

impl CallGate for Policy {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<Verdict>> {
        futures::future::ready(self.decide(&call)).boxed()
    }

    fn config_digest(&self) -> Option<String> {
        self.digest().map(str::to_owned)
    }
}

impl Policy {
    /// The verdict of the file's rules alone (no sticky decisions).
    pub fn decide(&self, call: &GateCall<'_>) -> Option<Verdict> {
        decide(self, &[], call, 0, &Facts::unknown(self, call, NO_STORE))
    }

    /// Every rule that matches the call and which one decides (no sticky decisions).
    pub fn explain(&self, call: &GateCall<'_>) -> Explanation {
        explain(self, &[], call, 0, &Facts::unknown(self, call, NO_STORE))
    }
}
