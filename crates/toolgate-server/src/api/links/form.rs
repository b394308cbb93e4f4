//! The small HTML pages of a one-time link: self-contained (no script, no
//! outside resources), every value escaped.

use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, REFERRER_POLICY};
use axum::response::{IntoResponse, Response};
use toolgate::approval::lifecycle::grant::{GrantScope, GrantSpec};
use toolgate::approval::lifecycle::{requester, waiting_for};
use toolgate::ledger::{ApprovalRecord, ApprovalState};

use toolgate_notify::escape_html as escape;

use crate::notify::token::{LinkChoice, LinkClaims};

/// What a page that decides nothing says.
#[derive(Debug)]
pub(crate) enum Notice {
    /// The vote was recorded.
    Recorded {
        /// The approval after it.
        record: Box<ApprovalRecord>,
        /// What the link did.
        choice: LinkChoice,
    },
    /// The link was used before.
    Used,
    /// The link (the approval) expired.
    Expired,
    /// The token does not verify.
    Tampered,
    /// The approval is no longer pending.
    AlreadyDecided(ApprovalState),
    /// The approval is not on record any more.
    Gone,
    /// A vote the lifecycle refused (why).
    Refused(String),
    /// An e-mail link opened by someone other than its recipient.
    NotTheRecipient(String),
    /// Credentials are needed (why).
    SignIn(String),
    /// The form could not be read.
    BadForm(String),
    /// The form was posted from another origin (the one named).
    CrossOrigin(String),
    /// The server has no store.
    NoStore,
    /// The store failed.
    Store(String),
}

/// A page with `status` saying `notice`.
pub(crate) fn notice(status: StatusCode, notice: Notice) -> Response {
    let (title, body) = match notice {
        Notice::Recorded { record, choice } => recorded(&record, choice),
        Notice::Used => ("Link already used".into(), p("This link was used before. Each link decides once.")),
        Notice::Expired => ("Link expired".into(), p("The approval request expired: nothing can be decided any more.")),
        Notice::Tampered => ("Invalid link".into(), p("This link is not valid: it was altered or is incomplete.")),
        Notice::AlreadyDecided(state) => (
            "Already decided".into(),
            p(&format!("This approval was already decided: it is {}. Nothing changed.", state.as_str())),
        ),
        Notice::Gone => ("Approval not found".into(), p("This approval is no longer on record.")),
        Notice::Refused(why) => ("Not recorded".into(), p(&format!("{why}. Nothing changed."))),
        Notice::NotTheRecipient(to) => (
            "Not your link".into(),
            p(&format!(
                "This link was sent to {to}. A forwarded link is not a delegation: sign in as {to}, or ask them to decide. Nothing changed."
            )),
        ),
        Notice::SignIn(why) => (
            "Sign in first".into(),
            format!("{}<p><a href=\"../\">Open toolgate to sign in</a>, then open the link again.</p>", p(&why)),
        ),
        Notice::BadForm(why) => ("Bad request".into(), p(&why)),
        Notice::CrossOrigin(origin) => (
            "Not from this page".into(),
            p(&format!("This form was sent from {origin}, not from this server's own page. Nothing changed.")),
        ),
        Notice::NoStore => ("No store".into(), p("This server keeps no approvals (--store none).")),
        Notice::Store(why) => ("Try again".into(), p(&format!("The store is unavailable ({why}). Nothing changed."))),
    };
    html(status, &title, &body)
}

/// `GET`'s page: what the link would do, and the form that does it.
pub(crate) fn confirmation(
    record: &ApprovalRecord,
    claims: &LinkClaims,
    asks_for_token: bool,
    grant: Option<&GrantSpec>,
) -> Response {
    let input = serde_json::to_string_pretty(&record.input).unwrap_or_default();
    let mut body = String::new();
    body.push_str(&row("Tool", &format!("<code>{}</code>", escape(&record.tool_name))));
    body.push_str(&format!("<h2>Input</h2><pre>{}</pre>", escape(&input)));
    if let Some(reason) = &record.reason {
        body.push_str(&row("Why it asks", &escape(reason)));
    }
    body.push_str(&row("Requested by", &escape(requester(record).unwrap_or("(no owner)"))));
    body.push_str(&row("Waiting for", &escape(&waiting_for(record))));
    if let Some(to) = &claims.principal {
        body.push_str(&row("Sent to", &escape(to)));
    }
    let (verb, what) = match claims.choice {
        LinkChoice::Approve => ("Approve", "records your approval of this exact call and input"),
        LinkChoice::Deny => ("Deny", "records your denial; the model is told the reason"),
    };
    body.push_str(&format!("<p>The button below {what}. Opening this page decided nothing.</p>"));
    if let Some(grant) = grant {
        body.push_str(&format!("<p>It also allows {}.</p>", escape(&grant_in_words(grant, &record.tool_name))));
    }
    body.push_str("<form method=\"post\">");
    if claims.choice == LinkChoice::Deny {
        body.push_str("<label>Reason (optional)<textarea name=\"reason\" maxlength=\"2000\"></textarea></label>");
    }
    if asks_for_token {
        body.push_str(
            "<label>Your access token<input type=\"password\" name=\"token\" autocomplete=\"current-password\" required></label>",
        );
    }
    body.push_str(&format!("<button type=\"submit\" class=\"{}\">{verb}</button></form>", claims.choice.as_str()));
    html(StatusCode::OK, &format!("{verb} {}?", record.tool_name), &body)
}

/// A grant in words: "the next 5 `transfer` calls like it in this chat, for 1h, without asking".
fn grant_in_words(grant: &GrantSpec, tool: &str) -> String {
    let how_many = grant.uses.map_or_else(|| "every later".to_owned(), |uses| format!("the next {uses}"));
    let inputs = if grant.input.is_empty() { "" } else { " with inputs like it" };
    let scope = match grant.scope {
        GrantScope::Principal => "in any chat of its requester",
        _ => "in this chat",
    };
    let within = grant.within.as_deref().map(|within| format!(", for {within}")).unwrap_or_default();
    format!("{how_many} {tool} calls{inputs} {scope}{within}, without asking")
}

/// The page after a recorded vote.
fn recorded(record: &ApprovalRecord, choice: LinkChoice) -> (String, String) {
    let done = match choice {
        LinkChoice::Approve => "Your approval was recorded",
        LinkChoice::Deny => "Your denial was recorded",
    };
    let now = match record.state {
        ApprovalState::Pending => format!("It still waits for {}.", waiting_for(record)),
        ApprovalState::Approved => "The call is approved; the run goes on.".to_owned(),
        ApprovalState::Denied => "The call is denied; the model is told.".to_owned(),
        other => format!("It is {}.", other.as_str()),
    };
    (format!("{done}."), p(&format!("{} — {now}", escape(&record.tool_name))))
}

fn row(label: &str, value_html: &str) -> String {
    format!("<p><strong>{}:</strong> {value_html}</p>", escape(label))
}

fn p(text: &str) -> String {
    format!("<p>{}</p>", escape(text))
}

/// A whole page.
fn html(status: StatusCode, title: &str, body: &str) -> Response {
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>{title} · toolgate</title><style>{STYLE}</style></head>\
         <body><main><h1>{title}</h1>{body}</main></body></html>",
        title = escape(title),
    );
    (
        status,
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CACHE_CONTROL, "no-store"),
            // `same-origin`, not `no-referrer`: a browser then posts the page's form with its
            // origin (under `no-referrer` it sends `Origin: null`, which the sign-in cookie's
            // origin check refuses), and still sends no referrer to any other site.
            (REFERRER_POLICY, "same-origin"),
            (
                axum::http::header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
            ),
        ],
        page,
    )
        .into_response()
}

const STYLE: &str = "body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7fb;color:#1f2330}\
main{max-width:40rem;margin:2rem auto;padding:1.5rem;background:#fff;border-radius:12px;box-shadow:0 1px 4px #0002}\
pre{background:#f0f1f5;padding:.75rem;border-radius:8px;overflow:auto;white-space:pre-wrap;word-break:break-word}\
label{display:block;margin:.75rem 0}textarea,input{display:block;width:100%;box-sizing:border-box;margin-top:.25rem;\
padding:.5rem;font:inherit}button{font:inherit;padding:.6rem 1.4rem;border:0;border-radius:8px;color:#fff;cursor:pointer}\
.approve{background:#15803d}.deny{background:#b91c1c}";
