//! The fields of an event's approval that messages show, read leniently.
//!
//! The approval is the server's inbox item as JSON; a field that is missing
//! or of another type shows as absent rather than failing the delivery.

use serde_json::Value;

use crate::event::{Event, EventKind};

/// What a Slack message or an e-mail says about an approval.
pub(crate) struct Summary {
    pub approval_id: String,
    pub tool: String,
    /// The input as pretty JSON.
    pub input: String,
    pub reason: Option<String>,
    pub requester: Option<String>,
    pub conversation_id: Option<String>,
    /// A sub-agent's call: the agents from the root down, then the tool
    /// (`researcher › accountant › transfer_money`).
    pub lineage: Option<String>,
    pub approvers: Vec<String>,
    pub quorum: Option<u64>,
    pub votes: Vec<Vote>,
    pub state: Option<String>,
    pub expires_at: Option<String>,
}

/// One vote cast so far.
pub(crate) struct Vote {
    pub principal: String,
    pub decision: String,
    pub reason: Option<String>,
    pub at: Option<String>,
}

fn text(value: &Value, key: &str) -> Option<String> {
    match value.get(key)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The item's `lineage` (`[{agent, toolCallId}]`) and its tool, as a path;
/// `None` for a call of the root (no lineage, or none that reads as one).
fn lineage(approval: &Value) -> Option<String> {
    let steps = approval.get("lineage")?.as_array()?;
    let mut path: Vec<String> = steps.iter().filter_map(|step| text(step, "agent")).collect();
    if path.is_empty() {
        return None;
    }
    path.push(text(approval, "tool").unwrap_or_else(|| "(unknown tool)".into()));
    Some(path.join(" \u{203a} "))
}

impl Summary {
    pub fn of(event: &Event) -> Summary {
        let approval = &event.approval;
        let input = approval.get("input").map_or_else(
            || "null".to_owned(),
            |input| serde_json::to_string_pretty(input).unwrap_or_else(|_| input.to_string()),
        );
        let approvers = approval
            .get("approvers")
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(|p| p.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let votes = approval
            .get("votes")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .map(|vote| Vote {
                        principal: text(vote, "principal").unwrap_or_else(|| "(unknown)".into()),
                        decision: text(vote, "decision").unwrap_or_else(|| "(unknown)".into()),
                        reason: text(vote, "reason"),
                        at: text(vote, "at"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Summary {
            approval_id: text(approval, "id").unwrap_or_default(),
            tool: text(approval, "tool").unwrap_or_else(|| "(unknown tool)".into()),
            input,
            reason: text(approval, "reason"),
            requester: text(approval, "requester"),
            conversation_id: text(approval, "conversationId"),
            lineage: lineage(approval),
            approvers,
            quorum: approval.get("quorum").and_then(Value::as_u64),
            votes,
            state: text(approval, "state"),
            expires_at: text(approval, "expiresAt"),
        }
    }

    /// The headline, such as `Approval requested: transfer_money`.
    pub fn title(&self, kind: EventKind) -> String {
        let tool = &self.tool;
        match kind {
            EventKind::Requested => format!("Approval requested: {tool}"),
            EventKind::Decided => match self.state.as_deref() {
                Some("approved") => format!("Approved: {tool}"),
                Some("denied") => format!("Denied: {tool}"),
                Some(state) => format!("Approval decided: {tool} ({state})"),
                None => format!("Approval decided: {tool}"),
            },
            EventKind::Escalated => format!("Approval escalated: {tool}"),
            EventKind::Expired => format!("Approval expired: {tool}"),
            EventKind::Executed => match self.state.as_deref() {
                Some("failed") => format!("Approved call failed: {tool}"),
                _ => format!("Approved call executed: {tool}"),
            },
            EventKind::Reminded => format!("Reminder: approval requested: {tool}"),
        }
    }

    /// Who decides: `bob, carol (1 of 2 needed)`.
    pub fn deciders(&self) -> String {
        let names = if self.approvers.is_empty() { "anyone allowed".to_owned() } else { self.approvers.join(", ") };
        match self.quorum {
            Some(quorum) => format!("{names} ({quorum} approval{} needed)", if quorum == 1 { "" } else { "s" }),
            None => names,
        }
    }

    /// Whether the message shows the approval's final state.
    pub fn shows_state(kind: EventKind) -> bool {
        matches!(kind, EventKind::Decided | EventKind::Expired | EventKind::Executed)
    }
}

impl Vote {
    /// `bob: approve (looks fine) at 2026-…`.
    pub fn line(&self) -> String {
        let mut line = format!("{}: {}", self.principal, self.decision);
        if let Some(reason) = &self.reason {
            line.push_str(&format!(" ({reason})"));
        }
        if let Some(at) = &self.at {
            line.push_str(&format!(" at {at}"));
        }
        line
    }
}
