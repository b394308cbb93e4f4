//! JWT bearer tokens from the identity provider people already run
//! (Keycloak, Auth0, Okta, Entra, Google): `--jwt-jwks FILE_OR_URL`.
//!
//! A token is accepted when, in this order:
//! - it is a compact JWS whose header names `RS256`, `ES256` or `EdDSA` (never
//!   `none` and never an HMAC algorithm: a public key is no shared secret);
//! - its `kid` names a key of the JWKS (a JWKS with a single key also takes a
//!   token without `kid`), of the family its algorithm needs, published for
//!   signatures (`use`, when given) and for that algorithm (`alg`, when given);
//! - its signature verifies with that key (`jsonwebtoken` does the verification);
//! - `exp` is present and not past, `nbf` (when present) not in the future,
//!   both with 60 s of leeway, and `iss` and `aud` are present and match the
//!   configured ones (both are required: without them any token the JWKS
//!   signed, for any application of that identity provider, would pass;
//!   RFC 9068 access tokens carry both);
//! - the principal claim (`sub` by default) is a non-empty string and the groups
//!   claim (`groups` by default), when present, an array of strings.
//!
//! Anything else is a [`JwtError`] that names the check that failed; a
//! server answers it with 401 and `WWW-Authenticate: Bearer
//! error="invalid_token", error_description="..."` ([`invalid_token_challenge`]).
//!
//! The JWKS is read from a file or fetched over HTTPS (plain HTTP only from a
//! loopback host), kept for its `Cache-Control` max-age (5 minutes without
//! one, at most a day), and read again when a token names an unknown `kid`,
//! so a provider's key rotation is picked up without a restart; unknown kids
//! trigger at most one read per [`REFRESH_COOLDOWN`], so random kids cannot
//! make the server hammer the provider.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use serde_json::{Map, Value};
use tokio::sync::{Mutex, RwLock};

/// The algorithms a token may name.
pub const ACCEPTED: [&str; 3] = ["RS256", "ES256", "EdDSA"];
/// The leeway on `exp` and `nbf`.
pub const LEEWAY_SECONDS: u64 = 60;
/// The least time between two reads of the JWKS caused by unknown kids.
pub const REFRESH_COOLDOWN: Duration = Duration::from_secs(10);
/// How long a fetched JWKS is kept without a `Cache-Control` max-age.
const DEFAULT_MAX_AGE: Duration = Duration::from_secs(300);
/// The longest a fetched JWKS is kept.
const LONGEST_MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);
/// The largest JWKS document read.
const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// Where the JWKS comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwksSource {
    /// A file, read again on an unknown `kid`.
    File(PathBuf),
    /// An HTTPS URL (HTTP only on a loopback host).
    Url(String),
}

impl JwksSource {
    /// A URL when `text` starts with `https://` or `http://`, else a file path.
    /// A plain-HTTP URL whose host is not loopback is refused.
    pub fn parse(text: &str) -> Result<Self, JwtError> {
        if !(text.starts_with("http://") || text.starts_with("https://")) {
            return Ok(Self::File(PathBuf::from(text)));
        }
        let url = url::Url::parse(text).map_err(|error| JwtError::Jwks(format!("`{text}` is not a URL: {error}")))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(JwtError::Jwks(format!("the JWKS URL `{text}` may not carry credentials")));
        }
        let loopback = match url.host() {
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        };
        if url.scheme() == "http" && !loopback {
            return Err(JwtError::Jwks(format!("the JWKS URL `{text}` must use https (http only on loopback)")));
        }
        Ok(Self::Url(url.into()))
    }
}

/// How tokens are checked (the `--jwt-*` flags).
#[derive(Debug, Clone)]
pub struct JwtConfig {
    /// Where the keys come from.
    pub jwks: JwksSource,
    /// The required `iss`.
    pub issuer: String,
    /// The required `aud` (one of the token's).
    pub audience: String,
    /// The claim naming the principal.
    pub principal_claim: String,
    /// The claim listing the principal's groups.
    pub groups_claim: String,
}

impl JwtConfig {
    /// Tokens checked against `jwks` that must name `issuer` and `audience`, with the default claims.
    pub fn new(jwks: JwksSource, issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        Self {
            jwks,
            issuer: issuer.into(),
            audience: audience.into(),
            principal_claim: "sub".to_owned(),
            groups_claim: "groups".to_owned(),
        }
    }
}

/// Why a token was refused (each names the check that failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JwtError {
    /// No `Authorization: Bearer` token.
    #[error("no bearer token (Authorization: Bearer TOKEN)")]
    Missing,
    /// Not a compact JWS.
    #[error("the token is malformed: {0}")]
    Malformed(String),
    /// `none`, an HMAC algorithm, or one this server does not take.
    #[error("the token's algorithm `{0}` is not accepted (RS256, ES256 or EdDSA)")]
    Algorithm(String),
    /// The `kid` names no key of the JWKS.
    #[error("the token's key `{0}` is not in the JWKS")]
    UnknownKey(String),
    /// The signature does not verify.
    #[error("the token's signature is invalid")]
    Signature,
    /// `exp` is past.
    #[error("the token has expired")]
    Expired,
    /// `nbf` is in the future.
    #[error("the token is not valid yet")]
    NotYetValid,
    /// `iss` is not the configured issuer.
    #[error("the token's issuer is not the expected one")]
    Issuer,
    /// `aud` does not hold the configured audience.
    #[error("the token's audience is not the expected one")]
    Audience,
    /// A claim is missing or of the wrong type.
    #[error("the token's claim `{claim}` {problem}")]
    Claim {
        /// The claim.
        claim: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The JWKS could not be read or used.
    #[error("the JWKS cannot be used: {0}")]
    Jwks(String),
}

/// The principal a token names, and its groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The principal claim's value.
    pub principal: String,
    /// The groups claim's values (none when the claim is absent).
    pub groups: Vec<String>,
}

/// Checks bearer tokens against a JWKS it keeps (see the module docs). Cheap to share.
#[derive(Debug)]
pub struct JwtVerifier {
    config: JwtConfig,
    keys: RwLock<Keys>,
    refreshing: Mutex<Option<Instant>>,
    client: reqwest::Client,
}

#[derive(Debug)]
struct Keys {
    set: JwkSet,
    fresh_until: Instant,
}

impl JwtVerifier {
    /// Reads the JWKS once (so a wrong path or URL fails at start) and keeps it.
    pub async fn new(config: JwtConfig) -> Result<Arc<Self>, JwtError> {
        // No redirects: the configured URL is the one trusted for keys, and a
        // redirect could lead the fetch anywhere (even to plain HTTP).
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| JwtError::Jwks(error.to_string()))?;
        let (set, max_age) = read_jwks(&config.jwks, &client).await?;
        let keys = RwLock::new(Keys { set, fresh_until: Instant::now() + max_age });
        Ok(Arc::new(Self { config, keys, refreshing: Mutex::new(None), client }))
    }

    /// The settings.
    pub fn config(&self) -> &JwtConfig {
        &self.config
    }

    /// Verifies a token (without the `Bearer ` prefix).
    pub async fn verify(&self, token: &str) -> Result<Verified, JwtError> {
        // A header jsonwebtoken cannot read may still name an algorithm (`none`): say so.
        let header = jsonwebtoken::decode_header(token).map_err(|error| match raw_algorithm(token) {
            Some(algorithm) if !ACCEPTED.contains(&algorithm.as_str()) => JwtError::Algorithm(algorithm),
            _ => JwtError::Malformed(error.to_string()),
        })?;
        let family = match header.alg {
            Algorithm::RS256 => AlgorithmFamily::Rsa,
            Algorithm::ES256 => AlgorithmFamily::Ec,
            Algorithm::EdDSA => AlgorithmFamily::Ed,
            other => return Err(JwtError::Algorithm(format!("{other:?}"))),
        };
        let jwk = self.key(header.kid.as_deref()).await?;
        if !family_of(&jwk).is_some_and(|of| of == family) {
            return Err(JwtError::Algorithm(format!("{:?} with a key of another kind", header.alg)));
        }
        // A key published for encryption, or for another algorithm of its family, verifies nothing.
        let for_signatures =
            !matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_)));
        let for_this = jwk.common.key_algorithm.is_none_or(|alg| format!("{alg:?}") == format!("{:?}", header.alg));
        if !for_signatures || !for_this {
            return Err(JwtError::Algorithm(format!("{:?} with a key published for another use", header.alg)));
        }
        let key = DecodingKey::from_jwk(&jwk).map_err(|error| JwtError::Jwks(error.to_string()))?;
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &self.validation(header.alg))
            .map_err(|error| refusal(error.into_kind()))?
            .claims;
        identity(&claims, &self.config.principal_claim, &self.config.groups_claim)
    }

    fn validation(&self, algorithm: Algorithm) -> Validation {
        let mut validation = Validation::new(algorithm);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_nbf = true;
        validation.set_audience(&[&self.config.audience]);
        validation.required_spec_claims.insert("aud".to_owned());
        validation.set_issuer(&[&self.config.issuer]);
        validation.required_spec_claims.insert("iss".to_owned());
        validation
    }

    /// The key a token names, reading the JWKS again when it is stale or the kid unknown.
    async fn key(&self, kid: Option<&str>) -> Result<Jwk, JwtError> {
        {
            let keys = self.keys.read().await;
            if Instant::now() < keys.fresh_until
                && let Some(jwk) = find(&keys.set, kid)?
            {
                return Ok(jwk);
            }
        }
        self.refresh().await;
        let keys = self.keys.read().await;
        // The kid is the client's text: echo a bounded piece of it.
        find(&keys.set, kid)?.ok_or_else(|| JwtError::UnknownKey(kid.unwrap_or("(none)").chars().take(64).collect()))
    }

    /// Reads the JWKS again, at most once per [`REFRESH_COOLDOWN`]; a failed
    /// read keeps the keys held.
    async fn refresh(&self) {
        let mut last = self.refreshing.lock().await;
        if last.is_some_and(|at| at.elapsed() < REFRESH_COOLDOWN) {
            return;
        }
        *last = Some(Instant::now());
        match read_jwks(&self.config.jwks, &self.client).await {
            Ok((set, max_age)) => *self.keys.write().await = Keys { set, fresh_until: Instant::now() + max_age },
            Err(error) => tracing::warn!(%error, "cannot read the JWKS again; keeping the keys held"),
        }
    }
}

/// The `WWW-Authenticate` value for a bearer token refused because of `why`:
/// the challenge RFC 6750 defines, `Bearer error="invalid_token",
/// error_description="..."`, the description being `why` without quotes,
/// backslashes or control characters (so that it fits the quoted string).
pub fn invalid_token_challenge(why: &str) -> String {
    let description: String = why.chars().filter(|c| *c != '"' && *c != '\\' && !c.is_control()).collect();
    format!("Bearer error=\"invalid_token\", error_description=\"{description}\"")
}

/// The principal (the `principal_claim`, a non-empty string) and the groups
/// (the `groups_claim`, an array of strings, none when absent) that verified
/// claims name. Shared with the OpenID Connect ID tokens ([`crate::oidc`]).
pub(crate) fn identity(
    claims: &Map<String, Value>,
    principal_claim: &str,
    groups_claim: &str,
) -> Result<Verified, JwtError> {
    let principal = match claims.get(principal_claim) {
        Some(Value::String(principal)) if !principal.is_empty() => principal.clone(),
        _ => return Err(claim(principal_claim, "must be a non-empty string (the principal)")),
    };
    let groups = match claims.get(groups_claim) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| claim(groups_claim, "must be an array of strings"))?,
        Some(_) => return Err(claim(groups_claim, "must be an array of strings")),
    };
    Ok(Verified { principal, groups })
}

fn claim(name: &str, problem: &'static str) -> JwtError {
    JwtError::Claim { claim: name.to_owned(), problem }
}

/// The key `kid` names; without a kid, the set's only key.
fn find(set: &JwkSet, kid: Option<&str>) -> Result<Option<Jwk>, JwtError> {
    match kid {
        Some(kid) => Ok(set.find(kid).cloned()),
        None if set.keys.len() == 1 => Ok(set.keys.first().cloned()),
        None => Err(JwtError::UnknownKey("(none: the token names no kid and the JWKS holds several keys)".into())),
    }
}

fn family_of(jwk: &Jwk) -> Option<AlgorithmFamily> {
    match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Some(AlgorithmFamily::Rsa),
        AlgorithmParameters::EllipticCurve(_) => Some(AlgorithmFamily::Ec),
        AlgorithmParameters::OctetKeyPair(_) => Some(AlgorithmFamily::Ed),
        // A symmetric key in a JWKS is never a verification key here, nor is a kind this server does not know.
        _ => None,
    }
}

/// The `alg` a token's header names, read without trusting it (for the error).
fn raw_algorithm(token: &str) -> Option<String> {
    use base64::Engine;
    let header = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(header).ok()?;
    let header: Value = serde_json::from_slice(&bytes).ok()?;
    Some(header.get("alg")?.as_str()?.chars().take(32).collect())
}

fn refusal(kind: ErrorKind) -> JwtError {
    match kind {
        ErrorKind::ExpiredSignature => JwtError::Expired,
        ErrorKind::ImmatureSignature => JwtError::NotYetValid,
        ErrorKind::InvalidIssuer => JwtError::Issuer,
        ErrorKind::InvalidAudience => JwtError::Audience,
        ErrorKind::InvalidSignature => JwtError::Signature,
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName | ErrorKind::UnsupportedAlgorithm => {
            JwtError::Algorithm("not the key's".to_owned())
        }
        ErrorKind::MissingRequiredClaim(name) => claim(&name, "is required"),
        ErrorKind::InvalidClaimFormat(name) => claim(&name, "has the wrong type"),
        other => JwtError::Malformed(format!("{other:?}")),
    }
}

/// Reads the JWKS and how long to keep it.
async fn read_jwks(source: &JwksSource, client: &reqwest::Client) -> Result<(JwkSet, Duration), JwtError> {
    let (bytes, max_age) = match source {
        JwksSource::File(path) => {
            let bytes = tokio::fs::read(path)
                .await
                .map_err(|error| JwtError::Jwks(format!("cannot read {}: {error}", path.display())))?;
            // A file is cheap to read: it is checked again on every unknown kid.
            (bytes, LONGEST_MAX_AGE)
        }
        JwksSource::Url(url) => fetch(url, client).await?,
    };
    if bytes.len() > MAX_JWKS_BYTES {
        return Err(JwtError::Jwks(format!("the JWKS is larger than {MAX_JWKS_BYTES} bytes")));
    }
    let set: JwkSet = serde_json::from_slice(&bytes)
        .map_err(|error| JwtError::Jwks(format!("not a JWKS document ({{\"keys\": [...]}}): {error}")))?;
    Ok((set, max_age))
}

async fn fetch(url: &str, client: &reqwest::Client) -> Result<(Vec<u8>, Duration), JwtError> {
    let unusable = |error: reqwest::Error| JwtError::Jwks(format!("cannot fetch {url}: {error}"));
    let response = client.get(url).send().await.map_err(unusable)?.error_for_status().map_err(unusable)?;
    let max_age = response
        .headers()
        .get(reqwest::header::CACHE_CONTROL)
        .and_then(|value| value.to_str().ok())
        .and_then(max_age)
        .unwrap_or(DEFAULT_MAX_AGE)
        .min(LONGEST_MAX_AGE);
    if response.status().is_redirection() {
        return Err(JwtError::Jwks(format!("{url} answered with a redirect, which is not followed")));
    }
    // Read as it streams, stopping past the cap: a huge answer is never held whole.
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = futures::StreamExt::next(&mut stream).await {
        body.extend_from_slice(&chunk.map_err(unusable)?);
        if body.len() > MAX_JWKS_BYTES {
            return Err(JwtError::Jwks(format!("the JWKS at {url} is larger than {MAX_JWKS_BYTES} bytes")));
        }
    }
    Ok((body, max_age))
}

/// The `max-age` of a `Cache-Control` value (`no-store` and `no-cache`: none).
fn max_age(cache_control: &str) -> Option<Duration> {
    let mut age = None;
    for directive in cache_control.split(',').map(str::trim) {
        let lower = directive.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return Some(Duration::ZERO);
        }
        if let Some(seconds) = lower.strip_prefix("max-age=") {
            age = seconds.trim_matches('"').parse().ok().map(Duration::from_secs);
        }
    }
    age
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_age_is_read_from_cache_control() {
        assert_eq!(max_age("public, max-age=3600"), Some(Duration::from_secs(3600)));
        assert_eq!(max_age("max-age=\"60\", must-revalidate"), Some(Duration::from_secs(60)));
        assert_eq!(max_age("no-store"), Some(Duration::ZERO));
        assert_eq!(max_age("private"), None);
    }

    #[test]
    fn jwks_urls_are_https_except_on_loopback() {
        assert!(matches!(JwksSource::parse("https://idp.example.com/jwks"), Ok(JwksSource::Url(_))));
        assert!(matches!(JwksSource::parse("http://127.0.0.1:8080/jwks"), Ok(JwksSource::Url(_))));
        assert!(matches!(JwksSource::parse("http://[::1]:8080/jwks"), Ok(JwksSource::Url(_))));
        assert!(matches!(JwksSource::parse("http://localhost/jwks"), Ok(JwksSource::Url(_))));
        assert!(JwksSource::parse("http://idp.example.com/jwks").is_err());
        // A userinfo that looks like a loopback host does not make the host loopback.
        assert!(JwksSource::parse("http://127.0.0.1:1@evil.example/jwks").is_err());
        assert!(JwksSource::parse("http://localhost.evil.example/jwks").is_err());
        assert!(JwksSource::parse("https://user:pw@idp.example.com/jwks").is_err());
        assert_eq!(JwksSource::parse("keys/jwks.json").unwrap(), JwksSource::File("keys/jwks.json".into()));
    }
}
