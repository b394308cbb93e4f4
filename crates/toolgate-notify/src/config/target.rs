//! Where a channel delivers, and the checks of the keys that say so.
//!
//! A webhook needs an http(s) URL, a known format and, for `json`, the
//! secret's variable. An e-mail channel needs an `smtp://` (or `smtps://`)
//! URL with only a host and a port, a TLS mode (plain text only to a
//! loopback host), a sender, recipients, and both or neither of user and
//! password. Keys of the other kind of channel are refused.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use lettre::Address;
use lettre::message::Mailbox;
use url::Url;

use super::{
    DEFAULT_SMTP_PASSWORD_ENV, DEFAULT_SMTP_USER_ENV, NotifyConfig, NotifyConfigError, refuse_keys, required_env,
};

/// Where a channel delivers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Target {
    /// An HTTP POST per delivery.
    Webhook(Webhook),
    /// One e-mail per recipient.
    Email(Email),
}

/// A webhook channel's target.
#[derive(Debug, Clone)]
pub struct Webhook {
    /// The URL posted to.
    pub url: Url,
    /// How the body is written.
    pub format: WebhookFormat,
    /// The HMAC key, when configured.
    secret: Option<Secret>,
}

impl Webhook {
    /// A webhook target; without a secret no `toolgate-signature` header is sent.
    pub fn new(url: Url, format: WebhookFormat, secret: Option<Vec<u8>>) -> Webhook {
        Webhook { url, format, secret: secret.map(Secret) }
    }

    /// The HMAC key for the `toolgate-signature` header, when configured.
    pub fn secret(&self) -> Option<&[u8]> {
        self.secret.as_ref().map(|secret| secret.0.as_slice())
    }
}

/// The body format of a webhook channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WebhookFormat {
    /// The [`Event`](crate::Event) as JSON, signed.
    Json,
    /// A Slack incoming-webhook message with Block Kit blocks.
    Slack,
}

/// An e-mail channel's target.
#[derive(Debug, Clone)]
pub struct Email {
    /// The SMTP server.
    pub server: SmtpServer,
    /// The sender.
    pub from: Mailbox,
    /// The recipients as configured, resolved per event by [`Email::recipients`].
    pub to: Vec<EmailTarget>,
}

/// An SMTP server and how to talk to it.
#[derive(Debug, Clone)]
pub struct SmtpServer {
    /// The host name or IP address (IPv6 without brackets).
    pub host: String,
    /// The port (default 587 for STARTTLS, 465 for implicit TLS, 25 for none).
    pub port: u16,
    /// Transport security.
    pub tls: SmtpTls,
    credentials: Option<SmtpCredentials>,
}

impl SmtpServer {
    /// The user and password to log in with, when configured.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.credentials.as_ref().map(|c| (c.user.as_str(), c.password.as_str()))
    }
}

/// SMTP transport security.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SmtpTls {
    /// Plain connection upgraded with STARTTLS, which must succeed.
    StartTls,
    /// TLS from the first byte (SMTPS).
    Implicit,
    /// No encryption (loopback servers only).
    None,
}

/// One entry of an e-mail channel's `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmailTarget {
    /// The approval's current approvers (`approvers`).
    Approvers,
    /// A principal, mapped to an address through `[emails]`.
    Principal(String),
    /// The members of a group (`group:NAME`).
    Group(String),
    /// A literal address (contains `@`).
    Address(String),
}

/// Key material that never shows in `Debug` output.
#[derive(Clone)]
struct Secret(Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[derive(Clone)]
struct SmtpCredentials {
    user: String,
    password: String,
}

impl fmt::Debug for SmtpCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmtpCredentials").field("user", &self.user).field("password", &"<redacted>").finish()
    }
}
pub(super) fn webhook_target(
    raw: &NotifyConfig,
    url: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Webhook, NotifyConfigError> {
    refuse_keys(
        raw,
        "webhook",
        &[
            ("tls", raw.tls.is_some()),
            ("from", raw.from.is_some()),
            ("to", raw.to.is_some()),
            ("user_env", raw.user_env.is_some()),
            ("password_env", raw.password_env.is_some()),
        ],
    )?;
    let channel = raw.name.as_str();
    let invalid = |reason: String| NotifyConfigError::InvalidUrl { channel: channel.into(), url: url.into(), reason };
    let parsed = Url::parse(url).map_err(|e| invalid(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid(format!("the scheme must be http or https, not {}", parsed.scheme())));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid("it has no host".into()));
    }
    let format = match raw.format.as_deref() {
        None | Some("json") => WebhookFormat::Json,
        Some("slack") => WebhookFormat::Slack,
        Some(other) => {
            return Err(NotifyConfigError::UnknownFormat { channel: channel.into(), format: other.into() });
        }
    };
    let secret = match &raw.secret_env {
        Some(var) => Some(required_env(channel, var, env)?.into_bytes()),
        None if format == WebhookFormat::Json => {
            return Err(NotifyConfigError::MissingSecret { channel: channel.into() });
        }
        None => None,
    };
    Ok(Webhook::new(parsed, format, secret))
}

pub(super) fn email_target(
    raw: &NotifyConfig,
    url: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Email, NotifyConfigError> {
    refuse_keys(raw, "smtp", &[("format", raw.format.is_some()), ("secret_env", raw.secret_env.is_some())])?;
    let channel = raw.name.as_str();
    let mut server = smtp_server(channel, url, raw.tls.as_deref())?;
    server.credentials = smtp_credentials(raw, env)?;
    let from = raw.from.as_deref().ok_or_else(|| NotifyConfigError::MissingFrom { channel: channel.into() })?;
    let from = Mailbox::from_str(from).map_err(|e| NotifyConfigError::InvalidFrom {
        channel: channel.into(),
        from: from.into(),
        reason: e.to_string(),
    })?;
    let to = raw.to.as_deref().unwrap_or_default();
    if to.is_empty() {
        return Err(NotifyConfigError::EmptyTo { channel: channel.into() });
    }
    let to = to.iter().map(|entry| email_target_entry(channel, entry)).collect::<Result<_, _>>()?;
    Ok(Email { server, from, to })
}

fn email_target_entry(channel: &str, entry: &str) -> Result<EmailTarget, NotifyConfigError> {
    let invalid =
        |reason: String| NotifyConfigError::InvalidRecipient { channel: channel.into(), entry: entry.into(), reason };
    if entry == "approvers" {
        Ok(EmailTarget::Approvers)
    } else if let Some(group) = entry.strip_prefix("group:") {
        if group.is_empty() {
            Err(invalid("the group name is empty".into()))
        } else {
            Ok(EmailTarget::Group(group.into()))
        }
    } else if entry.contains('@') {
        Address::from_str(entry).map_err(|e| invalid(e.to_string()))?;
        Ok(EmailTarget::Address(entry.into()))
    } else if entry.is_empty() {
        Err(invalid("it is empty".into()))
    } else {
        Ok(EmailTarget::Principal(entry.into()))
    }
}

/// Parses `smtp://host[:port]` or `smtps://host[:port]` with the `tls` key.
fn smtp_server(channel: &str, url: &str, tls: Option<&str>) -> Result<SmtpServer, NotifyConfigError> {
    let invalid = |reason: &str| NotifyConfigError::InvalidUrl {
        channel: channel.into(),
        url: url.into(),
        reason: reason.into(),
    };
    let parsed = Url::parse(url).map_err(|e| invalid(&e.to_string()))?;
    let implicit_scheme = match parsed.scheme() {
        "smtp" => false,
        "smtps" => true,
        _ => return Err(invalid("the scheme must be smtp (or smtps for implicit TLS)")),
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(invalid(
            "put credentials in SMTP_USER/SMTP_PASSWORD or the variables named by user_env/password_env",
        ));
    }
    if !matches!(parsed.path(), "" | "/") || parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid("only a host and a port are allowed (set TLS with the `tls` key)"));
    }
    let host = match parsed.host() {
        Some(url::Host::Domain(domain)) if !domain.is_empty() => domain.to_owned(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        _ => return Err(invalid("it has no host")),
    };
    let invalid_tls = |reason: &str| NotifyConfigError::InvalidTls {
        channel: channel.into(),
        tls: tls.unwrap_or_default().into(),
        reason: reason.into(),
    };
    let tls = match (tls, implicit_scheme) {
        (None, false) | (Some("starttls"), false) => SmtpTls::StartTls,
        (None, true) | (Some("implicit"), _) => SmtpTls::Implicit,
        (Some("none"), false) => SmtpTls::None,
        (Some("starttls" | "none"), true) => return Err(invalid_tls("smtps:// means implicit TLS")),
        (Some(_), _) => return Err(invalid_tls("use \"starttls\", \"implicit\" or \"none\"")),
    };
    if tls == SmtpTls::None && !is_loopback(&host) {
        return Err(NotifyConfigError::PlaintextSmtp { channel: channel.into(), host });
    }
    let port = parsed.port().unwrap_or(match tls {
        SmtpTls::StartTls => 587,
        SmtpTls::Implicit => 465,
        SmtpTls::None => 25,
    });
    Ok(SmtpServer { host, port, tls, credentials: None })
}

/// True for `localhost`, 127.0.0.0/8 and ::1.
fn is_loopback(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    host.eq_ignore_ascii_case("localhost")
        || host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The SMTP login: from `user_env`/`password_env` (which must be set) or
/// `SMTP_USER`/`SMTP_PASSWORD` (when set); both or neither.
fn smtp_credentials(
    raw: &NotifyConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<SmtpCredentials>, NotifyConfigError> {
    let channel = raw.name.as_str();
    let read = |named: &Option<String>, default: &str| -> Result<(String, Option<String>), NotifyConfigError> {
        match named {
            Some(var) => Ok((var.clone(), Some(required_env(channel, var, env)?))),
            None => Ok((default.to_owned(), env(default).filter(|value| !value.is_empty()))),
        }
    };
    let (user_var, user) = read(&raw.user_env, DEFAULT_SMTP_USER_ENV)?;
    let (password_var, password) = read(&raw.password_env, DEFAULT_SMTP_PASSWORD_ENV)?;
    match (user, password) {
        (Some(user), Some(password)) => Ok(Some(SmtpCredentials { user, password })),
        (None, None) => Ok(None),
        (Some(_), None) => Err(NotifyConfigError::IncompleteCredentials {
            channel: channel.into(),
            present: "user",
            present_var: user_var,
            missing: "password",
            missing_var: password_var,
        }),
        (None, Some(_)) => Err(NotifyConfigError::IncompleteCredentials {
            channel: channel.into(),
            present: "password",
            present_var: password_var,
            missing: "user",
            missing_var: user_var,
        }),
    }
}
