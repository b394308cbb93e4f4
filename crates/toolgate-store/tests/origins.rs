//! Migration 0010: which path holds an approval (`origin`) and the input
//! schema its requester gave are stored fields. A record keeps both through
//! the store (in memory, SQLite, Postgres); approvals written at 0009 get
//! their origin once, from what the paths wrote then (a held call's tool
//! call id `held_…`, the API's conversations `api:…`). Postgres runs when
//! `TOOLGATE_TEST_POSTGRES_URL` is set.

mod support;

use serde_json::json;
use sqlx::Connection;
use sqlx::migrate::Migrator;
use support::{Stores, record};
use toolgate::ledger::{ApprovalRecord, LedgerStore, Origin, conversation_key};
use toolgate_store::{SqlStore, StoreSpec};

static SQLITE: Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES: Migrator = sqlx::migrate!("migrations/postgres");

/// The last migration before origins.
const BEFORE_ORIGINS: i64 = 9;

/// An approval of each path, with the origin it must have.
fn approvals() -> Vec<(ApprovalRecord, Origin)> {
    let held = |id: &str, owner: Option<&str>, name: &str| ApprovalRecord {
        owner: owner.map(str::to_owned),
        tool_call_id: format!("held_{id}"),
        ..record(&format!("held_{id}_1"), &conversation_key(owner, name))
    };
    let mut chat = record("chat", &conversation_key(Some("alice"), "api-lookalike"));
    chat.owner = Some("alice".to_owned());
    vec![
        (chat, Origin::Chat),
        (held("gw", Some("alice"), "mcp:alice:claude"), Origin::Gateway),
        (held("api", Some("alice"), "api:default"), Origin::Calls),
        // An owner whose name reads like the API's conversations: its conversation is what counts.
        (held("tricky", Some("api:x"), "mcp:api:x:cli"), Origin::Gateway),
        (held("anonymous", None, "api:run-1"), Origin::Calls),
    ]
}

/// Writes [`approvals`] with the 0009 schema's columns.
macro_rules! fill_at_0009 {
    ($conn:expr) => {{
        let conn = $conn;
        for (record, _) in approvals() {
            sqlx::query(
                "INSERT INTO approvals (approval_id, conversation_id, tool_call_id, tool_name, input, input_digest, \
             issued_at, expires_at, state, updated_at, owner) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            )
            .bind(&record.approval_id)
            .bind(&record.conversation_id)
            .bind(&record.tool_call_id)
            .bind(&record.tool_name)
            .bind(serde_json::to_string(&record.input).unwrap())
            .bind(&record.input_digest)
            .bind(record.issued_at)
            .bind(record.expires_at)
            .bind(record.state.as_str())
            .bind(record.updated_at)
            .bind(&record.owner)
            .execute(&mut *conn)
            .await
            .unwrap();
        }
    }};
}

async fn check_upgraded(store: &dyn LedgerStore) {
    for (before, origin) in approvals() {
        let stored = store.approvals(std::slice::from_ref(&before.approval_id)).await.unwrap().pop().unwrap();
        assert_eq!((stored.origin, stored.input_schema), (origin, None), "{}", before.approval_id);
    }
}

#[tokio::test]
async fn a_sqlite_store_at_0009_gives_each_approval_its_origin() {
    let (_dir, path) = support::sqlite_path();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    SQLITE.run_to(BEFORE_ORIGINS, &mut conn).await.unwrap();
    fill_at_0009!(&mut conn);
    conn.close().await.unwrap();
    let store = SqlStore::open(&StoreSpec::Sqlite(path)).await.unwrap();
    check_upgraded(&store).await;
    store.close().await;
}

#[tokio::test]
async fn a_postgres_store_at_0009_gives_each_approval_its_origin() {
    let Some((url, name, database)) = support::fresh_postgres_database("origins").await else { return };
    let mut conn = sqlx::PgConnection::connect(&database).await.unwrap();
    POSTGRES.run_to(BEFORE_ORIGINS, &mut conn).await.unwrap();
    fill_at_0009!(&mut conn);
    conn.close().await.unwrap();
    let store = SqlStore::open(&StoreSpec::Postgres(database)).await.unwrap();
    check_upgraded(&store).await;
    store.close().await;
    support::drop_postgres_database(&url, &name).await;
}

/// Issued with an origin and a schema, a record reads back with both, on both handles.
async fn keeps_origin_and_schema(stores: Stores) {
    let schema = json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]});
    let mut issued = Vec::new();
    for (n, origin) in Origin::ALL.into_iter().enumerate() {
        let mut record = record(&format!("r{n}"), "c");
        record.origin = origin;
        record.input_schema = (origin == Origin::Calls).then(|| schema.clone());
        issued.push(record);
    }
    stores.a.issue(&issued, &[]).await.unwrap();
    let ids: Vec<String> = issued.iter().map(|record| record.approval_id.clone()).collect();
    let mut read = stores.b.approvals(&ids).await.unwrap();
    read.sort_by(|a, b| a.approval_id.cmp(&b.approval_id));
    assert_eq!(read, issued);
    stores.finish().await;
}

#[tokio::test]
async fn records_keep_their_origin_and_schema_in_memory() {
    keeps_origin_and_schema(Stores::memory()).await;
}

#[tokio::test]
async fn records_keep_their_origin_and_schema_on_sqlite() {
    keeps_origin_and_schema(Stores::sqlite().await).await;
}

#[tokio::test]
async fn records_keep_their_origin_and_schema_on_postgres() {
    let Some(stores) = Stores::postgres("origins").await else { return };
    keeps_origin_and_schema(stores).await;
}
