//! Groups reach the rules: a `principal = "group:NAME"` rule applies to the
//! members of the config's `[groups]` and to the groups a JWT names, and to
//! nobody merely named like the group.

mod common;

use std::collections::BTreeMap;

use axum::http::HeaderName;
use common::keys::{AUDIENCE, ISSUER, claims, generate, sign, write_jwks};
use common::*;
use jsonwebtoken::Algorithm;
use serde_json::{Value, json};
use toolgate_policy::{Policy, PolicyHandle};
use toolgate_server::{JwksSource, JwtConfig, JwtVerifier, PrincipalSource, ServerConfig};

const RULES: &str = "[[rule]]\nname = \"finance-never-deletes\"\naction = \"deny\"\ntool = \"delete_file\"\n\
                     principal = \"group:finance\"\nreason = \"finance does not delete files\"\n";

fn first_turn() -> String {
    json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]})
    .to_string()
}

/// What happened to the first turn's `delete_file` call: denied by the group rule, or asked.
async fn outcome(server: &Server, credential: (&str, &str)) -> &'static str {
    let headers = [("content-type", "application/json"), credential];
    let reply = send(server, "POST", "/api/chat", &headers, first_turn().as_bytes()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chunks = reply.chunks();
    let kind = |name: &str| chunks.iter().any(|chunk| chunk["type"] == name);
    if kind("tool-output-denied") {
        let reason = chunks.iter().find(|chunk| chunk["type"] == "data-toolgate-reason").map(|c| c["data"].clone());
        assert!(reason.unwrap_or(Value::Null).to_string().contains("finance-never-deletes"), "{chunks:#?}");
        "denied"
    } else if kind("tool-approval-request") {
        "asked"
    } else {
        panic!("neither denied nor asked: {chunks:#?}")
    }
}

fn with_rules(config: &mut ServerConfig) {
    config.policy = PolicyHandle::new(Policy::from_toml_str(RULES).unwrap());
}

#[tokio::test]
async fn a_group_rule_applies_to_the_config_groups_members() {
    let server = start_configured(default_script(), |config| {
        with_rules(config);
        config.principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
        config.groups = BTreeMap::from([("finance".to_owned(), vec!["bob".to_owned()])]);
    })
    .await;
    assert_eq!(outcome(&server, ("x-user", "bob")).await, "denied");
    assert_eq!(outcome(&server, ("x-user", "alice")).await, "asked");
    // A principal named like the group is no principal at all: refused where it enters.
    let headers = [("content-type", "application/json"), ("x-user", "group:finance")];
    let reply = send(&server, "POST", "/api/chat", &headers, first_turn().as_bytes()).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.contains("invalid_principal") && reply.body.contains("a group"), "{}", reply.body);
}

#[tokio::test]
async fn a_group_rule_applies_to_the_groups_a_token_names() {
    let dir = tempfile::tempdir().unwrap();
    let key = generate(dir.path(), "idp-1", Algorithm::ES256);
    let jwks = dir.path().join("jwks.json");
    write_jwks(&jwks, &[&key]);
    let jwt = JwtConfig::new(JwksSource::File(jwks), ISSUER, AUDIENCE);
    let verifier = JwtVerifier::new(jwt).await.unwrap();
    let server = start_configured(default_script(), move |config| {
        with_rules(config);
        config.principals = PrincipalSource::Jwt(verifier);
    })
    .await;
    let finance = format!("Bearer {}", sign(&key, &claims(|claims| claims["groups"] = json!(["finance", "staff"]))));
    assert_eq!(outcome(&server, ("authorization", &finance)).await, "denied");
    let staff = format!("Bearer {}", sign(&key, &claims(|claims| claims["groups"] = json!(["staff"]))));
    assert_eq!(outcome(&server, ("authorization", &staff)).await, "asked");

    // `GET /api/me` says who the server takes the token for.
    let me = send(&server, "GET", "/api/me", &[("authorization", &finance)], b"").await;
    assert_eq!(me.json(), json!({"principal": "alice", "groups": ["finance", "staff"], "signIn": "token"}));
    let anonymous = get(&server, "/api/me").await;
    assert_eq!((anonymous.status, anonymous.json()["error"]["code"].as_str()), (401, Some("unauthorized")));
}

#[tokio::test]
async fn a_single_user_server_names_nobody() {
    let server = start_configured(default_script(), |_| {}).await;
    let me = get(&server, "/api/me").await;
    assert_eq!(me.json(), json!({"principal": null, "groups": [], "signIn": "none"}));
}
