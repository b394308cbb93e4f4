//! What one delivery is and what one attempt achieved: the types the
//! notifier and each channel's sender (`smtp`, `webhook`) share. The senders
//! import this file, never the notifier that dispatches to them.

use std::error::Error as StdError;
use std::time::Duration;

use crate::event::Event;

/// One delivery of one event over one channel (an outbox row).
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// The delivery's id, stable across attempts (`toolgate-delivery` header).
    pub delivery_id: String,
    /// The e-mail address, for e-mail channels.
    pub recipient: Option<String>,
    /// The event.
    pub event: Event,
}

/// What one attempt achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The receiver accepted the delivery.
    Delivered {
        /// The receiver's answer, such as `HTTP 200` or `SMTP 250 OK`.
        detail: String,
    },
    /// A transient failure: try again later.
    Retry {
        /// What went wrong.
        error: String,
        /// How long the receiver asked to wait (`Retry-After`), if it did.
        after: Option<Duration>,
    },
    /// A permanent failure: do not try again.
    Failed {
        /// What went wrong.
        error: String,
    },
}

/// An error and its sources, joined with `: ` (repeated texts left out).
pub(crate) fn error_chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
