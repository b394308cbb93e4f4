//! Delivering one outbox row over one channel.
//!
//! A [`Notifier`] holds one HTTP client (no redirects followed, a total
//! timeout per request) and one pooled SMTP transport per e-mail channel.
//! [`Notifier::deliver`] makes exactly one attempt and reports an
//! [`Outcome`]; it never panics and returns within twice the timeout even if
//! a server stalls (the timeout bounds each request or SMTP command, and the
//! whole attempt is cut at twice that to allow for connecting).

use std::collections::HashMap;
use std::time::Duration;

use crate::config::{Channel, Channels, Target};
use crate::delivery::{Delivery, Outcome, error_chain};
use crate::{smtp, webhook};

/// The default timeout of one request or SMTP command.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A notifier that cannot be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotifierError {
    /// E-mail channels need a tokio runtime to start their connection pools.
    #[error("the notifier must be created inside a tokio runtime (e-mail channels start connection pools)")]
    NoRuntime,
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Http(String),
    /// An e-mail channel's SMTP transport could not be built.
    #[error("notify channel {channel:?}: cannot set up SMTP: {reason}")]
    Smtp {
        /// The channel.
        channel: String,
        /// What went wrong.
        reason: String,
    },
}

/// Delivers notifications; cheap to share behind an `Arc`.
pub struct Notifier {
    http: reqwest::Client,
    smtp: HashMap<String, smtp::Transport>,
    timeout: Duration,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut smtp: Vec<&String> = self.smtp.keys().collect();
        smtp.sort();
        f.debug_struct("Notifier").field("smtp_channels", &smtp).field("timeout", &self.timeout).finish()
    }
}

impl Notifier {
    /// A notifier for `channels` with the default timeout (10 s).
    pub fn new(channels: &Channels) -> Result<Notifier, NotifierError> {
        Notifier::with_timeout(channels, DEFAULT_TIMEOUT)
    }

    /// A notifier whose requests and SMTP commands time out after `timeout`.
    /// With e-mail channels it must be called inside a tokio runtime.
    pub fn with_timeout(channels: &Channels, timeout: Duration) -> Result<Notifier, NotifierError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .connect_timeout(timeout)
            .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| NotifierError::Http(error_chain(&e)))?;
        let mut smtp = HashMap::new();
        for channel in &channels.channels {
            if let Target::Email(email) = &channel.target {
                if tokio::runtime::Handle::try_current().is_err() {
                    return Err(NotifierError::NoRuntime);
                }
                let transport = smtp::transport(email, timeout)
                    .map_err(|reason| NotifierError::Smtp { channel: channel.name.clone(), reason })?;
                smtp.insert(channel.name.clone(), transport);
            }
        }
        Ok(Notifier { http, smtp, timeout })
    }

    /// The timeout of one request or SMTP command.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Makes one attempt to deliver `delivery` over `channel`; `now_unix_secs`
    /// is the signature's timestamp and the base for `Retry-After` dates.
    pub async fn deliver(&self, channel: &Channel, delivery: &Delivery, now_unix_secs: i64) -> Outcome {
        let attempt = async {
            match &channel.target {
                Target::Webhook(hook) => webhook::post(&self.http, hook, delivery, now_unix_secs).await,
                Target::Email(email) => match self.smtp.get(&channel.name) {
                    Some(transport) => smtp::send(transport, email, delivery).await,
                    None => Outcome::Failed {
                        error: format!(
                            "e-mail channel {:?} was not configured when the notifier started",
                            channel.name
                        ),
                    },
                },
            }
        };
        match tokio::time::timeout(self.timeout.saturating_mul(2), attempt).await {
            Ok(outcome) => outcome,
            Err(_) => {
                Outcome::Retry { error: format!("timed out after {:?}", self.timeout.saturating_mul(2)), after: None }
            }
        }
    }
}
