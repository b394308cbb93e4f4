//! What the call-gating API's test files share: a server with rules on a
//! store (in memory, or two replicas on one SQLite file or one Postgres
//! database), and the API's requests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderName;
use serde_json::Value;
use toolgate::ledger::{LedgerConfig, LedgerStore, ManualClock, MemoryStore};
use toolgate_policy::{Policy, PolicyHandle};
use toolgate_server::{CallsDefault, PrincipalSource, ServerConfig};

use crate::common::*;

/// The rules most call tests run under: reads allowed, drops denied,
/// payments asked of two of finance.
pub const RULES: &str = r#"
[[rule]]
name = "reads"
action = "allow"
tool = "read_file"

[[rule]]
name = "no-drops"
action = "deny"
tool = "drop_table"
reason = "tables are never dropped"

[[rule]]
name = "payments"
action = "ask"
tool = "transfer"
approvers = ["group:finance"]
quorum = 2
reason = "finance signs off payments"
"#;

/// The clock every test server starts at.
pub const T0: i64 = 1_800_000_000_000;

/// A server with `rules`, principals from `x-user`, `finance` = bob and
/// carol, on `store` at `clock`, deciding what no rule names by `default`.
pub async fn server_with(
    rules: &str,
    store: Arc<dyn LedgerStore>,
    clock: Arc<ManualClock>,
    default: CallsDefault,
) -> Server {
    let policy = Policy::from_toml_str(rules).expect("the test's rules compile");
    start_configured(default_script(), move |config: &mut ServerConfig| {
        config.policy = PolicyHandle::new(policy);
        config.principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
        config.groups = BTreeMap::from([("finance".to_owned(), vec!["bob".to_owned(), "carol".to_owned()])]);
        config.ledger = Some(LedgerConfig::new(store).clock(clock).ttl(Duration::from_secs(3600)));
        config.calls.default = default;
    })
    .await
}

/// Where a test's servers keep their ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// One server, in memory.
    Memory,
    /// Two servers on one SQLite file.
    Sqlite,
    /// Two servers on one fresh Postgres database (`TOOLGATE_TEST_POSTGRES_URL`).
    Postgres,
}

/// The servers of a test on one backend: two replicas on a database (the
/// same server twice in memory), sharing one clock.
pub struct Replicas {
    pub first: Server,
    pub second: Option<Server>,
    pub clock: Arc<ManualClock>,
    _dir: Option<std::path::PathBuf>,
}

impl Replicas {
    /// The second replica (the first in memory).
    pub fn second(&self) -> &Server {
        self.second.as_ref().unwrap_or(&self.first)
    }

    /// Both replicas (one in memory).
    pub fn all(&self) -> Vec<&Server> {
        std::iter::once(&self.first).chain(self.second.as_ref()).collect()
    }
}

impl Drop for Replicas {
    fn drop(&mut self) {
        if let Some(dir) = &self._dir {
            std::fs::remove_dir_all(dir).ok();
        }
    }
}

/// The servers of `backend` with `rules`; `None` (with a note) when it is
/// Postgres and no database is configured (a failure when
/// `TOOLGATE_TEST_REQUIRE_POSTGRES=1`).
pub async fn replicas(backend: Backend, rules: &str, default: CallsDefault) -> Option<Replicas> {
    let clock = Arc::new(ManualClock::new(T0));
    let (stores, dir): (Vec<Arc<dyn LedgerStore>>, _) = match backend {
        Backend::Memory => (vec![Arc::new(MemoryStore::new())], None),
        Backend::Sqlite => {
            let dir = std::env::temp_dir().join(format!("toolgate-calls-{}", uuid::Uuid::now_v7().simple()));
            std::fs::create_dir_all(&dir).unwrap();
            let spec = toolgate_store::StoreSpec::Sqlite(dir.join("ledger.db"));
            (vec![open(&spec).await, open(&spec).await], Some(dir))
        }
        Backend::Postgres => {
            let url = postgres_url()?;
            let spec = toolgate_store::StoreSpec::Postgres(fresh_database(&url).await);
            (vec![open(&spec).await, open(&spec).await], None)
        }
    };
    let mut servers = Vec::new();
    for store in stores {
        servers.push(server_with(rules, store, clock.clone(), default).await);
    }
    let second = (servers.len() > 1).then(|| servers.pop()).flatten();
    let first = servers.pop().expect("a server");
    Some(Replicas { first, second, clock, _dir: dir })
}

async fn open(spec: &toolgate_store::StoreSpec) -> Arc<dyn LedgerStore> {
    toolgate_store::open_store(spec).await.expect("the store opens").expect("a store")
}

/// The Postgres URL to test against: `None` (with a note) to skip; panics
/// when `TOOLGATE_TEST_REQUIRE_POSTGRES=1` but no URL is set.
pub fn postgres_url() -> Option<String> {
    match std::env::var("TOOLGATE_TEST_POSTGRES_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            assert_ne!(
                std::env::var("TOOLGATE_TEST_REQUIRE_POSTGRES").as_deref(),
                Ok("1"),
                "TOOLGATE_TEST_REQUIRE_POSTGRES=1 but TOOLGATE_TEST_POSTGRES_URL is not set"
            );
            eprintln!("note: skipped on Postgres: TOOLGATE_TEST_POSTGRES_URL is not set (scripts/with-postgres.sh)");
            None
        }
    }
}

/// A fresh database on the server of `url`, and its URL.
pub async fn fresh_database(url: &str) -> String {
    use sqlx::Connection;
    let name = format!("toolgate_calls_{}", uuid::Uuid::now_v7().simple());
    let mut connection = sqlx::PgConnection::connect(url).await.expect("Postgres answers");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut connection).await.unwrap();
    connection.close().await.ok();
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, format!("?{query}")),
        None => (url, String::new()),
    };
    let (server, _) = head.rsplit_once('/').expect("a database URL");
    format!("{server}/{name}{query}")
}

/// `POST /api/calls` as `user`.
pub async fn gate(server: &Server, user: &str, body: Value) -> Reply {
    call(server, "POST", "/api/calls", user, Some(body)).await
}

/// `GET /api/calls/{id}` as `user`.
pub async fn status(server: &Server, user: &str, id: &str) -> Reply {
    call(server, "GET", &format!("/api/calls/{id}"), user, None).await
}

/// `POST /api/calls/{id}/start` as `user`.
pub async fn start_call(server: &Server, user: &str, id: &str) -> Reply {
    call(server, "POST", &format!("/api/calls/{id}/start"), user, None).await
}

/// `POST /api/calls/{id}/finish` as `user` with `body`.
pub async fn finish_call(server: &Server, user: &str, id: &str, body: Value) -> Reply {
    call(server, "POST", &format!("/api/calls/{id}/finish"), user, Some(body)).await
}

/// A vote on approval `approval` as `user`.
pub async fn vote(server: &Server, approval: &str, user: &str, body: Value) -> Reply {
    call(server, "POST", &format!("/api/approvals/{approval}"), user, Some(body)).await
}

/// The error code of a reply.
pub fn code(reply: &Reply) -> String {
    reply.json()["error"]["code"].as_str().unwrap_or_default().to_owned()
}

/// A string field of `value`.
pub fn text<'v>(value: &'v Value, key: &str) -> &'v str {
    value[key].as_str().unwrap_or_else(|| panic!("`{key}` in {value}"))
}
