//! JWT bearer tokens: keys the test generates (RS256, ES256, EdDSA, with
//! `openssl`) in a JWKS file and over HTTP on loopback; every refusal is 401
//! with a `WWW-Authenticate` challenge naming the check that failed, and a key
//! rotation is picked up without a restart.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::keys::{AUDIENCE, ISSUER, Key, claims, generate, now, sign, write_jwks};
use common::*;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use toolgate::ledger::{LedgerConfig, MemoryStore};
use toolgate_server::{JwksSource, JwtConfig, JwtVerifier, PrincipalSource};

struct Setup {
    server: Server,
    keys: Vec<Key>,
    jwks: PathBuf,
    _dir: tempfile::TempDir,
}

async fn start_jwt() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let keys = vec![
        generate(dir.path(), "rsa-1", Algorithm::RS256),
        generate(dir.path(), "ec-1", Algorithm::ES256),
        generate(dir.path(), "ed-1", Algorithm::EdDSA),
    ];
    let jwks = dir.path().join("jwks.json");
    write_jwks(&jwks, &keys.iter().collect::<Vec<_>>());
    let config = JwtConfig::new(JwksSource::File(jwks.clone()), ISSUER, AUDIENCE);
    let verifier = JwtVerifier::new(config).await.unwrap();
    let ledger = LedgerConfig::new(Arc::new(MemoryStore::new()));
    let server = start_configured(default_script(), move |config| {
        config.principals = PrincipalSource::Jwt(verifier);
        config.ledger = Some(ledger);
    })
    .await;
    Setup { server, keys, jwks, _dir: dir }
}

async fn with_token(server: &Server, token: &str) -> Reply {
    send(server, "GET", "/api/audit", &[("authorization", &format!("Bearer {token}"))], b"").await
}

/// A 401 whose challenge says `invalid_token` and names the check.
fn assert_refused(reply: &Reply, check: &str) {
    assert_eq!((reply.status, reply.json()["error"]["code"].as_str()), (401, Some("unauthorized")), "{}", reply.body);
    let challenge =
        reply.header("www-authenticate").unwrap_or_else(|| panic!("no challenge: {} {}", reply.status, reply.body));
    assert!(challenge.starts_with("Bearer error=\"invalid_token\", error_description=\""), "{challenge}");
    assert!(challenge.contains(check), "`{check}` in {challenge}");
}

#[tokio::test]
async fn tokens_of_every_accepted_algorithm_name_their_principal() {
    let setup = start_jwt().await;
    for key in &setup.keys {
        let reply = with_token(&setup.server, &sign(key, &claims(|_| {}))).await;
        assert_eq!(reply.status, 200, "{:?}: {}", key.algorithm, reply.body);
    }
    // The principal is the `sub` claim: the audit log records it as the owner.
    let token = sign(&setup.keys[2], &claims(|_| {}));
    let body = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]})
    .to_string();
    let headers = [("content-type", "application/json"), ("authorization", &*format!("Bearer {token}"))];
    assert_eq!(send(&setup.server, "POST", "/api/chat", &headers, body.as_bytes()).await.status, 200);
    let audit = with_token(&setup.server, &token).await;
    let event: Value = serde_json::from_str(audit.body.lines().next().expect("an issued event")).unwrap();
    assert_eq!((event["kind"].as_str(), event["owner"].as_str()), (Some("issued"), Some("alice")));
}

#[tokio::test]
async fn every_failed_check_is_a_401_that_names_it() {
    let setup = start_jwt().await;
    let (rsa, ec) = (&setup.keys[0], &setup.keys[1]);
    let server = &setup.server;
    assert_refused(&get(server, "/api/audit").await, "no bearer token");
    let cases = [
        (sign(rsa, &claims(|c| c["exp"] = json!(now() - 120))), "expired"),
        (sign(ec, &claims(|c| c["nbf"] = json!(now() + 120))), "not valid yet"),
        (sign(rsa, &claims(|c| c["iss"] = json!("https://elsewhere.test"))), "issuer"),
        (sign(ec, &claims(|c| c["aud"] = json!("another-app"))), "audience"),
        (sign(rsa, &claims(|c| c.as_object_mut().unwrap().retain(|k, _| k != "exp"))), "`exp` is required"),
        (sign(ec, &claims(|c| c["sub"] = json!(""))), "`sub` must be a non-empty string"),
        (sign(ec, &claims(|c| c["groups"] = json!("finance"))), "`groups` must be an array of strings"),
    ];
    for (token, check) in &cases {
        assert_refused(&with_token(server, token).await, check);
    }
    // Within the 60 s leeway a just-expired token still passes.
    assert_eq!(with_token(server, &sign(rsa, &claims(|c| c["exp"] = json!(now() - 30)))).await.status, 200);

    // A key the JWKS does not hold.
    let stranger = generate(setup._dir.path(), "stranger", Algorithm::EdDSA);
    assert_refused(&with_token(server, &sign(&stranger, &claims(|_| {}))).await, "`stranger` is not in the JWKS");

    // `alg: none`, unsigned.
    let encode = |value: &Value| URL_SAFE_NO_PAD.encode(value.to_string());
    let none = format!("{}.{}.", encode(&json!({"alg": "none", "typ": "JWT"})), encode(&claims(|_| {})));
    assert_refused(&with_token(server, &none).await, "algorithm `none` is not accepted");

    // HS256 "signed" with the RSA public key as the secret, naming the RSA key.
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(rsa.kid.clone());
    let confused = jsonwebtoken::encode(&header, &claims(|_| {}), &EncodingKey::from_secret(&rsa.public_pem)).unwrap();
    assert_refused(&with_token(server, &confused).await, "is not accepted");

    // A tampered payload: Alice's valid token with Bob's claims put in.
    let valid = sign(ec, &claims(|_| {}));
    let parts: Vec<&str> = valid.split('.').collect();
    let tampered = format!("{}.{}.{}", parts[0], encode(&claims(|c| c["sub"] = json!("bob"))), parts[2]);
    assert_refused(&with_token(server, &tampered).await, "signature is invalid");
}

/// A key the JWKS publishes for encryption, or for another algorithm, verifies no token.
#[tokio::test]
async fn a_key_published_for_another_use_verifies_nothing() {
    use jsonwebtoken::jwk::{KeyAlgorithm, PublicKeyUse};
    let setup = start_jwt().await;
    let mut for_encryption = generate(setup._dir.path(), "enc-1", Algorithm::RS256);
    for_encryption.jwk.common.public_key_use = Some(PublicKeyUse::Encryption);
    let mut for_ps256 = generate(setup._dir.path(), "ps-1", Algorithm::RS256);
    for_ps256.jwk.common.key_algorithm = Some(KeyAlgorithm::PS256);
    let mut for_signatures = generate(setup._dir.path(), "sig-1", Algorithm::ES256);
    for_signatures.jwk.common.public_key_use = Some(PublicKeyUse::Signature);
    for_signatures.jwk.common.key_algorithm = Some(KeyAlgorithm::ES256);
    write_jwks(&setup.jwks, &[&for_encryption, &for_ps256, &for_signatures]);
    for key in [&for_encryption, &for_ps256] {
        assert_refused(&with_token(&setup.server, &sign(key, &claims(|_| {}))).await, "published for another use");
    }
    assert_eq!(with_token(&setup.server, &sign(&for_signatures, &claims(|_| {}))).await.status, 200);
}

#[tokio::test]
async fn a_rotated_key_is_picked_up_without_a_restart() {
    let setup = start_jwt().await;
    let rotated = generate(setup._dir.path(), "rsa-2", Algorithm::RS256);
    let token = sign(&rotated, &claims(|_| {}));
    write_jwks(&setup.jwks, &[&rotated]);
    assert_eq!(with_token(&setup.server, &token).await.status, 200, "the new kid made the server read the JWKS again");
    let retired = sign(&setup.keys[0], &claims(|_| {}));
    assert_refused(&with_token(&setup.server, &retired).await, "`rsa-1` is not in the JWKS");
}

/// The JWKS over HTTP (loopback), kept for its `Cache-Control` max-age.
#[tokio::test]
async fn a_jwks_url_is_fetched() {
    let dir = tempfile::tempdir().unwrap();
    let key = generate(dir.path(), "ed-url", Algorithm::EdDSA);
    let set = JwkSet { keys: vec![key.jwk.clone()] };
    let served = serde_json::to_string(&set).unwrap();
    let app = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            let served = served.clone();
            async move { ([("cache-control", "public, max-age=600")], served) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let verifier = JwtVerifier::new(JwtConfig::new(JwksSource::parse(&url).unwrap(), ISSUER, AUDIENCE)).await.unwrap();
    let verified = verifier.verify(&sign(&key, &claims(|_| {}))).await.unwrap();
    assert_eq!((verified.principal.as_str(), verified.groups), ("alice", vec!["finance".to_owned()]));
}

/// Item 9 of the threat model: the JWKS fetch follows no redirect and stops
/// reading past its cap (the body is streamed, never held whole).
#[tokio::test]
async fn a_jwks_redirect_or_an_oversized_jwks_is_refused() {
    let huge = "x".repeat(3 * 1024 * 1024);
    let app = axum::Router::new()
        .route(
            "/moved",
            axum::routing::get(|| async { (axum::http::StatusCode::FOUND, [("location", "/elsewhere")], "") }),
        )
        .route("/huge", axum::routing::get(move || std::future::ready(huge.clone())));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    for (path, said) in [("/moved", "redirect"), ("/huge", "larger than")] {
        let source = JwksSource::parse(&format!("{base}{path}")).unwrap();
        let error = JwtVerifier::new(JwtConfig::new(source, ISSUER, AUDIENCE)).await.unwrap_err().to_string();
        assert!(error.contains(said), "{path}: {error}");
    }
}

/// Item 9 of the threat model: an open inbox stream kept the permissions it
/// began with. Now it checks its credential again at every keep-alive and,
/// once the token expired, ends with an `ended` event saying why.
#[tokio::test]
async fn an_inbox_stream_ends_when_its_token_expires() {
    a_stream_ends_when_its_token_expires("/api/approvals/stream").await;
}

/// The call-gating API's stream kept the permissions it began with, as the
/// inbox stream once did: it checks its credential at every keep-alive too.
#[tokio::test]
async fn a_call_stream_ends_when_its_token_expires() {
    a_stream_ends_when_its_token_expires("/api/calls/stream").await;
}

/// Opens the stream at `path` with a token about to expire and reads it until it ends.
async fn a_stream_ends_when_its_token_expires(path: &str) {
    let setup = start_jwt().await;
    // Valid now only thanks to the 60 s leeway, and not for long.
    let token = sign(&setup.keys[0], &claims(|claims| claims["exp"] = json!(now() - 58)));
    let url = format!("http://{}{path}", setup.server.addr);
    let response = reqwest::Client::new().get(url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    let read = async {
        while let Some(chunk) = futures::StreamExt::next(&mut body).await {
            seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            if seen.contains("event: ended") {
                break;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), read).await.expect("the stream ended within 30 s");
    let data = seen.split("event: ended\ndata: ").nth(1).unwrap().lines().next().unwrap();
    let ended: Value = serde_json::from_str(data).unwrap();
    assert_eq!(ended["code"], "unauthorized", "{ended}");
    assert!(ended["message"].as_str().unwrap().contains("expired"), "{ended}");
}
