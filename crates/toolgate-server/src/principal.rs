//! Who sent a request: the principal recorded with every approval answer.
//!
//! Four sources, one of them configured on the server:
//! - a header set by a trusted proxy in front of toolgate (`--principal-header X-User`):
//!   its value is the principal; a request without it has none. Anyone can set
//!   a header, so it is believed only from a loopback peer or from a peer in
//!   one of the `--trusted-proxy` networks: from any other peer (or one the
//!   server cannot see) a request is refused with 401 before anything runs;
//! - JWT bearer tokens from an identity provider (`--jwt-jwks`, see [`crate::jwt`]):
//!   the verified token's principal claim names the principal; a request
//!   without a valid token is refused with 401 and a `WWW-Authenticate` header
//!   naming the check that failed;
//! - a bearer-token mapping (`--tokens-file`): `Authorization: Bearer TOKEN`
//!   names the principal, and a request with a missing or unknown token is
//!   refused with 401 before anything runs. The file may hold each token
//!   itself or its SHA-256 digest (`"sha256:HEX"`), so that it holds no usable
//!   secret; either way the server keeps only digests, and a lookup compares
//!   the presented token's digest with every entry in constant time;
//! - OpenID Connect sign-in on the page (`--oidc-issuer`, see [`crate::oidc`]):
//!   a request without an `Authorization` header is identified by its
//!   session cookie (an expired or tampered one counts as none: 401); one
//!   with the header goes to the bearer-token source configured beside it
//!   (JWTs or a tokens file), and is refused with 401 when there is none.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header::{AUTHORIZATION, HeaderName};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use ipnet::IpNet;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use toolgate::ledger::{Clock, Millis, SystemClock, check_group, check_principal};

use crate::error::ApiError;
use crate::jwt::{JwtError, JwtVerifier};
use crate::oidc::OidcSignIn;

/// Where the principal of a request comes from.
#[derive(Debug, Clone, Default)]
pub enum PrincipalSource {
    /// Requests carry no principal.
    #[default]
    None,
    /// The value of this header, from a loopback peer or one of these proxies' networks.
    Header(HeaderName, Vec<IpNet>),
    /// The principal a bearer token maps to; other requests are refused.
    Tokens(TokenTable),
    /// The principal a verified JWT bearer token names; other requests are refused.
    Jwt(Arc<JwtVerifier>),
    /// The person signed in on the page with OpenID Connect (the session
    /// cookie); requests with an `Authorization` header go to `bearer`.
    Oidc {
        /// The sign-in, which checks session cookies.
        sessions: Arc<OidcSignIn>,
        /// Where bearer tokens are checked: [`PrincipalSource::Jwt`] or
        /// [`PrincipalSource::Tokens`]; [`PrincipalSource::None`] refuses them.
        bearer: Box<PrincipalSource>,
    },
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
            check_principal(&principal).map_err(|error| error.to_string())?;
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

    /// The OpenID Connect sign-in, when the page signs people in.
    pub fn oidc(&self) -> Option<&Arc<OidcSignIn>> {
        match self {
            Self::Oidc { sessions, .. } => Some(sessions),
            _ => None,
        }
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

    /// The principal of a request from `peer` (`None`: unknown), or 401 when
    /// tokens are required and this one is missing or unknown, or when a
    /// principal header comes from a peer that is not trusted to set it.
    pub async fn principal(&self, headers: &HeaderMap, peer: Option<IpAddr>) -> Result<Option<String>, ApiError> {
        Ok(self.identify(headers, peer).await?.0)
    }

    /// [`Self::principal`] with the groups the credential names (a JWT's
    /// groups claim), a session's expiry judged by the system clock.
    pub async fn identify(
        &self,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
    ) -> Result<(Option<String>, Vec<String>), ApiError> {
        self.identify_at(headers, peer, SystemClock.now()).await
    }

    /// [`Self::identify`] at `now` (milliseconds since the Unix epoch; the
    /// server's clock). A principal or group that is not a valid name
    /// ([`check_principal`], [`check_group`]) is refused: 400
    /// `invalid_principal` from a header, 401 from a credential.
    pub async fn identify_at(
        &self,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
        now: Millis,
    ) -> Result<(Option<String>, Vec<String>), ApiError> {
        let (principal, groups) = self.credential(headers, peer, now).await?;
        let checked = principal
            .as_deref()
            .map_or(Ok(()), check_principal)
            .and_then(|()| groups.iter().try_for_each(|group| check_group(group)));
        match checked {
            Ok(()) => Ok((principal, groups)),
            Err(error) if matches!(self, Self::Header(..)) => {
                Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid_principal", error.to_string()))
            }
            Err(error) => Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                format!("the credential names an unusable identity: {error}"),
            )),
        }
    }

    /// What the request's credential names, unchecked.
    async fn credential(
        &self,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
        now: Millis,
    ) -> Result<(Option<String>, Vec<String>), ApiError> {
        match self {
            Self::Oidc { sessions, bearer } => {
                if headers.contains_key(AUTHORIZATION) {
                    if matches!(**bearer, Self::None) {
                        return Err(ApiError::new(
                            StatusCode::UNAUTHORIZED,
                            "unauthorized",
                            "this server takes no bearer tokens: sign in on its page",
                        ));
                    }
                    return Box::pin(bearer.credential(headers, peer, now)).await;
                }
                let session = sessions
                    .session(headers, now)
                    .await
                    .map_err(|refusal| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", refusal.to_string()))?;
                Ok((Some(session.principal), session.groups))
            }
            Self::None => Ok((None, Vec::new())),
            Self::Header(name, proxies) => {
                if !peer.is_some_and(|peer| trusted_peer(peer, proxies)) {
                    let peer = peer.map_or_else(|| "an unknown peer".to_owned(), |peer| peer.to_string());
                    return Err(ApiError::new(
                        StatusCode::UNAUTHORIZED,
                        "unauthorized",
                        format!(
                            "the principal header `{name}` is only accepted from loopback or a --trusted-proxy network, not from {peer}"
                        ),
                    ));
                }
                Ok((header_principal(headers, name)?, Vec::new()))
            }
            Self::Jwt(verifier) => {
                let token = bearer(headers).ok_or_else(|| ApiError::invalid_token(JwtError::Missing))?;
                let verified = verifier.verify(token).await.map_err(ApiError::invalid_token)?;
                Ok((Some(verified.principal), verified.groups))
            }
            Self::Tokens(tokens) => match bearer(headers).and_then(|token| tokens.principal(token)) {
                Some(principal) => Ok((Some(principal.to_owned()), Vec::new())),
                None => Err(ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "a bearer token from the server's tokens file is required (Authorization: Bearer TOKEN)",
                )),
            },
        }
    }
}

/// The token of an `Authorization: Bearer TOKEN` header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|token| !token.is_empty())
}

/// The trimmed, non-empty value of the principal header. A header sent
/// twice is refused (400 `invalid_principal`): a proxy that adds its header
/// after the client's would otherwise be read by whichever comes first.
fn header_principal(headers: &HeaderMap, name: &HeaderName) -> Result<Option<String>, ApiError> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_principal",
            format!("the principal header `{name}` appears more than once"),
        ));
    }
    let Some(value) = first else { return Ok(None) };
    let value = value.to_str().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_principal",
            format!("the principal header `{name}` is not text"),
        )
    })?;
    Ok(Some(value.trim()).filter(|value| !value.is_empty()).map(str::to_owned))
}

/// True when `peer` may set the principal header: a loopback address (an
/// IPv4 address mapped into IPv6 counts as itself), or one in `proxies`.
fn trusted_peer(peer: IpAddr, proxies: &[IpNet]) -> bool {
    let peer = peer.to_canonical();
    peer.is_loopback() || proxies.iter().any(|net| net.contains(&peer))
}

/// Who sent a request: its principal from the server's source (see the
/// module docs), `None` without one, and its groups (those its credential
/// names and the config's `[groups]` that list it). Extracting it refuses the
/// request with 401 when a required credential is missing or not believed.
/// The peer's address comes from the connection
/// ([`axum::extract::ConnectInfo`], which [`crate::serve_listener`] provides;
/// under a router served without it the peer is unknown, and a principal
/// header is then never believed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The principal.
    pub principal: Option<String>,
    /// Its groups, sorted, each once.
    pub groups: Vec<String>,
}

impl Caller {
    /// Who a request with these headers from `peer` is, now: its credential
    /// checked by the server's source, its groups those the credential names
    /// and the config's `[groups]` that list it. Long-lived responses (the
    /// inbox stream) call it again to re-check a caller.
    pub async fn identify(
        state: &crate::AppState,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
    ) -> Result<Self, ApiError> {
        let config = state.config();
        let (principal, mut groups) = config.principals.identify_at(headers, peer, state.now()).await?;
        if let Some(principal) = &principal {
            groups.extend(toolgate::ledger::groups_listing(&config.groups, principal));
        }
        groups.sort_unstable();
        groups.dedup();
        Ok(Caller { principal, groups })
    }
}

/// The peer address of a request, when the server provides it.
pub(crate) fn peer_of(parts: &Parts) -> Option<IpAddr> {
    parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip())
}

impl FromRequestParts<crate::AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &crate::AppState) -> Result<Self, Self::Rejection> {
        Caller::identify(state, &parts.headers, peer_of(parts)).await
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

    #[tokio::test]
    async fn a_principal_header_is_believed_from_loopback_and_trusted_proxies_only() {
        let proxies = vec!["10.1.0.0/16".parse().unwrap(), "fd00::/8".parse().unwrap()];
        let source = PrincipalSource::Header(HeaderName::from_static("x-user"), proxies);
        let mut headers = HeaderMap::new();
        headers.insert("x-user", " alice ".parse().unwrap());
        let from = |peer: &str| source.principal(&headers, Some(peer.parse().unwrap()));
        for trusted in ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1", "10.1.200.3", "fd12::7"] {
            assert_eq!(from(trusted).await.unwrap().as_deref(), Some("alice"), "{trusted}");
        }
        for untrusted in ["10.2.0.1", "192.168.1.5", "::ffff:10.2.0.1", "2001:db8::1"] {
            let error = from(untrusted).await.unwrap_err();
            assert_eq!((error.status, error.code), (StatusCode::UNAUTHORIZED, "unauthorized"), "{untrusted}");
        }
        assert!(source.principal(&headers, None).await.is_err(), "an unknown peer is not trusted");
        let without = source.principal(&HeaderMap::new(), Some("127.0.0.1".parse().unwrap())).await;
        assert_eq!(without.unwrap(), None);
    }

    #[tokio::test]
    async fn a_repeated_or_reserved_principal_header_is_refused() {
        let source = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
        let loopback = Some("127.0.0.1".parse().unwrap());
        let mut twice = HeaderMap::new();
        twice.append("x-user", "mallory".parse().unwrap());
        twice.append("x-user", "alice".parse().unwrap());
        let error = source.principal(&twice, loopback).await.unwrap_err();
        assert_eq!((error.status, error.code), (StatusCode::BAD_REQUEST, "invalid_principal"));
        for bad in ["group:finance", "link:email", "ali\tce"] {
            let mut headers = HeaderMap::new();
            headers.insert("x-user", bad.parse().unwrap());
            let error = source.principal(&headers, loopback).await.unwrap_err();
            assert_eq!((error.status, error.code), (StatusCode::BAD_REQUEST, "invalid_principal"), "{bad}");
        }
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
}
