//! OpenID Connect sign-in for the web page (`toolgate serve --oidc-issuer URL
//! --oidc-client-id ID --public-url URL`).
//!
//! This module is the sign-in itself ([`OidcSignIn`]): the provider, the
//! signed cookies, the signed-out sessions and the checks. Its steps answer
//! with plain data ([`Redirect`]: a status and the headers to send) or typed
//! errors ([`OidcError`], [`SessionRefusal`], [`CrossOriginRequest`]); a
//! server's HTTP routes (`toolgate-server`'s `oidc` module) serve them at
//! the paths below, map the errors to the statuses and codes named here, and
//! add what only HTTP needs (which routes stay open, the sign-in header on
//! every 401).
//!
//! The contract:
//! - At start the provider is discovered from `ISSUER/.well-known/openid-configuration`
//!   (and its JWKS read), so a wrong issuer fails at once. The issuer must use
//!   https; plain http is taken only from a loopback host (127.0.0.0/8, `::1`,
//!   `localhost`), as tests run their provider.
//! - A GET of the page (`/`) without a valid session answers 302 to the
//!   provider's authorization endpoint: the authorization code flow with PKCE
//!   (`code_challenge_method=S256`), a random `state`, a `nonce`, and
//!   `redirect_uri` = `PUBLIC_URL/auth/callback`. The pending sign-in (its
//!   state, the path first asked for, and an expiry 10 minutes out) rides in a
//!   signed cookie, `toolgate_login` (`HttpOnly`, `SameSite=Lax`); the PKCE
//!   verifier and the nonce are derived from the state with a server key, so
//!   the browser never holds them. The cookie keeps the last three pending
//!   sign-ins, so tabs signing in at once do not undo each other; the
//!   callback removes the one it completes.
//! - `GET /auth/callback?code&state` accepts only a state that a pending
//!   sign-in of this browser holds (else 400 `invalid_state` and no session),
//!   exchanges the code (with the client secret when configured), and
//!   verifies the ID token: its signature against the provider's JWKS (read
//!   again once when a signature fails, for key rotation), `iss`, `aud`, `exp`
//!   and `nonce` (`openidconnect` does these checks), and `at_hash` when the
//!   token has one. The principal and groups come from the token's claims
//!   (`--jwt-principal-claim`, `--jwt-groups-claim`). It then sets the session
//!   cookie, `toolgate_session`: `HttpOnly`, `SameSite=Lax`, the public URL's
//!   path (`/`), `Secure` when the public URL is https; its value holds the
//!   principal, the groups and the expiry (the token's `exp`, at most
//!   [`MAX_SESSION`] from now), signed with HMAC-SHA256 under a key derived
//!   from the approval secret ([`crate::ApprovalSecret::derive_key`] with
//!   `"toolgate session v1"`). Then it answers 303 to the page path first
//!   asked for (a path of this server, never another origin).
//! - `POST /auth/logout` revokes the session until it would expire (so a copy
//!   of its cookie stops working, on every replica sharing the store: see
//!   `revoked.rs`), clears the session cookie and answers 303 to the page.
//! - API requests ride the cookie ([`crate::PrincipalSource::Oidc`]): an
//!   expired or tampered cookie counts as none, and without a session (or a
//!   bearer token, when the server also takes them) an API request is 401
//!   `unauthorized` JSON, never a redirect; every 401 then carries
//!   `X-Toolgate-Sign-In: oidc`, which tells the page to reload and sign in.
//! - CSRF: a request that changes something (any method but GET, HEAD,
//!   OPTIONS, TRACE) with the session cookie and no `Authorization` header
//!   must carry an `Origin` (else a `Referer`) of the public URL's origin;
//!   otherwise it is 403 `cross_origin_request` before anything runs.
//!   Requests with a bearer token are not checked: a cross-origin page cannot
//!   add that header.
//! - `/healthz` and the page's script and styles (`/app.js`, `/app.css`) stay open.
//!
//! Time is the caller's: every check takes `now` (a server's clock, the
//! ledger's when it has one).

mod config;
mod cookies;
mod error;
mod provider;
mod revoked;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::header::{LOCATION, ORIGIN, REFERER, SET_COOKIE};
use http::{HeaderMap, HeaderValue, StatusCode};
use openidconnect::url::{Host, Url};
use serde::Deserialize;
use subtle::ConstantTimeEq;
use toolgate::ledger::{LinkStore, Millis};

pub use self::config::{DEFAULT_SCOPES, OidcConfig};
use self::cookies::{CookieKey, Pending};
pub use self::cookies::{LOGIN_COOKIE, SESSION_COOKIE, Session, SessionRefusal};
pub use self::error::{CrossOriginRequest, OidcError};
use self::provider::Provider;
use crate::jwt::identity;
use crate::secret::{ApprovalSecret, hmac_sha256};

/// The longest a session lasts, whatever the ID token's `exp`.
pub const MAX_SESSION: Duration = Duration::from_secs(12 * 60 * 60);
/// How long a sign-in may take from the redirect to the provider to the callback.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// The path of the callback below the public URL.
pub const CALLBACK_PATH: &str = "auth/callback";

/// Where people reach the server, as the cookies and redirects need it.
#[derive(Debug, Clone)]
struct PublicUrl {
    /// `scheme://host[:port]`, what a same-origin request's `Origin` says.
    origin: String,
    /// The path of the page, ending in `/` (`/` unless behind a path prefix).
    base_path: String,
    /// The callback URL.
    callback: String,
    /// True for https: the cookies are `Secure`.
    secure: bool,
}

impl PublicUrl {
    fn parse(text: &str) -> Result<Self, OidcError> {
        let invalid = |detail: &str| OidcError::InvalidUrl {
            what: "the public URL (--public-url)",
            url: text.to_owned(),
            detail: detail.to_owned(),
        };
        let url = Url::parse(text).map_err(|error| invalid(&error.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(invalid("it must be an http or https URL with a host"));
        }
        if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
            return Err(invalid("it may not have a query, a fragment or credentials"));
        }
        let secure = url.scheme() == "https";
        if !secure && !is_loopback(&url) {
            tracing::warn!(
                "the public URL {text} is plain http: the session cookie is not `Secure`; put the server behind https"
            );
        }
        let origin = url.origin().ascii_serialization();
        let mut base_path = url.path().to_owned();
        if !base_path.ends_with('/') {
            base_path.push('/');
        }
        let callback = format!("{origin}{base_path}{CALLBACK_PATH}");
        Ok(Self { origin, base_path, callback, secure })
    }
}

/// True when the URL's host is a loopback address or `localhost`.
fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Checks that the issuer uses https, or http on a loopback host.
fn check_issuer(issuer: &str) -> Result<(), OidcError> {
    let url = Url::parse(issuer).map_err(|error| OidcError::InvalidUrl {
        what: "the OIDC issuer (--oidc-issuer)",
        url: issuer.to_owned(),
        detail: error.to_string(),
    })?;
    match url.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(&url) => Ok(()),
        _ => Err(OidcError::InsecureIssuer(issuer.to_owned())),
    }
}

/// The query of the callback (`GET /auth/callback?code&state`, or the
/// provider's `error` and `error_description`), as the provider sent it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Callback {
    /// The authorization code.
    pub code: Option<String>,
    /// The state the server sent to the provider.
    pub state: Option<String>,
    /// The provider's error code, when it refused.
    pub error: Option<String>,
    /// The provider's words about its error.
    pub error_description: Option<String>,
}

/// What to answer a browser with: a redirect (its status and `Location`)
/// and the cookies it sets (`Set-Cookie`). A server sends these as they are.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Redirect {
    /// 302 (to the provider) or 303 (back to the page).
    pub status: StatusCode,
    /// `Location`, and any `Set-Cookie`.
    pub headers: HeaderMap,
}

impl Redirect {
    fn new(status: StatusCode) -> Self {
        Self { status, headers: HeaderMap::new() }
    }
}

/// The sign-in of one server: its provider, its public URL and its cookie keys (see the module docs).
pub struct OidcSignIn {
    provider: Provider,
    public: PublicUrl,
    principal_claim: String,
    groups_claim: String,
    /// Signs session cookies.
    sessions: CookieKey,
    /// Signs the pending sign-ins and derives their PKCE verifiers and nonces.
    logins: CookieKey,
    /// Sessions signed out before they expire.
    revoked: revoked::Revocations,
}

impl std::fmt::Debug for OidcSignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcSignIn")
            .field("provider", &self.provider)
            .field("public_url", &self.public)
            .finish_non_exhaustive()
    }
}

impl OidcSignIn {
    /// Checks the configuration and discovers the provider (its discovery
    /// document and JWKS are read now, so a wrong issuer fails at start).
    /// Cookies are signed with keys derived from `secret`
    /// ([`ApprovalSecret::derive_key`]): use the server's approval secret.
    pub async fn discover(config: OidcConfig, secret: &ApprovalSecret) -> Result<Arc<Self>, OidcError> {
        check_issuer(&config.issuer)?;
        let public = PublicUrl::parse(&config.public_url)?;
        let provider = Provider::discover(&config, &public.callback).await?;
        Ok(Arc::new(Self {
            provider,
            public,
            principal_claim: config.principal_claim,
            groups_claim: config.groups_claim,
            sessions: CookieKey::new(secret.derive_key("toolgate session v1")),
            logins: CookieKey::new(secret.derive_key("toolgate login v1")),
            revoked: revoked::Revocations::default(),
        }))
    }

    /// The origin same-origin requests name (`Origin: scheme://host[:port]`).
    pub fn public_origin(&self) -> &str {
        &self.public.origin
    }

    /// The callback URL registered at the provider (`PUBLIC_URL/auth/callback`).
    pub fn callback_url(&self) -> &str {
        &self.public.callback
    }

    /// The valid session the request's cookie holds at `now`, unless it was signed out.
    pub async fn session(&self, headers: &HeaderMap, now: Millis) -> Result<Session, SessionRefusal> {
        let session = cookies::session(&self.sessions, headers, now)?;
        if self.revoked.is_revoked(&session.id).await {
            return Err(SessionRefusal::Revoked);
        }
        Ok(session)
    }

    /// Records signed-out sessions in `store` (so every replica on it refuses
    /// them), instead of this process's memory. A server calls it when it has a store.
    pub fn keep_revocations_in(&self, store: Arc<dyn LinkStore>) {
        self.revoked.keep_in(store);
    }

    /// True when the request carries a session cookie, valid or not.
    pub fn has_session_cookie(&self, headers: &HeaderMap) -> bool {
        cookies::values(headers, SESSION_COOKIE).next().is_some()
    }

    /// Starts a sign-in that returns to `return_to` (a path of this server as
    /// it sees it, e.g. `/?x=1`): 302 to the provider, with the pending sign-in in its cookie.
    pub fn begin(&self, return_to: &str, headers: &HeaderMap, now: Millis) -> Result<Redirect, OidcError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|error| OidcError::Random(error.to_string()))?;
        let state = URL_SAFE_NO_PAD.encode(bytes);
        let to = if is_local_path(return_to) { return_to.to_owned() } else { "/".to_owned() };
        let mut pending = cookies::pending(&self.logins, headers, now);
        pending.push(Pending { state: state.clone(), to, expires: now.saturating_add(millis(LOGIN_TIMEOUT)) });
        let url = self.provider.authorization_url(&state, self.derived("nonce", &state), self.derived("pkce", &state));
        let mut redirect = Redirect::new(StatusCode::FOUND);
        redirect.headers.insert(LOCATION, header_value(url.as_str())?);
        redirect.headers.insert(SET_COOKIE, self.pending_cookie(&pending, now)?);
        Ok(redirect)
    }

    /// Finishes the sign-in a callback with `code` and `state` (or a provider's
    /// `error`) completes: the session cookie and 303 to the path first asked for.
    pub async fn finish(&self, callback: Callback, headers: &HeaderMap, now: Millis) -> Result<Redirect, OidcError> {
        if let Some(error) = callback.error {
            let detail =
                callback.error_description.map_or(error.clone(), |description| format!("{error}: {description}"));
            return Err(OidcError::Refused(printable(&detail)));
        }
        let state = callback.state.filter(|state| !state.is_empty()).ok_or(OidcError::InvalidState("missing"))?;
        let mut pending = cookies::pending(&self.logins, headers, now);
        let index = pending
            .iter()
            .position(|login| bool::from(login.state.as_bytes().ct_eq(state.as_bytes())))
            .ok_or(OidcError::InvalidState("unknown, expired or from another browser"))?;
        let code = callback.code.filter(|code| !code.is_empty()).ok_or(OidcError::MissingCode)?;
        let login = pending.remove(index);
        let nonce = self.derived("nonce", &state);
        let signed_in = self.provider.sign_in(code, self.derived("pkce", &state), nonce, now).await?;
        let verified = identity(&signed_in.claims, &self.principal_claim, &self.groups_claim)?;
        let longest = now.saturating_add(millis(MAX_SESSION));
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).map_err(|error| OidcError::Random(error.to_string()))?;
        let session = Session {
            principal: verified.principal,
            groups: verified.groups,
            expires: signed_in.expires.min(longest),
            id: URL_SAFE_NO_PAD.encode(id),
        };
        let session_cookie = self.session_cookie(&session, now)?;
        tracing::info!(principal = %session.principal, "signed in with OpenID Connect");
        let mut redirect = Redirect::new(StatusCode::SEE_OTHER);
        redirect.headers.insert(LOCATION, header_value(&self.location(&login.to))?);
        redirect.headers.append(SET_COOKIE, session_cookie);
        redirect.headers.append(SET_COOKIE, self.pending_cookie(&pending, now)?);
        Ok(redirect)
    }

    /// Signs out: revokes the request's session (when it has a valid one)
    /// until it would expire, clears the session cookie and sends the browser
    /// to the page (303). [`OidcError::SignOut`] when the revocation cannot be
    /// recorded: the session then still works, and the cookie is kept.
    pub async fn logout(&self, headers: &HeaderMap, now: Millis) -> Result<Redirect, OidcError> {
        if let Ok(session) = self.session(headers, now).await
            && let Err(error) = self.revoked.revoke(&session.id, session.expires, now).await
        {
            tracing::error!(%error, "cannot record a signed-out session");
            return Err(OidcError::SignOut(error));
        }
        let mut redirect = Redirect::new(StatusCode::SEE_OTHER);
        if let Ok(location) = HeaderValue::from_str(&self.public.base_path) {
            redirect.headers.insert(LOCATION, location);
        }
        if let Ok(cookie) =
            HeaderValue::from_str(&cookies::clear(SESSION_COOKIE, &self.public.base_path, self.public.secure))
        {
            redirect.headers.insert(SET_COOKIE, cookie);
        }
        Ok(redirect)
    }

    /// Checks a cookie-authenticated request that changes something: its
    /// `Origin` (else `Referer`) must be the public URL's origin.
    pub fn check_origin(&self, headers: &HeaderMap) -> Result<(), CrossOriginRequest> {
        let text = |name| headers.get(name).and_then(|value: &HeaderValue| value.to_str().ok());
        let origin = match (text(ORIGIN), text(REFERER)) {
            (Some(origin), _) => Some(origin.to_owned()),
            (None, Some(referer)) => Url::parse(referer).ok().map(|url| url.origin().ascii_serialization()),
            (None, None) => None,
        };
        match origin {
            Some(origin) if origin == self.public.origin => Ok(()),
            other => Err(CrossOriginRequest {
                expected: self.public.origin.clone(),
                origin: other.map(|origin| printable(&origin)),
            }),
        }
    }

    /// The browser's URL path for a path of this server (below the public URL's path).
    fn location(&self, path: &str) -> String {
        format!("{}{}", self.public.base_path, path.strip_prefix('/').unwrap_or(path))
    }

    /// A PKCE verifier or nonce for a sign-in: unguessable without the server's key.
    fn derived(&self, what: &str, state: &str) -> String {
        URL_SAFE_NO_PAD.encode(hmac_sha256(self.logins.key(), &[what.as_bytes(), b"\0", state.as_bytes()]))
    }

    fn session_cookie(&self, session: &Session, now: Millis) -> Result<HeaderValue, OidcError> {
        let max_age = (session.expires - now).max(0) / 1000;
        let value = self.sessions.seal(session);
        if value.len() > cookies::MAX_COOKIE_BYTES {
            return Err(OidcError::SessionTooLarge(value.len()));
        }
        header_value(&cookies::set(SESSION_COOKIE, &value, &self.public.base_path, max_age, self.public.secure))
    }

    fn pending_cookie(&self, pending: &[Pending], now: Millis) -> Result<HeaderValue, OidcError> {
        // On the page's path, not only the callback's: the next page load (another tab) must see it to keep it.
        let path = &self.public.base_path;
        let kept = &pending[pending.len().saturating_sub(cookies::MAX_PENDING)..];
        let cookie = match kept.iter().map(|login| login.expires).max() {
            Some(last) => {
                cookies::set(LOGIN_COOKIE, &self.logins.seal(&kept), path, (last - now) / 1000, self.public.secure)
            }
            None => cookies::clear(LOGIN_COOKIE, path, self.public.secure),
        };
        header_value(&cookie)
    }
}

/// True for a path of this server: `/` and more, never `//host` or `/\host`
/// (which browsers take for another origin), and no control characters.
fn is_local_path(path: &str) -> bool {
    path.starts_with('/')
        && !path.starts_with("//")
        && !path.starts_with("/\\")
        && !path.chars().any(|c| c.is_control() || c == '\\')
}

fn header_value(text: &str) -> Result<HeaderValue, OidcError> {
    HeaderValue::from_str(text).map_err(|error| OidcError::Internal(format!("not a header value: {error}")))
}

/// A bounded piece of text from outside, without control characters, for an error message.
fn printable(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

fn millis(duration: Duration) -> Millis {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuers_are_https_except_on_loopback() {
        for ok in [
            "https://idp.example.com/realms/main",
            "http://127.0.0.1:8080",
            "http://127.9.0.1/x",
            "http://[::1]:9000",
            "http://localhost:3000",
        ] {
            assert!(check_issuer(ok).is_ok(), "{ok}");
        }
        for refused in ["http://idp.example.com", "http://10.0.0.1", "http://[fd00::1]", "ftp://127.0.0.1"] {
            let error = check_issuer(refused).unwrap_err();
            assert!(matches!(error, OidcError::InsecureIssuer(_)), "{refused}: {error}");
            assert!(error.to_string().contains("must use https"), "{error}");
        }
        assert!(matches!(check_issuer("not a url"), Err(OidcError::InvalidUrl { .. })));
    }

    #[test]
    fn the_public_url_gives_origin_path_and_callback() {
        let root = PublicUrl::parse("https://toolgate.example.com").unwrap();
        assert_eq!((root.origin.as_str(), root.base_path.as_str()), ("https://toolgate.example.com", "/"));
        assert_eq!(root.callback, "https://toolgate.example.com/auth/callback");
        assert!(root.secure);
        let prefixed = PublicUrl::parse("http://127.0.0.1:3000/toolgate").unwrap();
        assert_eq!(prefixed.callback, "http://127.0.0.1:3000/toolgate/auth/callback");
        assert!(!prefixed.secure);
        assert!(PublicUrl::parse("https://example.com/?x=1").is_err());
        assert!(PublicUrl::parse("mailto:someone@example.com").is_err());
    }

    #[test]
    fn only_local_paths_are_return_paths() {
        for ok in ["/", "/?chat=1", "/a/b"] {
            assert!(is_local_path(ok), "{ok}");
        }
        for refused in ["//evil.example/", "/\\evil.example", "https://evil.example/", "", "/x\r\nSet-Cookie: a=b"] {
            assert!(!is_local_path(refused), "{refused}");
        }
    }
}
