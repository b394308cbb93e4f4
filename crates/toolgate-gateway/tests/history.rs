//! History terms through the gateway: concurrent `tools/call`s against a
//! count limit, each decided and, when a person must answer, issued through
//! the lifecycle's one path (`held::admit_asked`). Exactly the limit's calls
//! run without asking, and no question is issued on a history that moved
//! before it was recorded (one judged on 2 calls while the 3rd was
//! recorded is denied, not asked). An approval, out of band or in the
//! client's form, is judged again on the history as it claims the call
//! (memory, SQLite, and two Postgres replicas with `scripts/with-postgres.sh`).

mod support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use support::{Client, Setup, call, connect, text};
use toolgate::approval::lifecycle::held::RULES_PRINCIPAL;
use toolgate::approval::lifecycle::{Decision, VoteOptions, Voter, cast};
use toolgate::ledger::{
    ApprovalState, ApprovalStore, AuditKind, AuditQuery, AuditStore, LedgerStore, MemoryStore, SystemClock,
};

const RULES: &str = r#"
    [[rule]]
    name = "three-bumps"
    action = "deny"
    tool = "count__bump"
    history = { window = "1h", scope = "principal", count = { gte = 3 } }

    [[rule]]
    name = "big"
    action = "ask"
    tool = "count__bump"
    input = { "/label" = { glob = "big*" } }

    [[rule]]
    name = "small"
    action = "allow"
    tool = "count__bump"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_against_a_count_rule_run_exactly_the_limit_and_ask_only_on_the_history_judged() {
    let setup = Setup::new(RULES, |options| options.hold = Duration::from_millis(50)).await;
    let session = connect(&setup.gateway, Client::default(), "alice").await;
    let calls = (0..20).map(|index| {
        let label = if index % 2 == 0 { format!("small-{index}") } else { format!("big-{index}") };
        call(&session, "count__bump", json!({"label": label}))
    });
    let results = futures::future::join_all(calls).await;
    assert_eq!(setup.counter.count(), 3, "exactly three calls run without asking");
    let ran = results.iter().filter(|result| text(result).starts_with("bumped small-")).count();
    let denied = results.iter().filter(|result| text(result).contains("rule `three-bumps`")).count();
    let held = results.iter().filter(|result| result["_meta"]["toolgate/approval"]["state"] == json!("pending"));
    assert_eq!(ran + denied + held.count(), 20, "{results:?}");
    let events = setup.store.audit(&AuditQuery::default()).await.unwrap();
    let seqs = |kind: AuditKind| -> Vec<i64> {
        events.iter().filter(|event| event.kind == kind).map(|event| event.seq).collect()
    };
    let (allowed, issued) = (seqs(AuditKind::Allowed), seqs(AuditKind::Issued));
    assert_eq!(allowed.len(), 3, "each call a history rule let through is counted as it is let through");
    let third = allowed.iter().max().copied().unwrap();
    assert!(
        issued.iter().all(|seq| *seq < third),
        "a question was issued after the third call was recorded: {issued:?} after {third}"
    );
    let denials = events.iter().filter(|event| event.kind == AuditKind::Denied).count();
    assert_eq!(denials, denied, "each refusal is on record");
}

/// Approved out of band, then retried at once: a retry judged before the
/// third call ran attaches to its approval, whose claim is judged again on
/// the history as it starts (`held::drive` with the session's rules), so ten
/// approved calls against a limit of three run exactly three; the others are
/// denied by the rule and never reach the upstream server.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approved_calls_claimed_at_once_run_exactly_the_limit() {
    let setup = Setup::new(RULES, |options| options.hold = Duration::from_millis(50)).await;
    let session = connect(&setup.gateway, Client::default(), "alice").await;
    let labels: Vec<String> = (0..10).map(|index| format!("big-{index}")).collect();
    let asked =
        futures::future::join_all(labels.iter().map(|label| call(&session, "count__bump", json!({"label": label}))));
    let ids: Vec<String> = asked
        .await
        .iter()
        .map(|result| result["_meta"]["toolgate/approval"]["id"].as_str().expect("held for a person").to_owned())
        .collect();
    let voter = Voter::new(Some("alice".to_owned()));
    for id in &ids {
        cast(&*setup.store, &SystemClock, id, &voter, Decision::APPROVE, VoteOptions::default()).await.unwrap();
    }
    // Each retry attaches to its approved call and claims it.
    let results =
        futures::future::join_all(labels.iter().map(|label| call(&session, "count__bump", json!({"label": label}))))
            .await;
    assert_eq!(setup.counter.count(), 3, "exactly three approved calls run: {results:?}");
    let denied = results.iter().filter(|result| text(result).contains("three-bumps")).count();
    assert_eq!(denied, 7, "the others are refused by the rule as they are claimed: {results:?}");
    // Each refusal is on record, as the retry was judged or, having passed that, as its claim was.
    let events = setup.store.audit(&AuditQuery::default()).await.unwrap();
    assert_eq!(events.iter().filter(|event| event.kind == AuditKind::Denied).count(), 7);
}

/// The client's form's approval.
fn approve() -> Value {
    json!({"action": "accept", "content": {"decision": "approve"}})
}

/// A call asked about in the client's form, approved there only after three
/// other calls ran: the answer's claim is judged again on the history as it
/// is now, so the call does not run. The audit shows the person's approval,
/// then the rule's refusal at the claim; the client reads the rule's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approval_in_the_form_after_the_limit_was_reached_is_refused_at_its_claim() {
    let setup = Setup::new(RULES, |_| {}).await;
    let client = Client::eliciting_later([approve()]);
    let session = connect(&setup.gateway, client.clone(), "alice").await;
    let asked = call(&session, "count__bump", json!({"label": "big-1"}));
    let meanwhile = async {
        client.wait_asked(1).await;
        // While the form is open, other calls of alice's reach the limit.
        let other = connect(&setup.gateway, Client::default(), "alice").await;
        for index in 0..3 {
            let result = call(&other, "count__bump", json!({"label": format!("small-{index}")})).await;
            assert!(text(&result).starts_with("bumped small-"), "{result:?}");
        }
        client.answer(1);
    };
    let (result, ()) = tokio::join!(asked, meanwhile);
    assert_eq!(setup.counter.count(), 3, "the approved call does not run: {result:?}");
    assert_eq!(result["isError"], json!(true));
    assert!(text(&result).starts_with("denied by toolgate: rule `three-bumps`"), "{result:?}");
    let events = setup.store.audit(&AuditQuery::default()).await.unwrap();
    let issued = events.iter().find(|event| event.kind == AuditKind::Issued).expect("the call was asked about");
    let id = issued.approval_id.clone();
    let own: Vec<_> = events.iter().filter(|event| event.approval_id == id).collect();
    let kinds: Vec<AuditKind> = own.iter().map(|event| event.kind).collect();
    assert_eq!(kinds, [AuditKind::Issued, AuditKind::Approved, AuditKind::Denied], "{own:?}");
    assert_eq!(own[1].principal.as_deref(), Some("alice"), "the person's approval is on record");
    assert_eq!(own[2].data["atClaim"], json!(true), "{}", own[2].data);
    assert!(own[2].data["reason"].as_str().unwrap().starts_with("rule `three-bumps`"), "{}", own[2].data);
    let record = setup.store.approvals(std::slice::from_ref(&id)).await.unwrap().pop().unwrap();
    assert_eq!(record.state, ApprovalState::Denied);
    assert_eq!(record.decision.unwrap().principal.as_deref(), Some(RULES_PRINCIPAL), "the rules refused it");
}

/// Ten calls asked about in the clients' forms at once (the history
/// empty), five through each of two gateways on the handles `a` and `b`
/// (two replicas on Postgres), then all ten approved at once against a
/// limit of three: each answer's claim is judged again on the history in one
/// conditional write with its entry, so exactly three run and seven are
/// refused by the rule. `principal` is fresh (a Postgres server may hold
/// earlier runs' calls).
async fn approvals_in_the_form_given_at_once_run_exactly_the_limit(
    (a, b): (Arc<dyn LedgerStore>, Arc<dyn LedgerStore>),
    principal: &str,
) {
    let (counter, first, mcp) = Setup::on(Arc::clone(&a), RULES, |_| {}).await;
    let second = Setup::gateway(&mcp, b, RULES, |_| {});
    let mut clients = Vec::new();
    let mut sessions = Vec::new();
    for (gateway, name) in [(&first, "one"), (&second, "two")] {
        let client = Client { name: Some(name.to_owned()), ..Client::eliciting_later((0..5).map(|_| approve())) };
        sessions.push(connect(gateway, client.clone(), principal).await);
        clients.push(client);
    }
    let calls = futures::future::join_all(
        (0..10).map(|index| call(&sessions[index % 2], "count__bump", json!({"label": format!("big-{index}")}))),
    );
    let answer = async {
        for client in &clients {
            client.wait_asked(5).await;
        }
        for client in &clients {
            client.answer(5);
        }
    };
    let (results, ()) = tokio::join!(calls, answer);
    assert_eq!(counter.count(), 3, "exactly three approved calls run: {results:?}");
    let denied = results.iter().filter(|result| text(result).contains("rule `three-bumps`")).count();
    assert_eq!(denied, 7, "the others are refused by the rule as they are claimed: {results:?}");
    let events = a.audit(&AuditQuery::default()).await.unwrap();
    let own: Vec<_> = events.iter().filter(|event| event.principal.as_deref() == Some(principal)).collect();
    let count = |kind: AuditKind| own.iter().filter(|event| event.kind == kind).count();
    assert_eq!(count(AuditKind::Approved), 10, "every answer is on record");
    assert_eq!(count(AuditKind::Allowed), 3, "each claim that passed counts its call");
    let refused = own.iter().filter(|event| event.kind == AuditKind::Denied && event.data["atClaim"] == true);
    assert_eq!(refused.count(), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_approvals_in_the_form_given_at_once_run_exactly_the_limit() {
    let store: Arc<dyn LedgerStore> = Arc::new(MemoryStore::default());
    approvals_in_the_form_given_at_once_run_exactly_the_limit((Arc::clone(&store), store), "alice").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_approvals_in_the_form_given_at_once_run_exactly_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let spec = toolgate_store::StoreSpec::Sqlite(dir.path().join("ledger.db"));
    let (a, b) = (sql(&spec).await, sql(&spec).await);
    approvals_in_the_form_given_at_once_run_exactly_the_limit((a.clone(), b.clone()), "alice").await;
    a.close().await;
    b.close().await;
}

/// On two replicas of a Postgres database (`TOOLGATE_TEST_POSTGRES_URL`, as
/// `scripts/with-postgres.sh` sets it; skipped without it unless
/// `TOOLGATE_TEST_REQUIRE_POSTGRES=1`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_replicas_approvals_in_the_form_given_at_once_run_exactly_the_limit() {
    let Ok(url) = std::env::var("TOOLGATE_TEST_POSTGRES_URL") else {
        let required = std::env::var("TOOLGATE_TEST_REQUIRE_POSTGRES").as_deref() == Ok("1");
        assert!(!required, "TOOLGATE_TEST_REQUIRE_POSTGRES=1 but TOOLGATE_TEST_POSTGRES_URL is not set");
        eprintln!("skipped: set TOOLGATE_TEST_POSTGRES_URL to run it");
        return;
    };
    let spec = toolgate_store::StoreSpec::Postgres(url);
    let (a, b) = (sql(&spec).await, sql(&spec).await);
    let principal = format!("alice-{}", uuid::Uuid::now_v7().simple());
    approvals_in_the_form_given_at_once_run_exactly_the_limit((a.clone(), b.clone()), &principal).await;
    a.close().await;
    b.close().await;
}

async fn sql(spec: &toolgate_store::StoreSpec) -> Arc<toolgate_store::SqlStore> {
    Arc::new(toolgate_store::SqlStore::open(spec).await.unwrap())
}
