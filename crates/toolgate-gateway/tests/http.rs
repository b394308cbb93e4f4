//! The gateway over streamable HTTP with a principal source: a request
//! without a known token is refused before anything runs, and a call's
//! approval is filed under the token's principal, not the gateway's default.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use support::{Client, Setup, call};
use tokio_util::sync::CancellationToken;
use toolgate::ledger::{ApprovalQuery, InboxStore};
use toolgate_auth::{PrincipalSource, TokenTable};
use toolgate_gateway::Identity;
use toolgate_gateway::http::{Principals, router};

async fn serve(setup: &Setup) -> String {
    let tokens = TokenTable::from_entries(HashMap::from([("carol-token".to_owned(), "carol".to_owned())])).unwrap();
    let principals = Principals {
        source: Arc::new(PrincipalSource::Tokens(tokens)),
        groups: Arc::new(BTreeMap::from([("ops".to_owned(), vec!["carol".to_owned()])])),
    };
    let default = Identity { principal: "alice".into(), groups: vec![] };
    let app = router(Arc::clone(&setup.gateway), default, principals, vec![], CancellationToken::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::test]
async fn a_request_without_a_known_token_is_refused() {
    let setup = Setup::new("", |_| {}).await;
    let base = serve(&setup).await;
    let http = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}});
    for token in [None, Some("wrong")] {
        let mut request =
            http.post(format!("{base}/mcp")).header("accept", "application/json, text/event-stream").json(&initialize);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "token {token:?}");
        // The refusal `toolgate serve` gives: its code and words as JSON.
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("tokens file"), "{body}");
    }
    assert_eq!(http.get(format!("{base}/healthz")).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_call_is_filed_under_the_token_principal() {
    let setup = Setup::new("", |_| {}).await;
    let base = serve(&setup).await;
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header("carol-token");
    let session = Client::default().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    let pending = call(&session, "count__bump", json!({"label": "h"})).await;
    assert_eq!(pending["_meta"]["toolgate/approval"]["state"], json!("pending"), "{pending}");
    let query = ApprovalQuery { limit: 10, ..ApprovalQuery::default() };
    let records = setup.store.list_approvals(&query).await.unwrap();
    assert_eq!(records.len(), 1);
    // The requester and the client are fields of the record, not parts of its key.
    let record = &records[0];
    assert_eq!(record.owner.as_deref(), Some("carol"));
    assert_eq!(record.client.as_deref(), Some("test-client"));
    assert_eq!(record.conversation_name(), "mcp:carol:test-client");
    assert_eq!(setup.counter.count(), 0);
}
