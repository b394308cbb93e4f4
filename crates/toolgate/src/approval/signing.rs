//! HMAC-SHA256 signatures that bind an approval to one exact tool call.
//!
//! A signed approval id has the form `apr_<nonce>.<sig>`, where `sig` is
//! base64url (no padding) of HMAC-SHA256 over the UTF-8 JSON array
//! `["toolgate-approval-v1", "apr_<nonce>", toolCallId, toolName, inputDigest]`
//! and `inputDigest` is base64url(SHA-256(canonical JSON of the input)), see
//! [`canonical_json`]: keys sorted, so key order never matters, and integers
//! exact, so no two inputs a handler can tell apart share a digest.
//!
//! **Held calls.** When the engine holds a step's other calls until the
//! decision (`hold_batch_for_approval`), the array gets a sixth element, the
//! digest of the held calls: base64url(SHA-256 of the JSON array of
//! `[toolCallId, toolName, inputDigest]` triples, sorted by call id). A held
//! call therefore runs only when a signature the server issued names it, and
//! a call a client adds next to a signed approval is not covered by it.
//!
//! The AI SDK's separate `signature` field is also written (when enabled) and
//! read: its v1 payload is `["ai-sdk-tool-approval-v1", approvalId,
//! toolCallId, toolName, inputDigest]`; the older newline-joined payload is
//! accepted on verification when no field contains a newline. It covers no
//! held calls.
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

use super::canonical::{CanonicalError, canonical_json};

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
    /// The signature does not match the approval, call, tool, input and held calls.
    #[error("invalid signature")]
    Invalid,
    /// The input holds a number without an exact canonical form, so nothing can be bound to it.
    #[error("the input has a number without an exact canonical form")]
    AmbiguousInput,
}

/// A tool call as a signature binds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignedCall<'a> {
    /// The call's id.
    pub tool_call_id: &'a str,
    /// The tool it calls.
    pub tool_name: &'a str,
    /// The input as the model wrote it.
    pub input: &'a Value,
}

/// The calls held beside an approval request, as a signature binds them:
/// computed once per step (or per message on verification), whatever the
/// number of requests that share them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldCalls {
    digest: Option<String>,
}

impl HeldCalls {
    /// No calls held.
    pub fn none() -> Self {
        Self::default()
    }

    /// These calls held (order does not matter). Fails when an input has no canonical form.
    pub fn of(calls: &[SignedCall<'_>]) -> Result<Self, CanonicalError> {
        Ok(Self { digest: held_digest(calls)? })
    }
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

    /// Issues a signed approval id for `call`, covering the calls `held`
    /// until the decision; `nonce` makes it unique. Fails when an input has
    /// no canonical form.
    pub fn issue(&self, nonce: &str, call: SignedCall<'_>, held: &HeldCalls) -> Result<IssuedApproval, CanonicalError> {
        let digest = input_digest(call.input)?;
        let unsigned = format!("{APPROVAL_ID_PREFIX}{nonce}");
        let message = toolgate_payload(&unsigned, call.tool_call_id, call.tool_name, &digest, held.digest.as_deref());
        let approval_id = format!("{unsigned}.{}", self.sign(&message));
        let signature = self
            .signature_field
            .then(|| self.sign(&payload(&[AI_SDK_DOMAIN, &approval_id, call.tool_call_id, call.tool_name, &digest])));
        Ok(IssuedApproval { approval_id, signature })
    }

    /// Checks that `request` was issued by this signer for exactly this call
    /// (the request's call id, `tool_name`, `input`) and exactly these held
    /// calls: the signature in the approval id if it has one, else the
    /// separate `signature` field (which covers no held calls).
    pub fn verify(
        &self,
        request: &ToolApprovalRequestPart,
        tool_name: &str,
        input: &Value,
        held: &HeldCalls,
    ) -> Result<(), SignatureError> {
        let digest = input_digest(input).map_err(|_| SignatureError::AmbiguousInput)?;
        if let Some((unsigned, sig)) = split_signed_id(&request.approval_id) {
            let message = toolgate_payload(unsigned, &request.tool_call_id, tool_name, &digest, held.digest.as_deref());
            return if self.check(&message, sig) { Ok(()) } else { Err(SignatureError::Invalid) };
        }
        let Some(sig) = request.signature.as_deref() else {
            return Err(SignatureError::Missing);
        };
        if held.digest.is_some() {
            return Err(SignatureError::Invalid);
        }
        let v1 = payload(&[AI_SDK_DOMAIN, &request.approval_id, &request.tool_call_id, tool_name, &digest]);
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

/// base64url(SHA-256(canonical JSON of `input`)); for inputs whose integers
/// fit a double this is exactly the AI SDK's digest.
pub fn input_digest(input: &Value) -> Result<String, CanonicalError> {
    Ok(canonical_digest(&canonical_json(input)?))
}

/// The [`input_digest`] of an input already in canonical form ([`canonical_json`]).
pub fn canonical_digest(canonical: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

/// The digest of the held calls, `None` when there are none.
fn held_digest(held: &[SignedCall<'_>]) -> Result<Option<String>, CanonicalError> {
    if held.is_empty() {
        return Ok(None);
    }
    let mut triples = held
        .iter()
        .map(|call| Ok([call.tool_call_id.to_owned(), call.tool_name.to_owned(), input_digest(call.input)?]))
        .collect::<Result<Vec<_>, CanonicalError>>()?;
    triples.sort();
    let json = serde_json::to_vec(&triples).unwrap_or_default();
    Ok(Some(URL_SAFE_NO_PAD.encode(Sha256::digest(json))))
}

fn toolgate_payload(
    unsigned_id: &str,
    tool_call_id: &str,
    tool_name: &str,
    digest: &str,
    held_digest: Option<&str>,
) -> Vec<u8> {
    match held_digest {
        None => payload(&[TOOLGATE_DOMAIN, unsigned_id, tool_call_id, tool_name, digest]),
        Some(held) => payload(&[TOOLGATE_DOMAIN, unsigned_id, tool_call_id, tool_name, digest, held]),
    }
}

/// Splits `apr_<nonce>.<sig>` into its unsigned part and signature.
fn split_signed_id(approval_id: &str) -> Option<(&str, &str)> {
    let (unsigned, sig) = approval_id.rsplit_once('.')?;
    (unsigned.starts_with(APPROVAL_ID_PREFIX) && !sig.is_empty()).then_some((unsigned, sig))
}

fn payload(fields: &[&str]) -> Vec<u8> {
    serde_json::to_vec(fields).unwrap_or_default()
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

    fn call<'a>(tool_call_id: &'a str, tool_name: &'a str, input: &'a Value) -> SignedCall<'a> {
        SignedCall { tool_call_id, tool_name, input }
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
        assert_eq!(input_digest(&json!({"b": "x", "a": 1.0})).unwrap(), expected);
    }

    #[test]
    fn integers_beyond_two_to_the_53_are_bound_exactly() {
        let signer = ApprovalSigner::new("secret").unwrap();
        let issued = json!({"amount": 9_007_199_254_740_993_u64});
        let id = signer.issue("n1", call("c", "transfer_money", &issued), &HeldCalls::none()).unwrap().approval_id;
        let neighbour = json!({"amount": 9_007_199_254_740_992_u64});
        assert_eq!(signer.verify(&request(&id, "c", None), "transfer_money", &issued, &HeldCalls::none()), Ok(()));
        assert_eq!(
            signer.verify(&request(&id, "c", None), "transfer_money", &neighbour, &HeldCalls::none()),
            Err(SignatureError::Invalid)
        );
        let ambiguous = json!({"amount": 1e20});
        assert!(signer.issue("n2", call("c", "transfer_money", &ambiguous), &HeldCalls::none()).is_err());
        assert_eq!(
            signer.verify(&request(&id, "c", None), "transfer_money", &ambiguous, &HeldCalls::none()),
            Err(SignatureError::AmbiguousInput)
        );
    }

    #[test]
    fn held_calls_are_bound_as_a_set() {
        let signer = ApprovalSigner::new("secret").unwrap();
        let (gated, weather, small) = (json!({"path": "a"}), json!({"city": "Paris"}), json!({"amount": 5}));
        let calls = [call("w", "get_weather", &weather), call("t", "transfer_money", &small)];
        let held = |calls: &[SignedCall<'_>]| HeldCalls::of(calls).unwrap();
        let id = signer.issue("n1", call("d", "delete_file", &gated), &held(&calls)).unwrap().approval_id;
        let req = request(&id, "d", None);
        assert_eq!(signer.verify(&req, "delete_file", &gated, &held(&calls)), Ok(()));
        let reordered = [calls[1], calls[0]];
        assert_eq!(signer.verify(&req, "delete_file", &gated, &held(&reordered)), Ok(()), "order does not matter");
        let injected = json!({"amount": 1000, "to": "Eve"});
        let more = [calls[0], calls[1], call("x", "transfer_money", &injected)];
        assert_eq!(signer.verify(&req, "delete_file", &gated, &held(&more)), Err(SignatureError::Invalid));
        assert_eq!(signer.verify(&req, "delete_file", &gated, &held(&calls[..1])), Err(SignatureError::Invalid));
        assert_eq!(signer.verify(&req, "delete_file", &gated, &HeldCalls::none()), Err(SignatureError::Invalid));
        let changed = json!({"amount": 6});
        let tampered = [calls[0], call("t", "transfer_money", &changed)];
        assert_eq!(signer.verify(&req, "delete_file", &gated, &held(&tampered)), Err(SignatureError::Invalid));

        // An approval issued with nothing held covers nothing held.
        let plain = signer.issue("n2", call("d", "delete_file", &gated), &HeldCalls::none()).unwrap().approval_id;
        let plain = request(&plain, "d", None);
        assert_eq!(signer.verify(&plain, "delete_file", &gated, &held(&calls)), Err(SignatureError::Invalid));
    }

    #[test]
    fn verifies_the_ai_sdk_field_in_both_payload_forms() {
        let signer = ApprovalSigner::new("secret").unwrap();
        let input = json!({"path": "a"});
        let digest = input_digest(&input).unwrap();
        let v1 = signer.sign(&payload(&[AI_SDK_DOMAIN, "appr-1", "call-1", "delete_file", &digest]));
        assert_eq!(
            signer.verify(&request("appr-1", "call-1", Some(v1.clone())), "delete_file", &input, &HeldCalls::none()),
            Ok(())
        );
        let weather = json!({"city": "Paris"});
        assert_eq!(
            signer.verify(
                &request("appr-1", "call-1", Some(v1)),
                "delete_file",
                &input,
                &HeldCalls::of(&[call("w", "get_weather", &weather)]).unwrap()
            ),
            Err(SignatureError::Invalid),
            "the separate field covers no held calls"
        );
        let legacy = signer.sign(format!("appr-1\ncall-1\ndelete_file\n{digest}").as_bytes());
        assert_eq!(
            signer.verify(
                &request("appr-1", "call-1", Some(legacy.clone())),
                "delete_file",
                &input,
                &HeldCalls::none()
            ),
            Ok(())
        );
        assert_eq!(
            signer.verify(&request("appr-1", "call-2", Some(legacy)), "delete_file", &input, &HeldCalls::none()),
            Err(SignatureError::Invalid)
        );
        assert_eq!(
            signer.verify(&request("appr-1", "call-1", None), "delete_file", &input, &HeldCalls::none()),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            signer.verify(&request("appr-1", "call-1", Some("%%%".into())), "delete_file", &input, &HeldCalls::none()),
            Err(SignatureError::Invalid)
        );
    }

    #[test]
    fn an_approval_id_has_one_valid_spelling() {
        let signer = ApprovalSigner::new("secret").unwrap();
        let input = json!({"path": "a"});
        let id = signer.issue("n1", call("call-1", "delete_file", &input), &HeldCalls::none()).unwrap().approval_id;
        assert_eq!(signer.verify(&request(&id, "call-1", None), "delete_file", &input, &HeldCalls::none()), Ok(()));
        for variant in [format!("{id}="), format!("{id}=="), format!("{id} "), id.replacen('.', "..", 1)] {
            assert_eq!(
                signer.verify(&request(&variant, "call-1", None), "delete_file", &input, &HeldCalls::none()),
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
