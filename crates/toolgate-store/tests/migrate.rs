//! Upgrading a store: a database at migration 0004 holding approvals, audit
//! events and a conversation opens at the latest migration with every row intact, each
//! approval listed under its requester (the owner half of its conversation
//! key, '' without one), the log counting up past every number it ever gave,
//! the new states and kinds admitted (0005's and 0006's), the
//! notification cursor after the existing log (history is not notified), and
//! (0007) every approval and conversation given its owner as a field, read
//! once from its key. On SQLite (where 0005 rebuilds two tables), and on
//! Postgres when `TOOLGATE_TEST_POSTGRES_URL` is set.

mod support;

use serde_json::json;
use sqlx::Connection;
use sqlx::migrate::Migrator;
use support::{decision, event, lease, record};
use toolgate::ledger::ApprovalState::{Denied, Executing, Pending, Withdrawn};
use toolgate::ledger::{
    ApprovalQuery, ApprovalRecord, ApprovalStore, AuditEvent, AuditKind, AuditQuery, AuditStore, ContinuationStore,
    ConversationStore, Guard, InboxStore, OutboxStore, StateFilter, Transition, TransitionOutcome, Update,
    conversation_key,
};
use toolgate_protocol::ToolResultOutput;
use toolgate_store::{SqlStore, StoreSpec};

static SQLITE: Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES: Migrator = sqlx::migrate!("migrations/postgres");

/// The last migration before approvers.
const BEFORE_APPROVERS: i64 = 4;

/// The approvals stored before 0005, one per kind of conversation key and
/// state, issued at 10, 20, ... in this order.
fn approvals() -> Vec<ApprovalRecord> {
    let at = |mut record: ApprovalRecord, issued_at: i64| {
        record.issued_at = issued_at;
        record.updated_at = issued_at + 1;
        record
    };
    let mut running = at(record("running", "plain-chat"), 40);
    running.state = Executing;
    running.decision = Some(decision(true, "carol", 41));
    running.lease = Some(lease("exe_1", 500));
    let mut done = at(record("done", &conversation_key(Some("bob"), "old")), 50);
    done.state = Denied;
    done.decision = Some(decision(false, "bob", 51));
    done.output = Some(ToolResultOutput::Text { value: "denied".to_owned(), provider_options: None });
    vec![
        at(record("owned", &conversation_key(Some("alice"), "chat")), 10),
        // An owner holding the separator and letters of several bytes: the key splits at its last separator.
        at(record("tricky", &conversation_key(Some("ünï\u{1f}ops"), "chat ✓")), 20),
        at(record("anonymous", "plain-chat"), 30),
        running,
        done,
    ]
}

/// The audit events stored before 0005 (the fifth is then removed, so the
/// log's highest number was given to an event no longer there).
fn events() -> Vec<AuditEvent> {
    let owned = |kind, approval: &str, owner: Option<&str>, n: i64| AuditEvent {
        owner: owner.map(str::to_owned),
        ..event(kind, approval, "chat", 100 + n, json!({"n": n}))
    };
    vec![
        owned(AuditKind::Issued, "owned", Some("alice"), 1),
        owned(AuditKind::Approved, "running", None, 2),
        owned(AuditKind::Executed, "running", None, 3),
        owned(AuditKind::Denied, "done", Some("bob"), 4),
        owned(AuditKind::Rejected, "done", Some("bob"), 5),
    ]
}

/// Writes [`approvals`], [`events`] and a conversation with the 0004 schema's columns.
macro_rules! fill_at_0004 {
    ($conn:expr) => {{
        let conn = $conn;
        for record in approvals() {
            sqlx::query(
                "INSERT INTO approvals (approval_id, conversation_id, tool_call_id, tool_name, input, input_digest, \
                 issued_at, expires_at, state, decision, output, lease_executor, lease_until, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
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
            .bind(record.decision.as_ref().map(|decision| serde_json::to_string(decision).unwrap()))
            .bind(record.output.as_ref().map(|output| serde_json::to_string(output).unwrap()))
            .bind(record.lease.as_ref().map(|lease| lease.executor.clone()))
            .bind(record.lease.as_ref().map(|lease| lease.until))
            .bind(record.updated_at)
            .execute(&mut *conn)
            .await
            .unwrap();
        }
        for event in events() {
            sqlx::query(
                "INSERT INTO audit_events (at, kind, approval_id, tool_call_id, conversation_id, owner, principal, \
                 data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(event.at)
            .bind(event.kind.as_str())
            .bind(&event.approval_id)
            .bind(&event.tool_call_id)
            .bind(&event.conversation_id)
            .bind(&event.owner)
            .bind(&event.principal)
            .bind(serde_json::to_string(&event.data).unwrap())
            .execute(&mut *conn)
            .await
            .unwrap();
        }
        // An "always allow" kept before grants: after 0012, a grant without a use limit, its author a column.
        sqlx::query(
            "INSERT INTO decisions (id, scope_kind, scope_key, tool_name, created_at, expires_at, body) \
             VALUES ('dec_old', 'principal', 'alice', 'send_email', 10, NULL, $1)",
        )
        .bind(
            r#"{"id":"dec_old","action":"allow","tool":"send_email","scope":{"kind":"principal","principal":"alice"},"createdAt":10,"createdBy":"alice"}"#,
        )
        .execute(&mut *conn)
        .await
        .unwrap();
        sqlx::query("DELETE FROM audit_events WHERE seq = (SELECT max(seq) FROM audit_events)")
            .execute(&mut *conn)
            .await
            .unwrap();
        for key in ["plain-chat".to_owned(), conversation_key(Some("ünï\u{1f}ops"), "chat ✓")] {
            sqlx::query(
                "INSERT INTO conversations (conversation_id, messages, version, updated_at) VALUES ($1, $2, 3, 60)",
            )
            .bind(key)
            .bind(r#"[{"id":"m1","z":1,"a":2}]"#)
            .execute(&mut *conn)
            .await
            .unwrap();
        }
    }};
}

/// The ids a listing of every state shows.
async fn listed(store: &SqlStore, keys: Option<&[&str]>) -> Vec<String> {
    let query = ApprovalQuery {
        viewer_keys: keys.map(|keys| keys.iter().map(|key| (*key).to_owned()).collect()),
        states: StateFilter::All,
        conversation_id: None,
        conversation_name: None,
        limit: 100,
    };
    store.list_approvals(&query).await.unwrap().into_iter().map(|record| record.approval_id).collect()
}

/// Everything written at 0004 reads back at the latest migration, and the new schema works.
async fn check_upgraded(store: &SqlStore) {
    let before = approvals();
    let ids: Vec<String> = before.iter().map(|record| record.approval_id.clone()).collect();
    // 0007 gives each approval its owner, read once from its key (at the key's last separator).
    let owner_of = |id: &str| match id {
        "owned" => Some("alice"),
        "tricky" => Some("ünï\u{1f}ops"),
        "done" => Some("bob"),
        _ => None,
    };
    let upgraded: Vec<ApprovalRecord> = before
        .iter()
        .cloned()
        .map(|record| ApprovalRecord { owner: owner_of(&record.approval_id).map(str::to_owned), ..record })
        .collect();
    assert_eq!(store.approvals(&ids).await.unwrap(), upgraded, "every approval intact, with its owner");
    assert_eq!(upgraded[1].conversation_name(), "chat ✓");
    assert_eq!(listed(store, None).await, ["done", "running", "anonymous", "tricky", "owned"]);
    assert_eq!(listed(store, Some(&["alice"])).await, ["owned"], "listed under its requester");
    assert_eq!(listed(store, Some(&["ünï\u{1f}ops"])).await, ["tricky"], "split at the last separator");
    assert_eq!(listed(store, Some(&["bob"])).await, ["done"]);
    assert_eq!(listed(store, Some(&[""])).await, ["running", "anonymous"], "conversations without owner");
    assert!(listed(store, Some(&["ünï"])).await.is_empty());

    let logged = store.audit(&AuditQuery::default()).await.unwrap();
    let expected: Vec<AuditEvent> =
        events().into_iter().take(4).zip(1..).map(|(event, seq)| AuditEvent { seq, ..event }).collect();
    assert_eq!(logged, expected, "every event intact, with its number");
    store.append(&[event(AuditKind::Voted, "owned", "chat", 200, json!({"decision": "approve"}))]).await.unwrap();
    let log = store.audit(&AuditQuery { after_seq: Some(4), ..AuditQuery::default() }).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(store.notify_cursor().await.unwrap(), 4, "notifications start after the existing log");
    let newer = [AuditKind::Escalated, AuditKind::Reminded, AuditKind::Notified, AuditKind::NotificationFailed];
    let appended: Vec<AuditEvent> =
        newer.iter().map(|kind| event(*kind, "owned", "chat", 201, json!({"channel": "ops"}))).collect();
    store.append(&appended).await.unwrap();
    let log = store.audit(&AuditQuery { after_seq: Some(4), ..AuditQuery::default() }).await.unwrap();
    assert_eq!(log.iter().skip(1).map(|event| event.kind).collect::<Vec<_>>(), newer, "0006's kinds are admitted");
    assert!(log[0].seq > 5, "a number given before is never given again: {}", log[0].seq);
    let allowed = event(AuditKind::Allowed, "", "chat", 202, json!({"toolName": "t", "input": {}}));
    store.append(&[allowed]).await.expect("0009's kind `allowed` is admitted");
    let granted = event(AuditKind::Granted, "", "chat", 203, json!({"grant": "dec_old"}));
    let used = store.use_decision("dec_old", 203, &[granted]).await.unwrap().expect("0012 keeps the decision live");
    assert_eq!((used.uses_left, used.created_by.as_deref()), (None, Some("alice")), "a grant without a use limit");
    assert_eq!(store.decisions_by(Some("alice"), 204).await.unwrap().len(), 1, "found by its author");

    let withdraw = Transition {
        approval_id: "owned".to_owned(),
        from: Pending,
        to: Withdrawn,
        guard: Guard::NotExpiredAt(200),
        update: Update { continuation: true, ..Update::default() },
        at: 200,
        events: vec![event(AuditKind::Withdrawn, "owned", "chat", 200, json!({}))],
    };
    let outcome = store.apply(&[withdraw], &[]).await.unwrap().remove(0);
    assert!(matches!(&outcome, TransitionOutcome::Moved(record) if record.state == Withdrawn), "{outcome:?}");
    let due = store.due_continuations(0, 10).await.unwrap();
    assert_eq!(due, [conversation_key(Some("alice"), "chat")]);
    let stored = store.conversation("plain-chat").await.unwrap().unwrap();
    assert_eq!((stored.version, stored.updated_at, stored.owner), (3, 60, None));
    let owned = store.conversation(&conversation_key(Some("ünï\u{1f}ops"), "chat ✓")).await.unwrap().unwrap();
    assert_eq!(owned.owner.as_deref(), Some("ünï\u{1f}ops"), "a conversation gets its owner too");
    assert_eq!(serde_json::to_string(&stored.messages).unwrap(), r#"[{"id":"m1","z":1,"a":2}]"#);
}

#[tokio::test]
async fn a_sqlite_store_at_0004_opens_at_the_latest_with_every_row() {
    let (_dir, path) = support::sqlite_path();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    SQLITE.run_to(BEFORE_APPROVERS, &mut conn).await.unwrap();
    fill_at_0004!(&mut conn);
    let high: i64 = sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'audit_events'")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(high, 5);
    conn.close().await.unwrap();

    let spec = StoreSpec::Sqlite(path.clone());
    let store = SqlStore::open(&spec).await.unwrap();
    check_upgraded(&store).await;
    store.close().await;

    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let check: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&mut conn).await.unwrap();
    assert_eq!(check, "ok");
    let indexes: Vec<(String, String)> =
        sqlx::query_as("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    let names: Vec<&str> = indexes.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "approval_viewers_approval",
            "approvals_call",
            "approvals_executing",
            "approvals_newest",
            "approvals_pending_newest",
            "approvals_timer",
            "audit_events_answers",
            "audit_events_approval",
            "audit_events_calls",
            "audit_events_calls_key",
            "audit_events_calls_requester",
            "audit_events_conversation",
            "audit_events_owner",
            "audit_receipts_approval",
            "audit_seals_kind",
            "decisions_created_by",
            "decisions_scope",
            "link_uses_expiry",
            "notifications_approval",
            "notifications_due",
            "notifications_ended"
        ]
    );
    assert!(indexes[2].1.contains("WHERE state = 'executing'"), "{}", indexes[2].1);
    assert!(indexes[6].1.contains("'voted'"), "{}", indexes[6].1);
    let autoincrement: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_sequence ORDER BY name").fetch_all(&mut conn).await.unwrap();
    assert!(autoincrement.contains(&"audit_events".to_owned()), "{autoincrement:?}");
    assert!(!autoincrement.iter().any(|name| name.ends_with("_0005") || name.ends_with("_0006")), "{autoincrement:?}");
    conn.close().await.unwrap();

    // Opened again, nothing runs twice.
    let store = SqlStore::open(&spec).await.unwrap();
    assert_eq!(listed(&store, Some(&["alice"])).await, ["owned"]);
    store.close().await;
}

#[tokio::test]
async fn a_postgres_store_at_0004_opens_at_the_latest_with_every_row() {
    let Some((url, name, database)) = support::fresh_postgres_database("migrate").await else { return };
    let mut conn = sqlx::PgConnection::connect(&database).await.unwrap();
    POSTGRES.run_to(BEFORE_APPROVERS, &mut conn).await.unwrap();
    fill_at_0004!(&mut conn);
    conn.close().await.unwrap();

    let store = SqlStore::open(&StoreSpec::Postgres(database.clone())).await.unwrap();
    check_upgraded(&store).await;
    store.close().await;
    let store = SqlStore::open(&StoreSpec::Postgres(database)).await.unwrap();
    assert_eq!(listed(&store, Some(&["alice"])).await, ["owned"]);
    store.close().await;
    support::drop_postgres_database(&url, &name).await;
}
