//! OpenID Connect sign-in for the page, against a provider the test runs on
//! loopback: discovery, a JWKS with a key made by `openssl`, an authorization
//! endpoint that signs Alice in at once, and a token endpoint that checks the
//! PKCE verifier and issues RS256 ID tokens (with `nonce` and `at_hash`).
//! The test follows the redirects itself (reqwest, no redirect policy) and
//! carries the cookies by hand, so it sees every status, header and cookie.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use common::keys::{Key, generate, now, sign};
use common::{TempDir, default_script};
use jsonwebtoken::Algorithm;
use jsonwebtoken::jwk::JwkSet;
use reqwest::redirect::Policy;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate::ScriptedModel;
use toolgate::ledger::{LedgerConfig, ManualClock, MemoryStore};
use toolgate_server::oidc::{LOGIN_COOKIE, SESSION_COOKIE};
use toolgate_server::{
    AppState, ApprovalSecret, OidcConfig, OidcError, OidcSignIn, PrincipalSource, ServerConfig, TokenTable,
    serve_listener,
};

const CLIENT_ID: &str = "toolgate-web";

// ---------------------------------------------------------------------------
// The provider

/// An authorization the provider granted, waiting for its code to be exchanged.
#[derive(Clone)]
struct Grant {
    nonce: String,
    challenge: String,
    redirect_uri: String,
}

struct ProviderState {
    issuer: String,
    keys: Vec<Key>,
    /// Which key signs ID tokens (the JWKS holds `published`).
    signing: Mutex<usize>,
    published: Mutex<Vec<usize>>,
    /// The client secret the token endpoint requires (HTTP Basic), if any.
    client_secret: Option<String>,
    grants: Mutex<HashMap<String, Grant>>,
    /// Every authorization request's query, in order.
    authorizations: Mutex<Vec<HashMap<String, String>>>,
    /// Changes made to the ID token's claims before signing.
    edit: Mutex<ClaimsEdit>,
}

/// A change to an ID token's claims.
type ClaimsEdit = Box<dyn Fn(&mut Value) + Send>;

type Provider = Arc<ProviderState>;

async fn discovery(State(provider): State<Provider>) -> Response {
    let issuer = &provider.issuer;
    axum::Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "code_challenge_methods_supported": ["S256"],
    }))
    .into_response()
}

async fn jwks(State(provider): State<Provider>) -> Response {
    let published = provider.published.lock().unwrap().clone();
    let set = JwkSet { keys: published.iter().map(|&index| provider.keys[index].jwk.clone()).collect() };
    axum::Json(set).into_response()
}

/// Signs Alice in at once: back to the client with a code.
async fn authorize(State(provider): State<Provider>, Query(query): Query<HashMap<String, String>>) -> Response {
    provider.authorizations.lock().unwrap().push(query.clone());
    let code = format!("code-{}", uuid::Uuid::now_v7().simple());
    let grant = Grant {
        nonce: query["nonce"].clone(),
        challenge: query["code_challenge"].clone(),
        redirect_uri: query["redirect_uri"].clone(),
    };
    provider.grants.lock().unwrap().insert(code.clone(), grant);
    let state = &query["state"];
    Redirect::to(&format!("{}?code={code}&state={state}", query["redirect_uri"])).into_response()
}

fn token_error(error: &str) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(json!({"error": error}))).into_response()
}

/// Exchanges a code (once) for tokens, checking the client and the PKCE verifier.
async fn token(
    State(provider): State<Provider>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let basic = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok()).map(str::to_owned);
    let client_ok = match &provider.client_secret {
        Some(secret) => basic == Some(format!("Basic {}", STANDARD.encode(format!("{CLIENT_ID}:{secret}")))),
        None => form.get("client_id").map(String::as_str) == Some(CLIENT_ID),
    };
    if !client_ok {
        return token_error("invalid_client");
    }
    let Some(grant) = form.get("code").and_then(|code| provider.grants.lock().unwrap().remove(code)) else {
        return token_error("invalid_grant");
    };
    let verifier = form.get("code_verifier").cloned().unwrap_or_default();
    let pkce_ok = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) == grant.challenge;
    if form.get("grant_type").map(String::as_str) != Some("authorization_code")
        || form.get("redirect_uri") != Some(&grant.redirect_uri)
        || !pkce_ok
    {
        return token_error("invalid_grant");
    }
    let access_token = format!("access-{}", uuid::Uuid::now_v7().simple());
    let half = &Sha256::digest(access_token.as_bytes())[..16];
    let mut claims = json!({
        "iss": provider.issuer, "aud": CLIENT_ID, "sub": "alice", "groups": ["finance"],
        "iat": now(), "exp": now() + 600, "nonce": grant.nonce, "at_hash": URL_SAFE_NO_PAD.encode(half),
    });
    (provider.edit.lock().unwrap())(&mut claims);
    let id_token = sign(&provider.keys[*provider.signing.lock().unwrap()], &claims);
    axum::Json(json!({"access_token": access_token, "token_type": "Bearer", "expires_in": 300, "id_token": id_token}))
        .into_response()
}

async fn start_provider(dir: &std::path::Path, client_secret: Option<&str>) -> Provider {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let keys = vec![generate(dir, "idp-1", Algorithm::RS256), generate(dir, "idp-2", Algorithm::RS256)];
    let provider = Arc::new(ProviderState {
        issuer,
        keys,
        signing: Mutex::new(0),
        published: Mutex::new(vec![0]),
        client_secret: client_secret.map(str::to_owned),
        grants: Mutex::default(),
        authorizations: Mutex::default(),
        edit: Mutex::new(Box::new(|_| {})),
    });
    let app = axum::Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/jwks", get(jwks))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .with_state(Arc::clone(&provider));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    provider
}

// ---------------------------------------------------------------------------
// The server

struct Setup {
    provider: Provider,
    url: String,
    state: AppState,
    clock: Arc<ManualClock>,
    trace: std::path::PathBuf,
    http: reqwest::Client,
    _dir: TempDir,
}

impl Setup {
    fn prompts(&self) -> usize {
        self.state.flush_trace();
        std::fs::read_to_string(&self.trace).unwrap_or_default().lines().count()
    }
}

async fn start() -> Setup {
    start_with(None).await
}

/// A provider and a `toolgate serve` that signs people in there; `bob`'s bearer token works beside it.
async fn start_with(client_secret: Option<&str>) -> Setup {
    let dir = std::env::temp_dir().join(format!("toolgate-oidc-test-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let provider = start_provider(&dir, client_secret).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let secret = ApprovalSecret::resolve(Some("test-secret"), &dir).unwrap();
    let mut oidc = OidcConfig::new(provider.issuer.clone(), CLIENT_ID, url.clone());
    oidc.client_secret = client_secret.map(str::to_owned);
    let sessions = OidcSignIn::discover(oidc, &secret).await.unwrap();
    let tokens = TokenTable::from_entries(HashMap::from([("token-of-bob".to_owned(), "bob".to_owned())])).unwrap();
    let clock = Arc::new(ManualClock::new(now() * 1000));
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), toolgate::demo::toolkit(), secret);
    config.principals = PrincipalSource::Oidc { sessions, bearer: Box::new(PrincipalSource::Tokens(tokens)) };
    config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())).clock(clock.clone()));
    let trace = dir.join("prompts.jsonl");
    config.trace_prompts = Some(trace.clone());
    let model = ScriptedModel::from_json(&default_script().to_string()).unwrap();
    let state = AppState::new(config, Arc::new(model)).unwrap();
    let served = state.clone();
    tokio::spawn(async move { serve_listener(listener, served, std::future::pending()).await.unwrap() });
    let http = reqwest::Client::builder().redirect(Policy::none()).build().unwrap();
    Setup { provider, url, state, clock, trace, http, _dir: TempDir(dir) }
}

// ---------------------------------------------------------------------------
// A browser, by hand

fn location(response: &reqwest::Response) -> String {
    let value = response.headers().get(header::LOCATION);
    value.unwrap_or_else(|| panic!("no Location in a {}", response.status())).to_str().unwrap().to_owned()
}

/// The `Set-Cookie` line for cookie `name`, if the response sets it.
fn set_cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|value| value.to_str().unwrap().to_owned())
        .find(|line| line.starts_with(&format!("{name}=")))
}

/// `NAME=VALUE` of a `Set-Cookie` line, to send back.
fn pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}

fn query(url: &str) -> HashMap<String, String> {
    let url = reqwest::Url::parse(url).unwrap();
    url.query_pairs().map(|(name, value)| (name.into_owned(), value.into_owned())).collect()
}

/// A page load without a session, up to the callback URL the provider sends the browser to.
struct Started {
    login_cookie: String,
    callback: String,
}

async fn start_sign_in(setup: &Setup, path: &str) -> Started {
    let page = setup.http.get(format!("{}{path}", setup.url)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::FOUND, "the page sends the browser to sign in");
    let login_cookie = pair(&set_cookie(&page, LOGIN_COOKIE).expect("the pending sign-in's cookie"));
    let at_provider = setup.http.get(location(&page)).send().await.unwrap();
    assert_eq!(at_provider.status(), StatusCode::SEE_OTHER, "the provider signs Alice in at once");
    Started { login_cookie, callback: location(&at_provider) }
}

/// A full sign-in: the session cookie's `Set-Cookie` line and where the callback sends the browser.
async fn sign_in_at(setup: &Setup, path: &str) -> (String, String) {
    let started = start_sign_in(setup, path).await;
    let callback =
        setup.http.get(&started.callback).header(header::COOKIE, &started.login_cookie).send().await.unwrap();
    assert_eq!(callback.status(), StatusCode::SEE_OTHER, "{}", callback.text().await.unwrap());
    let session = set_cookie(&callback, SESSION_COOKIE).expect("the session cookie");
    (session, location(&callback))
}

async fn sign_in(setup: &Setup) -> String {
    pair(&sign_in_at(setup, "/").await.0)
}

async fn get_with_cookie(setup: &Setup, path: &str, cookie: &str) -> reqwest::Response {
    setup.http.get(format!("{}{path}", setup.url)).header(header::COOKIE, cookie).send().await.unwrap()
}

fn chat_body() -> String {
    json!({"id": format!("chat-{}", uuid::Uuid::now_v7().simple()), "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]})
    .to_string()
}

async fn post_chat(setup: &Setup, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = setup.http.post(format!("{}/api/chat", setup.url)).header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(chat_body()).send().await.unwrap()
}

async fn error_code(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    (status, body["error"]["code"].as_str().unwrap_or_default().to_owned())
}

// ---------------------------------------------------------------------------
// The tests

#[tokio::test]
async fn the_page_sends_the_browser_to_the_provider_with_pkce_state_and_nonce() {
    let setup = start().await;
    let page = setup.http.get(format!("{}/", setup.url)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::FOUND);
    let authorize = location(&page);
    assert!(authorize.starts_with(&format!("{}/authorize?", setup.provider.issuer)), "{authorize}");
    let asked = query(&authorize);
    assert_eq!(asked["response_type"], "code");
    assert_eq!(asked["client_id"], CLIENT_ID);
    assert_eq!(asked["redirect_uri"], format!("{}/auth/callback", setup.url));
    assert_eq!(asked["scope"], "openid profile email groups");
    assert_eq!(asked["code_challenge_method"], "S256");
    assert_eq!(asked["code_challenge"].len(), 43, "a SHA-256 in base64url");
    assert!(asked["state"].len() >= 32 && asked["nonce"].len() >= 32, "{asked:?}");
    let login = set_cookie(&page, LOGIN_COOKIE).unwrap();
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/;", "Max-Age=600"] {
        assert!(login.contains(attribute), "{attribute} in {login}");
    }
    assert!(!login.contains(&asked["nonce"]), "the nonce is derived, not stored in the cookie");

    // A second page load starts another sign-in: new state, new challenge.
    let again = query(&location(&setup.http.get(format!("{}/", setup.url)).send().await.unwrap()));
    assert_ne!((&again["state"], &again["code_challenge"]), (&asked["state"], &asked["code_challenge"]));

    // API calls without a session are 401 JSON, never a redirect; /healthz and the assets stay open.
    for (method, path) in [("GET", "/api/me"), ("GET", "/api/audit"), ("POST", "/api/chat"), ("POST", "/ag-ui")] {
        let request = setup.http.request(method.parse().unwrap(), format!("{}{path}", setup.url));
        let response = request.header("content-type", "application/json").body("{}").send().await.unwrap();
        assert_eq!(response.headers().get("x-toolgate-sign-in").unwrap(), "oidc", "{path}");
        assert!(response.headers().get(header::LOCATION).is_none(), "{path}");
        assert_eq!(error_code(response).await, (StatusCode::UNAUTHORIZED, "unauthorized".to_owned()), "{path}");
    }
    for path in ["/healthz", "/app.js", "/app.css"] {
        assert_eq!(setup.http.get(format!("{}{path}", setup.url)).send().await.unwrap().status(), 200, "{path}");
    }
    assert_eq!(setup.prompts(), 0);
}

#[tokio::test]
async fn signing_in_sets_a_session_cookie_that_the_page_and_the_api_ride() {
    let setup = start().await;
    let (session, back_to) = sign_in_at(&setup, "/?view=audit").await;
    assert_eq!(back_to, "/?view=audit", "back to the page first asked for");
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age="] {
        assert!(session.contains(attribute), "{attribute} in {session}");
    }
    assert!(!session.contains("Secure"), "not Secure on a plain-http public URL: {session}");
    let max_age: i64 = session.split("Max-Age=").nth(1).unwrap().split(';').next().unwrap().parse().unwrap();
    // The token's exp is real time + 600 s; the server's clock is a manual one, set when the setup started, so
    // the seconds the setup took (a loaded machine) add to the age.
    assert!((590..=605).contains(&max_age), "the ID token's exp: {max_age}");
    let cookie = pair(&session);

    let me: Value = get_with_cookie(&setup, "/api/me", &cookie).await.json().await.unwrap();
    assert_eq!(me, json!({"principal": "alice", "groups": ["finance"], "signIn": "oidc"}));
    let page = get_with_cookie(&setup, "/", &cookie).await;
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("<html"), "the page itself");

    // Same-origin writes with the cookie work, and name Alice.
    let origin = setup.url.clone();
    let chat = post_chat(&setup, &[("cookie", &cookie), ("origin", &origin)]).await;
    assert_eq!(chat.status(), 200);
    assert!(chat.text().await.unwrap().contains("tool-approval-request"));
    assert_eq!(setup.prompts(), 1);
    let audit = get_with_cookie(&setup, "/api/audit", &cookie).await.text().await.unwrap();
    let event: Value = serde_json::from_str(audit.lines().next().expect("an issued approval")).unwrap();
    assert_eq!(event["owner"], "alice");
}

#[tokio::test]
async fn a_confidential_client_sends_its_secret() {
    let setup = start_with(Some("s3cret")).await;
    let cookie = sign_in(&setup).await;
    let me: Value = get_with_cookie(&setup, "/api/me", &cookie).await.json().await.unwrap();
    assert_eq!(me["principal"], "alice");
}

#[tokio::test]
async fn a_tampered_unknown_or_foreign_state_is_refused_and_sets_no_session() {
    let setup = start().await;
    let started = start_sign_in(&setup, "/").await;
    let state = query(&started.callback)["state"].clone();
    let mut tampered = state.clone().into_bytes();
    tampered[5] = if tampered[5] == b'A' { b'B' } else { b'A' };
    let tampered = started.callback.replace(&state, std::str::from_utf8(&tampered).unwrap());
    let cases = [
        (tampered, Some(started.login_cookie.clone())),
        (started.callback.clone(), None), // another browser
        (started.callback.replace(&format!("state={state}"), "state="), Some(started.login_cookie.clone())),
        (started.callback.clone(), Some(format!("{LOGIN_COOKIE}=forged.value"))), // a forged pending sign-in
    ];
    for (url, cookie) in cases {
        let mut request = setup.http.get(&url);
        if let Some(cookie) = &cookie {
            request = request.header(header::COOKIE, cookie);
        }
        let response = request.send().await.unwrap();
        assert!(set_cookie(&response, SESSION_COOKIE).is_none(), "no session for {url}");
        let (status, code) = error_code(response).await;
        assert_eq!((status, code.as_str()), (StatusCode::BAD_REQUEST, "invalid_state"), "{url} {cookie:?}");
    }
    // The genuine callback still works, once.
    let callback =
        setup.http.get(&started.callback).header(header::COOKIE, &started.login_cookie).send().await.unwrap();
    assert_eq!(callback.status(), StatusCode::SEE_OTHER);
    assert!(set_cookie(&callback, SESSION_COOKIE).is_some());
    let cleared = set_cookie(&callback, LOGIN_COOKIE).expect("the pending sign-in is cleared");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");

    // The provider's refusal is a clear 401.
    let refused = format!("{}/auth/callback?error=access_denied&error_description=no+thanks&state={state}", setup.url);
    let response = setup.http.get(&refused).header(header::COOKIE, &started.login_cookie).send().await.unwrap();
    assert!(set_cookie(&response, SESSION_COOKIE).is_none());
    assert_eq!(error_code(response).await, (StatusCode::UNAUTHORIZED, "sign_in_refused".to_owned()));
}

/// Two tabs signing in at once: the second page load keeps the first's pending sign-in, and both complete.
#[tokio::test]
async fn sign_ins_in_two_tabs_do_not_undo_each_other() {
    let setup = start().await;
    let first = setup.http.get(format!("{}/?tab=1", setup.url)).send().await.unwrap();
    let first_cookie = pair(&set_cookie(&first, LOGIN_COOKIE).unwrap());
    let second = get_with_cookie(&setup, "/?tab=2", &first_cookie).await;
    let both = pair(&set_cookie(&second, LOGIN_COOKIE).unwrap());
    let callback_of = |page: String| {
        let http = setup.http.clone();
        async move { location(&http.get(page).send().await.unwrap()) }
    };
    let (one, two) = (callback_of(location(&first)).await, callback_of(location(&second)).await);
    let done = setup.http.get(&one).header(header::COOKIE, &both).send().await.unwrap();
    assert_eq!((done.status(), location(&done)), (StatusCode::SEE_OTHER, "/?tab=1".to_owned()));
    let left = pair(&set_cookie(&done, LOGIN_COOKIE).unwrap());
    let done = setup.http.get(&two).header(header::COOKIE, &left).send().await.unwrap();
    assert_eq!((done.status(), location(&done)), (StatusCode::SEE_OTHER, "/?tab=2".to_owned()));
    assert!(set_cookie(&done, LOGIN_COOKIE).unwrap().contains("Max-Age=0"), "none left: the cookie goes");
    // A completed sign-in's state is gone: its callback cannot be replayed with the cookie it left.
    let replay = setup.http.get(&one).header(header::COOKIE, &left).send().await.unwrap();
    assert_eq!(error_code(replay).await, (StatusCode::BAD_REQUEST, "invalid_state".to_owned()));
}

#[tokio::test]
async fn cross_origin_writes_with_the_cookie_are_refused_before_anything_runs() {
    let setup = start().await;
    let cookie = sign_in(&setup).await;
    let evil_referer = format!("http://evil.example/page?from={}", setup.url);
    for headers in [
        vec![("cookie", cookie.as_str()), ("origin", "http://evil.example")],
        vec![("cookie", cookie.as_str()), ("origin", "null")],
        vec![("cookie", cookie.as_str())],
        vec![("cookie", cookie.as_str()), ("referer", evil_referer.as_str())],
    ] {
        let response = post_chat(&setup, &headers).await;
        assert_eq!(
            error_code(response).await,
            (StatusCode::FORBIDDEN, "cross_origin_request".to_owned()),
            "{headers:?}"
        );
    }
    let decision = setup
        .http
        .post(format!("{}/api/decisions", setup.url))
        .header("cookie", &cookie)
        .header("origin", "http://evil.example")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(decision.status(), StatusCode::FORBIDDEN);
    assert_eq!(setup.prompts(), 0, "nothing ran");

    // A same-origin Referer serves when there is no Origin.
    let referer = format!("{}/#chat=1", setup.url);
    assert_eq!(post_chat(&setup, &[("cookie", &cookie), ("referer", &referer)]).await.status(), 200);
    assert_eq!(setup.prompts(), 1);
    // A bearer token is not subject to the check (a cross-origin page cannot send one).
    let bearer =
        post_chat(&setup, &[("authorization", "Bearer token-of-bob"), ("origin", "http://evil.example")]).await;
    assert_eq!(bearer.status(), 200);
}

#[tokio::test]
async fn tampered_and_expired_sessions_count_as_none() {
    let setup = start().await;
    let cookie = sign_in(&setup).await;
    let value = cookie.strip_prefix(&format!("{SESSION_COOKIE}=")).unwrap();
    let (payload, mac) = value.split_once('.').unwrap();
    let mut claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    claims["p"] = json!("mallory");
    let forged = format!("{SESSION_COOKIE}={}.{mac}", URL_SAFE_NO_PAD.encode(claims.to_string()));
    // Another last character of the MAC (`A` or `E`: both canonical there). Sessions carry a random id, so the
    // MAC differs every run, and a fixed `A` was the MAC itself one run in sixteen.
    let other = if mac.ends_with('A') { 'E' } else { 'A' };
    let flipped = format!("{SESSION_COOKIE}={payload}.{}{other}", &mac[..mac.len() - 1]);
    for bad in [forged, flipped] {
        let me = get_with_cookie(&setup, "/api/me", &bad).await;
        assert_eq!(error_code(me).await, (StatusCode::UNAUTHORIZED, "unauthorized".to_owned()));
        let page = get_with_cookie(&setup, "/", &bad).await;
        assert_eq!(page.status(), StatusCode::FOUND, "the page signs in again");
    }
    assert_eq!(get_with_cookie(&setup, "/api/me", &cookie).await.status(), 200);

    // The ID token's exp (ten minutes) ends the session, by the server's clock.
    setup.clock.advance(Duration::from_secs(601));
    let me = get_with_cookie(&setup, "/api/me", &cookie).await;
    assert_eq!(me.status(), StatusCode::UNAUTHORIZED);
    let body: Value = me.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("expired"), "{body}");
    let page = get_with_cookie(&setup, "/", &cookie).await;
    assert_eq!(page.status(), StatusCode::FOUND);
    assert!(location(&page).starts_with(&setup.provider.issuer), "back to the provider");
}

#[tokio::test]
async fn a_session_lasts_twelve_hours_at_most() {
    let setup = start().await;
    *setup.provider.edit.lock().unwrap() = Box::new(|claims| claims["exp"] = json!(now() + 48 * 3600));
    let (session, _) = sign_in_at(&setup, "/").await;
    let max_age: i64 = session.split("Max-Age=").nth(1).unwrap().split(';').next().unwrap().parse().unwrap();
    assert!((12 * 3600 - 10..=12 * 3600).contains(&max_age), "{max_age}");
    let cookie = pair(&session);
    setup.clock.advance(Duration::from_secs(12 * 3600 - 60));
    assert_eq!(get_with_cookie(&setup, "/api/me", &cookie).await.status(), 200);
    setup.clock.advance(Duration::from_secs(61));
    assert_eq!(get_with_cookie(&setup, "/api/me", &cookie).await.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn id_tokens_that_fail_a_check_give_no_session() {
    let setup = start().await;
    let cases: Vec<(ClaimsEdit, &str)> = vec![
        (Box::new(|claims| claims["nonce"] = json!("replayed-nonce")), "nonce"),
        (Box::new(|claims| claims["aud"] = json!("another-app")), "audience"),
        (Box::new(|claims| claims["iss"] = json!("http://127.0.0.1:1")), "issuer"),
        (Box::new(|claims| claims["exp"] = json!(now() - 120)), "xpired"),
        (Box::new(|claims| claims["at_hash"] = json!("AAAAAAAAAAAAAAAAAAAAAA")), "at_hash"),
        (Box::new(|claims| claims["groups"] = json!("finance")), "`groups` must be an array of strings"),
    ];
    for (edit, check) in cases {
        *setup.provider.edit.lock().unwrap() = edit;
        let started = start_sign_in(&setup, "/").await;
        let callback =
            setup.http.get(&started.callback).header(header::COOKIE, &started.login_cookie).send().await.unwrap();
        assert!(set_cookie(&callback, SESSION_COOKIE).is_none(), "{check}");
        let status = callback.status();
        let body: Value = callback.json().await.unwrap();
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (StatusCode::UNAUTHORIZED, Some("invalid_id_token")),
            "{body}"
        );
        assert!(body["error"]["message"].as_str().unwrap().contains(check), "{check} in {body}");
    }
    *setup.provider.edit.lock().unwrap() = Box::new(|_| {});
    // A key the JWKS does not publish signs nothing in.
    *setup.provider.signing.lock().unwrap() = 1;
    let started = start_sign_in(&setup, "/").await;
    let callback =
        setup.http.get(&started.callback).header(header::COOKIE, &started.login_cookie).send().await.unwrap();
    assert_eq!(error_code(callback).await, (StatusCode::UNAUTHORIZED, "invalid_id_token".to_owned()));
}

#[tokio::test]
async fn a_rotated_provider_key_is_picked_up_without_a_restart() {
    let setup = start().await;
    *setup.provider.published.lock().unwrap() = vec![1];
    *setup.provider.signing.lock().unwrap() = 1;
    let cookie = sign_in(&setup).await;
    assert_eq!(get_with_cookie(&setup, "/api/me", &cookie).await.status(), 200);
}

#[tokio::test]
async fn signing_out_clears_the_cookie() {
    let setup = start().await;
    let cookie = sign_in(&setup).await;
    // Never a GET (a link or an image on another site could sign anyone out).
    let get = get_with_cookie(&setup, "/auth/logout", &cookie).await;
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(set_cookie(&get, SESSION_COOKIE).is_none());
    // A POST from the server's own origin; from another origin it is refused.
    let post = |origin: &str| {
        setup.http.post(format!("{}/auth/logout", setup.url)).header("cookie", &cookie).header("origin", origin)
    };
    assert_eq!(post("http://evil.example").send().await.unwrap().status(), StatusCode::FORBIDDEN);
    let out = post(&setup.url).send().await.unwrap();
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&out), "/");
    let cleared = set_cookie(&out, SESSION_COOKIE).unwrap();
    assert!(cleared.starts_with(&format!("{SESSION_COOKIE}=;")) && cleared.contains("Max-Age=0"), "{cleared}");
    assert!(cleared.contains("Path=/") && cleared.contains("HttpOnly"), "{cleared}");
    // A copy of the signed-out cookie (another tab's, a stolen one) no longer works.
    let copy = get_with_cookie(&setup, "/api/me", &cookie).await;
    assert_eq!(copy.status(), StatusCode::UNAUTHORIZED);
    assert!(copy.text().await.unwrap().contains("signed out"));
    // The browser, without the cookie, is sent to sign in again.
    assert_eq!(setup.http.get(format!("{}/", setup.url)).send().await.unwrap().status(), StatusCode::FOUND);
}

#[tokio::test]
async fn bearer_tokens_keep_working_beside_sign_in() {
    let setup = start().await;
    let me = setup.http.get(format!("{}/api/me", setup.url)).bearer_auth("token-of-bob").send().await.unwrap();
    let me: Value = me.json().await.unwrap();
    assert_eq!((me["principal"].as_str(), me["signIn"].as_str()), (Some("bob"), Some("oidc")));
    let wrong = setup.http.get(format!("{}/api/me", setup.url)).bearer_auth("not-a-token").send().await.unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    // With both, the bearer token decides (a wrong one is not saved by a good cookie).
    let cookie = sign_in(&setup).await;
    let both = get_with_cookie(&setup, "/api/me", &cookie).await;
    assert_eq!(both.status(), 200);
    let request = setup.http.get(format!("{}/api/me", setup.url)).header("cookie", &cookie).bearer_auth("not-a-token");
    assert_eq!(request.send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn an_issuer_on_plain_http_elsewhere_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let secret = ApprovalSecret::resolve(Some("test-secret"), dir.path()).unwrap();
    let config = OidcConfig::new("http://idp.example.com", CLIENT_ID, "https://toolgate.example.com");
    let error = OidcSignIn::discover(config, &secret).await.unwrap_err();
    assert!(matches!(error, OidcError::InsecureIssuer(_)), "{error}");
    assert!(error.to_string().contains("must use https"), "{error}");
    // An issuer that is not there fails at start too, naming it.
    let config = OidcConfig::new("http://127.0.0.1:1", CLIENT_ID, "http://127.0.0.1:3000");
    let error = OidcSignIn::discover(config, &secret).await.unwrap_err();
    assert!(matches!(error, OidcError::Discovery { .. }), "{error}");
}
