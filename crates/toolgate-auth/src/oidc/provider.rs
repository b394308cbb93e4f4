//! The OpenID Connect provider as this server uses it (through `openidconnect`):
//! discovery, the authorization URL, the code exchange and ID token verification.
//!
//! HTTP to the provider goes through a `reqwest` client of its own, which
//! follows no redirects (so a provider's answer cannot point the server at
//! another host), gives up after 10 seconds and reads at most 1 MiB an answer.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreClientAuthMethod, CoreIdToken, CoreProviderMetadata, CoreTokenResponse,
};
use openidconnect::url::Url;
use openidconnect::{
    AccessTokenHash, AsyncHttpClient, AuthType, AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret,
    CsrfToken, EndpointMaybeSet, EndpointNotSet, EndpointSet, HttpRequest, HttpResponse, IssuerUrl, Nonce,
    OAuth2TokenResponse, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, TokenResponse,
};
use serde_json::{Map, Value};
use toolgate::ledger::Millis;
use toolgate::model::error_chain;

use super::config::OidcConfig;
use super::error::OidcError;

/// The least time between two discoveries caused by ID tokens whose signature fails.
const REFRESH_COOLDOWN: Duration = Duration::from_secs(10);
/// The largest answer read from the provider.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// How long a request to the provider may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The client `openidconnect` builds from the discovery document.
type ProviderClient =
    CoreClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointMaybeSet, EndpointMaybeSet>;

/// This server as the provider's client: what discovery needs.
struct Settings {
    http: ProviderHttp,
    issuer: IssuerUrl,
    client_id: ClientId,
    client_secret: Option<ClientSecret>,
    redirect: RedirectUrl,
    scopes: Vec<Scope>,
}

/// The provider: the client of its last discovery (its JWKS included).
pub(super) struct Provider {
    settings: Settings,
    client: RwLock<Arc<ProviderClient>>,
    /// When the keys were last read again for a failed signature.
    refreshed: tokio::sync::Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("issuer", &self.settings.issuer.as_str())
            .field("client_id", &self.settings.client_id.as_str())
            .field("redirect", &self.settings.redirect.as_str())
            .finish_non_exhaustive()
    }
}

/// An ID token that passed every check: its claims and its expiry.
pub(super) struct SignedIn {
    /// The token's claims, as it carries them.
    pub claims: Map<String, Value>,
    /// Its `exp` (milliseconds since the Unix epoch).
    pub expires: Millis,
}

/// Why a request to the provider failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum HttpError {
    /// The request failed (connection, timeout, body).
    #[error(transparent)]
    Request(#[from] reqwest::Error),
    /// The answer is too large.
    #[error("the answer is larger than {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
}

impl Settings {
    /// Reads the discovery document and the JWKS, and builds the client from them.
    async fn discover(&self) -> Result<ProviderClient, OidcError> {
        let metadata = CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http)
            .await
            .map_err(|error| OidcError::Discovery { issuer: self.issuer.to_string(), detail: error_chain(&error) })?;
        // HTTP Basic unless the provider says it takes the secret only in the body.
        let methods = metadata.token_endpoint_auth_methods_supported();
        let post_only = methods.is_some_and(|methods| {
            methods.contains(&CoreClientAuthMethod::ClientSecretPost)
                && !methods.contains(&CoreClientAuthMethod::ClientSecretBasic)
        });
        let auth_type = if post_only { AuthType::RequestBody } else { AuthType::BasicAuth };
        Ok(CoreClient::from_provider_metadata(metadata, self.client_id.clone(), self.client_secret.clone())
            .set_redirect_uri(self.redirect.clone())
            .set_auth_type(auth_type))
    }
}

impl Provider {
    /// Discovers the provider of `config`; the callback is `redirect`.
    pub(super) async fn discover(config: &OidcConfig, redirect: &str) -> Result<Self, OidcError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .build()
            .map_err(|error| OidcError::Client(error.to_string()))?;
        let invalid = |what, url: &str, error: &dyn std::error::Error| OidcError::InvalidUrl {
            what,
            url: url.to_owned(),
            detail: error.to_string(),
        };
        let issuer = IssuerUrl::new(config.issuer.clone())
            .map_err(|error| invalid("the OIDC issuer (--oidc-issuer)", &config.issuer, &error))?;
        let redirect =
            RedirectUrl::new(redirect.to_owned()).map_err(|error| invalid("the callback URL", redirect, &error))?;
        let scopes = config.scopes.iter().filter(|scope| *scope != "openid").map(|scope| Scope::new(scope.clone()));
        let settings = Settings {
            http: ProviderHttp(http),
            issuer,
            client_id: ClientId::new(config.client_id.clone()),
            client_secret: config.client_secret.clone().map(ClientSecret::new),
            redirect,
            scopes: scopes.collect(),
        };
        let client = RwLock::new(Arc::new(settings.discover().await?));
        tracing::info!(issuer = %settings.issuer.as_str(), "discovered the OpenID Connect provider");
        Ok(Self { settings, client, refreshed: tokio::sync::Mutex::new(None) })
    }

    fn client(&self) -> Arc<ProviderClient> {
        Arc::clone(&self.client.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// The provider's authorization URL for one sign-in.
    pub(super) fn authorization_url(&self, state: &str, nonce: String, verifier: String) -> Url {
        let challenge = PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(verifier));
        let state = CsrfToken::new(state.to_owned());
        let (url, _, _) = self
            .client()
            .authorize_url(CoreAuthenticationFlow::AuthorizationCode, move || state, move || Nonce::new(nonce))
            .add_scopes(self.settings.scopes.iter().cloned())
            .set_pkce_challenge(challenge)
            .url();
        url
    }

    /// Exchanges `code` (with the PKCE `verifier`) and verifies the ID token
    /// it brings against `nonce` at `now`; a failed signature makes the keys
    /// be read again once (a rotation at the provider) before it counts.
    pub(super) async fn sign_in(
        &self,
        code: String,
        verifier: String,
        nonce: String,
        now: Millis,
    ) -> Result<SignedIn, OidcError> {
        let client = self.client();
        let response = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|error| OidcError::CodeExchange(error.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(verifier))
            .request_async(&self.settings.http)
            .await
            .map_err(|error| OidcError::CodeExchange(error_chain(&error)))?;
        let id_token = response.id_token().ok_or(OidcError::NoIdToken)?;
        let nonce = Nonce::new(nonce);
        let expires = match verify(&client, id_token, &response, &nonce, now) {
            Err(ClaimsVerificationError::SignatureVerification(_)) if self.refresh().await => {
                verify(&self.client(), id_token, &response, &nonce, now)
            }
            verified => verified,
        }
        .map_err(|error| OidcError::IdToken(error_chain(&error)))?;
        Ok(SignedIn { claims: payload(id_token)?, expires })
    }

    /// Discovers the provider again (its keys may have rotated), at most once
    /// per [`REFRESH_COOLDOWN`]; true when there are new keys to try.
    async fn refresh(&self) -> bool {
        let mut last = self.refreshed.lock().await;
        if last.is_some_and(|at| at.elapsed() < REFRESH_COOLDOWN) {
            return false;
        }
        *last = Some(Instant::now());
        match self.settings.discover().await {
            Ok(client) => {
                *self.client.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(client);
                true
            }
            Err(error) => {
                tracing::warn!(%error, "cannot discover the OIDC provider again; keeping its keys");
                false
            }
        }
    }
}

/// Checks the ID token (signature, `iss`, `aud`, `exp`, `nonce`, and
/// `at_hash` when present) at `now`; its `exp` in milliseconds.
fn verify(
    client: &ProviderClient,
    id_token: &CoreIdToken,
    response: &CoreTokenResponse,
    nonce: &Nonce,
    now: Millis,
) -> Result<Millis, ClaimsVerificationError> {
    let time: DateTime<Utc> = DateTime::from_timestamp_millis(now).unwrap_or_default();
    let verifier = client.id_token_verifier().set_time_fn(move || time);
    let claims = id_token.claims(&verifier, nonce)?;
    if let Some(expected) = claims.access_token_hash() {
        let algorithm = id_token.signing_alg().map_err(ClaimsVerificationError::SignatureVerification)?;
        let key = id_token.signing_key(&verifier).map_err(ClaimsVerificationError::SignatureVerification)?;
        let actual = AccessTokenHash::from_token(response.access_token(), algorithm, key)
            .map_err(|error| ClaimsVerificationError::Other(format!("cannot hash the access token: {error}")))?;
        if actual != *expected {
            return Err(ClaimsVerificationError::Other("`at_hash` does not match the access token".to_owned()));
        }
    }
    Ok(claims.expiration().timestamp_millis())
}

/// The claims of a verified ID token, every one as the token carries it.
fn payload(id_token: &CoreIdToken) -> Result<Map<String, Value>, OidcError> {
    let compact = id_token.to_string();
    let payload = compact.split('.').nth(1).unwrap_or_default();
    URL_SAFE_NO_PAD
        .decode(payload)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| OidcError::IdToken("its claims are not a JSON object".to_owned()))
}

/// The HTTP client `openidconnect` sends its requests to the provider with.
struct ProviderHttp(reqwest::Client);

impl<'c> AsyncHttpClient<'c> for ProviderHttp {
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(send(&self.0, request))
    }
}

/// Sends one request to the provider through `client` and reads the answer (bounded).
async fn send(client: &reqwest::Client, request: HttpRequest) -> Result<HttpResponse, HttpError> {
    let (parts, body) = request.into_parts();
    let mut response =
        client.request(parts.method, parts.uri.to_string()).headers(parts.headers).body(body).send().await?;
    let status = response.status();
    let headers = std::mem::take(response.headers_mut());
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(HttpError::TooLarge);
        }
        bytes.extend_from_slice(&chunk);
    }
    let mut answer = HttpResponse::new(bytes);
    *answer.status_mut() = status;
    *answer.headers_mut() = headers;
    Ok(answer)
}
