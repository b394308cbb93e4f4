//! The webhook receiver against toolgate-notify's real deliveries.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use toolgate_notify::{Channels, Delivery, Event, EventKind, Notifier, NotifyConfig, Outcome, render_json, unix_now};
use toolgate_testkit::webhook::WebhookReceiver;

fn channels(url: &str, secret: &str) -> Channels {
    let raw = NotifyConfig {
        name: "hook".into(),
        webhook: Some(url.into()),
        secret_env: Some("HOOK_SECRET".into()),
        ..NotifyConfig::default()
    };
    let secret = secret.to_owned();
    Channels::from_config(&[raw], &BTreeMap::new(), move |var| (var == "HOOK_SECRET").then(|| secret.clone())).unwrap()
}

fn delivery(id: &str, kind: EventKind) -> Delivery {
    Delivery {
        delivery_id: id.into(),
        recipient: None,
        event: Event {
            id: format!("evt_{id}"),
            kind,
            created_at: "2026-03-01T10:00:00.000Z".into(),
            approval: json!({"id": "apr_1", "tool": "transfer_money", "input": {"amount": 1}}),
            links: None,
        },
    }
}

#[tokio::test]
async fn records_verifies_and_answers_as_scripted() {
    let receiver = WebhookReceiver::start("s3cret");
    receiver.respond_with(vec![(503, Some(9)), (500, None)]);
    let channels = channels(&receiver.url(), "s3cret");
    let notifier = Notifier::new(&channels).unwrap();
    let channel = &channels.channels[0];
    let first = delivery("d1", EventKind::Requested);

    let outcome = notifier.deliver(channel, &first, unix_now()).await;
    assert!(
        matches!(outcome, Outcome::Retry { after: Some(after), .. } if after == Duration::from_secs(9)),
        "{outcome:?}"
    );
    let outcome = notifier.deliver(channel, &first, unix_now()).await;
    assert!(matches!(outcome, Outcome::Retry { after: None, .. }), "{outcome:?}");
    let outcome = notifier.deliver(channel, &first, unix_now()).await;
    assert!(matches!(outcome, Outcome::Delivered { .. }), "{outcome:?}");
    let outcome = notifier.deliver(channel, &delivery("d2", EventKind::Decided), unix_now()).await;
    assert!(matches!(outcome, Outcome::Delivered { .. }), "{outcome:?}");

    let requests = receiver.wait_for(|requests| requests.len() == 4, Duration::from_secs(5)).await;
    let statuses: Vec<(u16, usize)> = requests.iter().map(|r| (r.status, r.attempt)).collect();
    assert_eq!(statuses, [(503, 1), (500, 2), (200, 3), (200, 1)]);
    assert!(requests.iter().all(|r| r.signature_ok), "{:?}", receiver.signature_failures());
    assert!(receiver.signature_failures().is_empty());
    assert_eq!(requests[0].raw_body, render_json(&first.event));
    assert_eq!(receiver.attempts("d1"), 3);
    assert_eq!(receiver.attempts("d2"), 1);
    assert_eq!(receiver.attempts("d3"), 0);
    let deliveries = receiver.deliveries();
    let summary: Vec<(&str, &str, usize)> =
        deliveries.iter().map(|d| (d.delivery_id.as_str(), d.event_type.as_str(), d.attempts)).collect();
    assert_eq!(summary, [("d1", "approval.requested", 3), ("d2", "approval.decided", 1)]);
    assert_eq!(deliveries[1].body["id"], "evt_d2");
}

#[tokio::test]
async fn bad_signatures_are_recorded() {
    let receiver = WebhookReceiver::start("right");
    let channels = channels(&receiver.url(), "wrong");
    let notifier = Notifier::new(&channels).unwrap();
    let outcome = notifier.deliver(&channels.channels[0], &delivery("d1", EventKind::Expired), unix_now()).await;
    assert!(matches!(outcome, Outcome::Delivered { .. }), "{outcome:?}");
    let requests = receiver.wait_for(|requests| !requests.is_empty(), Duration::from_secs(5)).await;
    assert!(!requests[0].signature_ok);
    let failures = receiver.signature_failures();
    assert_eq!(failures.len(), 1);
    assert!(failures[0].contains("d1") && failures[0].contains("does not match"), "{failures:?}");
}

#[test]
fn works_under_a_runtime_of_its_own_choosing() {
    // No runtime here: the receiver brings its own; the client side runs on a current-thread runtime.
    let receiver = WebhookReceiver::start_unsigned();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let channels = channels(&receiver.url(), "k");
        let notifier = Notifier::new(&channels).unwrap();
        let outcome = notifier.deliver(&channels.channels[0], &delivery("d1", EventKind::Executed), unix_now()).await;
        assert!(matches!(outcome, Outcome::Delivered { .. }), "{outcome:?}");
        receiver.wait_for(|requests| requests.len() == 1, Duration::from_secs(5)).await;
    });
    assert!(receiver.signature_failures().is_empty());
}

#[test]
#[should_panic(expected = "waited")]
fn wait_for_panics_after_the_timeout() {
    let receiver = WebhookReceiver::start("k");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(receiver.wait_for(|requests| !requests.is_empty(), Duration::from_millis(100)));
}
