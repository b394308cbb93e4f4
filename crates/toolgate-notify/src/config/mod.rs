//! The `[[notify]]` tables of the configuration file and their validation.
//!
//! [`NotifyConfig`] is one raw table as TOML gives it (unknown keys refused);
//! [`Channels::from_config`] checks every table, reads the secrets and SMTP
//! credentials from the environment (through a lookup function, so tests pass
//! a closure) and returns validated [`Channel`]s, or the first problem as a
//! [`NotifyConfigError`] naming the channel. Nothing is connected here.

mod error;
mod target;

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use lettre::Address;
use serde::{Deserialize, Serialize};

use crate::event::EventKind;
pub use error::NotifyConfigError;
pub use target::{Email, EmailTarget, SmtpServer, SmtpTls, Target, Webhook, WebhookFormat};
use target::{email_target, webhook_target};

/// The environment variable read for the SMTP user when `user_env` is not set.
pub const DEFAULT_SMTP_USER_ENV: &str = "SMTP_USER";
/// The environment variable read for the SMTP password when `password_env` is not set.
pub const DEFAULT_SMTP_PASSWORD_ENV: &str = "SMTP_PASSWORD";

/// One `[[notify]]` table as written in the configuration file.
///
/// Every value is kept as text so that [`Channels::from_config`] can name the
/// channel in its errors; see the crate documentation for the keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// The channel's name: unique, `[A-Za-z0-9_.-]+`.
    pub name: String,
    /// The webhook URL (http or https); exclusive with `smtp`.
    pub webhook: Option<String>,
    /// The SMTP server, `smtp://host[:port]` (or `smtps://`, implicit TLS); exclusive with `webhook`.
    pub smtp: Option<String>,
    /// The environment variable holding the webhook's HMAC key.
    pub secret_env: Option<String>,
    /// The event kinds sent over the channel; all when absent.
    pub events: Option<Vec<String>>,
    /// The webhook body: `json` (default) or `slack`.
    pub format: Option<String>,
    /// The kind of links in messages: `signed` (default) or `bearer` (webhooks only).
    pub links: Option<String>,
    /// SMTP transport security: `starttls` (default), `implicit` or `none` (loopback only).
    pub tls: Option<String>,
    /// The e-mail sender, such as `toolgate <approvals@example.com>`.
    pub from: Option<String>,
    /// The e-mail recipients: `approvers`, principals, `group:NAME` or addresses.
    pub to: Option<Vec<String>>,
    /// The environment variable holding the SMTP user (default `SMTP_USER`).
    pub user_env: Option<String>,
    /// The environment variable holding the SMTP password (default `SMTP_PASSWORD`).
    pub password_env: Option<String>,
    /// A grant its approve links offer (`{uses, within, input, scope}`): approving through one also lets the
    /// next calls like it run without asking. Checked by the server; not with `links = "bearer"`.
    pub grant: Option<serde_json::Value>,
}
/// The validated channels and the principals' e-mail addresses.
#[derive(Debug, Clone, Default)]
pub struct Channels {
    /// The channels, in configuration order.
    pub channels: Vec<Channel>,
    /// Principal → e-mail address (`[emails]`).
    pub emails: BTreeMap<String, String>,
}

/// One validated notification channel.
#[derive(Debug, Clone)]
pub struct Channel {
    /// The channel's unique name.
    pub name: String,
    /// The event kinds it was configured for (all when `events` was omitted).
    pub events: BTreeSet<EventKind>,
    /// The kind of links the server puts in its messages.
    pub links: LinkMode,
    /// The grant its approve links offer, as configured (a table; the server checks its keys).
    pub grant: Option<serde_json::Value>,
    /// Where and how it delivers.
    pub target: Target,
}

/// What kind of link the server builds for a channel's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkMode {
    /// Links signed for one recipient (the default, and the only mode for e-mail).
    Signed,
    /// Links that act for whoever holds them (shared chat channels that sign in elsewhere).
    Bearer,
}
impl Channels {
    /// Validates the raw tables and the `[emails]` map; `env` looks up
    /// environment variables (secrets, SMTP credentials).
    pub fn from_config(
        notify: &[NotifyConfig],
        emails: &BTreeMap<String, String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Channels, NotifyConfigError> {
        for (principal, address) in emails {
            Address::from_str(address).map_err(|e| NotifyConfigError::InvalidEmailMapping {
                principal: principal.clone(),
                address: address.clone(),
                reason: e.to_string(),
            })?;
        }
        let mut channels: Vec<Channel> = Vec::with_capacity(notify.len());
        for raw in notify {
            let channel = Channel::from_config(raw, &env)?;
            if channels.iter().any(|c| c.name == channel.name) {
                return Err(NotifyConfigError::DuplicateName { name: channel.name });
            }
            channels.push(channel);
        }
        Ok(Channels { channels, emails: emails.clone() })
    }

    /// The channel with this name.
    pub fn get(&self, name: &str) -> Option<&Channel> {
        self.channels.iter().find(|c| c.name == name)
    }

    /// True when no channel is configured.
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }
}

impl Channel {
    /// True when the channel sends events of this kind; a channel that takes
    /// `approval.requested` also takes `approval.reminded` (a reminder sends the request again).
    pub fn wants(&self, kind: EventKind) -> bool {
        self.events.contains(&kind) || (kind == EventKind::Reminded && self.events.contains(&EventKind::Requested))
    }

    /// True for e-mail channels (one delivery per recipient).
    pub fn is_email(&self) -> bool {
        matches!(self.target, Target::Email(_))
    }

    fn from_config(raw: &NotifyConfig, env: &dyn Fn(&str) -> Option<String>) -> Result<Channel, NotifyConfigError> {
        let name = raw.name.clone();
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
        if name.is_empty() || !name.chars().all(valid) {
            return Err(NotifyConfigError::InvalidName { name });
        }
        let events = parse_events(&name, raw.events.as_deref())?;
        let links = match raw.links.as_deref() {
            None | Some("signed") => LinkMode::Signed,
            Some("bearer") => LinkMode::Bearer,
            Some(other) => return Err(NotifyConfigError::UnknownLinks { channel: name, links: other.into() }),
        };
        let target = match (&raw.webhook, &raw.smtp) {
            (Some(url), None) => Target::Webhook(webhook_target(raw, url, env)?),
            (None, Some(url)) => {
                if links == LinkMode::Bearer {
                    return Err(NotifyConfigError::BearerLinksOnEmail { channel: name });
                }
                Target::Email(email_target(raw, url, env)?)
            }
            (None, None) => return Err(NotifyConfigError::NoTarget { channel: name }),
            (Some(_), Some(_)) => return Err(NotifyConfigError::BothTargets { channel: name }),
        };
        let grant = match &raw.grant {
            Some(grant) if !grant.is_object() => {
                return Err(NotifyConfigError::InvalidGrant { channel: name, reason: "it must be a table".into() });
            }
            Some(_) if links == LinkMode::Bearer => {
                let reason = "a bearer link votes as its channel, which grants nothing: use signed links".into();
                return Err(NotifyConfigError::InvalidGrant { channel: name, reason });
            }
            grant => grant.clone(),
        };
        Ok(Channel { name, events, links, target, grant })
    }
}

fn parse_events(channel: &str, events: Option<&[String]>) -> Result<BTreeSet<EventKind>, NotifyConfigError> {
    let Some(events) = events else {
        return Ok(EventKind::ALL.into_iter().collect());
    };
    if events.is_empty() {
        return Err(NotifyConfigError::EmptyEvents { channel: channel.into() });
    }
    events
        .iter()
        .map(|event| {
            EventKind::parse(event)
                .ok_or_else(|| NotifyConfigError::UnknownEvent { channel: channel.into(), event: event.clone() })
        })
        .collect()
}

/// Refuses the keys of `raw` that `target` channels do not take.
fn refuse_keys(
    raw: &NotifyConfig,
    target: &'static str,
    keys: &[(&'static str, bool)],
) -> Result<(), NotifyConfigError> {
    match keys.iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(NotifyConfigError::NotApplicable { channel: raw.name.clone(), field, target }),
        None => Ok(()),
    }
}

/// The value of environment variable `var`, or `MissingEnv` when unset or empty.
fn required_env(channel: &str, var: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, NotifyConfigError> {
    env(var)
        .filter(|value| !value.is_empty())
        .ok_or_else(|| NotifyConfigError::MissingEnv { channel: channel.into(), var: var.into() })
}
