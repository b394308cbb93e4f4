//! The states an approval passes through, the moves between them, and the
//! one [`Decision`] a person (or the engine on their behalf) makes.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_protocol::ToolApprovalResponsePart;

/// Where an approval is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalState {
    /// Issued; waiting for an answer.
    Pending,
    /// A person approved it; it has not started running.
    Approved,
    /// A person denied it (or the conversation moved on without an answer).
    Denied,
    /// Nobody answered before it expired.
    Expired,
    /// Running under a lease.
    Executing,
    /// Ran; the result is stored.
    Executed,
    /// Ran and failed; the error is stored.
    Failed,
    /// Started, but the process stopped before the outcome was stored.
    Interrupted,
    /// The requester withdrew it before it was decided.
    Withdrawn,
    /// An approver's edit needed other approvers: a new approval of the
    /// edited input took its place ([`crate::ledger::ApprovalRecord::superseded_by`]).
    Superseded,
}

impl ApprovalState {
    /// Every state, in life order.
    pub const ALL: [Self; 10] = [
        Self::Pending,
        Self::Approved,
        Self::Denied,
        Self::Expired,
        Self::Executing,
        Self::Executed,
        Self::Failed,
        Self::Interrupted,
        Self::Withdrawn,
        Self::Superseded,
    ];

    /// The name stored and shown (`pending`, `approved`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
            Self::Executing => "executing",
            Self::Executed => "executed",
            Self::Failed => "failed",
            Self::Interrupted => "interrupted",
            Self::Withdrawn => "withdrawn",
            Self::Superseded => "superseded",
        }
    }

    /// The state with this name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == name)
    }
}

impl ApprovalState {
    /// Whether the lifecycle allows moving from this state to `to` (see the
    /// table in [`crate::approval::lifecycle`]). Stores apply only the
    /// transitions the engine builds, and the engine builds only these.
    pub fn can_move_to(self, to: Self) -> bool {
        use ApprovalState::{
            Approved, Denied, Executed, Executing, Expired, Failed, Interrupted, Pending, Superseded, Withdrawn,
        };
        matches!(
            (self, to),
            (Pending, Pending | Approved | Denied | Expired | Withdrawn | Superseded | Executing)
                | (Approved, Executing | Denied)
                | (Executing, Executing | Executed | Failed | Interrupted)
        )
    }

    /// Whether nothing can move the approval any more.
    pub fn is_final(self) -> bool {
        Self::ALL.into_iter().all(|to| !self.can_move_to(to))
    }
}

/// What a person decided about one gated call (or what the engine decided on
/// their behalf: a request nobody answered is denied, as is one a policy refuses).
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Run the call, with the person's replacement input if they edited it.
    Approve {
        /// The input to run instead of the model's.
        edited_input: Option<Value>,
    },
    /// Do not run the call.
    Deny {
        /// Why, when a reason was given.
        reason: Option<String>,
    },
}

impl Decision {
    /// Approve as the model wrote the call.
    pub const APPROVE: Self = Self::Approve { edited_input: None };

    /// The decision an approval response part carries.
    pub fn of(response: &ToolApprovalResponsePart) -> Self {
        match (response.approved, &response.edited_input) {
            (false, _) => Self::Deny { reason: response.reason.clone() },
            (true, edit) => Self::Approve { edited_input: edit.clone() },
        }
    }

    /// Whether this approves the call.
    pub fn is_approve(&self) -> bool {
        matches!(self, Self::Approve { .. })
    }

    /// Whether two decisions choose differently: approve and deny, or
    /// approvals of different inputs. Reasons do not count.
    pub fn contradicts(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Approve { edited_input: a }, Self::Approve { edited_input: b }) => a != b,
            (Self::Deny { .. }, Self::Deny { .. }) => false,
            (Self::Approve { .. }, Self::Deny { .. }) | (Self::Deny { .. }, Self::Approve { .. }) => true,
        }
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Approve { edited_input: None } => f.write_str("approve"),
            Self::Approve { edited_input: Some(edit) } => write!(f, "approve with edited input {edit}"),
            Self::Deny { .. } => f.write_str("deny"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_moves_forward_only() {
        use ApprovalState::*;
        for state in ApprovalState::ALL.into_iter().filter(|state| *state != Pending) {
            assert!(!state.can_move_to(Pending), "nothing goes back to pending from {state:?}");
        }
        assert!(Pending.can_move_to(Pending), "a vote that does not decide keeps it pending");
        let finals: Vec<ApprovalState> = ApprovalState::ALL.into_iter().filter(|s| s.is_final()).collect();
        assert_eq!(finals, [Denied, Expired, Executed, Failed, Interrupted, Withdrawn, Superseded]);
        assert!(
            Pending.can_move_to(Superseded) && !Approved.can_move_to(Superseded),
            "only a pending one is superseded"
        );
        assert!(Executing.can_move_to(Executing), "an idempotent call's lapsed lease is claimed again");
        assert!(!Denied.can_move_to(Approved), "a decision stands");
        assert!(Approved.can_move_to(Denied), "a rule may refuse an approved call as it is claimed (`counted`)");
    }

    #[test]
    fn reasons_do_not_make_a_contradiction() {
        let deny = |reason: &str| Decision::Deny { reason: Some(reason.to_owned()) };
        let edit = |path: &str| Decision::Approve { edited_input: Some(serde_json::json!({"path": path})) };
        assert!(!deny("no").contradicts(&deny("never")));
        assert!(deny("no").contradicts(&Decision::APPROVE));
        assert!(edit("a").contradicts(&edit("b")) && edit("a").contradicts(&Decision::APPROVE));
        assert!(!edit("a").contradicts(&edit("a")));
        assert_eq!(edit("a").to_string(), r#"approve with edited input {"path":"a"}"#);
    }
}
