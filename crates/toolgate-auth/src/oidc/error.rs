//! Why OpenID Connect sign-in failed ([`OidcError`]), and why a request
//! signed in with the session cookie was refused ([`CrossOriginRequest`]).
//!
//! Typed errors only: a server answers each with its status and code
//! (`toolgate-server` maps them: 400 `invalid_state`, 401 `invalid_id_token`,
//! 502 `provider_error`, 403 `cross_origin_request`...).

use crate::jwt::JwtError;

/// Why sign-in cannot be set up, why one sign-in failed, or why a sign-out
/// could not be recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OidcError {
    /// The issuer uses plain http on a host that is not loopback.
    #[error(
        "the OIDC issuer `{0}` must use https (plain http is accepted only on a loopback address: 127.0.0.0/8, ::1 or localhost)"
    )]
    InsecureIssuer(String),
    /// A configured URL cannot be used.
    #[error("{what} `{url}` cannot be used: {detail}")]
    InvalidUrl {
        /// Which setting.
        what: &'static str,
        /// Its value.
        url: String,
        /// What is wrong.
        detail: String,
    },
    /// The provider's discovery document or JWKS cannot be read.
    #[error("cannot discover the OIDC provider {issuer}: {detail}")]
    Discovery {
        /// The issuer.
        issuer: String,
        /// Why.
        detail: String,
    },
    /// The HTTP client cannot be built.
    #[error("cannot build the HTTP client for the OIDC provider: {0}")]
    Client(String),
    /// The provider answered the callback with an error instead of a code.
    #[error("the identity provider refused the sign-in: {0}")]
    Refused(String),
    /// The callback's `state` is missing, unknown, expired or not this browser's.
    #[error("the sign-in `state` is {0}: start again from the page")]
    InvalidState(&'static str),
    /// The callback has no `code`.
    #[error("the callback has no authorization `code`")]
    MissingCode,
    /// The code could not be exchanged at the token endpoint.
    #[error("the identity provider did not exchange the code: {0}")]
    CodeExchange(String),
    /// The token response has no ID token.
    #[error("the identity provider's token response has no ID token")]
    NoIdToken,
    /// The ID token failed verification (signature, `iss`, `aud`, `exp`, `nonce`, `at_hash`).
    #[error("the ID token is not valid: {0}")]
    IdToken(String),
    /// The ID token names no usable principal or groups.
    #[error("the ID token cannot name a principal: {0}")]
    Claims(#[from] JwtError),
    /// The session would not fit in a cookie (too many groups).
    #[error("the session does not fit in a cookie ({0} bytes, at most 3800): the ID token names too many groups")]
    SessionTooLarge(usize),
    /// The system random source failed.
    #[error("cannot generate a sign-in state: {0}")]
    Random(String),
    /// An answer could not be built (a header value the URL or cookie does not fit).
    #[error("cannot build the sign-in answer: {0}")]
    Internal(String),
    /// The signed-out session could not be recorded (the store failed), so
    /// a copy of its cookie still works.
    #[error("the sign-out could not be recorded, so the session still works: {0}")]
    SignOut(String),
}

/// A request signed in with the session cookie that changes something, from
/// another origin than the server's public URL (a cross-site request forgery).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a request signed in with the session cookie that changes something must come from {expected} (Origin or Referer), not from {}",
    .origin.as_deref().unwrap_or("an unnamed origin")
)]
pub struct CrossOriginRequest {
    /// The server's origin (`scheme://host[:port]`).
    pub expected: String,
    /// The origin the request named (its `Origin`, else its `Referer`'s),
    /// bounded and without control characters; `None` when it named none.
    pub origin: Option<String>,
}
