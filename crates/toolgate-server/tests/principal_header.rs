//! `--principal-header` is believed only from loopback and `--trusted-proxy`
//! networks: anyone else could name any principal. Requests go through the
//! router in process with the peer's address set as the connection would
//! (no traffic leaves the process), and over a real loopback socket.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderName, Request};
use common::*;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use toolgate::ScriptedModel;
use toolgate_server::{AppState, ApprovalSecret, PrincipalSource, ServerConfig, router};
use tower::ServiceExt;

fn state(proxies: &[&str]) -> AppState {
    let dir = std::env::temp_dir();
    let secret = ApprovalSecret::resolve(Some("test-secret"), &dir).unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), toolgate::demo::toolkit(), secret);
    let proxies = proxies.iter().map(|net| net.parse().unwrap()).collect();
    config.principals = PrincipalSource::Header(HeaderName::from_static("x-user"), proxies);
    let model = ScriptedModel::from_json(&default_script().to_string()).unwrap();
    AppState::new(config, Arc::new(model)).unwrap()
}

/// `GET /api/decisions` as `alice` from `peer` (`None`: a connection the router cannot see).
async fn decisions_from(state: &AppState, peer: Option<&str>) -> (u16, Value) {
    let mut request = Request::get("/api/decisions").header("x-user", "alice").body(Body::empty()).unwrap();
    if let Some(peer) = peer {
        let addr: SocketAddr = peer.parse().unwrap();
        request.extensions_mut().insert(ConnectInfo(addr));
    }
    let response = router(state.clone()).oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn a_principal_header_from_an_untrusted_peer_is_refused() {
    let state = state(&["198.51.100.0/24"]);
    for trusted in ["127.0.0.1:5000", "[::1]:5000", "198.51.100.9:443"] {
        let (status, body) = decisions_from(&state, Some(trusted)).await;
        assert_eq!((status, body), (200, json!({"decisions": []})), "{trusted}");
    }
    for untrusted in [Some("192.0.2.7:5000"), Some("[2001:db8::1]:5000"), None] {
        let (status, body) = decisions_from(&state, untrusted).await;
        assert_eq!((status, body["error"]["code"].as_str()), (401, Some("unauthorized")), "{untrusted:?}");
        assert!(body["error"]["message"].as_str().unwrap().contains("x-user"), "{body}");
    }
}

/// Served for real, the connection's own address is what decides.
#[tokio::test]
async fn a_served_loopback_client_is_believed() {
    let principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
    let server = start_configured(default_script(), move |config| config.principals = principals).await;
    let reply = send(&server, "GET", "/api/decisions", &[("x-user", "alice")], b"").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}
