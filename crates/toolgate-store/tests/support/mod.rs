//! Stores to run the behavioural suite against, and record builders.
#![allow(dead_code, missing_docs)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};
use sqlx::Connection;
use toolgate::ledger::{
    ApprovalRecord, ApprovalState, AuditEvent, AuditKind, DecisionQuery, DecisionScope, Guard, Lease, LedgerStore,
    MemoryStore, RecordedDecision, StoredDecision, Transition, TransitionOutcome, Update,
};
use toolgate_store::{SqlStore, StoreSpec};

/// The Postgres server the suite also runs against, when set.
pub const POSTGRES_URL: &str = "TOOLGATE_TEST_POSTGRES_URL";
/// When `1`, a missing [`POSTGRES_URL`] fails the Postgres tests instead of skipping them.
pub const REQUIRE_POSTGRES: &str = "TOOLGATE_TEST_REQUIRE_POSTGRES";

/// Two handles on one database (two "processes" for the SQL stores).
pub struct Stores {
    pub a: Arc<dyn LedgerStore>,
    pub b: Arc<dyn LedgerStore>,
    sql: Vec<Arc<SqlStore>>,
    _dir: Option<tempfile::TempDir>,
    drop_database: Option<(String, String)>,
}

impl Stores {
    pub fn memory() -> Self {
        let store: Arc<dyn LedgerStore> = Arc::new(MemoryStore::new());
        Self { a: store.clone(), b: store, sql: Vec::new(), _dir: None, drop_database: None }
    }

    pub async fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let spec = StoreSpec::Sqlite(dir.path().join("ledger.db"));
        let (a, b) = (open(&spec).await, open(&spec).await);
        Self { a: a.clone(), b: b.clone(), sql: vec![a, b], _dir: Some(dir), drop_database: None }
    }

    /// A fresh database on the test server, or `None` (skipped) without one.
    pub async fn postgres(test: &str) -> Option<Self> {
        let (url, name, database) = fresh_postgres_database(test).await?;
        // The second handle keeps two connections (`pool_max_conns`): races still run on both.
        let separator = if database.contains('?') { '&' } else { '?' };
        let small_pool = StoreSpec::Postgres(format!("{database}{separator}pool_max_conns=2"));
        let (a, b) = (open(&StoreSpec::Postgres(database)).await, open(&small_pool).await);
        Some(Self { a: a.clone(), b: b.clone(), sql: vec![a, b], _dir: None, drop_database: Some((url, name)) })
    }

    /// Closes the SQL stores and drops a test database.
    pub async fn finish(self) {
        for store in &self.sql {
            store.close().await;
        }
        if let Some((url, name)) = &self.drop_database {
            drop_postgres_database(url, name).await;
        }
    }
}

/// A fresh, empty database on the test server: the server's URL, the
/// database's name and its URL; `None` (skipped) without a server. Drop it
/// with [`drop_postgres_database`].
pub async fn fresh_postgres_database(test: &str) -> Option<(String, String, String)> {
    let Ok(url) = std::env::var(POSTGRES_URL) else {
        assert!(
            std::env::var(REQUIRE_POSTGRES).as_deref() != Ok("1"),
            "{REQUIRE_POSTGRES}=1 but {POSTGRES_URL} is not set"
        );
        eprintln!("skipped postgres::{test}: set {POSTGRES_URL} to run it");
        return None;
    };
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!("toolgate_test_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let mut admin = sqlx::PgConnection::connect(&url).await.expect("connect to the test server");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .expect("create a test database");
    admin.close().await.ok();
    let database = with_database(&url, &name);
    Some((url, name, database))
}

/// Drops a database [`fresh_postgres_database`] created.
pub async fn drop_postgres_database(url: &str, name: &str) {
    let mut admin = sqlx::PgConnection::connect(url).await.expect("connect to the test server");
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
        .execute(&mut admin)
        .await
        .expect("drop the test database");
}

async fn open(spec: &StoreSpec) -> Arc<SqlStore> {
    Arc::new(SqlStore::open(spec).await.unwrap_or_else(|error| panic!("open {spec}: {error}")))
}

/// The URL with its database replaced.
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(base, query)| (base, Some(query)));
    let scheme_end = base.find("://").map_or(0, |at| at + 3);
    let host_end = base[scheme_end..].find('/').map_or(base.len(), |at| scheme_end + at);
    let mut out = format!("{}/{database}", &base[..host_end]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// A temp path for a SQLite file, and the dir that owns it.
pub fn sqlite_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("nested/dir/ledger.db");
    (dir, path)
}

/// A pending approval expiring at 1000.
pub fn record(id: &str, conversation: &str) -> ApprovalRecord {
    ApprovalRecord {
        approval_id: id.to_owned(),
        conversation_id: conversation.to_owned(),
        owner: None,
        client: None,
        tool_call_id: format!("call_{id}"),
        tool_name: "send_email".to_owned(),
        input: json!({"to": "a@example.com", "body": "hi"}),
        input_digest: format!("digest_{id}"),
        issued_at: 10,
        expires_at: 1000,
        state: ApprovalState::Pending,
        decision: None,
        output: None,
        lease: None,
        updated_at: 10,
        routing: None,
        votes: Vec::new(),
        reason: None,
        supersedes: None,
        superseded_by: None,
        origin: Default::default(),
        input_schema: None,
        lineage: Vec::new(),
    }
}

pub fn event(kind: AuditKind, approval_id: &str, conversation: &str, at: i64, data: Value) -> AuditEvent {
    AuditEvent {
        seq: 0,
        at,
        kind,
        approval_id: approval_id.to_owned(),
        tool_call_id: format!("call_{approval_id}"),
        conversation_id: conversation.to_owned(),
        owner: None,
        principal: Some("alice".to_owned()),
        data,
    }
}

pub fn decision(approved: bool, principal: &str, at: i64) -> RecordedDecision {
    RecordedDecision {
        approved,
        edited_input: approved.then(|| json!({"to": "b@example.com", "body": "edited"})),
        reason: (!approved).then(|| format!("no, says {principal}")),
        principal: Some(principal.to_owned()),
        decided_at: at,
    }
}

pub fn lease(executor: &str, until: i64) -> Lease {
    Lease { executor: executor.to_owned(), until }
}

pub fn transition(id: &str, from: ApprovalState, to: ApprovalState, guard: Guard, at: i64) -> Transition {
    Transition { approval_id: id.to_owned(), from, to, guard, update: Update::default(), at, events: Vec::new() }
}

/// The events as stored, without `seq` (to compare with what was appended).
pub fn unsequenced(events: &[AuditEvent]) -> Vec<AuditEvent> {
    events.iter().map(|event| AuditEvent { seq: 0, ..event.clone() }).collect()
}

pub fn in_conversation(conversation_id: &str) -> DecisionScope {
    DecisionScope::Conversation { conversation_id: conversation_id.to_owned() }
}

pub fn of_principal(principal: &str) -> DecisionScope {
    DecisionScope::Principal { principal: principal.to_owned() }
}

/// A sticky decision about `send_email` made at `created_at`, never expiring.
pub fn sticky(id: &str, scope: DecisionScope, created_at: i64) -> StoredDecision {
    StoredDecision {
        id: id.to_owned(),
        body: json!({"id": id, "scope": scope, "effect": "allow", "toolName": "send_email"}),
        scope,
        tool_name: "send_email".to_owned(),
        created_at,
        expires_at: None,
        uses_left: None,
        created_by: None,
    }
}

/// The decisions a query selects at `now`.
pub fn decision_query(conversation_id: Option<&str>, principal: Option<&str>, now: i64) -> DecisionQuery {
    DecisionQuery { conversation_id: conversation_id.map(str::to_owned), principal: principal.map(str::to_owned), now }
}

/// The ids of the decisions the query selects, in the order the store lists them.
pub async fn decision_ids(store: &dyn LedgerStore, query: &DecisionQuery) -> Vec<String> {
    store.decisions(query).await.unwrap().into_iter().map(|decision| decision.id).collect()
}

/// Applies one transition and checks the outcome against the reference
/// semantics (`applies_to` / `write_into` on the record as it was).
pub async fn check(store: &dyn LedgerStore, transition: Transition) -> TransitionOutcome {
    let before = store.approvals(std::slice::from_ref(&transition.approval_id)).await.unwrap();
    let outcome = store.apply(std::slice::from_ref(&transition), &[]).await.unwrap().remove(0);
    let after = store.approvals(std::slice::from_ref(&transition.approval_id)).await.unwrap();
    match before.first() {
        None => assert_eq!(outcome, TransitionOutcome::Missing),
        Some(before) if transition.applies_to(before) => {
            let mut expected = before.clone();
            transition.write_into(&mut expected);
            assert_eq!(outcome, TransitionOutcome::Moved(expected.clone()));
            assert_eq!(after, vec![expected]);
        }
        Some(before) => {
            assert_eq!(outcome, TransitionOutcome::Unmoved(before.clone()));
            assert_eq!(after, vec![before.clone()]);
        }
    }
    outcome
}

/// Whether the transition moved.
pub fn moved(outcome: &TransitionOutcome) -> bool {
    matches!(outcome, TransitionOutcome::Moved(_))
}

/// The record a transition moved or left.
pub fn record_of(outcome: &TransitionOutcome) -> &ApprovalRecord {
    match outcome {
        TransitionOutcome::Moved(record) | TransitionOutcome::Unmoved(record) => record,
        TransitionOutcome::Missing => panic!("missing"),
    }
}

/// One test per scenario and backend: `memory::NAME`, `sqlite::NAME`, `postgres::NAME`.
#[allow(unused_macros, reason = "only the suites use it")]
macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                super::$name(&super::Stores::memory()).await;
            })*
        }
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let stores = super::Stores::sqlite().await;
                super::$name(&stores).await;
                stores.finish().await;
            })*
        }
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                if let Some(stores) = super::Stores::postgres(stringify!($name)).await {
                    super::$name(&stores).await;
                    stores.finish().await;
                }
            })*
        }
    };
}
