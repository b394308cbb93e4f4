//! [`Explanation`]: what a policy decides for one call and why, with every
//! rule and sticky decision that matched (for `toolgate policy explain`).

use std::fmt;

use serde::Serialize;
use toolgate::tool::{GateAction, Verdict};

/// What matched: a file rule or a sticky decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum MatchSource {
    /// A rule of the policy file.
    Rule {
        /// Its name (`rule #N` when unnamed).
        name: String,
        /// Its 1-based position.
        position: usize,
    },
    /// A sticky decision.
    Sticky {
        /// Its id.
        id: String,
    },
}

impl MatchSource {
    /// The rule's name or the sticky decision's id.
    pub fn name(&self) -> &str {
        match self {
            Self::Rule { name, .. } => name,
            Self::Sticky { id } => id,
        }
    }
}

/// One rule or sticky decision that matched a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleMatch {
    /// What matched.
    pub source: MatchSource,
    /// What it decides.
    pub action: GateAction,
    /// Why it matched, as a person reads it.
    pub reason: String,
    /// Who must approve, for an `ask` rule with approvers.
    #[serde(skip)]
    pub route: Option<toolgate::approval::lifecycle::Route>,
}

/// The decision for one call and every match behind it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The decision: the highest action among the matches (deny > ask > allow), or `None` when nothing matched.
    pub decision: Option<GateAction>,
    /// The deciding rule's name or sticky decision's id: the first match, in
    /// order (file rules, then sticky decisions), with the deciding action.
    pub rule: Option<String>,
    /// The deciding match's reason.
    pub reason: Option<String>,
    /// Every match, file rules first (in file order), then sticky decisions.
    pub matches: Vec<RuleMatch>,
    /// The deciding match's approvers, for an `ask` rule with them.
    #[serde(skip)]
    pub route: Option<toolgate::approval::lifecycle::Route>,
}

impl Explanation {
    /// Builds the explanation from every match, in order.
    pub(crate) fn from_matches(matches: Vec<RuleMatch>) -> Self {
        let mut winner: Option<&RuleMatch> = None;
        for candidate in &matches {
            if winner.is_none_or(|best| candidate.action > best.action) {
                winner = Some(candidate);
            }
        }
        let (decision, rule, reason) = match winner {
            Some(best) => (Some(best.action), Some(best.source.name().to_owned()), Some(best.reason.clone())),
            None => (None, None, None),
        };
        let route = winner.and_then(|best| best.route.clone());
        Self { decision, rule, reason, matches, route }
    }

    /// The verdict a gate returns for this explanation.
    pub fn verdict(&self) -> Option<Verdict> {
        Some(Verdict { action: self.decision?, reason: Some(self.reason.clone()?), route: self.route.clone() })
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.decision, &self.reason) {
            (Some(decision), Some(reason)) => writeln!(f, "decision: {decision} ({reason})")?,
            _ => writeln!(f, "decision: none (no rule matched; the tool's own policy decides)")?,
        }
        for matched in &self.matches {
            writeln!(f, "  {:<5} {}", matched.action.as_str(), matched.reason)?;
        }
        Ok(())
    }
}
