//! HMAC-SHA256 signatures that bind an approval to one exact tool call.
//!
//! A signed approval id has the form `apr_<nonce>.<sig>`, where `sig` is
//! base64url (no padding) of HMAC-SHA256 over the UTF-8 JSON array
//! `["toolgate-approval-v1", "apr_<nonce>", toolCallId, toolName, inputDigest]`
//! and `inputDigest` is base64url(SHA-256(canonical JSON of the input)), keys
//! sorted (RFC 8785), so key order never matters. Clients treat approval ids
//! as opaque and echo them back, so the signature survives any client.
//!
//! The AI SDK's separate `signature` field is also written (when enabled) and
//! read: its v1 payload is `["ai-sdk-tool-approval-v1", approvalId,
//! toolCallId, toolName, inputDigest]`; the older newline-joined payload is
//! accepted on verification when no field contains a newline.
//!
//! What a signature cannot stop on its own: a client replaying a signed,
//! approved call after deleting its result from the history. Stopping that
//! needs server-side state (a store of executed calls).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};
use toolgate_protocol::ToolApprovalRequestPart;

type HmacSha256 = Hmac<Sha256>;

const APPROVAL_ID_PREFIX: &str = "apr_";
const TOOLGATE_DOMAIN: &str = "toolgate-approval-v1";
const AI_SDK_DOMAIN: &str = "ai-sdk-tool-approval-v1";

/// A signer that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignerError {
    /// The secret is empty.
    #[error("the approval secret is empty")]
    EmptySecret,
}

/// Why a signature check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The approval carries no signature.
    #[error("missing signature")]
    Missing,
    /// The signature does not match the approval, call, tool and input.
    #[error("invalid signature")]
    Invalid,
}

/// An approval id (and optional separate signature) issued for a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedApproval {
    /// The approval id, carrying the signature.
    pub approval_id: String,
    /// The AI SDK `signature` field, when enabled.
    pub signature: Option<String>,
}

/// Signs and verifies approvals with one secret.
#[derive(Clone)]
pub struct ApprovalSigner {
    key: std::sync::Arc<[u8]>,
    signature_field: bool,
}

impl std::fmt::Debug for ApprovalSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalSigner").field("signature_field", &self.signature_field).finish_non_exhaustive()
    }
}

impl ApprovalSigner {
    /// A signer for this secret (32 random bytes or more is recommended).
    pub fn new(secret: impl AsRef<[u8]>) -> Result<Self, SignerError> {
        let secret = secret.as_ref();
        if secret.is_empty() {
            return Err(SignerError::EmptySecret);
        }
        Ok(Self { key: secret.into(), signature_field: false })
    }

    /// Also write the AI SDK's separate `signature` field (for clients from
    /// ai@6.0.231 on; older ones reject unknown keys).
    pub fn with_signature_field(mut self, enabled: bool) -> Self {
        self.signature_field = enabled;
        self
    }

    /// Issues a signed approval id for a call; `nonce` makes it unique.
    pub fn issue(&self, nonce: &str, tool_call_id: &str, tool_name: &str, input: &Value) -> IssuedApproval {
        let digest = input_digest(input);
        let unsigned = format!("{APPROVAL_ID_PREFIX}{nonce}");
        let sig = self.sign(&payload(TOOLGATE_DOMAIN, &unsigned, tool_call_id, tool_name, &digest));
        let approval_id = format!("{unsigned}.{sig}");
        let signature = self
            .signature_field
            .then(|| self.sign(&payload(AI_SDK_DOMAIN, &approval_id, tool_call_id, tool_name, &digest)));
        IssuedApproval { approval_id, signature }
    }

    /// Checks that `request` was issued by this signer for exactly this call:
    /// the signature in the approval id if it has one, else the separate
    /// `signature` field.
    pub fn verify(
        &self,
        request: &ToolApprovalRequestPart,
        tool_name: &str,
        input: &Value,
    ) -> Result<(), SignatureError> {
        let digest = input_digest(input);
        if let Some((unsigned, sig)) = split_signed_id(&request.approval_id) {
            let message = payload(TOOLGATE_DOMAIN, unsigned, &request.tool_call_id, tool_name, &digest);
            return if self.check(&message, sig) { Ok(()) } else { Err(SignatureError::Invalid) };
        }
        let Some(sig) = request.signature.as_deref() else {
            return Err(SignatureError::Missing);
        };
        let v1 = payload(AI_SDK_DOMAIN, &request.approval_id, &request.tool_call_id, tool_name, &digest);
        if self.check(&v1, sig) {
            return Ok(());
        }
        let fields = [request.approval_id.as_str(), request.tool_call_id.as_str(), tool_name];
        if fields.iter().all(|field| !field.contains('\n')) {
            let legacy = format!("{}\n{}\n{}\n{}", fields[0], fields[1], fields[2], digest);
            if self.check(legacy.as_bytes(), sig) {
                return Ok(());
            }
        }
        Err(SignatureError::Invalid)
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC accepts keys of any length, and the secret is never empty.
        <HmacSha256 as KeyInit>::new_from_slice(&self.key).expect("HMAC takes keys of any length")
    }

    fn sign(&self, message: &[u8]) -> String {
        let mut mac = self.mac();
        mac.update(message);
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    }

    fn check(&self, message: &[u8], sig: &str) -> bool {
        let Ok(sig) = decode_base64url(sig) else {
            return false;
        };
        let mut mac = self.mac();
        mac.update(message);
        mac.verify_slice(&sig).is_ok()
    }
}

/// base64url(SHA-256(canonical JSON of `input`)), as the AI SDK computes it.
pub fn input_digest(input: &Value) -> String {
    // A serde_json::Value always has a canonical form (no NaN or infinities).
    let canonical = serde_json_canonicalizer::to_string(input).unwrap_or_else(|_| input.to_string());
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

/// Splits `apr_<nonce>.<sig>` into its unsigned part and signature.
fn split_signed_id(approval_id: &str) -> Option<(&str, &str)> {
    let (unsigned, sig) = approval_id.rsplit_once('.')?;
    (unsigned.starts_with(APPROVAL_ID_PREFIX) && !sig.is_empty()).then_some((unsigned, sig))
}

fn payload(domain: &str, approval_id: &str, tool_call_id: &str, tool_name: &str, digest: &str) -> Vec<u8> {
    serde_json::to_vec(&[domain, approval_id, tool_call_id, tool_name, digest]).unwrap_or_default()
}

/// Decodes base64url exactly as issued: no padding, no other spelling of the same bytes,
/// so an approval id has one valid form.
fn decode_base64url(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    URL_SAFE_NO_PAD.decode(text)
}

/// A fresh unsigned approval id, `apr_<nonce>`.
pub(crate) fn unsigned_approval_id(nonce: &str) -> String {
    format!("{APPROVAL_ID_PREFIX}{nonce}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(approval_id: &str, tool_call_id: &str, signature: Option<String>) -> ToolApprovalRequestPart {
        ToolApprovalRequestPart { approval_id: approval_id.into(), tool_call_id: tool_call_id.into(), signature }
    }

    #[test]
    fn digest_ignores_key_order() {
        assert_eq!(
            input_digest(&json!({"a": 1, "b": {"x": [1, 2], "y": null}})),
            input_digest(&json!({"b": {"y": null, "x": [1, 2]}, "a": 1}))
        );
        assert_ne!(input_digest(&json!({"a": 1})), input_digest(&json!({"a": 2})));
    }

    #[test]
    fn digest_matches_the_ai_sdk_canonical_form() {
        // sha256 of `{"a":1,"b":"x"}`, base64url without padding.
        let expected = URL_SAFE_NO_PAD.encode(Sha256::digest(br#"{"a":1,"b":"x"}"#));
        assert_eq!(input_digest(&json!({"b": "x", "a": 1.0})), expected);
    }

    #[test]
    fn verifies_the_ai_sdk_field_in_both_payload_forms() {
        let signer = ApprovalSigner::new("secret").unwrap();
        let input = json!({"path": "a"});
        let digest = input_digest(&input);
        let v1 = signer.sign(&payload(AI_SDK_DOMAIN, "appr-1", "call-1", "delete_file", &digest));
        assert_eq!(signer.verify(&request("appr-1", "call-1", Some(v1)), "delete_file", &input), Ok(()));
        let legacy = signer.sign(format!("appr-1\ncall-1\ndelete_file\n{digest}").as_bytes());
        assert_eq!(signer.verify(&request("appr-1", "call-1", Some(legacy.clone())), "delete_file", &input), Ok(()));
        assert_eq!(
            signer.verify(&request("appr-1", "call-2", Some(legacy)), "delete_file", &input),
            Err(SignatureError::Invalid)
        );
        assert_eq!(
            signer.verify(&request("appr-1", "call-1", None), "delete_file", &input),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            signer.verify(&request("appr-1", "call-1", Some("%%%".into())), "delete_file", &input),
            Err(SignatureError::Invalid)
        );
    }

    #[test]
    fn an_approval_id_has_one_valid_spelling() {
        let signer = ApprovalSigner::new("secret").unwrap();
        let input = json!({"path": "a"});
        let id = signer.issue("n1", "call-1", "delete_file", &input).approval_id;
        assert_eq!(signer.verify(&request(&id, "call-1", None), "delete_file", &input), Ok(()));
        for variant in [format!("{id}="), format!("{id}=="), format!("{id} "), id.replacen('.', "..", 1)] {
            assert_eq!(
                signer.verify(&request(&variant, "call-1", None), "delete_file", &input),
                Err(SignatureError::Invalid),
                "{variant}"
            );
        }
    }

    #[test]
    fn empty_secret_is_refused() {
        assert_eq!(ApprovalSigner::new("").unwrap_err(), SignerError::EmptySecret);
    }
}
