//! Who sent a request: the principal recorded with every approval answer,
//! and the groups its credential names.
//!
//! Four sources, one of them configured on a server ([`PrincipalSource`]):
//! - a header set by a trusted proxy in front of toolgate (`--principal-header X-User`):
//!   its value is the principal; a request without it has none. Anyone can set
//!   a header, so it is believed only from a loopback peer or from a peer in
//!   one of the `--trusted-proxy` networks: from any other peer (or one the
//!   server cannot see) a request is refused with 401 before anything runs;
//! - JWT bearer tokens from an identity provider (`--jwt-jwks`, see [`crate::jwt`]):
//!   the verified token's principal claim names the principal; a request
//!   without a valid token is refused with 401 and a `WWW-Authenticate` header
//!   naming the check that failed;
//! - a bearer-token mapping (`--tokens-file`, see [`crate::tokens`]):
//!   `Authorization: Bearer TOKEN` names the principal, and a request with a
//!   missing or unknown token is refused with 401 before anything runs;
//! - OpenID Connect sign-in on the page (`--oidc-issuer`, see [`crate::oidc`]):
//!   a request without an `Authorization` header is identified by its
//!   session cookie (an expired or tampered one counts as none: 401); one
//!   with the header goes to the bearer-token source configured beside it
//!   (JWTs or a tokens file), and is refused with 401 when there is none.
//!
//! A refusal is an [`IdentifyError`], which says how a server answers it (the
//! status and code above); a principal or group that is not a valid name is
//! refused too (400 `invalid_principal` from a header, 401 from a credential).

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use http::header::{AUTHORIZATION, HeaderName};
use http::{HeaderMap, StatusCode};
use ipnet::IpNet;
use toolgate::ledger::{Clock, Millis, NameError, SystemClock, check_group, check_principal};

use crate::jwt::{JwtError, JwtVerifier, invalid_token_challenge};
use crate::oidc::{OidcSignIn, SessionRefusal};
use crate::tokens::{TokenTable, TokensError};

/// Where the principal of a request comes from.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
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

/// Why a request was refused: a credential that is missing or not believed,
/// or a principal header that cannot be read. Each says what to fix.
///
/// A server answers it with [`IdentifyError::status`] (400 for a malformed
/// principal header, 401 for everything else), the stable
/// [`IdentifyError::code`] and, for a refused JWT, the `WWW-Authenticate`
/// [`IdentifyError::challenge`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdentifyError {
    /// The principal header came from a peer that may not set it (not
    /// loopback, not in a trusted proxy network, or unknown).
    #[error(
        "the principal header `{header}` is only accepted from loopback or a --trusted-proxy network, not from {}",
        shown_peer(*.peer)
    )]
    UntrustedPeer {
        /// The principal header.
        header: HeaderName,
        /// The peer (`None`: the server cannot see it).
        peer: Option<IpAddr>,
    },
    /// The principal header appears more than once.
    #[error("the principal header `{0}` appears more than once")]
    RepeatedHeader(HeaderName),
    /// The principal header's value is not text.
    #[error("the principal header `{0}` is not text")]
    HeaderNotText(HeaderName),
    /// The principal header names no valid principal ([`check_principal`]).
    #[error(transparent)]
    InvalidPrincipal(NameError),
    /// A JWT bearer token is missing or refused.
    #[error(transparent)]
    Jwt(#[from] JwtError),
    /// The bearer token is missing or not in the tokens file.
    #[error("a bearer token from the server's tokens file is required (Authorization: Bearer TOKEN)")]
    UnknownToken,
    /// A bearer token came to a server that signs people in on its page only.
    #[error("this server takes no bearer tokens: sign in on its page")]
    NoBearerTokens,
    /// No valid session cookie (missing, expired, tampered with, or signed out).
    #[error(transparent)]
    Session(#[from] SessionRefusal),
    /// A credential names a principal or a group that is not a valid name
    /// ([`check_principal`], [`check_group`]).
    #[error("the credential names an unusable identity: {0}")]
    UnusableIdentity(NameError),
}

impl IdentifyError {
    /// The HTTP status a server answers with: 400 for a principal header that
    /// cannot be read or names no valid principal, 401 for a credential that
    /// is missing or not believed.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::RepeatedHeader(_) | Self::HeaderNotText(_) | Self::InvalidPrincipal(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::UNAUTHORIZED,
        }
    }

    /// The stable machine-readable code: `invalid_principal` with 400,
    /// `unauthorized` with 401 (see [`IdentifyError::status`]).
    pub fn code(&self) -> &'static str {
        if self.status() == StatusCode::BAD_REQUEST { "invalid_principal" } else { "unauthorized" }
    }

    /// The `WWW-Authenticate` challenge of a refused JWT bearer token
    /// ([`invalid_token_challenge`]); `None` for every other refusal.
    pub fn challenge(&self) -> Option<String> {
        match self {
            Self::Jwt(error) => Some(invalid_token_challenge(&error.to_string())),
            _ => None,
        }
    }
}

/// A peer address for an error message.
fn shown_peer(peer: Option<IpAddr>) -> String {
    peer.map_or_else(|| "an unknown peer".to_owned(), |peer| peer.to_string())
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

    /// Reads a tokens file ([`TokenTable::read_file`]): a JSON object
    /// `{"TOKEN": "principal", "sha256:HEX": "principal", ...}`.
    /// Warns when other users of the machine may read it.
    pub fn tokens_file(path: &Path) -> Result<Self, TokensError> {
        TokenTable::read_file(path).map(Self::Tokens)
    }

    /// The principal of a request from `peer` (`None`: unknown), or a refusal
    /// when tokens are required and this one is missing or unknown, or when a
    /// principal header comes from a peer that is not trusted to set it.
    pub async fn principal(&self, headers: &HeaderMap, peer: Option<IpAddr>) -> Result<Option<String>, IdentifyError> {
        Ok(self.identify(headers, peer).await?.0)
    }

    /// [`Self::principal`] with the groups the credential names (a JWT's
    /// groups claim), a session's expiry judged by the system clock.
    pub async fn identify(
        &self,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
    ) -> Result<(Option<String>, Vec<String>), IdentifyError> {
        self.identify_at(headers, peer, SystemClock.now()).await
    }

    /// [`Self::identify`] at `now` (milliseconds since the Unix epoch; the
    /// server's clock). A principal or group that is not a valid name
    /// ([`check_principal`], [`check_group`]) is refused:
    /// [`IdentifyError::InvalidPrincipal`] (400 `invalid_principal`) from a
    /// header, [`IdentifyError::UnusableIdentity`] (401) from a credential.
    pub async fn identify_at(
        &self,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
        now: Millis,
    ) -> Result<(Option<String>, Vec<String>), IdentifyError> {
        let (principal, groups) = self.credential(headers, peer, now).await?;
        let checked = principal
            .as_deref()
            .map_or(Ok(()), check_principal)
            .and_then(|()| groups.iter().try_for_each(|group| check_group(group)));
        match checked {
            Ok(()) => Ok((principal, groups)),
            Err(error) if matches!(self, Self::Header(..)) => Err(IdentifyError::InvalidPrincipal(error)),
            Err(error) => Err(IdentifyError::UnusableIdentity(error)),
        }
    }

    /// What the request's credential names, unchecked.
    async fn credential(
        &self,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
        now: Millis,
    ) -> Result<(Option<String>, Vec<String>), IdentifyError> {
        match self {
            Self::Oidc { sessions, bearer } => {
                if headers.contains_key(AUTHORIZATION) {
                    if matches!(**bearer, Self::None) {
                        return Err(IdentifyError::NoBearerTokens);
                    }
                    return Box::pin(bearer.credential(headers, peer, now)).await;
                }
                let session = sessions.session(headers, now).await?;
                Ok((Some(session.principal), session.groups))
            }
            Self::None => Ok((None, Vec::new())),
            Self::Header(name, proxies) => {
                if !peer.is_some_and(|peer| trusted_peer(peer, proxies)) {
                    return Err(IdentifyError::UntrustedPeer { header: name.clone(), peer });
                }
                Ok((header_principal(headers, name)?, Vec::new()))
            }
            Self::Jwt(verifier) => {
                let token = bearer(headers).ok_or(JwtError::Missing)?;
                let verified = verifier.verify(token).await?;
                Ok((Some(verified.principal), verified.groups))
            }
            Self::Tokens(tokens) => match bearer(headers).and_then(|token| tokens.principal(token)) {
                Some(principal) => Ok((Some(principal.to_owned()), Vec::new())),
                None => Err(IdentifyError::UnknownToken),
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
/// twice is refused ([`IdentifyError::RepeatedHeader`]): a proxy that adds
/// its header after the client's would otherwise be read by whichever comes first.
fn header_principal(headers: &HeaderMap, name: &HeaderName) -> Result<Option<String>, IdentifyError> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(IdentifyError::RepeatedHeader(name.clone()));
    }
    let Some(value) = first else { return Ok(None) };
    let value = value.to_str().map_err(|_| IdentifyError::HeaderNotText(name.clone()))?;
    Ok(Some(value.trim()).filter(|value| !value.is_empty()).map(str::to_owned))
}

/// True when `peer` may set the principal header: a loopback address (an
/// IPv4 address mapped into IPv6 counts as itself), or one in `proxies`.
fn trusted_peer(peer: IpAddr, proxies: &[IpNet]) -> bool {
    let peer = peer.to_canonical();
    peer.is_loopback() || proxies.iter().any(|net| net.contains(&peer))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!((error.status(), error.code()), (StatusCode::UNAUTHORIZED, "unauthorized"), "{untrusted}");
            assert!(error.to_string().contains(&format!("not from {untrusted}")), "{error}");
        }
        let unknown = source.principal(&headers, None).await.unwrap_err();
        assert!(unknown.to_string().ends_with("not from an unknown peer"), "an unknown peer is not trusted: {unknown}");
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
        assert_eq!((error.status(), error.code()), (StatusCode::BAD_REQUEST, "invalid_principal"));
        for bad in ["group:finance", "link:email", "ali\tce"] {
            let mut headers = HeaderMap::new();
            headers.insert("x-user", bad.parse().unwrap());
            let error = source.principal(&headers, loopback).await.unwrap_err();
            assert_eq!((error.status(), error.code()), (StatusCode::BAD_REQUEST, "invalid_principal"), "{bad}");
        }
        let mut binary = HeaderMap::new();
        binary.insert("x-user", http::HeaderValue::from_bytes(b"al\xffice").unwrap());
        let error = source.principal(&binary, loopback).await.unwrap_err();
        assert_eq!(error, IdentifyError::HeaderNotText(HeaderName::from_static("x-user")));
        assert_eq!(error.status(), StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn tokens_are_required_and_refusals_say_how_to_answer() {
        let tokens = TokenTable::from_entries([("carol-token".to_owned(), "carol".to_owned())].into()).unwrap();
        let source = PrincipalSource::Tokens(tokens);
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, "Bearer carol-token".parse().unwrap());
        assert_eq!(source.identify(&headers, None).await.unwrap(), (Some("carol".to_owned()), Vec::new()));
        headers.insert(AUTHORIZATION, "Bearer wrong".parse().unwrap());
        let error = source.identify(&headers, None).await.unwrap_err();
        assert_eq!((error.status(), error.code(), error.challenge()), (StatusCode::UNAUTHORIZED, "unauthorized", None));
        let refused = IdentifyError::Jwt(JwtError::Missing);
        assert_eq!(refused.code(), "unauthorized");
        assert_eq!(
            refused.challenge().as_deref(),
            Some("Bearer error=\"invalid_token\", error_description=\"no bearer token (Authorization: Bearer TOKEN)\"")
        );
        assert!(!PrincipalSource::None.is_configured() && source.is_configured());
        assert_eq!(PrincipalSource::None.identify(&headers, None).await.unwrap(), (None, Vec::new()));
    }
}
