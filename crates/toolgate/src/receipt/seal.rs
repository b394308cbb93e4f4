//! What a server signs: receipts, checkpoints of the chain's head, and the
//! record of a prune.
//!
//! Each is a [`Signed`] envelope, `{"type", "kid", "payload", "sig"}`, whose
//! signature is Ed25519 over the canonical JSON of `{"type", "kid",
//! "payload"}`: the type and key are signed with the content, so a
//! checkpoint cannot pass for a receipt, nor a signature move to another key.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chain::ChainLink;
use super::keys::{Jwks, KeyRing, ReceiptKey, verify};
use super::{ReceiptError, digest_of};
use crate::approval::canonical::{CanonicalError, write_canonical, write_string};
use crate::approval::lifecycle::ApprovalState;
use crate::ledger::{ApprovalRecord, AuditEvent, Millis};

/// What a [`Signed`] envelope holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SealKind {
    /// The chain's head at a moment ([`Checkpoint`]).
    Checkpoint,
    /// What retention removed ([`PruneSeal`]).
    Prune,
    /// One decision or outcome of one approval ([`Receipt`]).
    Receipt,
}

/// A signed payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signed {
    /// What the payload is.
    #[serde(rename = "type")]
    pub kind: SealKind,
    /// The id of the key that signed it.
    pub kid: String,
    /// The content.
    pub payload: Value,
    /// Ed25519 over the canonical JSON of `{"type", "kid", "payload"}`, base64url.
    pub sig: String,
}

/// Why a signature does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// No key of the key set has this id.
    #[error("signed by an unknown key `{0}`")]
    UnknownKey(String),
    /// The signature does not match the content under the named key.
    #[error("the signature does not match (edited, or signed by another key than `{0}`)")]
    BadSignature(String),
    /// The payload is not what its type says.
    #[error("the signed {kind:?} is malformed: {why}")]
    Malformed {
        /// The type it claims.
        kind: SealKind,
        /// What is wrong.
        why: String,
    },
}

impl Signed {
    /// `payload` signed under `key`.
    pub fn sign(kind: SealKind, payload: &impl Serialize, key: &ReceiptKey) -> Result<Self, ReceiptError> {
        let payload = serde_json::to_value(payload).map_err(|error| ReceiptError::Canonical(error.to_string()))?;
        let message = message(kind, key.kid(), &payload)?;
        Ok(Self { kind, kid: key.kid().to_owned(), sig: key.sign(message.as_bytes()), payload })
    }

    /// Checks the signature against the key set.
    pub fn verify(&self, keys: &Jwks) -> Result<(), SealError> {
        let key = keys.find(&self.kid).ok_or_else(|| SealError::UnknownKey(self.kid.clone()))?;
        self.verify_under(&key)
    }

    /// Checks the signature against decoded keys.
    pub(crate) fn verify_in(&self, ring: &KeyRing) -> Result<(), SealError> {
        let key = ring.get(&self.kid).ok_or_else(|| SealError::UnknownKey(self.kid.clone()))?;
        self.verify_under(key)
    }

    pub(crate) fn verify_under(&self, key: &ed25519_dalek::VerifyingKey) -> Result<(), SealError> {
        let bad = || SealError::BadSignature(self.kid.clone());
        let message = message(self.kind, &self.kid, &self.payload).map_err(|_| bad())?;
        if verify(key, message.as_bytes(), &self.sig) { Ok(()) } else { Err(bad()) }
    }

    /// The payload read as `T`.
    pub fn payload<T: for<'de> Deserialize<'de>>(&self) -> Result<T, SealError> {
        serde_json::from_value(self.payload.clone())
            .map_err(|error| SealError::Malformed { kind: self.kind, why: error.to_string() })
    }
}

/// The signed message: the canonical JSON of `{"type", "kid", "payload"}`,
/// written member by member in canonical order (`kid`, `payload`, `type`)
/// rather than the payload copied into a new object.
pub(crate) fn message(kind: SealKind, kid: &str, payload: &Value) -> Result<String, ReceiptError> {
    framed(kind, kid, |out| write_canonical(payload, None, out))
        .map_err(|error: CanonicalError| ReceiptError::Canonical(error.to_string()))
}

/// The signed message around a payload that `payload` writes in its canonical form.
pub(crate) fn framed<E>(
    kind: SealKind,
    kid: &str,
    payload: impl FnOnce(&mut String) -> Result<(), E>,
) -> Result<String, E> {
    let mut out = String::with_capacity(1024);
    out.push_str("{\"kid\":");
    write_string(kid, &mut out);
    out.push_str(",\"payload\":");
    payload(&mut out)?;
    out.push_str(",\"type\":");
    write_string(kind.name(), &mut out);
    out.push('}');
    Ok(out)
}

impl SealKind {
    /// Its name in a [`Signed`] envelope's `type`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Checkpoint => "checkpoint",
            Self::Prune => "prune",
            Self::Receipt => "receipt",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::canonical_json;
    use serde_json::json;

    #[test]
    fn the_message_is_the_canonical_json_of_type_kid_and_payload() {
        let payload = json!({"b": [1, 2.5, "é\u{1}"], "a": {"z": null, "y": true}, "€": 1e21});
        for kind in [SealKind::Checkpoint, SealKind::Prune, SealKind::Receipt] {
            let whole = canonical_json(&json!({"type": kind, "kid": "k\"1", "payload": payload})).unwrap();
            assert_eq!(message(kind, "k\"1", &payload).unwrap(), whole);
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.name());
        }
    }
}

/// The chain's head: after `count` events, the last at `headSeq`, the hash was `headHash`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The last event chained.
    pub head_seq: i64,
    /// Its hash (base64url).
    pub head_hash: String,
    /// How many events the chain holds up to it, pruned ones included.
    pub count: u64,
    /// When it was signed.
    pub at: Millis,
}

/// One run of consecutive events retention removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrunedRange {
    /// The first event removed.
    pub from_seq: i64,
    /// The last event removed.
    pub to_seq: i64,
    /// How many were removed.
    pub count: u64,
    /// The hash before the first (its `prev`).
    pub prev: String,
    /// The hash of the last: the range's head.
    pub head: String,
}

/// What one prune removed from the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneSeal {
    /// The runs removed, in `seq` order.
    pub ranges: Vec<PrunedRange>,
    /// The retention cut-off: what was recorded before it could go.
    pub before: Millis,
    /// When it was signed.
    pub at: Millis,
}

/// A vote as a receipt names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptVote {
    /// Who voted.
    pub principal: Option<String>,
    /// `approve` or `deny`.
    pub decision: String,
    /// When.
    pub at: Millis,
}

/// The event of the chain a receipt was signed for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptEvent {
    /// Its position.
    pub seq: i64,
    /// Its kind (`approved`, `executed`, ...).
    pub kind: String,
    /// Its hash in the chain (base64url).
    pub hash: String,
}

/// A signed statement of what happened to one approval, as of one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// The approval.
    pub approval_id: String,
    /// Its conversation, as its owner named it.
    pub conversation_id: String,
    /// Who owns the conversation.
    pub owner: Option<String>,
    /// The call.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
    /// Digest of the tool's definition as offered (description and input
    /// schema), when the issuing path recorded it.
    pub tool_digest: Option<String>,
    /// Digest of the canonical input as the model asked it.
    pub input_digest: String,
    /// Digest of the canonical input as it ran (the edit's, if any).
    pub run_input_digest: String,
    /// Where the approval stands.
    pub state: String,
    /// The deciding answer: `approve` or `deny`.
    pub decision: Option<String>,
    /// Who gave it.
    pub decided_by: Option<String>,
    /// When.
    pub decided_at: Option<Millis>,
    /// Each vote: principal and time.
    pub votes: Vec<ReceiptVote>,
    /// The rule or policy that asked.
    pub rule: Option<String>,
    /// Digest of the configuration that held it, when the issuing path recorded it.
    pub config_digest: Option<String>,
    /// When it was issued.
    pub issued_at: Millis,
    /// When its state last changed.
    pub updated_at: Millis,
    /// Digest of the result or error, once it ran.
    pub result_digest: Option<String>,
    /// For a grant's use (a `granted` event): the grant spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// For a grant's use: who granted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted_by: Option<String>,
    /// The event this receipt was signed for.
    pub event: ReceiptEvent,
    /// When it was signed.
    pub signed_at: Millis,
}

impl Receipt {
    /// The receipt of `record` as of `event` (chained at `link`); `issued` is
    /// the data of its first event (`issued`), for the tool and config digests.
    pub fn of(
        record: &ApprovalRecord,
        event: &AuditEvent,
        link: &ChainLink,
        issued: Option<&Value>,
        signed_at: Millis,
    ) -> Result<Self, ReceiptError> {
        let edited = record.decision.as_ref().and_then(|decision| decision.edited_input.as_ref());
        let run_input_digest = match edited {
            Some(input) => digest_of(input)?,
            None => record.input_digest.clone(),
        };
        let result_digest = match &record.output {
            Some(output) if record.state != ApprovalState::Expired => Some(digest_of(
                &serde_json::to_value(output).map_err(|error| ReceiptError::Canonical(error.to_string()))?,
            )?),
            _ => None,
        };
        let text = |key: &str| issued.and_then(|data| data.get(key)).and_then(Value::as_str).map(str::to_owned);
        let votes = record.votes.iter().map(|vote| ReceiptVote {
            principal: vote.principal.clone(),
            decision: if vote.decision.is_approve() { "approve" } else { "deny" }.to_owned(),
            at: vote.at,
        });
        let decision = record.decision.as_ref();
        let spent = |key: &str| match event.kind {
            crate::ledger::AuditKind::Granted => event.data.get(key).and_then(Value::as_str).map(str::to_owned),
            _ => None,
        };
        Ok(Self {
            approval_id: record.approval_id.clone(),
            conversation_id: record.conversation_name().to_owned(),
            owner: record.owner.clone(),
            tool_call_id: record.tool_call_id.clone(),
            tool_name: record.tool_name.clone(),
            tool_digest: text("toolDigest"),
            input_digest: record.input_digest.clone(),
            run_input_digest,
            state: record.state.as_str().to_owned(),
            decision: decision.map(|decision| if decision.approved { "approve" } else { "deny" }.to_owned()),
            decided_by: decision.and_then(|decision| decision.principal.clone()),
            decided_at: decision.map(|decision| decision.decided_at),
            votes: votes.collect(),
            rule: record.reason.clone(),
            config_digest: text("configDigest"),
            issued_at: record.issued_at,
            updated_at: record.updated_at,
            result_digest,
            grant: spent("grant"),
            granted_by: spent("grantedBy"),
            event: ReceiptEvent { seq: link.seq, kind: event.kind.as_str().to_owned(), hash: link.hash.clone() },
            signed_at,
        })
    }
}
