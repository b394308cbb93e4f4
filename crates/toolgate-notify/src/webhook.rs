//! Webhook delivery: one signed POST per attempt.
//!
//! The request is `POST url` with `content-type: application/json`,
//! `toolgate-event: <type>`, `toolgate-delivery: <delivery id>`,
//! `user-agent: toolgate/<version>` and, when the channel has a secret,
//! `toolgate-signature: t=…,v1=…` (see [`crate::signature`]) computed afresh
//! per attempt over the same body. The body is [`render_json`] for the `json`
//! format and [`render_slack`](crate::render_slack) for `slack`.
//!
//! Outcomes: 2xx is delivered; 429 and 5xx are retried, honouring a
//! `Retry-After` header; other statuses (3xx included, since redirects are not
//! followed) fail; connection errors and timeouts are retried. Error texts
//! never contain the URL (a Slack webhook URL is a secret).

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};

use crate::backoff::parse_retry_after;
use crate::config::{Webhook, WebhookFormat};
use crate::delivery::{Delivery, Outcome, error_chain};
use crate::event::Event;
use crate::signature::signature_header;
use crate::slack::render_slack;

/// How much of a receiver's response body an outcome quotes.
const BODY_QUOTE_LIMIT: usize = 512;

/// The `json` format's body: the event as compact JSON.
pub fn render_json(event: &Event) -> Vec<u8> {
    serde_json::to_vec(event).expect("an Event (strings and JSON values) always serializes")
}

/// The body a webhook channel sends for `event`.
pub fn webhook_body(format: WebhookFormat, event: &Event) -> Vec<u8> {
    match format {
        WebhookFormat::Json => render_json(event),
        WebhookFormat::Slack => render_slack(event).to_string().into_bytes(),
    }
}

/// Posts one delivery and classifies the answer.
pub(crate) async fn post(client: &reqwest::Client, webhook: &Webhook, delivery: &Delivery, now: i64) -> Outcome {
    let body = webhook_body(webhook.format, &delivery.event);
    let mut request = client
        .post(webhook.url.clone())
        .header(CONTENT_TYPE, "application/json")
        .header("toolgate-event", delivery.event.kind.as_str())
        .header("toolgate-delivery", delivery.delivery_id.as_str());
    if let Some(secret) = webhook.secret() {
        request = request.header("toolgate-signature", signature_header(secret, now, &body));
    }
    match request.body(body).send().await {
        Ok(response) => classify(response, now).await,
        Err(error) if error.is_builder() => {
            Outcome::Failed { error: format!("cannot build the request: {}", error_chain(&error.without_url())) }
        }
        Err(error) => {
            let what = if error.is_timeout() { "timed out" } else { "request failed" };
            Outcome::Retry { error: format!("{what}: {}", error_chain(&error.without_url())), after: None }
        }
    }
}

async fn classify(response: reqwest::Response, now: i64) -> Outcome {
    let status = response.status();
    let retry_after: Option<Duration> =
        response.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(|v| parse_retry_after(v, now));
    let location = response.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let quoted = quote_body(response).await;
    let mut detail = format!("HTTP {}", status.as_u16());
    if !quoted.is_empty() {
        detail.push_str(&format!(": {quoted}"));
    }
    if status.is_success() {
        Outcome::Delivered { detail }
    } else if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        Outcome::Retry { error: detail, after: retry_after }
    } else if status.is_redirection() {
        let to = location.map(|l| format!(" to {l}")).unwrap_or_default();
        Outcome::Failed { error: format!("{detail} (a redirect{to}; redirects are not followed)") }
    } else {
        Outcome::Failed { error: detail }
    }
}

/// The start of the response body, for the outcome's text; never reads more
/// than a few kilobytes.
async fn quote_body(mut response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < BODY_QUOTE_LIMIT * 4 {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    let mut quoted: String = text.chars().take(BODY_QUOTE_LIMIT).collect();
    if text.chars().nth(BODY_QUOTE_LIMIT).is_some() {
        quoted.push('…');
    }
    quoted
}
