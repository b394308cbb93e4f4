//! [`Verdict`]: what a rule or policy decides about one call before any
//! person is asked.
//!
//! One type serves every layer that rules on a call:
//! - a tool's own [`ApprovalPolicy`](super::ApprovalPolicy) returns one
//!   ([`Tool::policy`](super::Tool::policy));
//! - a request-wide [`CallGate`](super::CallGate) returns one, or `None` when
//!   no rule speaks to the call;
//! - [`decide_call`](super::decide_call) combines the two into the one the
//!   engine acts on (its docs give the precedence).
//!
//! The `reason` is text people read (on approval cards) and, for a denial,
//! the model reads (in the `execution-denied` result). The `route` names who
//! must approve and only matters for [`GateAction::Ask`].

use super::GateAction;
use crate::approval::lifecycle::Route;

/// A ruling on one call: allow, ask or deny, why, and who must approve.
///
/// Build one with [`Verdict::allow`], [`Verdict::ask`], [`Verdict::deny`] or
/// [`Verdict::ask_if`], then add a reason with [`Verdict::because`] and
/// approvers with [`Verdict::routed`]:
///
/// ```
/// use toolgate::tool::{GateAction, Verdict};
///
/// let verdict = Verdict::ask().because("writes outside /tmp");
/// assert_eq!(verdict.action, GateAction::Ask);
/// assert_eq!(verdict.reason.as_deref(), Some("writes outside /tmp"));
/// assert_eq!(Verdict::deny("frozen").reason.as_deref(), Some("frozen"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// What happens to the call.
    pub action: GateAction,
    /// Why, as the person (and, for a denial, the model) reads it, e.g.
    /// ``rule `ask-writes` matched /path``. [`decide_call`](super::decide_call)
    /// always sets it for `Ask` and `Deny` and never for `Allow`.
    pub reason: Option<String>,
    /// Who must approve, when an `ask` names approvers (`None`: the
    /// requester). Ignored unless `action` is [`GateAction::Ask`].
    pub route: Option<Route>,
}

impl Verdict {
    /// Run the call without asking.
    pub fn allow() -> Self {
        Self::of(GateAction::Allow)
    }

    /// A person must approve the call first.
    pub fn ask() -> Self {
        Self::of(GateAction::Ask)
    }

    /// Never run the call: it gets an `execution-denied` result with this
    /// reason, and no person is asked.
    pub fn deny(reason: impl Into<String>) -> Self {
        Self::of(GateAction::Deny).because(reason)
    }

    /// [`Verdict::ask`] when `required`, else [`Verdict::allow`].
    pub fn ask_if(required: bool) -> Self {
        if required { Self::ask() } else { Self::allow() }
    }

    /// The same verdict with this reason.
    pub fn because(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// The same verdict with these approvers (meaningful for `ask` only).
    pub fn routed(mut self, route: Route) -> Self {
        self.route = Some(route);
        self
    }

    fn of(action: GateAction) -> Self {
        Self { action, reason: None, route: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_ordered_by_precedence_and_read_and_written_lowercase() {
        assert!(GateAction::Allow < GateAction::Ask && GateAction::Ask < GateAction::Deny);
        assert_eq!(GateAction::ALL.iter().max(), Some(&GateAction::Deny));
        for action in GateAction::ALL {
            assert_eq!(GateAction::parse(action.as_str()), Some(action));
            assert_eq!(action.to_string(), action.as_str());
            assert_eq!(serde_json::to_value(action).unwrap(), serde_json::json!(action.as_str()));
            assert_eq!(serde_json::from_value::<GateAction>(serde_json::json!(action.as_str())).unwrap(), action);
        }
        assert_eq!(GateAction::parse("Deny"), None);
    }

    #[test]
    fn constructors_and_builders() {
        assert_eq!(Verdict::allow(), Verdict { action: GateAction::Allow, reason: None, route: None });
        assert_eq!(Verdict::ask_if(true), Verdict::ask());
        assert_eq!(Verdict::ask_if(false), Verdict::allow());
        let route = Route { approvers: vec!["dave".into()], quorum: 1, ..Route::default() };
        let verdict = Verdict::ask().because("finance decides").routed(route.clone());
        assert_eq!(
            verdict,
            Verdict { action: GateAction::Ask, reason: Some("finance decides".into()), route: Some(route) }
        );
        assert_eq!(Verdict::deny("no").reason.as_deref(), Some("no"));
    }
}
