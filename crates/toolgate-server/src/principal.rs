//! Who sent a request: the principal recorded with every approval answer.
//!
//! Two sources, configured on the server:
//! - a header set by a trusted proxy in front of toolgate (`--principal-header X-User`):
//!   its value is the principal; a request without it has none;
//! - a bearer-token mapping (`--tokens-file`): `Authorization: Bearer TOKEN`
//!   names the principal, and a request with a missing or unknown token is
//!   refused with 401 before anything runs. The file may hold each token
//!   itself or its SHA-256 digest (`"sha256:HEX"`), so that it holds no usable
//!   secret; either way the server keeps only digests, and a lookup compares
//!   the presented token's digest with every entry in constant time.

use std::collections::HashMap;
use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use axum::http::header::{AUTHORIZATION, HeaderName};
use axum::http::{HeaderMap, StatusCode};

use crate::error::ApiError;

/// Where the principal of a request comes from.
#[derive(Debug, Clone, Default)]
pub enum PrincipalSource {
    /// Requests carry no principal.
    #[default]
    None,
    /// The value of this header.
    Header(HeaderName),
    /// The principal a bearer token maps to; other requests are refused.
    Tokens(TokenTable),
}

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

impl TokenTable {
    /// A table from file entries: each key is a token, or `sha256:` and the
    /// token's digest in hex; each value the principal it names.
    pub fn from_entries(entries: HashMap<String, String>) -> Result<Self, String> {
        let mut table = Vec::with_capacity(entries.len());
        for (key, principal) in entries {
            if key.is_empty() || principal.is_empty() {
                return Err(format!("empty token or principal (principal `{principal}`)"));
            }
            let digest = match key.strip_prefix(SHA256_PREFIX) {
                Some(hex_digest) => {
                    let mut digest = [0u8; 32];
                    hex::decode_to_slice(hex_digest, &mut digest).map_err(|error| {
                        format!("the digest for principal `{principal}` must be 64 hex digits after `sha256:`: {error}")
                    })?;
                    digest
                }
                None => sha256(&key),
            };
            table.push((digest, principal));
        }
        Ok(Self { entries: table })
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
}

impl PrincipalSource {
    /// True when requests carry a principal (a header or tokens are configured).
    pub fn is_configured(&self) -> bool {
        !matches!(self, Self::None)
    }

    /// Reads a tokens file: a JSON object `{"TOKEN": "principal", "sha256:HEX": "principal", ...}`.
    /// Warns when other users of the machine may read it.
    pub fn tokens_file(path: &Path) -> Result<Self, TokensError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TokensError::Read { path: shown.clone(), source })?;
        let tokens: HashMap<String, String> = serde_json::from_str(&text)
            .map_err(|error| TokensError::Invalid { path: shown.clone(), detail: error.to_string() })?;
        let table = TokenTable::from_entries(tokens).map_err(|detail| TokensError::Invalid { path: shown, detail })?;
        warn_if_shared(path);
        Ok(Self::Tokens(table))
    }

    /// The principal of a request, or 401 when tokens are required and this one is missing or unknown.
    pub fn principal(&self, headers: &HeaderMap) -> Result<Option<String>, ApiError> {
        match self {
            Self::None => Ok(None),
            Self::Header(name) => Ok(headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::trim)
                .filter(|value| !value.is_empty())
                .map(str::to_owned)),
            Self::Tokens(tokens) => {
                let token = headers
                    .get(AUTHORIZATION)
                    .and_then(|value| value.to_str().ok())
                    .and_then(|value| value.strip_prefix("Bearer "))
                    .map(str::trim);
                match token.and_then(|token| tokens.principal(token)) {
                    Some(principal) => Ok(Some(principal.to_owned())),
                    None => Err(ApiError::new(
                        StatusCode::UNAUTHORIZED,
                        "unauthorized",
                        "a bearer token from the server's tokens file is required (Authorization: Bearer TOKEN)",
                    )),
                }
            }
        }
    }
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
    fn bad_entries_are_named() {
        assert!(table(&[("sha256:abc", "bob")]).unwrap_err().contains("`bob`"));
        assert!(table(&[("sha256:", "bob")]).is_err());
        assert!(table(&[("", "bob")]).unwrap_err().contains("empty token"));
        assert!(table(&[("token", "")]).unwrap_err().contains("empty token"));
    }
}
