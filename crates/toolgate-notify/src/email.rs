//! E-mail messages about approvals.
//!
//! [`render_email_content`] writes the subject (per event kind, such as
//! `Approval requested: transfer_money`), a plain-text body and an HTML body
//! with the same content: the tool (and, for a sub-agent's call, its
//! lineage: `researcher › accountant › transfer_money`), requester, reason, conversation, who
//! decides and the votes, the state or expiry, the input as pretty JSON (cut
//! at [`EMAIL_INPUT_LIMIT`] characters with a note) and, when the event has
//! links, Approve / Deny / View links (Approve and Deny only for events that
//! ask for a decision). Every value in the HTML is escaped, and only http(s)
//! links become anchors. [`render_email`] wraps it in a `multipart/alternative`
//! message with `toolgate-event` (and, when delivering, `toolgate-delivery`)
//! headers and `Auto-Submitted: auto-generated`.

use std::fmt::Write as _;
use std::str::FromStr;

use lettre::Message;
use lettre::message::header::{HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart};

use crate::event::{Event, EventKind, Links};
use crate::summary::Summary;

/// The most characters of the input an e-mail shows.
pub const EMAIL_INPUT_LIMIT: usize = 20_000;

/// An e-mail that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EmailError {
    /// The sender or recipient is not a valid mailbox.
    #[error("invalid {field} address {value:?}: {reason}")]
    InvalidAddress {
        /// `from` or `to`.
        field: &'static str,
        /// The value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The message could not be assembled.
    #[error("cannot build the e-mail: {0}")]
    Build(String),
}

/// The subject and bodies of an e-mail about one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailContent {
    /// The subject line.
    pub subject: String,
    /// The plain-text body.
    pub text: String,
    /// The HTML body.
    pub html: String,
}

/// The rows of facts both bodies show, as (label, value).
fn facts(summary: &Summary, event: &Event) -> Vec<(&'static str, String)> {
    let mut rows = vec![("Tool", summary.tool.clone())];
    rows.extend(summary.lineage.clone().map(|l| ("Lineage", l)));
    rows.extend(summary.requester.clone().map(|r| ("Requested by", r)));
    rows.extend(summary.reason.clone().map(|r| ("Reason", r)));
    rows.extend(summary.conversation_id.clone().map(|c| ("Conversation", c)));
    rows.push(("Who decides", summary.deciders()));
    if summary.votes.is_empty() {
        rows.push(("Votes", "none yet".into()));
    }
    if Summary::shows_state(event.kind) {
        rows.extend(summary.state.clone().map(|s| ("State", s)));
    } else {
        rows.extend(summary.expires_at.clone().map(|e| ("Expires", e)));
    }
    rows
}

/// The links a message about `kind` shows, as (label, URL).
fn links(kind: EventKind, links: Option<&Links>) -> Vec<(&'static str, &str)> {
    match links {
        Some(links) if kind.asks_for_decision() => {
            vec![("Approve", links.approve.as_str()), ("Deny", links.deny.as_str()), ("View", links.view.as_str())]
        }
        Some(links) => vec![("View", links.view.as_str())],
        None => Vec::new(),
    }
}

/// The input, cut to [`EMAIL_INPUT_LIMIT`] characters, and a note when cut.
fn input(summary: &Summary) -> (String, Option<String>) {
    let total = summary.input.chars().count();
    if total <= EMAIL_INPUT_LIMIT {
        return (summary.input.clone(), None);
    }
    let shown = summary.input.chars().take(EMAIL_INPUT_LIMIT).collect();
    (shown, Some(format!("Input cut: the first {EMAIL_INPUT_LIMIT} of {total} characters are shown.")))
}

fn footer(summary: &Summary, event: &Event) -> String {
    let mut footer = format!("Event {} ({})", event.id, event.kind);
    if !summary.approval_id.is_empty() {
        footer.push_str(&format!(", approval {}", summary.approval_id));
    }
    footer.push_str(&format!(", {}. Sent by toolgate.", event.created_at));
    footer
}

/// Renders the subject, plain text and HTML of an e-mail about `event`.
pub fn render_email_content(event: &Event) -> EmailContent {
    let summary = Summary::of(event);
    let subject = summary.title(event.kind).replace(['\r', '\n'], " ");
    let facts = facts(&summary, event);
    let links = links(event.kind, event.links.as_ref());
    let (input, input_note) = input(&summary);
    let votes: Vec<String> = summary.votes.iter().map(|vote| vote.line()).collect();
    let footer = footer(&summary, event);

    let mut text = format!("{subject}\n\n");
    for (label, value) in &facts {
        let _ = writeln!(text, "{:<14}{value}", format!("{label}:"));
    }
    if !votes.is_empty() {
        text.push_str("Votes:\n");
        votes.iter().for_each(|vote| text.push_str(&format!("  - {vote}\n")));
    }
    let _ = write!(text, "\nInput:\n{input}\n");
    input_note.iter().for_each(|note| text.push_str(&format!("({note})\n")));
    if !links.is_empty() {
        text.push('\n');
        links.iter().for_each(|(label, url)| text.push_str(&format!("{:<9}{url}\n", format!("{label}:"))));
    }
    let _ = write!(text, "\n-- \n{footer}\n");

    let html = html_body(&subject, &facts, &votes, (&input, input_note.as_deref()), &links, &footer);
    EmailContent { subject, text, html }
}

fn html_body(
    subject: &str,
    facts: &[(&str, String)],
    votes: &[String],
    (input, input_note): (&str, Option<&str>),
    links: &[(&str, &str)],
    footer: &str,
) -> String {
    let mut html = String::from("<!DOCTYPE html>\n<html>\n<body style=\"font-family: sans-serif;\">\n");
    let _ = writeln!(html, "<h2>{}</h2>", escape_html(subject));
    html.push_str("<table>\n");
    for (label, value) in facts {
        let _ = writeln!(html, "<tr><th align=\"left\">{label}</th><td>{}</td></tr>", escape_html(value));
    }
    html.push_str("</table>\n");
    if !votes.is_empty() {
        html.push_str("<p>Votes:</p>\n<ul>\n");
        votes.iter().for_each(|vote| html.push_str(&format!("<li>{}</li>\n", escape_html(vote))));
        html.push_str("</ul>\n");
    }
    let _ = writeln!(html, "<p>Input:</p>\n<pre>{}</pre>", escape_html(input));
    if let Some(note) = input_note {
        let _ = writeln!(html, "<p><em>{}</em></p>", escape_html(note));
    }
    if !links.is_empty() {
        let anchors: Vec<String> = links
            .iter()
            .map(|(label, url)| {
                if url.starts_with("https://") || url.starts_with("http://") {
                    format!("<a href=\"{}\">{label}</a>", escape_html(url))
                } else {
                    format!("{label}: {}", escape_html(url))
                }
            })
            .collect();
        let _ = writeln!(html, "<p>{}</p>", anchors.join(" &middot; "));
    }
    let _ = writeln!(html, "<hr>\n<p style=\"color: #666;\">{}</p>\n</body>\n</html>", escape_html(footer));
    html
}

/// Escapes text for HTML element content and attribute values (quoted).
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An e-mail about `event` from `from` to `to` (mailboxes such as
/// `name <address>` or bare addresses).
pub fn render_email(event: &Event, from: &str, to: &str) -> Result<Message, EmailError> {
    let from = Mailbox::from_str(from).map_err(|e| EmailError::InvalidAddress {
        field: "from",
        value: from.into(),
        reason: e.to_string(),
    })?;
    compose(&render_email_content(event), from, to, event.kind, None)
}

/// Builds the message; `delivery_id` becomes the `toolgate-delivery` header.
pub(crate) fn compose(
    content: &EmailContent,
    from: Mailbox,
    to: &str,
    kind: EventKind,
    delivery_id: Option<&str>,
) -> Result<Message, EmailError> {
    let to = Mailbox::from_str(to).map_err(|e| EmailError::InvalidAddress {
        field: "to",
        value: to.into(),
        reason: e.to_string(),
    })?;
    let header = |name: &str, value: &str| {
        HeaderName::new_from_ascii(name.to_owned())
            .map(|name| HeaderValue::new(name, value.to_owned()))
            .map_err(|e| EmailError::Build(e.to_string()))
    };
    let mut builder = Message::builder()
        .from(from)
        .to(to)
        .subject(content.subject.clone())
        .user_agent(format!("toolgate/{}", env!("CARGO_PKG_VERSION")))
        .raw_header(header("Auto-Submitted", "auto-generated")?)
        .raw_header(header("toolgate-event", kind.as_str())?);
    if let Some(delivery_id) = delivery_id {
        builder = builder.raw_header(header("toolgate-delivery", delivery_id)?);
    }
    builder
        .multipart(MultiPart::alternative_plain_html(content.text.clone(), content.html.clone()))
        .map_err(|e| EmailError::Build(e.to_string()))
}
