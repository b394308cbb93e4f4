//! The Slack, e-mail and JSON renderings.

mod common;

use std::collections::HashSet;

use common::{decided, requested};
use serde_json::{Value, json};
use toolgate_notify::{Event, EventKind, render_email, render_email_content, render_json, render_slack};

#[test]
fn slack_requested_with_links() {
    insta::assert_json_snapshot!(render_slack(&requested()));
}

#[test]
fn slack_decided_without_links() {
    insta::assert_json_snapshot!(render_slack(&decided()));
}

/// Checks the Block Kit rules an incoming webhook enforces (and panics naming the broken one).
fn assert_block_kit(message: &Value) {
    let text = message["text"].as_str().expect("a top-level fallback `text`");
    assert!(!text.is_empty() && text.chars().count() <= 40_000);
    let blocks = message["blocks"].as_array().expect("`blocks`");
    assert!(!blocks.is_empty() && blocks.len() <= 50, "{} blocks", blocks.len());
    let mut action_ids = HashSet::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("header") => assert_text(&block["text"], 150, Some("plain_text")),
            Some("section") => assert_text(&block["text"], 3000, None),
            Some("context") => {
                let elements = block["elements"].as_array().expect("context elements");
                assert!(!elements.is_empty() && elements.len() <= 10);
                elements.iter().for_each(|element| assert_text(element, 3000, None));
            }
            Some("actions") => {
                let elements = block["elements"].as_array().expect("action elements");
                assert!(!elements.is_empty() && elements.len() <= 25);
                for button in elements {
                    assert_eq!(button["type"], "button");
                    assert_text(&button["text"], 75, Some("plain_text"));
                    let url = button["url"].as_str().expect("a url button");
                    assert!(url.len() <= 3000 && url.starts_with("https://"), "{url}");
                    let action_id = button["action_id"].as_str().expect("action_id");
                    assert!(action_id.len() <= 255 && action_ids.insert(action_id.to_owned()), "{action_id}");
                    if let Some(style) = button.get("style") {
                        assert!(style == "primary" || style == "danger", "{style}");
                    }
                }
            }
            Some("divider") => {}
            other => panic!("unexpected block type {other:?}"),
        }
    }
}

fn assert_text(object: &Value, limit: usize, kind: Option<&str>) {
    let object_kind = object["type"].as_str().expect("a text object has a type");
    assert!(object_kind == "plain_text" || object_kind == "mrkdwn", "{object_kind}");
    if let Some(kind) = kind {
        assert_eq!(object_kind, kind);
    }
    let text = object["text"].as_str().expect("a text object has text");
    assert!(!text.is_empty(), "empty text in {object}");
    assert!(text.chars().count() <= limit, "{} characters > {limit}", text.chars().count());
}

#[test]
fn slack_messages_follow_block_kit_rules() {
    let mut huge = requested();
    huge.approval["input"] = json!({"blob": "<&>".repeat(20_000), "list": (0..2000).collect::<Vec<_>>()});
    huge.approval["reason"] = json!("why ".repeat(2000));
    huge.approval["tool"] = json!("t".repeat(400));
    huge.approval["approvers"] = json!((0..1000).map(|i| format!("approver-{i}")).collect::<Vec<_>>());
    let mut reminded = requested();
    reminded.kind = EventKind::Reminded;
    for event in [requested(), decided(), huge.clone(), reminded] {
        assert_block_kit(&render_slack(&event));
    }
    let message = render_slack(&huge);
    let input = message["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|b| b["text"]["text"].as_str().filter(|t| t.starts_with("*Input:*")));
    assert!(input.unwrap().contains("_Input cut: the first "), "{message}");
}

#[test]
fn slack_buttons_only_for_events_that_ask_for_a_decision() {
    let actions = |event: &Event| -> Option<Value> {
        render_slack(event)["blocks"].as_array().unwrap().iter().find(|b| b["type"] == "actions").cloned()
    };
    for kind in [EventKind::Requested, EventKind::Escalated, EventKind::Reminded] {
        let mut event = requested();
        event.kind = kind;
        let actions = actions(&event).unwrap_or_else(|| panic!("{kind} has no buttons"));
        let buttons: Vec<(&str, &str)> = actions["elements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b["text"]["text"].as_str().unwrap(), b["url"].as_str().unwrap()))
            .collect();
        let links = common::links();
        assert_eq!(buttons, [("Approve", &*links.approve), ("Deny", &*links.deny), ("View", &*links.view)]);
    }
    let mut decided_with_links = decided();
    decided_with_links.links = Some(common::links());
    assert!(actions(&decided_with_links).is_none());
    assert!(render_slack(&decided_with_links).to_string().contains("View in toolgate"));
    let mut no_links = requested();
    no_links.links = None;
    assert!(actions(&no_links).is_none());
    assert!(!render_slack(&no_links).to_string().contains("https://"));
}

#[test]
fn slack_escapes_text_from_the_event() {
    let message = render_slack(&requested()).to_string();
    assert!(!message.contains("<ops@acme.test>") && message.contains("&lt;ops@acme.test&gt; &amp; Co"), "{message}");
    assert!(message.contains("Pay invoice #42 &lt;urgent&gt;"));
}

#[test]
fn email_requested_bodies() {
    let content = render_email_content(&requested());
    assert_eq!(content.subject, "Approval requested: transfer_money");
    insta::assert_snapshot!("email_requested_text", content.text);
    insta::assert_snapshot!("email_requested_html", content.html);
}

#[test]
fn email_decided_bodies() {
    let content = render_email_content(&decided());
    assert_eq!(content.subject, "Approved: transfer_money");
    insta::assert_snapshot!("email_decided_text", content.text);
    insta::assert_snapshot!("email_decided_html", content.html);
}

#[test]
fn email_subjects_per_kind() {
    let subjects: Vec<String> = EventKind::ALL
        .into_iter()
        .map(|kind| {
            let mut event = requested();
            event.kind = kind;
            render_email_content(&event).subject
        })
        .collect();
    assert_eq!(
        subjects,
        [
            "Approval requested: transfer_money",
            "Approval decided: transfer_money (pending)",
            "Approval escalated: transfer_money",
            "Approval expired: transfer_money",
            "Approved call executed: transfer_money",
            "Reminder: approval requested: transfer_money",
        ]
    );
}

#[test]
fn email_html_escapes_every_value() {
    let mut event = requested();
    event.approval["input"] = json!({"html": "<script>alert('x')</script>"});
    event.approval["requester"] = json!("<b>mallory</b>");
    event.approval["tool"] = json!("t<i>");
    event.links.as_mut().unwrap().view = "javascript:alert(1)".into();
    let content = render_email_content(&event);
    assert!(!content.html.contains("<script>"), "{}", content.html);
    assert!(content.html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
    assert!(!content.html.contains("<b>mallory") && content.html.contains("&lt;b&gt;mallory"));
    assert!(!content.html.contains("t<i>"));
    assert!(!content.html.contains("href=\"javascript:"), "only http(s) links become anchors");
    // The link with `&` in it is escaped in the attribute.
    assert!(
        content.html.contains("href=\"https://toolgate.example.com/approvals/apr_01J/approve?token=t0k&amp;sig=abc\"")
    );
    // The text body keeps the values as they are.
    assert!(content.text.contains("<script>alert('x')</script>"));
}

#[test]
fn email_without_links_has_none() {
    let mut event = requested();
    event.links = None;
    let content = render_email_content(&event);
    assert!(!content.text.contains("https://") && !content.html.contains("href"));
}

#[test]
fn email_message_has_both_parts_and_the_event_header() {
    let message = render_email(&requested(), "toolgate <approvals@example.com>", "bob@example.com").unwrap();
    let raw = String::from_utf8(message.formatted()).unwrap();
    assert!(raw.contains("toolgate-event: approval.requested"), "{raw}");
    assert!(raw.contains("Auto-Submitted: auto-generated"));
    assert!(raw.contains("multipart/alternative"));
    assert!(raw.contains("text/plain") && raw.contains("text/html"));
    assert!(raw.contains("Subject: Approval requested: transfer_money"));
    assert!(render_email(&requested(), "not a mailbox", "bob@example.com").is_err());
    assert!(render_email(&requested(), "a@example.com", "bob").is_err());
}

#[test]
fn json_body_is_the_event() {
    let event = requested();
    let body: Value = serde_json::from_slice(&render_json(&event)).unwrap();
    assert_eq!(body["type"], "approval.requested");
    assert_eq!(body["createdAt"], "2026-03-01T10:00:00.000Z");
    assert_eq!(body["links"]["deny"], event.links.as_ref().unwrap().deny.as_str());
    assert_eq!(serde_json::from_value::<Event>(body).unwrap(), event);
    let without: Value = serde_json::from_slice(&render_json(&decided())).unwrap();
    assert!(without.get("links").is_none());
}

/// A request for a sub-agent's call: its item names the agent calls from the root.
fn requested_by_a_sub_agent() -> Event {
    let mut event = requested();
    event.approval["lineage"] = json!([
        {"agent": "researcher", "toolCallId": "call-1"},
        {"agent": "accountant", "toolCallId": "call-4"}
    ]);
    event
}

#[test]
fn a_sub_agents_call_names_its_lineage_in_mail_and_slack() {
    let event = requested_by_a_sub_agent();
    let path = format!("researcher \u{203a} accountant \u{203a} {}", event.approval["tool"].as_str().unwrap());
    let content = render_email_content(&event);
    assert!(content.text.contains(&format!("Lineage:      {path}\n")), "{}", content.text);
    assert!(content.html.contains(&path), "{}", content.html);
    insta::assert_json_snapshot!("slack_requested_by_a_sub_agent", render_slack(&event));
    // A call of the root has no lineage row.
    assert!(!render_email_content(&requested()).text.contains("Lineage"));
    assert!(!render_slack(&requested()).to_string().contains("Lineage"));
}
