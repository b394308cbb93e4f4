//! Notification channels for toolgate's approvals.
//!
//! The server keeps a durable outbox of deliveries; a worker hands each row to
//! this crate, which renders it in the channel's format, makes one attempt,
//! and reports an [`Outcome`]: delivered, retry (after [`backoff`], until
//! [`GIVE_UP_AFTER`]), or failed for good. This crate knows nothing of the
//! server, the store or the ledger: it takes configuration text, [`Event`]s
//! and [`Delivery`]s, and does HTTP and SMTP.
//!
//! # Configuration
//!
//! ```toml
//! [emails]
//! bob = "bob@example.com"
//!
//! [[notify]]
//! name = "ops-hook"                       # unique, [A-Za-z0-9_.-]+
//! webhook = "https://hooks.example.com/toolgate"
//! secret_env = "OPS_HOOK_SECRET"          # HMAC key; required for format json
//! events = ["approval.requested", "approval.decided"]   # omitted: all
//! format = "json"                         # or "slack"
//! links = "signed"                        # or "bearer"
//!
//! [[notify]]
//! name = "finance-mail"
//! smtp = "smtp://mail.example.com:587"    # credentials: SMTP_USER/SMTP_PASSWORD or user_env/password_env
//! tls = "starttls"                        # starttls | implicit | none (loopback only)
//! from = "toolgate <approvals@example.com>"
//! to = ["approvers", "group:finance", "carol", "audit@example.com"]
//! grant = { uses = 5, within = "1h" }    # optional: offered with the approve links (signed links only)
//! ```
//!
//! [`Channels::from_config`] validates the tables ([`NotifyConfigError`]
//! names the channel and the problem). A channel that takes
//! `approval.requested` also takes `approval.reminded` ([`Channel::wants`]).
//!
//! # Formats
//!
//! * `json` webhooks post the [`Event`] itself ([`render_json`]), signed with
//!   [`signature_header`] (`toolgate-signature: t=…,v1=…`); receivers check it
//!   with [`verify_signature`].
//! * `slack` webhooks post a Block Kit message ([`render_slack`]).
//! * E-mail channels send one message per recipient ([`render_email`],
//!   [`Email::recipients`]), plain text with an HTML alternative.

mod backoff;
mod config;
mod delivery;
mod email;
mod event;
mod notifier;
mod recipients;
mod signature;
mod slack;
mod smtp;
mod summary;
mod webhook;

pub use backoff::{BACKOFF_BASE, BACKOFF_CAP, GIVE_UP_AFTER, MAX_RETRY_AFTER, backoff, parse_retry_after, unix_now};
pub use config::{
    Channel, Channels, DEFAULT_SMTP_PASSWORD_ENV, DEFAULT_SMTP_USER_ENV, Email, EmailTarget, LinkMode, NotifyConfig,
    NotifyConfigError, SmtpServer, SmtpTls, Target, Webhook, WebhookFormat,
};
pub use delivery::{Delivery, Outcome};
pub use email::{EMAIL_INPUT_LIMIT, EmailContent, EmailError, escape_html, render_email, render_email_content};
pub use event::{Event, EventKind, Links};
pub use notifier::{DEFAULT_TIMEOUT, Notifier, NotifierError};
pub use recipients::{Recipient, Recipients};
pub use signature::{SIGNATURE_TOLERANCE, SignatureError, signature_header, verify_signature};
pub use slack::{SLACK_HEADER_LIMIT, SLACK_TEXT_LIMIT, SLACK_URL_LIMIT, render_slack};
pub use webhook::{render_json, webhook_body};

/// Re-exported so callers can name [`render_email`]'s message type without
/// depending on lettre themselves.
pub use lettre;
