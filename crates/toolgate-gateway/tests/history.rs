//! History terms through the gateway: concurrent `tools/call`s against a
//! count limit, each decided and, when a person must answer, issued through
//! the lifecycle's one path (`held::admit_asked`). Exactly the limit's calls
//! run without asking, and no question is issued on a history that moved
//! before it was recorded (one judged on 2 calls while the 3rd was
//! recorded is denied, not asked).

mod support;

use std::time::Duration;

use serde_json::json;
use support::{Client, Setup, call, connect, text};
use toolgate::approval::lifecycle::{Decision, VoteOptions, Voter, cast};
use toolgate::ledger::{AuditKind, AuditQuery, AuditStore, SystemClock};

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
