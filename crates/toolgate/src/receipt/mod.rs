//! Signed receipts and the audit log's hash chain: proof, checkable by
//! someone who does not trust the server, that what ran is what a named
//! person approved, and that the log was not rewritten since.
//!
//! The contract:
//! - every audit event, whatever its kind, is chained after it is appended:
//!   its digest (canonical JSON, RFC 8785, without `seq`) and
//!   `hash = SHA-256(prev ‖ digest)`, in `seq` order ([`chain`]);
//! - the chain's head is signed ([`Checkpoint`]) at least every minute and at
//!   shutdown; a prune signs the runs it removes ([`PruneSeal`]), so a log
//!   pruned by retention still verifies and one pruned by anybody else does not;
//! - each event that decides or ends an approval gets a [`Receipt`]: its
//!   approval, conversation, owner, tool, input digests as asked and as run,
//!   decision, votes, rule, times and result digest, bound to the event's
//!   hash and signed;
//! - each event that decides or ends a call without an approval (allowed or
//!   denied by a rule or the tool's policy, run on a grant, and how it ran)
//!   gets a [`CallReceipt`], made from the event alone and bound to its hash
//!   the same way;
//! - signatures are Ed25519 under a [`ReceiptKey`], named by `kid` in a
//!   [`Jwks`]; an old key stays in the key set, so rotating keeps what it
//!   signed verifiable;
//! - [`Verifier`] checks an export offline and names the first [`Break`].
//!
//! A store keeps the chain ([`ReceiptStore`]); `toolgate-store` implements it
//! on SQLite and Postgres, and the server's receipts worker drives it.

mod call;
pub mod chain;
mod deferred;
mod export;
mod json;
mod keys;
mod parallel;
mod prepare;
mod seal;
mod sealer;
mod verify;

pub use call::{CallReceipt, has_call_receipt, is_call_receipt, verify_call_receipt};
pub use chain::{ChainLink, GENESIS, Hash};
pub use export::{export, verify_store};
pub use keys::{Jwk, Jwks, ReceiptKey};
pub use seal::{Checkpoint, PruneSeal, PrunedRange, Receipt, ReceiptEvent, ReceiptVote, SealError, SealKind, Signed};
pub use sealer::{SealedBatch, seal_events, sign_checkpoint, sign_prune};
pub use verify::{Break, BreakKind, EventLine, ExportHeader, LogLine, Report, Verifier, verify_receipt};

use crate::approval::input_digest;
use crate::ledger::{AuditKind, Millis, StoreFuture};

/// Why a key, a key set or a value could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiptError {
    /// A key file or JWK that is not an Ed25519 key.
    #[error("receipt key `{kid}` is unusable: {why}")]
    BadKey {
        /// The key's id (or its file).
        kid: String,
        /// What is wrong.
        why: String,
    },
    /// A key set that is not a JWKS.
    #[error("not a key set (JWKS): {0}")]
    BadKeySet(String),
    /// A key file could not be read or written.
    #[error("{0}")]
    Io(String),
    /// A value with no canonical form.
    #[error("no canonical form: {0}")]
    Canonical(String),
}

/// base64url SHA-256 of a value's canonical JSON (the input digest's form).
pub(crate) fn digest_of(value: &serde_json::Value) -> Result<String, ReceiptError> {
    input_digest(value).map_err(|error| ReceiptError::Canonical(error.to_string()))
}

/// The digest of a tool's definition as the model is offered it (name,
/// description and input schema: base64url SHA-256 of its canonical JSON),
/// recorded in its approvals' `issued` events (`toolDigest`) and named by their receipts.
pub fn tool_digest(tool: &crate::Tool) -> Option<String> {
    serde_json::to_value(tool.spec()).ok().and_then(|spec| digest_of(&spec).ok())
}

/// The [`tool_digest`] of a function tool known only by what a caller
/// offered (the call-gating API's `description` and `inputSchema`, an MCP
/// server's tool listing): the same digest a [`crate::Tool`] of that name,
/// description and schema has.
pub fn definition_digest(name: &str, description: Option<&str>, input_schema: &serde_json::Value) -> Option<String> {
    let spec = toolgate_protocol::ToolSpec::Function {
        name: name.to_owned(),
        description: description.map(str::to_owned),
        input_schema: input_schema.clone(),
    };
    serde_json::to_value(spec).ok().and_then(|spec| digest_of(&spec).ok())
}

/// Whether an event of this kind gets a receipt: every kind that decides,
/// moves or ends an approval. Kinds that only tell (issued, notified,
/// reminded, escalated, continued, shadowed, rejected) are chained without
/// one, and so are a vote and an edit, which the decision's receipt names
/// (every vote, the input as run); a kind added later gets receipts unless
/// listed here.
pub fn has_receipt(kind: AuditKind) -> bool {
    !matches!(
        kind,
        AuditKind::Issued
            | AuditKind::Voted
            | AuditKind::Edited
            | AuditKind::Notified
            | AuditKind::NotificationFailed
            | AuditKind::Reminded
            | AuditKind::Escalated
            | AuditKind::Continued
            | AuditKind::Shadowed
            | AuditKind::Rejected
    )
}

/// The chain as a store keeps it: what the receipts worker drives and what
/// export and the receipt endpoint read. Implemented by `toolgate-store`'s
/// SQL stores; one signing key per store handle.
pub trait ReceiptStore: Send + Sync + std::fmt::Debug {
    /// Chains the events appended since the chain's head (at most `limit`),
    /// signs their receipts, and returns how many it chained. Two replicas
    /// calling it at once extend one chain: the store serialises them.
    fn seal(&self, limit: usize) -> StoreFuture<'_, u64>;

    /// Signs a checkpoint of the chain's head at `at`, when it moved since the
    /// newest one; returns it.
    fn checkpoint(&self, at: Millis) -> StoreFuture<'_, Option<Checkpoint>>;

    /// The newest receipt of an approval.
    fn receipt<'a>(&'a self, approval_id: &'a str) -> StoreFuture<'a, Option<Signed>>;

    /// The receipt signed for the event at `seq` (an approval's or a
    /// call's), checked to name that event.
    fn receipt_at(&self, seq: i64) -> StoreFuture<'_, Option<Signed>>;

    /// The public keys that ever signed here (every replica's, old ones too).
    fn receipt_keys(&self) -> StoreFuture<'_, Jwks>;

    /// The signed records of an export: the checkpoints and prunes, then the
    /// receipts of events after `after_seq`.
    fn signed_records(&self, after_seq: i64) -> StoreFuture<'_, Vec<Signed>>;

    /// Up to `limit` events after `after_seq`, in `seq` order, with their
    /// links (an empty link: not chained yet).
    fn chained_events(&self, after_seq: i64, limit: usize) -> StoreFuture<'_, Vec<EventLine>>;

    /// The newest checkpoint whose head is before the first event at or after
    /// `since` (where an export `--since` starts).
    fn checkpoint_before(&self, since: Millis) -> StoreFuture<'_, Option<Checkpoint>>;
}
