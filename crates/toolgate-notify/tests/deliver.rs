//! Delivering over webhooks (against wiremock) and SMTP (against aiosmtpd on loopback).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant, UNIX_EPOCH};

use common::{channels_with_env, requested};
use toolgate_notify::{
    Channel, Channels, Delivery, Notifier, NotifierError, NotifyConfigError, Outcome, SIGNATURE_TOLERANCE, Target,
    render_json, render_slack, unix_now, verify_signature,
};
use toolgate_testkit::smtp::SmtpSink;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const SECRET: &str = "whsec_deliver_test";

fn hook_channels(url: &str) -> Channels {
    let toml_text = format!("[[notify]]\nname = \"hook\"\nwebhook = \"{url}\"\nsecret_env = \"HOOK_SECRET\"\n");
    channels_with_env(&toml_text, &[("HOOK_SECRET", SECRET)]).unwrap()
}

fn delivery(id: &str) -> Delivery {
    Delivery { delivery_id: id.into(), recipient: None, event: requested() }
}

/// Mounts one answer on `/hook` and makes one delivery with a notifier of the given timeout.
async fn deliver_once(response: ResponseTemplate, timeout: Duration, now: i64) -> (Outcome, Vec<Request>) {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/hook")).respond_with(response).mount(&server).await;
    let channels = hook_channels(&format!("{}/hook", server.uri()));
    let notifier = Notifier::with_timeout(&channels, timeout).unwrap();
    let outcome = notifier.deliver(&channels.channels[0], &delivery("dlv_1"), now).await;
    (outcome, server.received_requests().await.unwrap_or_default())
}

fn header<'a>(request: &'a Request, name: &str) -> &'a str {
    request.headers.get(name).unwrap_or_else(|| panic!("no {name} header")).to_str().unwrap()
}

#[tokio::test]
async fn a_json_webhook_gets_a_signed_event() {
    let now = unix_now();
    let (outcome, requests) =
        deliver_once(ResponseTemplate::new(200).set_body_string("thanks"), Duration::from_secs(10), now).await;
    assert_eq!(outcome, Outcome::Delivered { detail: "HTTP 200: thanks".into() });
    let [request] = &requests[..] else { panic!("{} requests", requests.len()) };
    assert_eq!(request.method.as_str(), "POST");
    assert_eq!(header(request, "content-type"), "application/json");
    assert_eq!(header(request, "toolgate-event"), "approval.requested");
    assert_eq!(header(request, "toolgate-delivery"), "dlv_1");
    assert_eq!(header(request, "user-agent"), concat!("toolgate/", env!("CARGO_PKG_VERSION")));
    assert_eq!(request.body, render_json(&requested()));
    let signature = header(request, "toolgate-signature");
    assert!(signature.starts_with(&format!("t={now},v1=")), "{signature}");
    assert_eq!(verify_signature(SECRET.as_bytes(), signature, &request.body, unix_now(), SIGNATURE_TOLERANCE), Ok(()));
    assert!(verify_signature(b"other", signature, &request.body, unix_now(), SIGNATURE_TOLERANCE).is_err());
}

#[tokio::test]
async fn each_attempt_is_signed_afresh_over_the_same_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(500)).mount(&server).await;
    let channels = hook_channels(&format!("{}/hook", server.uri()));
    let notifier = Notifier::new(&channels).unwrap();
    let now = unix_now();
    for offset in [0, 30] {
        let outcome = notifier.deliver(&channels.channels[0], &delivery("dlv_r"), now + offset).await;
        assert!(matches!(outcome, Outcome::Retry { after: None, .. }), "{outcome:?}");
    }
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body, requests[1].body);
    assert!(header(&requests[0], "toolgate-signature").starts_with(&format!("t={now},")));
    assert!(header(&requests[1], "toolgate-signature").starts_with(&format!("t={},", now + 30)));
    for request in &requests {
        let signature = header(request, "toolgate-signature");
        assert_eq!(
            verify_signature(SECRET.as_bytes(), signature, &request.body, now + 30, SIGNATURE_TOLERANCE),
            Ok(())
        );
        assert_eq!(header(request, "toolgate-delivery"), "dlv_r");
    }
}

#[tokio::test]
async fn statuses_map_to_outcomes() {
    let ten = Duration::from_secs(10);
    let now = unix_now();
    let (outcome, _) = deliver_once(ResponseTemplate::new(204), ten, now).await;
    assert!(matches!(outcome, Outcome::Delivered { .. }), "{outcome:?}");
    let (outcome, _) = deliver_once(ResponseTemplate::new(500).set_body_string("boom"), ten, now).await;
    assert_eq!(outcome, Outcome::Retry { error: "HTTP 500: boom".into(), after: None });
    let (outcome, _) = deliver_once(ResponseTemplate::new(429).insert_header("retry-after", "7"), ten, now).await;
    assert!(
        matches!(outcome, Outcome::Retry { after: Some(after), .. } if after == Duration::from_secs(7)),
        "{outcome:?}"
    );
    let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(u64::try_from(now).unwrap() + 120));
    let (outcome, _) =
        deliver_once(ResponseTemplate::new(503).insert_header("retry-after", date.as_str()), ten, now).await;
    assert!(
        matches!(outcome, Outcome::Retry { after: Some(after), .. } if after == Duration::from_secs(120)),
        "{outcome:?}"
    );
    let (outcome, _) = deliver_once(ResponseTemplate::new(404), ten, now).await;
    assert!(matches!(&outcome, Outcome::Failed { error } if error.starts_with("HTTP 404")), "{outcome:?}");
    let (outcome, _) = deliver_once(ResponseTemplate::new(400), ten, now).await;
    assert!(matches!(outcome, Outcome::Failed { .. }), "{outcome:?}");
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let server = MockServer::start().await;
    let elsewhere = format!("{}/elsewhere", server.uri());
    Mock::given(path("/hook"))
        .respond_with(ResponseTemplate::new(302).insert_header("location", elsewhere.as_str()))
        .mount(&server)
        .await;
    Mock::given(path("/elsewhere")).respond_with(ResponseTemplate::new(200)).expect(0).mount(&server).await;
    let channels = hook_channels(&format!("{}/hook", server.uri()));
    let outcome = Notifier::new(&channels).unwrap().deliver(&channels.channels[0], &delivery("d"), unix_now()).await;
    assert!(
        matches!(&outcome, Outcome::Failed { error } if error.contains("302") && error.contains("not followed")),
        "{outcome:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn connection_refused_is_retried() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let channels = hook_channels(&format!("http://127.0.0.1:{port}/hook"));
    let outcome = Notifier::new(&channels).unwrap().deliver(&channels.channels[0], &delivery("d"), unix_now()).await;
    let Outcome::Retry { error, after: None } = &outcome else { panic!("{outcome:?}") };
    assert!(!error.contains(&port.to_string()), "the URL stays out of errors: {error}");
}

#[tokio::test]
async fn a_slow_receiver_times_out_and_is_retried() {
    let started = Instant::now();
    let slow = ResponseTemplate::new(200).set_delay(Duration::from_secs(5));
    let (outcome, _) = deliver_once(slow, Duration::from_millis(300), unix_now()).await;
    assert!(matches!(&outcome, Outcome::Retry { error, after: None } if error.contains("timed out")), "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_slack_webhook_gets_block_kit_without_a_signature() {
    let server = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200).set_body_string("ok")).mount(&server).await;
    let toml_text = format!("[[notify]]\nname = \"chat\"\nwebhook = \"{}/slack\"\nformat = \"slack\"\n", server.uri());
    let channels = channels_with_env(&toml_text, &[]).unwrap();
    let outcome = Notifier::new(&channels).unwrap().deliver(&channels.channels[0], &delivery("d"), unix_now()).await;
    assert!(matches!(outcome, Outcome::Delivered { .. }), "{outcome:?}");
    let requests = server.received_requests().await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(body, render_slack(&requested()));
    assert!(requests[0].headers.get("toolgate-signature").is_none());
}

fn mail_channels(port: u16, host: &str) -> Result<Channels, NotifyConfigError> {
    let toml_text = format!(
        "[emails]\nbob = \"bob@example.com\"\ncarol = \"carol@example.com\"\n\
         [[notify]]\nname = \"mail\"\nsmtp = \"smtp://{host}:{port}\"\ntls = \"none\"\n\
         from = \"toolgate <approvals@example.com>\"\nto = [\"approvers\"]\n"
    );
    channels_with_env(&toml_text, &[])
}

fn email_target(channel: &Channel) -> &toolgate_notify::Email {
    let Target::Email(email) = &channel.target else { panic!("not e-mail") };
    email
}

#[tokio::test]
async fn email_goes_to_each_recipient_over_plain_smtp_on_loopback() {
    let sink = SmtpSink::start();
    let channels = mail_channels(sink.port(), "127.0.0.1").unwrap();
    let channel = &channels.channels[0];
    let notifier = Notifier::new(&channels).unwrap();
    let approvers = ["bob".to_owned(), "carol".to_owned()];
    let recipients = email_target(channel).recipients(&approvers, &BTreeMap::new(), &channels.emails);
    assert!(recipients.unmapped.is_empty());
    for (i, recipient) in recipients.to.iter().enumerate() {
        let delivery = Delivery {
            delivery_id: format!("dlv_{i}"),
            recipient: Some(recipient.address.clone()),
            event: requested(),
        };
        let outcome = notifier.deliver(channel, &delivery, unix_now()).await;
        assert!(matches!(&outcome, Outcome::Delivered { detail } if detail.starts_with("SMTP 250")), "{outcome:?}");
    }
    let mails = sink.wait_for(2, Duration::from_secs(10)).await;
    assert_eq!(mails.len(), 2);
    let links = common::links();
    for (i, (mail, address)) in mails.iter().zip(["bob@example.com", "carol@example.com"]).enumerate() {
        assert_eq!(mail.from, "approvals@example.com");
        assert_eq!(mail.to, [address]);
        assert_eq!(mail.subject, "Approval requested: transfer_money");
        assert_eq!(mail.header("toolgate-delivery"), Some(format!("dlv_{i}").as_str()));
        assert_eq!(mail.header("toolgate-event"), Some("approval.requested"));
        assert_eq!(mail.header("to"), Some(address));
        let text = mail.text.as_deref().expect("a text part");
        assert!(text.contains(&links.approve) && text.contains(&links.deny) && text.contains(&links.view), "{text}");
        let html = mail.html.as_deref().expect("an html part");
        assert!(html.contains(&links.approve.replace('&', "&amp;")), "{html}");
    }
}

#[tokio::test]
async fn smtp_failures_map_to_outcomes() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let channels = mail_channels(port, "localhost").unwrap();
    let notifier = Notifier::with_timeout(&channels, Duration::from_secs(2)).unwrap();
    let mut delivery =
        Delivery { delivery_id: "d".into(), recipient: Some("bob@example.com".into()), event: requested() };
    let outcome = notifier.deliver(&channels.channels[0], &delivery, unix_now()).await;
    assert!(matches!(outcome, Outcome::Retry { after: None, .. }), "connection refused: {outcome:?}");
    delivery.recipient = None;
    let outcome = notifier.deliver(&channels.channels[0], &delivery, unix_now()).await;
    assert!(matches!(outcome, Outcome::Failed { .. }), "no recipient: {outcome:?}");
    delivery.recipient = Some("not an address".into());
    let outcome = notifier.deliver(&channels.channels[0], &delivery, unix_now()).await;
    assert!(matches!(outcome, Outcome::Failed { .. }), "bad recipient: {outcome:?}");
}

#[test]
fn plain_smtp_to_another_host_is_refused_at_config() {
    let err = mail_channels(25, "mail.example.com").unwrap_err();
    assert!(matches!(err, NotifyConfigError::PlaintextSmtp { .. }), "{err}");
}

#[test]
fn email_channels_need_a_runtime_to_start() {
    let channels = mail_channels(2525, "127.0.0.1").unwrap();
    assert_eq!(Notifier::new(&channels).unwrap_err(), NotifierError::NoRuntime);
    let hooks = hook_channels("http://127.0.0.1:9/hook");
    assert!(Notifier::new(&hooks).is_ok(), "webhooks alone need none");
}
