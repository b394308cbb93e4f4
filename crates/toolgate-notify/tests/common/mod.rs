//! Fixtures shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::json;
use toolgate_notify::{Channels, Event, EventKind, Links, NotifyConfig, NotifyConfigError};

/// The server's inbox item for a pending transfer, with text that needs escaping.
pub fn approval() -> serde_json::Value {
    json!({
        "id": "apr_01J",
        "toolCallId": "call_1",
        "tool": "transfer_money",
        "input": {"amount": 250, "currency": "EUR", "to": "ACME <ops@acme.test> & Co"},
        "reason": "Pay invoice #42 <urgent>",
        "conversationId": "conv_7",
        "requester": "alice",
        "approvers": ["bob", "group:finance"],
        "quorum": 2,
        "votes": [{"principal": "bob", "decision": "approve", "reason": "looks right", "at": "2026-03-01T10:05:00.000Z"}],
        "state": "pending",
        "createdAt": "2026-03-01T10:00:00.000Z",
        "expiresAt": "2026-03-02T10:00:00.000Z"
    })
}

pub fn links() -> Links {
    Links {
        approve: "https://toolgate.example.com/approvals/apr_01J/approve?token=t0k&sig=abc".into(),
        deny: "https://toolgate.example.com/approvals/apr_01J/deny?token=t0k&sig=def".into(),
        view: "https://toolgate.example.com/inbox/apr_01J".into(),
    }
}

/// A requested event with links.
pub fn requested() -> Event {
    Event {
        id: "evt_01".into(),
        kind: EventKind::Requested,
        created_at: "2026-03-01T10:00:00.000Z".into(),
        approval: approval(),
        links: Some(links()),
    }
}

/// A decided (approved) event without links.
pub fn decided() -> Event {
    let mut approval = approval();
    approval["state"] = json!("approved");
    approval["votes"] = json!([
        {"principal": "bob", "decision": "approve", "reason": "looks right", "at": "2026-03-01T10:05:00.000Z"},
        {"principal": "carol", "decision": "approve", "at": "2026-03-01T10:07:00.000Z"}
    ]);
    Event {
        id: "evt_02".into(),
        kind: EventKind::Decided,
        created_at: "2026-03-01T10:07:00.000Z".into(),
        approval,
        links: None,
    }
}

/// The part of the configuration file this crate reads.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    #[serde(default)]
    pub notify: Vec<NotifyConfig>,
    #[serde(default)]
    pub emails: BTreeMap<String, String>,
}

pub fn parse_file(toml_text: &str) -> File {
    toml::from_str(toml_text).unwrap_or_else(|e| panic!("bad TOML: {e}\n{toml_text}"))
}

/// Channels from TOML with the given environment.
pub fn channels_with_env(toml_text: &str, env: &[(&str, &str)]) -> Result<Channels, NotifyConfigError> {
    let file = parse_file(toml_text);
    let env: BTreeMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Channels::from_config(&file.notify, &file.emails, |name| env.get(name).cloned())
}
