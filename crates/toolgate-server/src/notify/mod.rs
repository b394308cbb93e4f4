//! Notifications about approvals, and the one-time links they carry.
//!
//! `[[notify]]` channels (signed JSON webhooks, Slack incoming webhooks,
//! e-mail; see [`toolgate_notify`]) hear about approvals as the audit log
//! records them: requested, decided, escalated, reminded, expired, executed.
//! The path of an event:
//!
//! 1. Enqueue (the worker in `workers/notifications/enqueue.rs`): every
//!    process follows the audit log from the store's notification cursor and
//!    turns each event into deliveries in the store's outbox, moving the
//!    cursor in the same write (an event is enqueued once, whichever process
//!    saw it; a restart loses none).
//! 2. Deliver (the worker in `workers/notifications/deliver.rs`): every
//!    process claims due deliveries, sends them, and records the outcome
//!    (`notified`, `notification_failed`), retrying with backoff for up to a
//!    day: delivery is at least once, each delivery with one id
//!    (`toolgate-delivery`) on every attempt.
//! 3. With `--public-url`, messages that ask for a decision carry one-time
//!    links (`PUBLIC_URL/a/{token}`, see [`token`] and `api/links/`).
//!    Without it they carry none: a link must lead somewhere people can
//!    reach, and the server cannot know that address.
//!
//! This module holds what the configuration and the handlers share with
//! those workers: the channels ([`Notifications`]) and the link tokens
//! ([`token`]). It imports nothing of the server.

pub mod token;

use std::time::Duration;

use tokio::sync::Notify;
use toolgate_notify::{Channels, Notifier, NotifierError};

/// The configured channels and what sends over them.
#[derive(Debug)]
pub struct Notifications {
    channels: Channels,
    notifier: Notifier,
    public_url: Option<String>,
    wake: Notify,
}

impl Notifications {
    /// Notifications over `channels`; links point at `public_url` (`None`: no links).
    pub fn new(channels: Channels, public_url: Option<&str>) -> Result<Self, NotifierError> {
        Self::with_timeout(channels, public_url, toolgate_notify::DEFAULT_TIMEOUT)
    }

    /// [`Self::new`] with another timeout per attempt (tests).
    pub fn with_timeout(
        channels: Channels,
        public_url: Option<&str>,
        timeout: Duration,
    ) -> Result<Self, NotifierError> {
        let notifier = Notifier::with_timeout(&channels, timeout)?;
        let public_url = public_url.map(|url| url.trim_end_matches('/').to_owned());
        Ok(Self { channels, notifier, public_url, wake: Notify::new() })
    }

    /// The channels.
    pub fn channels(&self) -> &Channels {
        &self.channels
    }

    /// What sends.
    pub(crate) fn notifier(&self) -> &Notifier {
        &self.notifier
    }

    /// The public URL links start with, without a trailing slash.
    pub fn public_url(&self) -> Option<&str> {
        self.public_url.as_deref()
    }

    /// Wakes the delivery worker (deliveries were enqueued).
    pub(crate) fn wake_delivery(&self) {
        self.wake.notify_one();
    }

    /// Completes when [`Self::wake_delivery`] is called.
    pub(crate) async fn delivery_woken(&self) {
        self.wake.notified().await;
    }
}
