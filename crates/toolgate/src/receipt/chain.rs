//! The hash chain over the audit log.
//!
//! Each event has a digest, base64url SHA-256 of its canonical JSON
//! ([`crate::approval::canonical_json`], RFC 8785) without its `seq`, and a
//! link: `hash = SHA-256(prev ‖ digest)` over the raw 32-byte values, where
//! `prev` is the hash of the event before it in `seq` order ([`GENESIS`] for
//! the first). The position is what the chain binds, not the number: two
//! events that trade places break it, and so does one edited, removed or put
//! in between.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::ReceiptError;
use crate::approval::canonical::write_canonical;
use crate::ledger::AuditEvent;

/// A 32-byte hash.
pub type Hash = [u8; 32];

/// The `prev` of the first event: 32 zero bytes.
pub const GENESIS: Hash = [0; 32];

/// One event's place in the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainLink {
    /// The event's position in the log.
    pub seq: i64,
    /// The hash of the event before it (base64url).
    pub prev: String,
    /// The event's digest (base64url).
    pub digest: String,
    /// `SHA-256(prev ‖ digest)` (base64url).
    pub hash: String,
}

/// base64url of a hash.
pub fn encode(hash: &Hash) -> String {
    URL_SAFE_NO_PAD.encode(hash)
}

/// The hash a base64url text holds.
pub fn decode(text: &str) -> Option<Hash> {
    let mut out = [0u8; 32];
    match URL_SAFE_NO_PAD.decode_slice(text, &mut out) {
        Ok(32) => Some(out),
        _ => None,
    }
}

/// The digest of an event given as JSON (an [`AuditEvent`]'s fields; `seq` is left out).
pub fn value_digest(event: &Value) -> Result<Hash, ReceiptError> {
    let mut text = String::with_capacity(512);
    write_canonical(event, Some("seq"), &mut text).map_err(|error| ReceiptError::Canonical(error.to_string()))?;
    Ok(Sha256::digest(text.as_bytes()).into())
}

/// The digest of an event.
pub fn event_digest(event: &AuditEvent) -> Result<Hash, ReceiptError> {
    let value = serde_json::to_value(event).map_err(|error| ReceiptError::Canonical(error.to_string()))?;
    value_digest(&value)
}

/// `SHA-256(prev ‖ digest)`.
pub fn link(prev: &Hash, digest: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update(prev);
    hasher.update(digest);
    hasher.finalize().into()
}

/// Chains `events` (in `seq` order) after `head`: one link per event.
pub fn chain_after(head: Hash, events: &[AuditEvent]) -> Result<Vec<ChainLink>, ReceiptError> {
    let mut prev = head;
    let mut links = Vec::with_capacity(events.len());
    for event in events {
        let digest = event_digest(event)?;
        let hash = link(&prev, &digest);
        links.push(ChainLink { seq: event.seq, prev: encode(&prev), digest: encode(&digest), hash: encode(&hash) });
        prev = hash;
    }
    Ok(links)
}
