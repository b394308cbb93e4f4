//! The events a channel can be told about, as the `json` format sends them.
//!
//! An [`Event`] is what the server's outbox stores and what a `json` webhook
//! receives verbatim: `{id, type, createdAt, approval, links?}`. `approval` is
//! the server's inbox item for the approval (kept as JSON, so this crate does
//! not depend on the server's types); `links` is absent when the server has no
//! public URL, and then no message carries links or buttons.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What happened to an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum EventKind {
    /// A tool call waits for a decision (`approval.requested`).
    #[serde(rename = "approval.requested")]
    Requested,
    /// The approval was approved or denied (`approval.decided`).
    #[serde(rename = "approval.decided")]
    Decided,
    /// The approval went to further approvers (`approval.escalated`).
    #[serde(rename = "approval.escalated")]
    Escalated,
    /// Nobody decided in time (`approval.expired`).
    #[serde(rename = "approval.expired")]
    Expired,
    /// The approved tool call ran (`approval.executed`).
    #[serde(rename = "approval.executed")]
    Executed,
    /// The approval still waits; the request is sent again (`approval.reminded`).
    #[serde(rename = "approval.reminded")]
    Reminded,
}

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: [EventKind; 6] = [
        EventKind::Requested,
        EventKind::Decided,
        EventKind::Escalated,
        EventKind::Expired,
        EventKind::Executed,
        EventKind::Reminded,
    ];

    /// The wire name, such as `approval.requested`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Requested => "approval.requested",
            EventKind::Decided => "approval.decided",
            EventKind::Escalated => "approval.escalated",
            EventKind::Expired => "approval.expired",
            EventKind::Executed => "approval.executed",
            EventKind::Reminded => "approval.reminded",
        }
    }

    /// The kind with this wire name, or `None` for an unknown name.
    pub fn parse(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// True for the kinds that ask someone to decide (requested, escalated,
    /// reminded): their messages carry approve and deny links.
    pub fn asks_for_decision(self) -> bool {
        matches!(self, EventKind::Requested | EventKind::Escalated | EventKind::Reminded)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Links into the server for one approval and one recipient.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Links {
    /// Approves the call when opened (a confirmation page on the server).
    pub approve: String,
    /// Denies the call when opened (a confirmation page on the server).
    pub deny: String,
    /// Shows the approval in the server's inbox.
    pub view: String,
}

/// One event about one approval: the `json` format's body.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// The event's id, the same for every delivery and attempt of it.
    pub id: String,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// When it happened (RFC 3339).
    pub created_at: String,
    /// The server's inbox item for the approval at the time of the event.
    pub approval: serde_json::Value,
    /// Links into the server, absent when the server has no public URL.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub links: Option<Links>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_wire_names() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, serde_json::json!(kind.as_str()));
            assert_eq!(serde_json::from_value::<EventKind>(json).unwrap(), kind);
        }
        assert_eq!(EventKind::parse("approval.unknown"), None);
        assert_eq!(EventKind::parse("requested"), None);
    }

    #[test]
    fn event_serializes_in_camel_case_and_omits_absent_links() {
        let event = Event {
            id: "evt_1".into(),
            kind: EventKind::Decided,
            created_at: "2026-01-02T03:04:05Z".into(),
            approval: serde_json::json!({"id": "apr_1"}),
            links: None,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "id": "evt_1",
                "type": "approval.decided",
                "createdAt": "2026-01-02T03:04:05Z",
                "approval": {"id": "apr_1"}
            })
        );
        assert_eq!(serde_json::from_value::<Event>(json).unwrap(), event);
    }
}
