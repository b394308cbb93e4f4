//! `GET /metrics` after a scripted day: one call approved and run, one
//! denied, both in the inbox and continued by the server; each series the
//! issue names for these events is read back by name and labels, and the
//! endpoint is for admins only once a principal source is configured.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use axum::http::HeaderName;
use common::*;
use serde_json::{Value, json};
use toolgate::ledger::{AuditKind, AuditQuery, LedgerConfig, MemoryStore};
use toolgate_server::{PrincipalSource, ServerConfig};

async fn server() -> Server {
    start_configured(default_script(), move |config: &mut ServerConfig| {
        config.toolkit = counting_toolkit(Arc::new(AtomicUsize::new(0)));
        config.principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
        config.admins = vec!["root".to_owned()];
        config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
    })
    .await
}

/// Alice asks in chat `chat`; the approval's id.
async fn ask(server: &Server, chat: &str) -> String {
    let body = json!({"id": chat, "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]});
    let reply = call(server, "POST", "/api/chat", "alice", Some(body)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chunks = reply.chunks();
    let request = chunks.iter().find(|chunk| chunk["type"] == "tool-approval-request").expect("an approval request");
    request["approvalId"].as_str().unwrap().to_owned()
}

/// Waits until the store holds `count` events of `kind`.
async fn events(server: &Server, kind: AuditKind, count: usize) {
    let store = server.state.config().ledger.as_ref().unwrap().store.clone();
    for _ in 0..100 {
        let found = store.audit(&AuditQuery::default()).await.unwrap().iter().filter(|e| e.kind == kind).count();
        if found >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("fewer than {count} `{}` events after 5 s", kind.as_str());
}

/// The samples of series `name` whose labels include `labels`, summed.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut total = 0.0;
    let mut found = false;
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let (series_name, rest) = series.split_once('{').unwrap_or((series, "}"));
        if series_name != name {
            continue;
        }
        let own: BTreeMap<&str, &str> = rest
            .trim_end_matches('}')
            .split(',')
            .filter_map(|pair| pair.split_once('='))
            .map(|(key, value)| (key, value.trim_matches('"')))
            .collect();
        if labels.iter().all(|(key, value)| own.get(key) == Some(value)) {
            total += value.parse::<f64>().unwrap();
            found = true;
        }
    }
    assert!(found, "no sample of `{name}` with {labels:?} in:\n{text}");
    total
}

#[tokio::test]
async fn a_scripted_day_shows_in_every_series_and_only_admins_read_them() {
    let server = server().await;
    let approved = ask(&server, "chat-1").await;
    let scraped = call(&server, "GET", "/metrics", "root", None).await.body;
    assert_eq!(sample(&scraped, "toolgate_approvals_pending", &[]), 1.0, "counted in the store");
    let reply =
        call(&server, "POST", &format!("/api/approvals/{approved}"), "alice", Some(json!({"decision": "approve"})))
            .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    events(&server, AuditKind::Executed, 1).await;
    let denied = ask(&server, "chat-2").await;
    let deny = json!({"decision": "deny", "reason": "not today"});
    let reply = call(&server, "POST", &format!("/api/approvals/{denied}"), "alice", Some(deny)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    events(&server, AuditKind::Continued, 2).await;
    assert_eq!(call(&server, "GET", "/nowhere", "alice", None).await.status, 404);

    let refused = call(&server, "GET", "/metrics", "alice", None).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(refused.json()["error"]["code"], "admin_only");
    let scraped = call(&server, "GET", "/metrics", "root", None).await;
    assert_eq!(scraped.status, 200, "{}", scraped.body);
    assert!(scraped.header("content-type").is_some_and(|value| value.starts_with("text/plain; version=0.0.4")));
    let text = scraped.body;
    let decided = |outcome| sample(&text, "toolgate_approvals_decided_total", &[("outcome", outcome)]);
    assert_eq!(
        (decided("approved"), decided("denied"), decided("expired"), decided("withdrawn")),
        (1.0, 1.0, 0.0, 0.0)
    );
    assert_eq!(sample(&text, "toolgate_approval_decision_seconds_count", &[]), 2.0);
    let calls = |outcome| sample(&text, "toolgate_tool_calls_total", &[("tool", "delete_file"), ("outcome", outcome)]);
    assert_eq!((calls("executed"), calls("denied")), (1.0, 1.0));
    assert_eq!(sample(&text, "toolgate_continuation_seconds_count", &[]), 2.0);
    let http = |route, status| sample(&text, "toolgate_http_requests_total", &[("route", route), ("status", status)]);
    assert_eq!(http("/api/chat", "200"), 2.0);
    assert_eq!(http("/api/approvals/{id}", "200"), 2.0);
    assert_eq!(http("/metrics", "403"), 1.0);
    assert_eq!(http("unmatched", "404"), 1.0);
    assert_eq!(sample(&text, "toolgate_http_request_duration_seconds_count", &[("route", "/api/chat")]), 2.0);
    // Each chat: the request that asks, and the continued run after the decision.
    assert_eq!(sample(&text, "toolgate_model_request_seconds_count", &[("provider", "script")]), 4.0);
    assert!(sample(&text, "toolgate_store_operation_seconds_count", &[("op", "apply")]) >= 2.0);
    assert!(sample(&text, "toolgate_store_operation_seconds_count", &[("op", "issue")]) >= 2.0);
    assert_eq!(sample(&text, "toolgate_approvals_pending", &[]), 0.0);
    assert_eq!(sample(&text, "toolgate_outbox_pending", &[]), 0.0);
    // Every series is there (notifications aside: this server has no channel).
    for name in toolgate_server::metrics::SERIES.iter().filter(|name| **name != "toolgate_notifications_total") {
        assert!(text.contains(&format!("# TYPE {name} ")), "`{name}` is missing:\n{text}");
    }
}

#[tokio::test]
async fn a_single_user_server_serves_its_metrics_to_its_user() {
    let server = start_configured(default_script(), |_| {}).await;
    let reply = get(&server, "/metrics").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(sample(&reply.body, "toolgate_approvals_decided_total", &[("outcome", "approved")]), 0.0);
}

/// `--metrics-addr`: the metrics alone, without sign-in, on a listener of
/// their own; nothing else is served there, and a rebound `Host` is refused.
#[tokio::test]
async fn the_metrics_listener_serves_the_metrics_alone_to_scrapers() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let metrics_addr = free.local_addr().unwrap();
    drop(free);
    let server = start_configured(default_script(), move |config: &mut ServerConfig| {
        config.principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
        config.ledger = Some(LedgerConfig::new(Arc::new(MemoryStore::new())));
        config.metrics_addr = Some(metrics_addr);
    })
    .await;
    ask(&server, "chat-1").await;
    assert_eq!(call(&server, "GET", "/metrics", "alice", None).await.status, 403, "on --addr: admins only");
    let client = reqwest::Client::new();
    let url = format!("http://{metrics_addr}/metrics");
    let mut scraped = None;
    for _ in 0..100 {
        if let Ok(response) = client.get(&url).send().await {
            scraped = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let scraped = scraped.expect("the metrics listener answers");
    assert_eq!(scraped.status(), 200);
    let text = scraped.text().await.unwrap();
    assert_eq!(sample(&text, "toolgate_approvals_pending", &[]), 1.0);
    let elsewhere = client.get(format!("http://{metrics_addr}/api/approvals")).send().await.unwrap();
    assert_eq!(elsewhere.status(), 404, "nothing but the metrics");
    let rebound = client.get(&url).header("host", "evil.example").send().await.unwrap();
    assert_eq!(rebound.status(), 421);
}

/// `GET /readyz`: ready on a store at this build's schema; 503 `not_ready`
/// naming the migrations when the schema is behind; ready again once it is
/// current. `/healthz` answers throughout.
#[tokio::test]
async fn readiness_follows_the_stores_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let store = toolgate_store::open_store(&toolgate_store::StoreSpec::Sqlite(path.clone())).await.unwrap().unwrap();
    let server = start_configured(default_script(), move |config: &mut ServerConfig| {
        config.ledger = Some(LedgerConfig::new(store));
    })
    .await;
    let ready = get(&server, "/readyz").await;
    assert_eq!((ready.status, ready.body.as_str()), (200, "ready"));
    // Take the newest migration's row away, as an older build's database would be.
    let sqlite = rusqlite::Connection::open(&path).unwrap();
    let newest: i64 = sqlite.query_row("SELECT MAX(version) FROM _sqlx_migrations", [], |row| row.get(0)).unwrap();
    sqlite.execute("UPDATE _sqlx_migrations SET success = 0 WHERE version = ?1", [newest]).unwrap();
    let behind = get(&server, "/readyz").await;
    assert_eq!(behind.status, 503, "{}", behind.body);
    assert_eq!(behind.json()["error"]["code"], "not_ready");
    assert!(behind.json()["error"]["message"].as_str().unwrap().contains(&format!("this build's is {newest}")));
    assert_eq!(get(&server, "/healthz").await.status, 200, "alive all the same");
    sqlite.execute("UPDATE _sqlx_migrations SET success = 1 WHERE version = ?1", [newest]).unwrap();
    assert_eq!(get(&server, "/readyz").await.status, 200);
}

/// The dashboard in `examples/grafana` charts every series the server
/// exports, and nothing the server does not export.
#[test]
fn the_dashboard_charts_every_series_and_no_other() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/grafana/toolgate.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut charted = std::collections::BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for (at, _) in expr.match_indices("toolgate_") {
                let name: String = expr[at..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                let name = name.trim_end_matches("_bucket").to_owned();
                charted.insert(name);
            }
        }
    }
    let exported: std::collections::BTreeSet<String> =
        toolgate_server::metrics::SERIES.iter().map(|name| (*name).to_owned()).collect();
    assert_eq!(charted, exported);
}
