//! Who is asking, for toolgate: the principal of a request, and the secret
//! that approvals are signed with.
//!
//! - [`principal`]: [`PrincipalSource`], the one configured way a server
//!   tells who sent a request (nobody, a trusted proxy's header, a tokens
//!   file, JWT bearer tokens, or OpenID Connect sign-in), and
//!   [`IdentifyError`], why a request was refused;
//! - [`tokens`]: the tokens file, [`TokenTable`] (bearer tokens by their
//!   SHA-256 digests);
//! - [`jwt`]: JWT bearer tokens verified against a JWKS ([`JwtVerifier`]);
//! - [`oidc`]: OpenID Connect sign-in on the web page ([`OidcSignIn`]): the
//!   provider, the signed session and login cookies, and the signed-out
//!   sessions;
//! - [`secret`]: the approval signing secret ([`ApprovalSecret`]) and the
//!   keys derived from it.
//!
//! The crate reads request headers ([`http::HeaderMap`]) and answers with
//! typed errors; it serves nothing. `toolgate-server` (its extractor, its
//! sign-in routes) and `toolgate-gateway` (its `/mcp` guard) answer those
//! errors over HTTP: [`IdentifyError::status`], [`IdentifyError::code`] and
//! [`IdentifyError::challenge`] say how, so both answer a refusal alike.

pub mod jwt;
pub mod oidc;
pub mod principal;
pub mod secret;
pub mod tokens;

pub use jwt::{JwksSource, JwtConfig, JwtError, JwtVerifier};
pub use oidc::{OidcConfig, OidcError, OidcSignIn};
pub use principal::{IdentifyError, PrincipalSource};
pub use secret::{ApprovalSecret, SecretError, SecretSource};
pub use tokens::{SHA256_PREFIX, TokenEntryError, TokenTable, TokensError};
