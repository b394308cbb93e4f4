//! Where the approval signing secret comes from.
//!
//! In order: an explicit secret (`--approval-secret`), the environment
//! (`TOOLGATE_APPROVAL_SECRET`), or a file in the data directory, created once
//! with 32 random bytes (mode 0600 on Unix) so restarts keep pending
//! approvals valid.

use std::path::{Path, PathBuf};

use toolgate::approval::{ApprovalSigner, SignerError};

/// The environment variable holding the secret.
pub const SECRET_ENV: &str = "TOOLGATE_APPROVAL_SECRET";
const SECRET_FILE: &str = "approval-secret";

/// A secret that cannot be had.
#[derive(Debug, thiserror::Error)]
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
        Ok(Self { signer: ApprovalSigner::new(text)?, source })
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
