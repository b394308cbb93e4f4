//! Receipts of calls decided without an approval ([`CallReceipt`]): a call a
//! rule or the tool's policy allowed or denied, one run on a grant, and
//! their execution outcomes (see [`crate::approval::lifecycle::direct`]).
//!
//! No approval record exists for them, so a call receipt is made from its
//! event alone: the event's conversation, owner, principal and tool call, and
//! what its data names (`toolName`, `input`, `result` or `error`, `reason`,
//! `grant`, `grantedBy`, `decidedBy`, and `toolDigest`, `configDigest`,
//! `rule` where the recording path knew them). It is signed in the same
//! envelope as an approval's receipt ([`super::Signed`], type `receipt`) and
//! bound the same way to its event's place in the chain
//! ([`super::ReceiptEvent`]). It has no `approvalId`: that is how a reader
//! tells the two apart ([`is_call_receipt`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chain::ChainLink;
use super::seal::{ReceiptEvent, SealError, SealKind, Signed};
use super::verify::{Break, BreakKind};
use super::{Jwks, ReceiptError, digest_of};
use crate::ledger::{AuditEvent, AuditKind, Millis};

/// A signed statement of one decision or outcome of a call no person was asked about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallReceipt {
    /// The call.
    pub tool_call_id: String,
    /// Its conversation, as its owner named it.
    pub conversation_id: String,
    /// Who owns the conversation.
    pub owner: Option<String>,
    /// Who made the call (the requester), when known.
    pub principal: Option<String>,
    /// The tool.
    pub tool_name: String,
    /// Digest of the tool's definition as offered, when the recording path knew it.
    pub tool_digest: Option<String>,
    /// Digest of the canonical input the call ran (or would have run) with.
    pub input_digest: Option<String>,
    /// `allow` or `deny`.
    pub decision: String,
    /// What decided: `policy` (a rule or the tool's own policy) or `grant`.
    pub decided_by: Option<String>,
    /// The rule, or why the policy decided so, when recorded (a denial's reason).
    pub rule: Option<String>,
    /// The grant the call ran on (`decidedBy`: `grant`).
    pub grant: Option<String>,
    /// Who made that grant.
    pub granted_by: Option<String>,
    /// Digest of the configuration (the rules) that decided, when recorded.
    pub config_digest: Option<String>,
    /// Digest of the result (`executed`) or the error (`failed`).
    pub result_digest: Option<String>,
    /// When the event happened.
    pub at: Millis,
    /// The event this receipt was signed for.
    pub event: ReceiptEvent,
    /// When it was signed.
    pub signed_at: Millis,
}

/// Whether an event gets a call receipt: one with no approval that decides a
/// call (`allowed`, `denied`, `granted`) or records how it ran (`executed`, `failed`).
pub fn has_call_receipt(event: &AuditEvent) -> bool {
    event.approval_id.is_empty()
        && matches!(
            event.kind,
            AuditKind::Allowed | AuditKind::Denied | AuditKind::Granted | AuditKind::Executed | AuditKind::Failed
        )
}

/// Whether a signed receipt is a call's (its payload names no approval).
pub fn is_call_receipt(signed: &Signed) -> bool {
    signed.kind == SealKind::Receipt && signed.payload.get("approvalId").is_none()
}

impl CallReceipt {
    /// The receipt of `event` (see [`has_call_receipt`]), chained at `link`, signed at `signed_at`.
    pub fn of(event: &AuditEvent, link: &ChainLink, signed_at: Millis) -> Result<Self, ReceiptError> {
        let data = &event.data;
        let text = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_owned);
        let digest = |key: &str| data.get(key).map(digest_of).transpose();
        let result_digest = match event.kind {
            AuditKind::Executed => digest("result")?,
            AuditKind::Failed => digest("error")?,
            _ => None,
        };
        let decision = if event.kind == AuditKind::Denied { "deny" } else { "allow" };
        Ok(Self {
            tool_call_id: event.tool_call_id.clone(),
            conversation_id: event.conversation_id.clone(),
            owner: event.owner.clone(),
            principal: event.principal.clone(),
            tool_name: text("toolName").unwrap_or_default(),
            tool_digest: text("toolDigest"),
            input_digest: digest("input")?,
            decision: decision.to_owned(),
            decided_by: text("decidedBy"),
            rule: text("rule").or_else(|| text("reason")),
            grant: text("grant"),
            granted_by: text("grantedBy"),
            config_digest: text("configDigest"),
            result_digest,
            at: event.at,
            event: ReceiptEvent { seq: link.seq, kind: event.kind.as_str().to_owned(), hash: link.hash.clone() },
            signed_at,
        })
    }
}

/// Checks one call receipt on its own: its signature under the key set; the receipt.
pub fn verify_call_receipt(signed: &Signed, keys: &Jwks) -> Result<CallReceipt, Break> {
    let broke = |kind, detail: String| Break { seq: None, kind, detail };
    if !is_call_receipt(signed) {
        return Err(broke(BreakKind::Malformed, "not the receipt of a call decided without an approval".to_owned()));
    }
    signed.verify(keys).map_err(|error| match error {
        SealError::UnknownKey(kid) => broke(BreakKind::UnknownKey, format!("the receipt is signed by `{kid}`")),
        other => broke(BreakKind::BadSignature, other.to_string()),
    })?;
    signed.payload().map_err(|error| broke(BreakKind::Malformed, error.to_string()))
}
