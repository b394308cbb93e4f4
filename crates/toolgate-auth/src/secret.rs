//! Where the approval signing secret comes from.
//!
//! In order: an explicit secret (`--approval-secret`), the environment
//! (`TOOLGATE_APPROVAL_SECRET`), or a file in the data directory, created once
//! with 32 random bytes (mode 0600 on Unix) so restarts keep pending
//! approvals valid.
//!
//! Other keys a server needs (the OpenID Connect session cookies, see
//! [`crate::oidc`]) are derived from the secret with HMAC-SHA256 under a label
//! of their own ([`ApprovalSecret::derive_key`]), so the raw secret signs
//! approvals only.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use toolgate::approval::{ApprovalSigner, SignerError};

/// The environment variable holding the secret.
pub const SECRET_ENV: &str = "TOOLGATE_APPROVAL_SECRET";
const SECRET_FILE: &str = "approval-secret";

/// A secret that cannot be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The secret file cannot be read or written.
    #[error("approval secret file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The secret cannot sign approvals (it is empty: "the approval secret is empty").
    #[error(transparent)]
    Signer(#[from] SignerError),
    /// The system random source failed.
    #[error("cannot generate an approval secret: {0}")]
    Random(String),
}

/// Where the secret came from, for the startup log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretSource {
    /// Given explicitly.
    Explicit,
    /// From `TOOLGATE_APPROVAL_SECRET`.
    Environment,
    /// Read from this file.
    File(PathBuf),
    /// Generated into this file.
    Generated(PathBuf),
}

/// The approval signing secret, held as the signer built from it.
#[derive(Clone)]
pub struct ApprovalSecret {
    signer: ApprovalSigner,
    source: SecretSource,
    /// The secret itself, for [`ApprovalSecret::derive_key`].
    secret: Arc<[u8]>,
}

impl std::fmt::Debug for ApprovalSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalSecret").field("source", &self.source).finish_non_exhaustive()
    }
}

impl ApprovalSecret {
    /// Resolves the secret: `explicit`, else the environment, else the file in `data_dir`.
    pub fn resolve(explicit: Option<&str>, data_dir: &Path) -> Result<Self, SecretError> {
        Self::resolve_with(explicit, std::env::var(SECRET_ENV).ok().as_deref(), data_dir)
    }

    /// Resolves the secret like [`ApprovalSecret::resolve`], with `env_value`
    /// standing for the value of `TOOLGATE_APPROVAL_SECRET` (`None`: unset).
    pub fn resolve_with(explicit: Option<&str>, env_value: Option<&str>, data_dir: &Path) -> Result<Self, SecretError> {
        if let Some(secret) = explicit {
            return Self::from_text(secret, SecretSource::Explicit);
        }
        if let Some(secret) = env_value {
            return Self::from_text(secret, SecretSource::Environment);
        }
        let path = data_dir.join(SECRET_FILE);
        let io = |source| SecretError::Io { path: path.display().to_string(), source };
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::from_text(text.trim(), SecretSource::File(path.clone())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let mut bytes = [0u8; 32];
                getrandom::fill(&mut bytes).map_err(|e| SecretError::Random(e.to_string()))?;
                let text: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                create_private_dir(data_dir).map_err(io)?;
                write_private(&path, &text).map_err(io)?;
                Self::from_text(&text, SecretSource::Generated(path.clone()))
            }
            Err(error) => Err(io(error)),
        }
    }

    fn from_text(text: &str, source: SecretSource) -> Result<Self, SecretError> {
        Ok(Self { signer: ApprovalSigner::new(text)?, source, secret: text.as_bytes().into() })
    }

    /// A key for another purpose than approvals: HMAC-SHA256 of `label` under
    /// the secret (e.g. `"toolgate session v1"`). Distinct labels give
    /// independent keys, and none of them reveals the secret.
    pub fn derive_key(&self, label: &str) -> [u8; 32] {
        hmac_sha256(&self.secret, &[label.as_bytes()])
    }

    /// Where it came from.
    pub fn source(&self) -> &SecretSource {
        &self.source
    }

    /// The signer using this secret (without the AI SDK `signature` field).
    pub fn signer(&self) -> &ApprovalSigner {
        &self.signer
    }
}

/// HMAC-SHA256 of the concatenated `parts` under `key` (any length).
///
/// RFC 2104 hashes a key longer than the hash's block and pads a shorter one
/// with zeros; done here, so that building the MAC has no error path.
pub(crate) fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > block.len() {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut mac = <Hmac<Sha256> as KeyInit>::new(&block.into());
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// Creates the data directory, and any missing parent, mode 0700 (as the store does).
#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.write_all(text.as_bytes())
}

#[cfg(not(unix))]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)
}

#[cfg(test)]
mod key_tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2 (a short key) and test case 6 (a key longer than the block).
        let short = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(hex::encode(short), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        let long = hmac_sha256(&[0xaa; 131], &[b"Test Using Larger Than Block-Size Key - Hash Key First"]);
        assert_eq!(hex::encode(long), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }

    #[test]
    fn derived_keys_differ_by_label_and_secret() {
        let dir = std::env::temp_dir();
        let one = ApprovalSecret::resolve_with(Some("one"), None, &dir).unwrap();
        let two = ApprovalSecret::resolve_with(Some("two"), None, &dir).unwrap();
        assert_ne!(one.derive_key("toolgate session v1"), one.derive_key("toolgate login v1"));
        assert_ne!(one.derive_key("toolgate session v1"), two.derive_key("toolgate session v1"));
        assert_eq!(one.derive_key("toolgate session v1"), one.clone().derive_key("toolgate session v1"));
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_generated_secret_and_its_new_data_directory_are_private() {
        let root = std::env::temp_dir().join(format!("toolgate-secret-{}-{}", std::process::id(), line!()));
        let data_dir = root.join("nested/data");
        let secret = ApprovalSecret::resolve_with(None, None, &data_dir).unwrap();
        let SecretSource::Generated(path) = secret.source() else { panic!("{:?}", secret.source()) };
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&data_dir), 0o700, "the data directory");
        assert_eq!(mode(path), 0o600, "the secret file");
        let again = ApprovalSecret::resolve_with(None, None, &data_dir).unwrap();
        assert!(matches!(again.source(), SecretSource::File(_)), "the second start reads it back");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
