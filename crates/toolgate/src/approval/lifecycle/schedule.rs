//! What a rule says happens while a routed approval waits: its escalation
//! steps and reminders ([`Schedule`]), stored with the approval's routing.
//! The routing holds it and the timers ([`super::timer`]) act on it; this file
//! imports neither.

use serde::{Deserialize, Serialize};

use crate::ledger::Millis;

/// What a rule says happens while an approval waits (empty: nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    /// Escalation steps, in the order of their delays.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalate: Vec<Escalation>,
    /// Remind the approvers this often (milliseconds) while pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind: Option<Millis>,
    /// How many escalation steps have fired.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fired: u32,
    /// When the approvers were last reminded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reminded_at: Option<Millis>,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

impl Schedule {
    /// True when the rule asks for no escalation and no reminders.
    pub fn is_empty(&self) -> bool {
        self.escalate.is_empty() && self.remind.is_none()
    }

    /// True when there is nothing to store: no steps, no reminders, nothing fired.
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }
}

/// One escalation step: after `after` milliseconds from issue, either more
/// approvers join (`to`) or the approval is denied (`deny`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Escalation {
    /// Milliseconds after the approval was issued.
    pub after: Millis,
    /// Principals and `group:NAME`s who join the approvers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    /// Deny the approval instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deny: bool,
}
