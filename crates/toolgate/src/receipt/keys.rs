//! Receipt keys: the Ed25519 key a server signs with, its public half as a
//! JWK (OKP, `Ed25519`), and the key set verifiers are given (a JWKS).
//!
//! A key's `kid` is its RFC 7638 thumbprint (base64url SHA-256 of
//! `{"crv":"Ed25519","kty":"OKP","x":…}`), so the same key always has the
//! same id and two keys never share one. The private key lives in one file,
//! a private JWK written `0600` on first use ([`ReceiptKey::load_or_create`]).
//! Rotating is pointing the server at another file: the old public key stays
//! in the store's key set (verify-only), so what it signed still verifies.

use std::io::Write as _;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::ReceiptError;

/// A public key as a JWK (RFC 8037: `kty` OKP, `crv` Ed25519).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwk {
    /// Always `OKP`.
    pub kty: String,
    /// Always `Ed25519`.
    pub crv: String,
    /// The public key, base64url.
    pub x: String,
    /// The key id (its RFC 7638 thumbprint).
    pub kid: String,
    /// Always `EdDSA`.
    #[serde(default = "eddsa")]
    pub alg: String,
    /// Always `sig`.
    #[serde(default = "sig", rename = "use")]
    pub use_: String,
    /// Always `["verify"]`: a published key only checks signatures.
    #[serde(default = "verify_only")]
    pub key_ops: Vec<String>,
}

fn eddsa() -> String {
    "EdDSA".to_owned()
}

fn sig() -> String {
    "sig".to_owned()
}

fn verify_only() -> Vec<String> {
    vec!["verify".to_owned()]
}

impl Jwk {
    /// The JWK of a public key.
    pub fn of(key: &VerifyingKey) -> Self {
        let x = URL_SAFE_NO_PAD.encode(key.as_bytes());
        Self {
            kid: thumbprint(&x),
            kty: "OKP".into(),
            crv: "Ed25519".into(),
            x,
            alg: eddsa(),
            use_: sig(),
            key_ops: verify_only(),
        }
    }

    /// The key it holds, checked: an Ed25519 OKP key whose `kid` is its thumbprint.
    pub fn key(&self) -> Result<VerifyingKey, ReceiptError> {
        let bad = |why: &str| ReceiptError::BadKey { kid: self.kid.clone(), why: why.to_owned() };
        if self.kty != "OKP" || self.crv != "Ed25519" {
            return Err(bad("not an OKP Ed25519 key"));
        }
        let bytes = URL_SAFE_NO_PAD.decode(&self.x).map_err(|_| bad("`x` is not base64url"))?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| bad("`x` is not 32 bytes"))?;
        if thumbprint(&self.x) != self.kid {
            return Err(bad("`kid` is not the key's thumbprint"));
        }
        VerifyingKey::from_bytes(&bytes).map_err(|_| bad("`x` is not a point on the curve"))
    }
}

/// The RFC 7638 thumbprint of an Ed25519 key given by its `x`.
fn thumbprint(x: &str) -> String {
    let members = format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{x}"}}"#);
    URL_SAFE_NO_PAD.encode(Sha256::digest(members.as_bytes()))
}

/// A set of public keys (`{"keys": [...]}`), what verifiers are given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwks {
    /// The keys, each with its `kid`.
    pub keys: Vec<Jwk>,
}

impl Jwks {
    /// The key set in this JSON text, every key checked.
    pub fn parse(text: &str) -> Result<Self, ReceiptError> {
        let set: Self = serde_json::from_str(text).map_err(|error| ReceiptError::BadKeySet(error.to_string()))?;
        for key in &set.keys {
            key.key()?;
        }
        Ok(set)
    }

    /// The key with this id, checked.
    pub fn find(&self, kid: &str) -> Option<VerifyingKey> {
        self.keys.iter().find(|key| key.kid == kid).and_then(|key| key.key().ok())
    }

    /// Every usable key, decoded once, by id.
    pub(crate) fn ring(&self) -> KeyRing {
        KeyRing(self.keys.iter().filter_map(|key| Some((key.kid.clone(), key.key().ok()?))).collect())
    }
}

/// Decoded keys by id (what a verifier checks many signatures with).
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyRing(std::collections::HashMap<String, VerifyingKey>);

impl KeyRing {
    /// The key with this id.
    pub(crate) fn get(&self, kid: &str) -> Option<&VerifyingKey> {
        self.0.get(kid)
    }
}

/// The private JWK as stored in the key file.
#[derive(Serialize, Deserialize)]
struct PrivateJwk {
    kty: String,
    crv: String,
    x: String,
    d: String,
    kid: String,
}

/// The key a server signs receipts and checkpoints with.
#[derive(Clone)]
pub struct ReceiptKey {
    key: SigningKey,
    public: Jwk,
}

impl std::fmt::Debug for ReceiptKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiptKey").field("kid", &self.public.kid).finish_non_exhaustive()
    }
}

impl ReceiptKey {
    /// The key with this 32-byte secret (tests; [`Self::generate`] otherwise).
    pub fn from_secret(secret: [u8; 32]) -> Self {
        let key = SigningKey::from_bytes(&secret);
        let public = Jwk::of(&key.verifying_key());
        Self { key, public }
    }

    /// A fresh random key.
    pub fn generate() -> Result<Self, ReceiptError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|error| ReceiptError::Io(format!("no randomness: {error}")))?;
        Ok(Self::from_secret(secret))
    }

    /// Its id.
    pub fn kid(&self) -> &str {
        &self.public.kid
    }

    /// Its public half.
    pub fn public(&self) -> &Jwk {
        &self.public
    }

    /// The Ed25519 signature of `message`, base64url.
    pub fn sign(&self, message: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(self.key.sign(message).to_bytes())
    }

    /// The key in this key file (a private JWK).
    pub fn load(path: &Path) -> Result<Self, ReceiptError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ReceiptError::Io(format!("cannot read receipt key {}: {error}", path.display())))?;
        let bad = |why: &str| ReceiptError::BadKey { kid: path.display().to_string(), why: why.to_owned() };
        let stored: PrivateJwk = serde_json::from_str(&text).map_err(|_| bad("not a private JWK"))?;
        if stored.kty != "OKP" || stored.crv != "Ed25519" {
            return Err(bad("not an OKP Ed25519 key"));
        }
        let secret = URL_SAFE_NO_PAD.decode(&stored.d).map_err(|_| bad("`d` is not base64url"))?;
        let secret: [u8; 32] = secret.try_into().map_err(|_| bad("`d` is not 32 bytes"))?;
        let key = Self::from_secret(secret);
        if key.public.x != stored.x {
            return Err(bad("`x` is not the public half of `d`"));
        }
        Ok(key)
    }

    /// The key in this file, created (`0600`, a fresh key) when there is none.
    pub fn load_or_create(path: &Path) -> Result<Self, ReceiptError> {
        if path.exists() {
            return Self::load(path);
        }
        let key = Self::generate()?;
        let stored = PrivateJwk {
            kty: "OKP".into(),
            crv: "Ed25519".into(),
            x: key.public.x.clone(),
            d: URL_SAFE_NO_PAD.encode(key.key.to_bytes()),
            kid: key.public.kid.clone(),
        };
        let text = serde_json::to_string_pretty(&stored).map_err(|error| ReceiptError::Io(error.to_string()))?;
        let io =
            |error: std::io::Error| ReceiptError::Io(format!("cannot write receipt key {}: {error}", path.display()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(path) {
            Ok(mut file) => file.write_all(text.as_bytes()).map_err(io)?,
            // Another process created it first: use theirs.
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => return Self::load(path),
            Err(error) => return Err(io(error)),
        }
        Ok(key)
    }
}

/// Checks `signature` (base64url) of `message` under `key`.
pub(crate) fn verify(key: &VerifyingKey, message: &[u8], signature: &str) -> bool {
    let Ok(bytes) = URL_SAFE_NO_PAD.decode(signature) else {
        return false;
    };
    let Ok(bytes) = <[u8; 64]>::try_from(bytes) else {
        return false;
    };
    key.verify_strict(message, &Signature::from_bytes(&bytes)).is_ok()
}
