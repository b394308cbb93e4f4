//! Who sent a request: the principal recorded with every approval answer.
//!
//! Two sources, configured on the server:
//! - a header set by a trusted proxy in front of toolgate (`--principal-header X-User`):
//!   its value is the principal; a request without it has none;
//! - a bearer-token mapping (`--tokens-file`): `Authorization: Bearer TOKEN`
//!   names the principal, and a request with a missing or unknown token is
//!   refused with 401 before anything runs.

use std::collections::HashMap;
use std::path::Path;

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
    Tokens(HashMap<String, String>),
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

    /// Reads a tokens file: a JSON object `{"TOKEN": "principal", ...}`.
    pub fn tokens_file(path: &Path) -> Result<Self, TokensError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TokensError::Read { path: shown.clone(), source })?;
        let tokens: HashMap<String, String> = serde_json::from_str(&text)
            .map_err(|error| TokensError::Invalid { path: shown.clone(), detail: error.to_string() })?;
        if let Some(empty) = tokens.iter().find(|(token, principal)| token.is_empty() || principal.is_empty()) {
            let detail = format!("empty token or principal (principal `{}`)", empty.1);
            return Err(TokensError::Invalid { path: shown, detail });
        }
        Ok(Self::Tokens(tokens))
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
                match token.and_then(|token| tokens.get(token)) {
                    Some(principal) => Ok(Some(principal.clone())),
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
