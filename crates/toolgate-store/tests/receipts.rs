//! The audit chain on SQLite, and on Postgres when `TOOLGATE_TEST_POSTGRES_URL`
//! is set: two replicas (two store handles, each with its own key) decide and
//! seal at once and the whole log verifies; then each kind of tampering done
//! to the database is found by `verify_store`, and retention's signed prune
//! verifies where a bare `DELETE` does not.

mod support;

use std::sync::Arc;

use serde_json::json;
use toolgate::ledger::{ApprovalState, AuditKind, AuditStore, Guard, LedgerStore};
use toolgate::receipt::{BreakKind, Jwks, ReceiptKey, ReceiptStore, verify_store};
use toolgate_store::{SqlStore, StoreSpec};

use support::{decision, event, record, transition};

/// Where the database is, for tampering with it directly.
enum Target {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl Target {
    async fn exec(&self, text: &str) {
        match self {
            Self::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).expect("open the file");
                conn.execute_batch(text).expect("tamper");
            }
            Self::Postgres(url) => {
                use sqlx::Connection as _;
                let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
                sqlx::raw_sql(sqlx::AssertSqlSafe(text.to_owned())).execute(&mut conn).await.expect("tamper");
            }
        }
    }
}

/// Two replicas of one database, each signing with its own key.
struct Replicas {
    a: Arc<SqlStore>,
    b: Arc<SqlStore>,
    target: Target,
    _dir: Option<tempfile::TempDir>,
    drop: Option<(String, String)>,
}

impl Replicas {
    async fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let spec = StoreSpec::Sqlite(path.clone());
        let (a, b) = (signed(&spec, 1).await, signed(&spec, 2).await);
        Self { a, b, target: Target::Sqlite(path), _dir: Some(dir), drop: None }
    }

    async fn postgres(test: &str) -> Option<Self> {
        let (url, name, database) = support::fresh_postgres_database(test).await?;
        let spec = StoreSpec::Postgres(database.clone());
        let (a, b) = (signed(&spec, 1).await, signed(&spec, 2).await);
        Some(Self { a, b, target: Target::Postgres(database), _dir: None, drop: Some((url, name)) })
    }

    async fn keys(&self) -> Jwks {
        self.a.receipt_keys().await.unwrap()
    }

    /// Seals everything and signs a checkpoint.
    async fn settle(&self) {
        while self.a.seal(500).await.unwrap() > 0 {}
        self.b.checkpoint(i64::MAX / 2).await.unwrap();
    }

    async fn verify(&self) -> Result<toolgate::receipt::Report, toolgate::receipt::Break> {
        verify_store(self.a.as_ref(), self.keys().await).await.unwrap()
    }

    async fn finish(self) {
        self.a.close().await;
        self.b.close().await;
        if let Some((url, name)) = &self.drop {
            support::drop_postgres_database(url, name).await;
        }
    }
}

async fn signed(spec: &StoreSpec, byte: u8) -> Arc<SqlStore> {
    let store = SqlStore::open(spec).await.expect("open");
    Arc::new(store.sign_with(ReceiptKey::from_secret([byte; 32])).await.expect("register the key"))
}

/// One approval issued, voted, approved and executed through `store`.
async fn decide(store: &dyn LedgerStore, id: &str, at: i64) {
    let mut issued = record(id, "chat-1");
    issued.issued_at = at;
    issued.expires_at = at + 1_000_000;
    let input = json!({"to": "a@example.com", "amount": at});
    issued.input = input.clone();
    issued.input_digest = toolgate::approval::input_digest(&input).unwrap();
    let data = json!({"toolName": "send_email", "input": input});
    store.issue(&[issued], &[event(AuditKind::Issued, id, "chat-1", at, data)]).await.unwrap();
    let mut approve = transition(id, ApprovalState::Pending, ApprovalState::Approved, Guard::None, at + 1);
    approve.update.decision = Some(decision(true, "bob", at + 1));
    approve.events = vec![
        event(AuditKind::Voted, id, "chat-1", at + 1, json!({"decision": "approve"})),
        event(AuditKind::Approved, id, "chat-1", at + 1, json!({})),
    ];
    store.apply(&[approve], &[]).await.unwrap();
    let mut run = transition(id, ApprovalState::Approved, ApprovalState::Executed, Guard::None, at + 2);
    run.update.output = Some(serde_json::from_value(json!({"type": "json", "value": {"sent": at}})).unwrap());
    run.events = vec![event(AuditKind::Executed, id, "chat-1", at + 2, json!({"result": {"sent": at}}))];
    store.apply(&[run], &[]).await.unwrap();
}

/// Both replicas decide `per` approvals each while both seal, all at once.
async fn write_concurrently(replicas: &Replicas, per: usize) {
    let mut tasks = Vec::new();
    for (name, store) in [("a", replicas.a.clone()), ("b", replicas.b.clone())] {
        let writer = store.clone();
        tasks.push(tokio::spawn(async move {
            let store = writer;
            for n in 0..per {
                decide(store.as_ref(), &format!("apr_{name}{n}"), 1_000 + n as i64 * 10).await;
            }
        }));
        tasks.push(tokio::spawn({
            let store = store.clone();
            async move {
                for _ in 0..per {
                    store.seal(7).await.unwrap();
                    store.checkpoint(1).await.unwrap();
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    replicas.settle().await;
}

/// Event `seq` of the approval's `kind`.
async fn seq_of(store: &SqlStore, approval: &str, kind: AuditKind) -> i64 {
    let query = toolgate::ledger::AuditQuery::default();
    let events = store.audit(&query).await.unwrap();
    events.iter().find(|event| event.approval_id == approval && event.kind == kind).expect("the event").seq
}

async fn tampering_is_found(replicas: Replicas) {
    write_concurrently(&replicas, 12).await;
    let report = replicas.verify().await.expect("two replicas' log verifies");
    assert_eq!(report.events, 96);
    assert_eq!(report.receipts, 48, "one per decision and one per execution");
    assert_eq!(report.unsealed, 0);
    assert_eq!(replicas.keys().await.keys.len(), 2, "both replicas' keys are published");
    let (a, target) = (replicas.a.as_ref(), &replicas.target);

    // Each case edits the database, checks the break, and puts it back.
    let issued = seq_of(a, "apr_a3", AuditKind::Issued).await;
    let original: String = a
        .audit(&Default::default())
        .await
        .unwrap()
        .iter()
        .find(|event| event.seq == issued)
        .map(|event| serde_json::to_string(&event.data).unwrap())
        .unwrap();
    let edited_input = original.replace("a@example.com", "b@example.com");
    target.exec(&format!("UPDATE audit_events SET data = '{edited_input}' WHERE seq = {issued}")).await;
    let found = replicas.verify().await.expect_err("an edited input");
    assert_eq!((found.seq, found.kind), (Some(issued), BreakKind::Edited), "{found}");
    target.exec(&format!("UPDATE audit_events SET data = '{original}' WHERE seq = {issued}")).await;
    replicas.verify().await.expect("restored");

    let voted = seq_of(a, "apr_b5", AuditKind::Voted).await;
    target.exec(&format!("UPDATE audit_events SET principal = 'mallory' WHERE seq = {voted}")).await;
    let found = replicas.verify().await.expect_err("an edited vote");
    assert_eq!((found.seq, found.kind), (Some(voted), BreakKind::Edited), "{found}");
    target.exec(&format!("UPDATE audit_events SET principal = 'alice' WHERE seq = {voted}")).await;

    let executed = seq_of(a, "apr_a7", AuditKind::Executed).await;
    target.exec(&format!("UPDATE audit_events SET at = at + 1 WHERE seq = {executed}")).await;
    let found = replicas.verify().await.expect_err("an edited time");
    assert_eq!((found.seq, found.kind), (Some(executed), BreakKind::Edited), "{found}");
    target.exec(&format!("UPDATE audit_events SET at = at - 1 WHERE seq = {executed}")).await;
    replicas.verify().await.expect("restored");

    // Two events trade places.
    let approved = seq_of(a, "apr_b2", AuditKind::Approved).await;
    let voted = approved - 1;
    target.exec(&format!(
        "UPDATE audit_events SET seq = -1 WHERE seq = {voted}; UPDATE audit_events SET seq = {voted} WHERE seq = {approved}; \
         UPDATE audit_events SET seq = {approved} WHERE seq = -1;"
    )).await;
    let found = replicas.verify().await.expect_err("reordered events");
    assert_eq!((found.seq, found.kind), (Some(voted), BreakKind::Reordered), "{found}");
    target.exec(&format!(
        "UPDATE audit_events SET seq = -1 WHERE seq = {voted}; UPDATE audit_events SET seq = {voted} WHERE seq = {approved}; \
         UPDATE audit_events SET seq = {approved} WHERE seq = -1;"
    )).await;
    replicas.verify().await.expect("restored");

    // An event inserted before the head, outside the chain.
    target
        .exec(
            "INSERT INTO audit_events (seq, at, kind, approval_id, tool_call_id, conversation_id, principal, data) \
                 VALUES (-5, 1, 'approved', 'apr_x', 'call_x', 'chat-1', 'mallory', '{}')",
        )
        .await;
    let found = replicas.verify().await.expect_err("an inserted event");
    assert_eq!((found.seq, found.kind), (Some(-5), BreakKind::Inserted), "{found}");
    target.exec("DELETE FROM audit_events WHERE seq = -5").await;

    // A receipt moved to another approval: the endpoint's read refuses it.
    let receipt_b = seq_of(a, "apr_b1", AuditKind::Executed).await;
    target
        .exec(&format!(
            "UPDATE audit_receipts SET approval_id = 'apr_a1' WHERE seq = {receipt_b}; \
                          DELETE FROM audit_receipts WHERE approval_id = 'apr_a1' AND seq <> {receipt_b}"
        ))
        .await;
    let refused = a.receipt("apr_a1").await.expect_err("a receipt of another approval");
    assert!(refused.to_string().contains("apr_b1"), "{refused}");

    // A checkpoint signed by a key nobody published.
    let rogue = SqlStore::open(&match target {
        Target::Sqlite(path) => StoreSpec::Sqlite(path.clone()),
        Target::Postgres(url) => StoreSpec::Postgres(url.clone()),
    })
    .await
    .unwrap()
    .sign_with(ReceiptKey::from_secret([66; 32]))
    .await
    .unwrap();
    decide(&rogue, "apr_rogue", 5_000).await;
    rogue.seal(100).await.unwrap();
    rogue.checkpoint(i64::MAX / 2 + 1).await.unwrap();
    let found = verify_store(a, replicas.keys().await).await.unwrap();
    assert!(found.is_ok(), "the rogue key is in the store's key set: {found:?}");
    let mut trusted = replicas.keys().await;
    let rogue_kid = ReceiptKey::from_secret([66; 32]).kid().to_owned();
    trusted.keys.retain(|key| key.kid != rogue_kid);
    let found = verify_store(a, trusted).await.unwrap().expect_err("signed by an unknown key");
    assert_eq!(found.kind, BreakKind::UnknownKey, "{found}");
    rogue.close().await;

    // A deleted event.
    let gone = seq_of(a, "apr_a9", AuditKind::Voted).await;
    target.exec(&format!("DELETE FROM audit_events WHERE seq = {gone}")).await;
    let found = replicas.verify().await.expect_err("a deleted event");
    assert_eq!((found.seq, found.kind), (Some(gone + 1), BreakKind::Missing), "{found}");
    replicas.finish().await;
}

async fn retention_signs_what_it_prunes(replicas: Replicas) {
    write_concurrently(&replicas, 6).await;
    // Events at 1000..1052 and 5000..; prune those before 1030, then more.
    decide(replicas.b.as_ref(), "apr_late", 5_000).await;
    replicas.settle().await;
    let pruned = replicas.a.prune(1_030).await.unwrap();
    assert!(pruned.events > 0);
    let report = replicas.verify().await.expect("a signed prune verifies");
    assert_eq!(report.pruned, pruned.events);
    decide(replicas.a.as_ref(), "apr_later", 6_000).await;
    replicas.settle().await;
    replicas.b.prune(1_060).await.unwrap();
    replicas.verify().await.expect("two signed prunes verify");

    // A prune nobody signed.
    replicas.target.exec("DELETE FROM audit_events WHERE at < 5001").await;
    let found = replicas.verify().await.expect_err("an unsigned prune");
    assert_eq!(found.kind, BreakKind::Missing, "{found}");
    replicas.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_two_replicas_verify_and_tampering_is_found() {
    tampering_is_found(Replicas::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_two_replicas_verify_and_tampering_is_found() {
    if let Some(replicas) = Replicas::postgres("receipts_tampering").await {
        tampering_is_found(replicas).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_retention_signs_what_it_prunes() {
    retention_signs_what_it_prunes(Replicas::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_retention_signs_what_it_prunes() {
    if let Some(replicas) = Replicas::postgres("receipts_retention").await {
        retention_signs_what_it_prunes(replicas).await;
    }
}

#[tokio::test]
async fn a_receipt_is_signed_for_the_approval_and_verifies_alone() {
    let replicas = Replicas::sqlite().await;
    decide(replicas.a.as_ref(), "apr_1", 1_000).await;
    replicas.settle().await;
    let receipt = replicas.b.receipt("apr_1").await.unwrap().expect("a receipt");
    let checked = toolgate::receipt::verify_receipt(&receipt, &replicas.keys().await).expect("it verifies");
    assert_eq!((checked.approval_id.as_str(), checked.state.as_str()), ("apr_1", "executed"));
    assert_eq!(checked.decided_by.as_deref(), Some("bob"));
    assert!(replicas.b.receipt("apr_none").await.unwrap().is_none());
    replicas.finish().await;
}
