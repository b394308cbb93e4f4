//! One-time approval links: `PUBLIC_URL/a/{token}`.
//!
//! A token is `BASE64URL(claims) "." BASE64URL(HMAC-SHA256(key, BASE64URL(claims)))`,
//! the key derived from the server's approval secret under its own label.
//! The claims bind the approval, its input's digest, the decision the link
//! makes, the approval's expiry, the channel it was sent through and, for an
//! e-mail, the principal it was sent to; a random nonce makes every link
//! distinct, and its digest ([`LinkClaims::link_id`]) is what the store
//! records when the link is used, so it is used once. A token that does not
//! verify is refused whole: nothing in it is read.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use toolgate_auth::ApprovalSecret;

/// The label the link key is derived under.
const KEY_LABEL: &str = "toolgate one-time approval links v1";

/// The longest token accepted (a real one is a few hundred bytes).
const MAX_TOKEN_LEN: usize = 2048;

/// What a link decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkChoice {
    /// Approve the call.
    Approve,
    /// Deny it.
    Deny,
}

impl LinkChoice {
    /// `approve` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Deny => "deny",
        }
    }
}

/// What a link's token binds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkClaims {
    /// The approval.
    #[serde(rename = "a")]
    pub approval_id: String,
    /// Its input's digest.
    #[serde(rename = "i")]
    pub input_digest: String,
    /// What the link decides.
    #[serde(rename = "d")]
    pub choice: LinkChoice,
    /// When the link stops working (the approval's expiry), milliseconds.
    #[serde(rename = "e")]
    pub expires_at: i64,
    /// The channel it was sent through.
    #[serde(rename = "c")]
    pub channel: String,
    /// The principal an e-mail was sent to (`None`: a webhook's link, for any approver).
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// Issued by a channel with `links = "bearer"`: the link alone decides
    /// (while the channel is still configured so).
    #[serde(rename = "b", default, skip_serializing_if = "std::ops::Not::not")]
    pub bearer: bool,
    /// Random, so every link is distinct.
    #[serde(rename = "n")]
    pub nonce: String,
}

impl LinkClaims {
    /// The id its use is recorded under.
    pub fn link_id(&self) -> String {
        let encoded = serde_json::to_vec(self).unwrap_or_default();
        hex::encode(Sha256::digest(&encoded))
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// Malformed, or its signature does not verify.
    #[error("this link is not valid: it was altered or is incomplete")]
    Tampered,
}

/// Signs and verifies link tokens.
#[derive(Clone)]
pub struct LinkSigner {
    key: [u8; 32],
}

impl std::fmt::Debug for LinkSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkSigner").finish_non_exhaustive()
    }
}

impl LinkSigner {
    /// The signer of this server's links.
    pub fn new(secret: &ApprovalSecret) -> Self {
        Self { key: secret.derive_key(KEY_LABEL) }
    }

    fn mac(&self, payload: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(payload);
        mac
    }

    /// The token of these claims.
    pub fn sign(&self, claims: &LinkClaims) -> String {
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).unwrap_or_default());
        let tag = self.mac(payload.as_bytes()).finalize().into_bytes();
        format!("{payload}.{}", URL_SAFE_NO_PAD.encode(tag))
    }

    /// The claims of a token this server signed.
    pub fn verify(&self, token: &str) -> Result<LinkClaims, LinkError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(LinkError::Tampered);
        }
        let (payload, tag) = token.split_once('.').ok_or(LinkError::Tampered)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| LinkError::Tampered)?;
        self.mac(payload.as_bytes()).verify_slice(&tag).map_err(|_| LinkError::Tampered)?;
        let claims = URL_SAFE_NO_PAD.decode(payload).map_err(|_| LinkError::Tampered)?;
        serde_json::from_slice(&claims).map_err(|_| LinkError::Tampered)
    }
}

/// A fresh random nonce.
pub fn nonce() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the system random source works");
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> LinkClaims {
        LinkClaims {
            approval_id: "appr_1".into(),
            input_digest: "d".into(),
            choice: LinkChoice::Approve,
            expires_at: 10,
            channel: "mail".into(),
            principal: Some("bob".into()),
            bearer: false,
            nonce: nonce(),
        }
    }

    #[test]
    fn a_signed_token_verifies_and_any_change_is_refused() {
        let secret = ApprovalSecret::resolve(Some("secret"), std::path::Path::new("/nonexistent")).unwrap();
        let signer = LinkSigner::new(&secret);
        let token = signer.sign(&claims());
        assert_eq!(signer.verify(&token).unwrap().principal.as_deref(), Some("bob"));
        let (payload, tag) = token.split_once('.').unwrap();
        let mut forged = claims();
        forged.principal = Some("mallory".into());
        let forged_payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
        assert_eq!(signer.verify(&format!("{forged_payload}.{tag}")), Err(LinkError::Tampered));
        assert_eq!(signer.verify(&format!("{payload}.{tag}x")), Err(LinkError::Tampered));
        assert_eq!(signer.verify(payload), Err(LinkError::Tampered));
        let other =
            LinkSigner::new(&ApprovalSecret::resolve(Some("other"), std::path::Path::new("/nonexistent")).unwrap());
        assert_eq!(other.verify(&token), Err(LinkError::Tampered));
        assert_ne!(claims().link_id(), claims().link_id(), "every link is distinct");
    }
}
