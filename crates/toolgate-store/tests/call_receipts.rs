//! Receipts of calls decided without an approval, on SQLite and (with
//! `TOOLGATE_TEST_POSTGRES_URL`) Postgres: a call run on a grant and a call
//! the rules allow, each with its outcome, get a receipt per event, found by
//! the event's `seq`; they verify alone and with the whole log; a receipt
//! whose input digest was edited in the database, one re-signed to name
//! another event, or one signed by another key is found by `verify_store`.
//! And a principal's own rule-denied call does not open other owners'
//! approval-less events to their audit view (memory, SQLite, Postgres).

mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate::approval::lifecycle::direct::{self, DirectCall};
use toolgate::ledger::{
    AuditEvent, AuditQuery, AuditStore, AuditView, ConversationStore, DecisionScope, LedgerConfig, LedgerStore,
    ManualClock,
};
use toolgate::receipt::{
    BreakKind, CallReceipt, Jwks, ReceiptKey, ReceiptStore, SealKind, Signed, verify_call_receipt, verify_store,
};
use toolgate::tool::{ApprovalContext, Caller, GateAction};
use toolgate::{Tool, ToolError};
use toolgate_policy::{Policy, StickyAction, StickyDecision, StoredGate, to_stored};
use toolgate_store::{SqlStore, StoreSpec};

const NOW: i64 = 1_700_000_000_000;

const RULES: &str = r#"
[[rule]]
name = "ask-transfers"
action = "ask"
tool = "transfer_money"
approvers = ["bob"]

[[rule]]
name = "read-freely"
action = "allow"
tool = "read_balance"
"#;

/// A store signing with key 1, on SQLite or on a fresh Postgres database.
struct Db {
    store: Arc<SqlStore>,
    target: Target,
    _dir: Option<tempfile::TempDir>,
    drop: Option<(String, String)>,
}

/// Where the database is, for tampering with it directly.
enum Target {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl Db {
    async fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let store = signed(&StoreSpec::Sqlite(path.clone())).await;
        Self { store, target: Target::Sqlite(path), _dir: Some(dir), drop: None }
    }

    async fn postgres(test: &str) -> Option<Self> {
        let (url, name, database) = support::fresh_postgres_database(test).await?;
        let store = signed(&StoreSpec::Postgres(database.clone())).await;
        Some(Self { store, target: Target::Postgres(database), _dir: None, drop: Some((url, name)) })
    }

    async fn keys(&self) -> Jwks {
        self.store.receipt_keys().await.unwrap()
    }

    /// Replaces the stored receipt of the event at `seq` (tampering with the database).
    async fn put_receipt(&self, seq: i64, signed: &Signed) {
        let body = serde_json::to_string(signed).unwrap().replace('\'', "''");
        let text = format!("UPDATE audit_receipts SET body = '{body}' WHERE seq = {seq}");
        match &self.target {
            Target::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).expect("open the file");
                conn.execute_batch(&text).expect("tamper");
            }
            Target::Postgres(url) => {
                use sqlx::Connection as _;
                let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
                sqlx::raw_sql(sqlx::AssertSqlSafe(text)).execute(&mut conn).await.expect("tamper");
            }
        }
    }

    async fn finish(self) {
        self.store.close().await;
        if let Some((url, name)) = &self.drop {
            support::drop_postgres_database(url, name).await;
        }
    }
}

async fn signed(spec: &StoreSpec) -> Arc<SqlStore> {
    let store = SqlStore::open(spec).await.expect("open");
    Arc::new(store.sign_with(ReceiptKey::from_secret([1; 32])).await.expect("register the key"))
}

/// Alice's `transfer_money` on a grant of bob's, and her `read_balance` the rules allow, each run.
async fn calls(store: Arc<SqlStore>) -> Vec<AuditEvent> {
    let policy = Arc::new(Policy::from_toml_str(RULES).unwrap());
    let mut grant = StickyDecision::new(
        "grant_1",
        StickyAction::Allow,
        "transfer_money",
        DecisionScope::Principal { principal: "alice".into() },
        NOW,
    )
    .created_by("bob");
    grant.uses = Some(1);
    store.save_decision(&to_stored(&grant)).await.unwrap();
    let ledger_store: Arc<dyn LedgerStore> = store.clone();
    let config = LedgerConfig::new(ledger_store.clone()).clock(Arc::new(ManualClock::new(NOW + 1)));
    let ledger = config.owned(Some("alice"), "chat-1").principal("alice");
    let gate =
        StoredGate::new(policy, ledger_store, Some(ledger.conversation_id.clone()), Some("alice".into()), NOW + 1);
    let caller = Caller {
        gate: Some(&gate),
        conversation_id: Some(&ledger.conversation_id),
        principal: Some("alice"),
        groups: &[],
    };
    for (name, call_id, input) in
        [("transfer_money", "call-t", json!({"amount": 10})), ("read_balance", "call-r", json!({"account": "a"}))]
    {
        let tool = Tool::function::<Value>(name).handler(|_: Value, _| async { Ok::<_, ToolError>(json!(1)) });
        let context = ApprovalContext::new(call_id, Vec::new());
        let verdict = direct::admit(Some(&ledger), caller, &tool, &input, context).await;
        assert_eq!(verdict.action, GateAction::Allow, "{name}: {verdict:?}");
        let call = DirectCall { tool_call_id: call_id, tool_name: name, input: &input };
        let ran = direct::ran(&ledger, call, Ok(&json!({"ok": name})), NOW + 5);
        direct::record(&ledger, &[ran]).await.unwrap();
    }
    store.audit(&AuditQuery::default()).await.unwrap()
}

async fn receipt_at(store: &SqlStore, seq: i64) -> Signed {
    store.receipt_at(seq).await.unwrap().unwrap_or_else(|| panic!("a receipt for event {seq}"))
}

async fn calls_have_receipts_and_tampering_is_found(db: Db) {
    let events = calls(db.store.clone()).await;
    let kinds: Vec<(&str, &str)> =
        events.iter().map(|event| (event.kind.as_str(), event.tool_call_id.as_str())).collect();
    assert_eq!(kinds, [("granted", "call-t"), ("executed", "call-t"), ("executed", "call-r")], "{events:?}");
    assert!(events.iter().all(|event| event.approval_id.is_empty()));
    while db.store.seal(100).await.unwrap() > 0 {}
    db.store.checkpoint(NOW + 10).await.unwrap();
    let keys = db.keys().await;
    let report = verify_store(db.store.as_ref(), keys.clone()).await.unwrap().expect("the log verifies");
    assert_eq!((report.events, report.receipts, report.unsealed), (3, 3, 0));

    let digest = Policy::from_toml_str(RULES).unwrap().digest().unwrap().to_owned();
    let grant_use: CallReceipt = verify_call_receipt(&receipt_at(&db.store, events[0].seq).await, &keys).unwrap();
    assert_eq!((grant_use.decided_by.as_deref(), grant_use.grant.as_deref()), (Some("grant"), Some("grant_1")));
    assert_eq!((grant_use.granted_by.as_deref(), grant_use.principal.as_deref()), (Some("bob"), Some("alice")));
    assert_eq!(grant_use.config_digest.as_deref(), Some(digest.as_str()), "the rules that asked");
    assert!(grant_use.tool_digest.is_some());
    assert_eq!(grant_use.input_digest, Some(toolgate::approval::input_digest(&json!({"amount": 10})).unwrap()));
    assert_eq!((grant_use.event.seq, grant_use.event.kind.as_str()), (events[0].seq, "granted"));
    let outcome = verify_call_receipt(&receipt_at(&db.store, events[1].seq).await, &keys).unwrap();
    assert_eq!(
        outcome.result_digest,
        Some(toolgate::approval::input_digest(&json!({"ok": "transfer_money"})).unwrap())
    );
    let allowed = verify_call_receipt(&receipt_at(&db.store, events[2].seq).await, &keys).unwrap();
    assert_eq!((allowed.tool_name.as_str(), allowed.decision.as_str()), ("read_balance", "allow"));
    assert!(db.store.receipt("").await.unwrap().is_none(), "no approval's receipt under an empty id");

    // A byte of the input digest edited in the database.
    let original = receipt_at(&db.store, events[0].seq).await;
    let mut edited = original.clone();
    let text = edited.payload["inputDigest"].as_str().unwrap().to_owned();
    let flipped = if text.starts_with('A') { "B" } else { "A" };
    edited.payload["inputDigest"] = json!(format!("{flipped}{}", &text[1..]));
    db.put_receipt(events[0].seq, &edited).await;
    let found = verify_store(db.store.as_ref(), keys.clone()).await.unwrap().unwrap_err();
    assert_eq!(found.kind, BreakKind::BadSignature, "{found}");
    assert!(found.detail.contains("call call-t"), "{found}");

    // Re-signed by the trusted key to name the next event: bound to another event's hash.
    let mut payload = original.payload.clone();
    payload["event"]["seq"] = json!(events[1].seq);
    let key = ReceiptKey::from_secret([1; 32]);
    db.put_receipt(events[0].seq, &Signed::sign(SealKind::Receipt, &payload, &key).unwrap()).await;
    let found = verify_store(db.store.as_ref(), keys.clone()).await.unwrap().unwrap_err();
    assert_eq!((found.seq, found.kind), (Some(events[1].seq), BreakKind::Edited), "{found}");
    assert!(db.store.receipt_at(events[0].seq).await.is_err(), "the row names another event");

    // Signed by another key.
    let other = ReceiptKey::from_secret([9; 32]);
    db.put_receipt(events[0].seq, &Signed::sign(SealKind::Receipt, &original.payload, &other).unwrap()).await;
    let found = verify_store(db.store.as_ref(), keys.clone()).await.unwrap().unwrap_err();
    assert_eq!(found.kind, BreakKind::UnknownKey, "{found}");

    db.put_receipt(events[0].seq, &original).await;
    assert!(verify_store(db.store.as_ref(), keys).await.unwrap().is_ok(), "restored, it verifies again");
    db.finish().await;
}

#[tokio::test]
async fn sqlite_calls_without_an_approval_have_receipts_and_tampering_is_found() {
    calls_have_receipts_and_tampering_is_found(Db::sqlite().await).await;
}

#[tokio::test]
async fn postgres_calls_without_an_approval_have_receipts_and_tampering_is_found() {
    if let Some(db) = Db::postgres("call_receipts").await {
        calls_have_receipts_and_tampering_is_found(db).await;
    }
}

/// A principal's own call denied by a rule (a `denied` event with no
/// approval) answers no approval: it does not open the approval-less events
/// of other owners to them (their receipts are served by that view).
async fn a_denied_call_opens_no_other_owners_events(stores: support::Stores) {
    let input = json!({"path": "notes.txt"});
    for (owner, call_id) in [("alice", "call-a"), ("mallory", "call-m")] {
        let ledger = LedgerConfig::new(stores.a.clone()).owned(Some(owner), "chat").principal(owner);
        let call = DirectCall { tool_call_id: call_id, tool_name: "delete_file", input: &input };
        let event = match owner {
            "alice" => direct::ran(&ledger, call, Ok(&json!(1)), NOW),
            _ => direct::refused(&ledger, call, "rule `not-mallory`", NOW),
        };
        direct::record(&ledger, &[event]).await.unwrap();
    }
    let query = AuditQuery { view: AuditView::Principal("mallory".into()), ..AuditQuery::default() };
    let seen: Vec<String> = stores.b.audit(&query).await.unwrap().into_iter().map(|event| event.tool_call_id).collect();
    assert_eq!(seen, ["call-m"]);
    stores.finish().await;
}

#[tokio::test]
async fn memory_a_denied_call_opens_no_other_owners_events() {
    a_denied_call_opens_no_other_owners_events(support::Stores::memory()).await;
}

#[tokio::test]
async fn sqlite_a_denied_call_opens_no_other_owners_events() {
    a_denied_call_opens_no_other_owners_events(support::Stores::sqlite().await).await;
}

#[tokio::test]
async fn postgres_a_denied_call_opens_no_other_owners_events() {
    if let Some(stores) = support::Stores::postgres("denied_view").await {
        a_denied_call_opens_no_other_owners_events(stores).await;
    }
}
