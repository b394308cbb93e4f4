//! The tokens file (`--tokens-file`): bearer tokens, each naming a principal.
//!
//! The contract:
//! - the file is a JSON object `{"TOKEN": "principal", "sha256:HEX": "principal", ...}`:
//!   each key is a token itself, or `sha256:` and the token's SHA-256 digest
//!   in hex (so that the file holds no usable secret); each value a
//!   principal, a valid name ([`toolgate::ledger::check_principal`]: never
//!   `group:` or `link:`);
//! - either way only digests are kept ([`TokenTable`]), and a lookup compares
//!   the presented token's digest with every entry, each in constant time;
//! - a file that other users of the machine may read is used, with a warning.

use std::collections::HashMap;
use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use toolgate::ledger::{NameError, check_principal};

/// The prefix of a tokens-file key that is a token's SHA-256 digest in hex.
pub const SHA256_PREFIX: &str = "sha256:";

/// Bearer tokens by their SHA-256 digests, each naming a principal.
#[derive(Clone, Default)]
pub struct TokenTable {
    entries: Vec<([u8; 32], String)>,
}

impl std::fmt::Debug for TokenTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenTable").field("tokens", &self.entries.len()).finish_non_exhaustive()
    }
}

/// Why an entry of a tokens file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenEntryError {
    /// The token or the principal is empty.
    #[error("empty token or principal (principal `{principal}`)")]
    Empty {
        /// The principal (maybe empty).
        principal: String,
    },
    /// The principal is not a valid name (a `group:` or `link:` one, a control character...).
    #[error(transparent)]
    Principal(#[from] NameError),
    /// A `sha256:` key is not 64 hex digits.
    #[error("the digest for principal `{principal}` must be 64 hex digits after `sha256:`: {detail}")]
    Digest {
        /// The principal it names.
        principal: String,
        /// What is wrong with the digest.
        detail: String,
    },
}

impl TokenTable {
    /// A table from file entries: each key is a token, or `sha256:` and the
    /// token's digest in hex; each value the principal it names.
    pub fn from_entries(entries: HashMap<String, String>) -> Result<Self, TokenEntryError> {
        let mut table = Vec::with_capacity(entries.len());
        for (key, principal) in entries {
            if key.is_empty() || principal.is_empty() {
                return Err(TokenEntryError::Empty { principal });
            }
            check_principal(&principal)?;
            let digest = match key.strip_prefix(SHA256_PREFIX) {
                Some(hex_digest) => {
                    let mut digest = [0u8; 32];
                    if let Err(error) = hex::decode_to_slice(hex_digest, &mut digest) {
                        return Err(TokenEntryError::Digest { principal, detail: error.to_string() });
                    }
                    digest
                }
                None => sha256(&key),
            };
            table.push((digest, principal));
        }
        Ok(Self { entries: table })
    }

    /// Reads a tokens file (see the module docs). Warns when other users of
    /// the machine may read it.
    pub fn read_file(path: &Path) -> Result<Self, TokensError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TokensError::Read { path: shown.clone(), source })?;
        let tokens: HashMap<String, String> = serde_json::from_str(&text)
            .map_err(|error| TokensError::Invalid { path: shown.clone(), detail: error.to_string() })?;
        let table = Self::from_entries(tokens).map_err(|source| TokensError::Entry { path: shown, source })?;
        warn_if_shared(path);
        Ok(table)
    }

    /// The principal `token` names: its digest is compared with every entry,
    /// each comparison in constant time.
    pub fn principal(&self, token: &str) -> Option<&str> {
        let digest = sha256(token);
        let mut found = None;
        for (entry, principal) in &self.entries {
            if bool::from(entry.ct_eq(&digest)) {
                found = Some(principal.as_str());
            }
        }
        found
    }
}

fn sha256(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Why a tokens file cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokensError {
    /// The file cannot be read.
    #[error("cannot read the tokens file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a JSON object of token → principal strings.
    #[error("the tokens file {path} must be a JSON object mapping each token to a principal: {detail}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// An entry of the file cannot be used.
    #[error("the tokens file {path} must be a JSON object mapping each token to a principal: {source}")]
    Entry {
        /// The file.
        path: String,
        /// What is wrong with the entry.
        source: TokenEntryError,
    },
}

/// Warns when the group or other users may read the tokens file.
#[cfg(unix)]
fn warn_if_shared(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else { return };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        tracing::warn!(
            "the tokens file {} can be read by other users of this machine (mode {mode:o}): run `chmod 600 {}`, or store digests (`\"sha256:HEX\": \"principal\"`)",
            path.display(),
            path.display()
        );
    }
}

#[cfg(not(unix))]
fn warn_if_shared(_path: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(&str, &str)]) -> Result<TokenTable, String> {
        TokenTable::from_entries(entries.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())
            .map_err(|error| error.to_string())
    }

    #[test]
    fn plain_and_hashed_tokens_name_their_principals() {
        let digest = hex::encode(sha256("bobs-secret"));
        let tokens = table(&[("alices-secret", "alice"), (&format!("sha256:{digest}"), "bob")]).unwrap();
        assert_eq!(tokens.principal("alices-secret"), Some("alice"));
        assert_eq!(tokens.principal("bobs-secret"), Some("bob"));
        assert_eq!(tokens.principal(&format!("sha256:{digest}")), None, "a digest is not a token");
        assert_eq!(tokens.principal("alices-secreT"), None);
        assert_eq!(tokens.principal(""), None);
        assert!(!format!("{tokens:?}").contains("alices-secret"), "Debug shows no token");
    }

    #[test]
    fn a_tokens_file_naming_a_group_or_link_principal_is_refused() {
        assert!(table(&[("t", "group:finance")]).unwrap_err().contains("a group"));
        assert!(table(&[("t", "link:email")]).unwrap_err().contains("link"));
    }

    #[test]
    fn bad_entries_are_named() {
        assert!(table(&[("sha256:abc", "bob")]).unwrap_err().contains("`bob`"));
        assert!(table(&[("sha256:", "bob")]).is_err());
        assert!(table(&[("", "bob")]).unwrap_err().contains("empty token"));
        assert!(table(&[("token", "")]).unwrap_err().contains("empty token"));
    }

    #[test]
    fn a_tokens_file_is_read_and_its_bad_entries_named() {
        let dir = std::env::temp_dir().join(format!("toolgate-tokens-{}-{}", std::process::id(), line!()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.json");
        std::fs::write(&good, r#"{"alices-secret": "alice"}"#).unwrap();
        assert_eq!(TokenTable::read_file(&good).unwrap().principal("alices-secret"), Some("alice"));
        let bad = dir.join("bad.json");
        std::fs::write(&bad, r#"{"t": "group:finance"}"#).unwrap();
        let error = TokenTable::read_file(&bad).unwrap_err();
        assert!(matches!(error, TokensError::Entry { .. }), "{error}");
        assert!(error.to_string().contains("mapping each token to a principal"), "{error}");
        assert!(matches!(TokenTable::read_file(&dir.join("none.json")), Err(TokensError::Read { .. })));
        std::fs::write(&bad, "[]").unwrap();
        assert!(matches!(TokenTable::read_file(&bad), Err(TokensError::Invalid { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
