//! Opening stores: specs, SQLite files and their settings, durability across
//! reopening, corrupt values, and errors that never show a password.

mod support;

use std::path::Path;

use serde_json::json;
use sqlx::Connection;
use support::{decision, decision_query, event, in_conversation, record, sticky, transition};
use toolgate::ledger::ApprovalState::{Approved, Pending};
use toolgate::ledger::{
    ApprovalStore, AuditKind, AuditQuery, AuditStore, ConversationStore, DecisionScope, Guard, StoreError,
    TransitionOutcome,
};
use toolgate_store::{OpenError, SqlStore, StoreSpec, open_store};

#[tokio::test]
async fn none_and_memory_specs() {
    let dir = Path::new("/nonexistent");
    assert!(open_store(&StoreSpec::parse("none", dir).unwrap()).await.unwrap().is_none());
    let memory = open_store(&StoreSpec::parse("memory", dir).unwrap()).await.unwrap().unwrap();
    memory.issue(&[record("m", "c")], &[]).await.unwrap();
    assert_eq!(memory.approvals(&["m".to_owned()]).await.unwrap().len(), 1);
    assert!(matches!(SqlStore::open(&StoreSpec::Memory).await, Err(OpenError::NotSql { .. })));
}

#[tokio::test]
async fn sqlite_file_is_created_with_its_directories_in_wal_mode() {
    let (_dir, path) = support::sqlite_path();
    let spec = StoreSpec::parse(&format!("sqlite://{}", path.display()), Path::new("/unused")).unwrap();
    let store = open_store(&spec).await.unwrap().unwrap();
    store.issue(&[record("a", "c")], &[]).await.unwrap();
    assert!(path.is_file(), "{}", path.display());

    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode").fetch_one(&mut conn).await.unwrap();
    assert_eq!(mode, "wal");
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%sqlite%' ORDER BY name",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        tables,
        [
            "_sqlx_migrations",
            "approval_viewers",
            "approvals",
            "audit_chain",
            "audit_events",
            "audit_receipts",
            "audit_seals",
            "continuation_generations",
            "continuations",
            "conversations",
            "decisions",
            "link_uses",
            "notifications",
            "notify_cursor",
            "receipt_keys"
        ]
    );
}

#[tokio::test]
async fn default_sqlite_spec_lives_in_the_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let spec = StoreSpec::parse("sqlite", &data_dir).unwrap();
    assert_eq!(spec, StoreSpec::default_for(&data_dir));
    open_store(&spec).await.unwrap().unwrap();
    assert!(data_dir.join("toolgate.db").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_a_sqlite_file_keeps_everything() {
    let (_dir, path) = support::sqlite_path();
    let spec = StoreSpec::Sqlite(path);
    let ids = ["kept".to_owned(), "answered".to_owned()];
    let everything = decision_query(Some("c"), None, 25);
    let (records, events, conversation, decisions) = {
        let store = SqlStore::open(&spec).await.unwrap();
        let issued = [event(AuditKind::Issued, "kept", "c", 10, json!({"b": 1, "a": 2}))];
        store.issue(&[record("kept", "c"), record("answered", "c")], &issued).await.unwrap();
        let mut approve = transition("answered", Pending, Approved, Guard::NotExpiredAt(20), 20);
        approve.update.decision = Some(decision(true, "alice", 20));
        approve.events = vec![event(AuditKind::Approved, "answered", "c", 20, json!({}))];
        store.apply(&[approve], &[]).await.unwrap();
        store.save_conversation("c", None, &json!([{"id": "m1"}]), None, 30).await.unwrap();
        let mut expiring = sticky("expiring", DecisionScope::Global, 20);
        expiring.expires_at = Some(50);
        for decision in [sticky("here", in_conversation("c"), 10), expiring, sticky("gone", in_conversation("c"), 21)] {
            store.save_decision(&decision).await.unwrap();
        }
        store.revoke_decision("gone").await.unwrap().unwrap();
        let saved = (
            store.approvals(&ids).await.unwrap(),
            store.audit(&AuditQuery::default()).await.unwrap(),
            store.conversation("c").await.unwrap(),
            store.decisions(&everything).await.unwrap(),
        );
        store.close().await;
        saved
    };
    let store = SqlStore::open(&spec).await.unwrap();
    assert_eq!(store.approvals(&ids).await.unwrap(), records);
    assert_eq!(store.audit(&AuditQuery::default()).await.unwrap(), events);
    assert_eq!(store.conversation("c").await.unwrap(), conversation);
    assert_eq!(decisions.len(), 2);
    assert_eq!(store.decisions(&everything).await.unwrap(), decisions, "saved ones kept, the revoked one gone");
    assert_eq!(store.decisions(&decision_query(Some("c"), None, 50)).await.unwrap(), decisions[..1], "expiry kept");
    // Ids stay taken, and later decisions still come after the ones before.
    let taken = store.save_decision(&sticky("here", DecisionScope::Global, 40)).await.unwrap_err();
    assert_eq!(taken, StoreError::DuplicateDecision("here".to_owned()));
    store.save_decision(&sticky("gone", in_conversation("c"), 21)).await.unwrap();
    let ids: Vec<String> = store.decisions(&everything).await.unwrap().into_iter().map(|found| found.id).collect();
    assert_eq!(ids, ["here", "expiring", "gone"]);
    // The answer is still spent, and the log keeps counting up.
    let mut again = transition("answered", Pending, Approved, Guard::None, 40);
    again.update.decision = Some(decision(true, "mallory", 40));
    let outcome = store.apply(&[again], &[event(AuditKind::Rejected, "answered", "c", 40, json!({}))]).await.unwrap();
    assert_eq!(outcome, vec![TransitionOutcome::Unmoved(records[1].clone())]);
    let log = store.audit(&AuditQuery::default()).await.unwrap();
    assert!(log[2].seq > log[1].seq);
}

#[tokio::test]
async fn corrupt_values_are_reported_as_corrupt() {
    let (_dir, path) = support::sqlite_path();
    let store = SqlStore::open(&StoreSpec::Sqlite(path.clone())).await.unwrap();
    store.issue(&[record("bad", "c")], &[event(AuditKind::Issued, "bad", "c", 1, json!({}))]).await.unwrap();
    store.save_conversation("c", None, &json!([]), None, 1).await.unwrap();
    store.save_decision(&sticky("bad_body", in_conversation("c"), 1)).await.unwrap();
    store.save_decision(&sticky("bad_scope", in_conversation("elsewhere"), 2)).await.unwrap();
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    for statement in [
        "UPDATE approvals SET decision = '{not json'",
        "UPDATE audit_events SET data = 'nope'",
        "UPDATE conversations SET messages = '['",
        "UPDATE decisions SET body = '{\"a\":' WHERE id = 'bad_body'",
        // The schema refuses a global scope with a key; written past its checks.
        "PRAGMA ignore_check_constraints = ON",
        "UPDATE decisions SET scope_kind = 'global' WHERE id = 'bad_scope'",
    ] {
        sqlx::query(statement).execute(&mut conn).await.unwrap();
    }
    let corrupt = |result: Result<_, StoreError>| matches!(result, Err(StoreError::Corrupt(_)));
    assert!(corrupt(store.approvals(&["bad".to_owned()]).await.map(drop)));
    assert!(corrupt(store.audit(&AuditQuery::default()).await.map(drop)));
    assert!(corrupt(store.conversation("c").await.map(drop)));
    let answer = transition("bad", Pending, Approved, Guard::None, 2);
    assert!(corrupt(store.apply(&[answer], &[]).await.map(drop)));

    let named = |result: Result<_, StoreError>, what: &str| match result {
        Err(StoreError::Corrupt(message)) => assert!(message.contains(what), "{message}"),
        other => panic!("expected a corrupt value naming {what}: {other:?}"),
    };
    named(
        store.decisions(&decision_query(None, None, 0)).await.map(drop),
        "`bad_scope` has scope kind `global` with key `elsewhere`",
    );
    // Read together: a corrupt conversation fails the read, a corrupt decision only the decisions.
    assert!(corrupt(store.conversation_with_decisions("c", &decision_query(None, None, 0)).await.map(drop)));
    let read = store.conversation_with_decisions("none", &decision_query(Some("c"), None, 0)).await.unwrap();
    assert_eq!(read.conversation, None);
    named(read.decisions.map(drop), "the body of `sticky decision bad_body`");
    named(store.revoke_decision("bad_body").await.map(drop), "the body of `sticky decision bad_body`");
    named(store.revoke_decision("bad_scope").await.map(drop), "`bad_scope` has scope kind");
    // A decision that cannot be read back is not removed.
    sqlx::query("UPDATE decisions SET scope_kind = 'conversation' WHERE id = 'bad_scope'")
        .execute(&mut conn)
        .await
        .unwrap();
    named(
        store.decisions(&decision_query(Some("c"), None, 0)).await.map(drop),
        "the body of `sticky decision bad_body`",
    );
    let found = store.decisions(&decision_query(Some("elsewhere"), None, 0)).await.unwrap();
    assert_eq!(found, vec![sticky("bad_scope", in_conversation("elsewhere"), 2)]);
}

#[tokio::test]
async fn closed_store_is_unavailable() {
    let (_dir, path) = support::sqlite_path();
    let store = SqlStore::open(&StoreSpec::Sqlite(path)).await.unwrap();
    store.close().await;
    let result = store.approvals(&["x".to_owned()]).await;
    assert!(matches!(result, Err(StoreError::Unavailable(_))), "{result:?}");
}

#[tokio::test]
async fn connect_errors_name_the_backend_but_never_the_password() {
    let url = "postgres://alice:hunter2@127.0.0.1:1/ledger";
    let spec = StoreSpec::parse(url, Path::new("/unused")).unwrap();
    let error = open_store(&spec).await.map(drop).unwrap_err();
    assert!(matches!(error, OpenError::Connect { backend: "postgres", .. }), "{error:?}");
    let shown = format!("{error} {error:?}");
    assert!(shown.contains("postgres://alice:***@127.0.0.1:1/ledger"), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
}

#[tokio::test]
async fn a_data_dir_that_cannot_be_created_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let spec = StoreSpec::Sqlite(file.join("sub/ledger.db"));
    let error = open_store(&spec).await.map(drop).unwrap_err();
    assert!(matches!(&error, OpenError::CreateDir { path, .. } if path == &file.join("sub")), "{error:?}");
    assert!(error.to_string().contains("a-file/sub"), "{error}");
}

/// A fresh data directory is private (0700), and so are the database file
/// and the `-wal` and `-shm` files SQLite creates beside it (0600), whatever
/// the process's umask would have given them.
#[cfg(unix)]
#[tokio::test]
async fn a_fresh_store_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let store = open_store(&StoreSpec::parse("sqlite", &data_dir).unwrap()).await.unwrap().unwrap();
    store.issue(&[record("a", "c")], &[]).await.unwrap();
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data_dir), 0o700, "the data directory");
    for name in ["toolgate.db", "toolgate.db-wal", "toolgate.db-shm"] {
        assert_eq!(mode(&data_dir.join(name)), 0o600, "{name}");
    }
}
