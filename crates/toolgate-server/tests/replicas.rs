//! Replicas: real server processes on one store, answered concurrently and
//! killed with SIGKILL mid-execution.
//!
//! The test binary runs itself as the server: `replica_process` serves when
//! `TOOLGATE_REPLICA_SERVE=1` (and returns at once otherwise). Every tool
//! execution appends one line to an executions log opened with `O_APPEND`,
//! which is how runs are counted across processes. Every call of the
//! scripted model has the id `call-1`, so each chat's user message carries a
//! `[key=…]` tag that the tool writes into its line: lines are counted per
//! chat (one approval each). Its output, `{"deleted", "key", "execution"}`,
//! carries the id of the run it came from, so a streamed result can be traced
//! to the logged run that produced it.
//!
//! - Two replicas on one Postgres, 500 approvals, 10,000 answers at once
//!   (duplicates, replays, approve-vs-deny races): no 5xx or transport error,
//!   every 200 carries the recorded outcome, every 409 is `approval_in_progress`
//!   (or `approval_already_decided` where both answers were sent), each
//!   approved call ran exactly once and each denied one never, and the stored
//!   conversations agree with the ledger.
//! - SIGKILL while a slow tool runs (SQLite, Postgres): after a restart the
//!   orphaned call gets 409 while its lease lives, then resolves as
//!   interrupted without running again; pending approvals stay answerable;
//!   executed ones replay.
//! - SIGKILL at random points under load, three rounds (SQLite, Postgres): no
//!   call ran twice, and once leases lapse every approval is pending,
//!   executed (one run), denied (none) or interrupted (at most one).
//!
//! - Routed approvals (`replicas/routed.rs`): votes at both replicas at
//!   once, one server-side continuation per conversation; SIGKILL during a
//!   continuation.
//!
//! Random choices print their seed; `TOOLGATE_REPLICAS_SEED` repeats them.
//!
//! Postgres tests run when `TOOLGATE_TEST_POSTGRES_URL` is set (each in a
//! fresh database), and fail when `TOOLGATE_TEST_REQUIRE_POSTGRES=1` without
//! it: `bash scripts/with-postgres.sh cargo test -p toolgate-server --test replicas`.

#[path = "replicas/routed.rs"]
mod routed;
#[path = "replicas/support.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;
use tokio::sync::Semaphore;
use toolgate::ledger::{ApprovalState, INTERRUPTED_TEXT, WARNING_INTERRUPTED};

/// The replica tests run one at a time: they measure processes, not the scheduler.
static SERIAL: Mutex<()> = Mutex::new(());

fn run(test: impl Future<Output = ()>) {
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(240), test).await.expect("the test finishes within 4 minutes");
    });
}

/// The server of a child process (see the module docs); returns at once in a normal run.
#[test]
fn replica_process() {
    if std::env::var(SERVE_ENV).as_deref() == Ok("1") {
        serve_from_env();
    }
}

/// The Postgres URL to test against: `None` (with a note) to skip; panics when
/// `TOOLGATE_TEST_REQUIRE_POSTGRES=1` but no URL is set.
fn postgres_url(test: &str) -> Option<String> {
    match std::env::var("TOOLGATE_TEST_POSTGRES_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            assert_ne!(
                std::env::var("TOOLGATE_TEST_REQUIRE_POSTGRES").as_deref(),
                Ok("1"),
                "TOOLGATE_TEST_REQUIRE_POSTGRES=1 but TOOLGATE_TEST_POSTGRES_URL is not set"
            );
            eprintln!(
                "note: {test}: skipped its Postgres part: TOOLGATE_TEST_POSTGRES_URL is not set \
                 (run under scripts/with-postgres.sh)"
            );
            None
        }
    }
}

/// A fresh database on the server of `url`, and its URL.
async fn fresh_database(url: &str) -> String {
    use sqlx::Connection;
    let name = format!("toolgate_replicas_{}", uuid::Uuid::now_v7().simple());
    let mut connection = sqlx::PgConnection::connect(url).await.expect("Postgres answers");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut connection)
        .await
        .expect("a fresh database");
    connection.close().await.ok();
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, format!("?{query}")),
        None => (url, String::new()),
    };
    let (server, _database) = head.rsplit_once('/').expect("a database URL");
    format!("{server}/{name}{query}")
}

/// Drops a database made by [`fresh_database`] (best effort: the cluster may be throwaway anyway).
async fn drop_database(url: &str, database_url: &str) {
    use sqlx::Connection;
    let name = database_url.rsplit_once('/').map(|(_, tail)| tail.split('?').next().unwrap_or(tail));
    let (Some(name), Ok(mut connection)) = (name, sqlx::PgConnection::connect(url).await) else { return };
    let statement = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
    sqlx::query(sqlx::AssertSqlSafe(statement)).execute(&mut connection).await.ok();
    connection.close().await.ok();
}

/// Failures by kind, with a few examples each, so one run reports every kind at once.
#[derive(Default)]
struct Violations(BTreeMap<String, (usize, Vec<String>)>);

impl Violations {
    fn add(&mut self, kind: &str, example: impl Into<String>) {
        let entry = self.0.entry(kind.to_owned()).or_default();
        entry.0 += 1;
        if entry.1.len() < 4 {
            let mut example: String = example.into();
            if example.len() > 900 {
                let mut cut = 900;
                while !example.is_char_boundary(cut) {
                    cut -= 1;
                }
                example.truncate(cut);
                example.push('…');
            }
            entry.1.push(example);
        }
    }

    fn check(&mut self, holds: bool, kind: &str, example: impl FnOnce() -> String) {
        if !holds {
            self.add(kind, example());
        }
    }

    fn assert_none(&self, test: &str) {
        if self.0.is_empty() {
            return;
        }
        let mut report = format!("{test}: {} kinds of violation\n", self.0.len());
        for (kind, (count, examples)) in &self.0 {
            report.push_str(&format!("- {kind}: {count} times, e.g.\n"));
            for example in examples {
                report.push_str(&format!("    {example}\n"));
            }
        }
        panic!("{report}");
    }
}

/// Counts by status (and error code) for the report.
fn tally(tallies: &mut BTreeMap<String, usize>, reply: &Result<Reply, String>) {
    let name = match reply {
        Ok(reply) if reply.status == 200 => "200".to_owned(),
        Ok(reply) => format!("{} {}", reply.status, reply.error_code().unwrap_or_default()),
        Err(_) => "transport error".to_owned(),
    };
    *tallies.entry(name).or_default() += 1;
}

/// Issues first turns for these keys, spread over `bases`, `in_flight` at a time.
async fn ask_all(
    client: &reqwest::Client,
    bases: &[String],
    keys: &[String],
    in_flight: usize,
) -> HashMap<String, Asked> {
    let semaphore = Arc::new(Semaphore::new(in_flight));
    let mut tasks = Vec::with_capacity(keys.len());
    for (index, key) in keys.iter().enumerate() {
        let permit = semaphore.clone().acquire_owned().await.expect("open semaphore");
        let (client, base, key) = (client.clone(), bases[index % bases.len()].clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            let asked = ask(&client, &base, &key).await;
            drop(permit);
            (key, asked)
        }));
    }
    let mut asked = HashMap::new();
    for task in tasks {
        let (key, result) = task.await.expect("the task ends");
        asked.insert(key, result.unwrap_or_else(|error| panic!("{error}")));
    }
    asked
}

// ---------------------------------------------------------------------------
// 1. Exactly once across two replicas on one Postgres.
// ---------------------------------------------------------------------------

const CHATS: usize = 500;
const EARLY_PER_APPROVAL: usize = 16;
const LATE_PER_APPROVAL: usize = 4;
const IN_FLIGHT: usize = 96;
/// Every this many approvals get approve-vs-deny races (half the answers deny).
const RACE_EVERY: usize = 5;

#[derive(Debug, Clone)]
struct Submission {
    key: String,
    approve: bool,
    server: usize,
}

#[test]
fn two_replicas_on_postgres_run_each_approved_call_exactly_once() {
    let Some(url) = postgres_url("two_replicas_on_postgres_run_each_approved_call_exactly_once") else { return };
    run(async {
        let database = fresh_database(&url).await;
        exactly_once(&database).await;
        drop_database(&url, &database).await;
    });
}

async fn exactly_once(database: &str) {
    let test = "exactly once across replicas";
    let started = Instant::now();
    let fixture = Fixture::new("once", Some(database.to_owned())).await;
    let replicas = [
        fixture.spawn(Duration::from_millis(20), Duration::from_secs(30)),
        fixture.spawn(Duration::from_millis(20), Duration::from_secs(30)),
    ];
    let bases: Vec<String> = replicas.iter().map(Replica::base).collect();
    let client = client();
    eprintln!("{test}: 2 replicas up in {:?}", started.elapsed());

    let keys: Vec<String> = (0..CHATS).map(|index| format!("c{index:04}")).collect();
    let asking = Instant::now();
    let asked = ask_all(&client, &bases, &keys, 32).await;
    eprintln!("{test}: {CHATS} approvals issued in {:?}", asking.elapsed());

    // Waves of five approvals, each answered 16 times in a shuffled burst
    // (races to claim), then 4 late answers each (replays), shuffled.
    let mut rng = Rng::from_clock(test);
    let racing = |index: usize| index.is_multiple_of(RACE_EVERY);
    let mut submissions = Vec::new();
    let mut late = Vec::new();
    for wave in keys.chunks(5) {
        let mut burst = Vec::new();
        for key in wave {
            let index: usize = key[1..].parse().expect("a key number");
            for answer in 0..EARLY_PER_APPROVAL + LATE_PER_APPROVAL {
                let approve = !racing(index) || answer % 2 == 0;
                let submission = Submission { key: key.clone(), approve, server: rng.below(2) };
                if answer < EARLY_PER_APPROVAL { burst.push(submission) } else { late.push(submission) }
            }
        }
        rng.shuffle(&mut burst);
        submissions.extend(burst);
    }
    rng.shuffle(&mut late);
    submissions.extend(late);
    let total = submissions.len();
    assert!(total >= 10_000, "{total} submissions");

    let answering = Instant::now();
    let semaphore = Arc::new(Semaphore::new(IN_FLIGHT));
    let asked = Arc::new(asked);
    let mut tasks = Vec::with_capacity(total);
    for submission in submissions {
        let permit = semaphore.clone().acquire_owned().await.expect("open semaphore");
        let (client, base, asked) = (client.clone(), bases[submission.server].clone(), asked.clone());
        tasks.push(tokio::spawn(async move {
            let body = answered(&submission.key, &asked[&submission.key], submission.approve);
            let reply = post_json(&client, &base, "/api/chat", &body).await;
            drop(permit);
            (submission, reply)
        }));
    }
    let mut results = Vec::with_capacity(total);
    for task in tasks {
        results.push(task.await.expect("the task ends"));
    }
    let elapsed = answering.elapsed();
    eprintln!(
        "{test}: {total} answers ({IN_FLIGHT} in flight, 2 replicas) in {elapsed:?}: {:.0}/s",
        total as f64 / elapsed.as_secs_f64()
    );

    let records = fixture.records(&asked).await;
    let executions = fixture.executions();
    let mut violations = Violations::default();
    let mut tallies = BTreeMap::new();
    for (submission, reply) in &results {
        tally(&mut tallies, reply);
        let Submission { key, approve, server } = submission;
        let answer = if *approve { "approve" } else { "deny" };
        let context = || format!("{key} ({answer}, replica {server})");
        let reply = match reply {
            Ok(reply) => reply,
            Err(error) => {
                violations.add("transport error", format!("{}: {error}", context()));
                continue;
            }
        };
        let Some(record) = records.get(key) else { continue };
        match reply.status {
            200 => {
                let expected = match record.state {
                    ApprovalState::Executed => stored_value(record).map(Outcome::Output),
                    ApprovalState::Denied => Some(Outcome::Denied),
                    _ => None,
                };
                match reply.outcome() {
                    Ok(outcome) if Some(&outcome) != expected.as_ref() => {
                        let source = if reply.replayed() { "replayed from the stored conversation" } else { "run" };
                        let kind = match &outcome {
                            Outcome::Error(text) if text.contains(BUSY_TEXT) => {
                                "the 'being settled by another request' error"
                            }
                            Outcome::Error(text) if text == INTERRUPTED_TEXT => "the 'interrupted' error",
                            _ => "another outcome",
                        };
                        violations.add(
                            &format!("a 200 to an {answer} ({source}) carrying {kind} instead of the recorded outcome"),
                            format!("{}: got {outcome:?}, recorded {:?} {expected:?}", context(), record.state),
                        );
                    }
                    Ok(_) => {}
                    Err(error) => violations.add("a 200 with a broken stream", format!("{}: {error}", context())),
                }
            }
            409 => {
                let code = reply.error_code().unwrap_or_default();
                let allowed = code == "approval_in_progress" || (code == "approval_already_decided" && racing_key(key));
                violations.check(allowed, "a 409 with an unexpected code", || format!("{}: {}", context(), reply.body));
            }
            status if status >= 500 => violations.add("a 5xx", format!("{}: {status} {}", context(), reply.body)),
            status => violations.add("an unexpected status", format!("{}: {status} {}", context(), reply.body)),
        }
    }

    // Every approval: decided, and run exactly once when approved, never when denied.
    for key in &keys {
        let Some(record) = records.get(key) else {
            violations.add("an issued approval missing from the store", key.clone());
            continue;
        };
        let runs = executions.count(key);
        let approved = record.decision.as_ref().map(|decision| decision.approved);
        match (record.state, approved) {
            (ApprovalState::Executed, Some(true)) => {
                violations.check(runs == 1, "an approved call that did not run exactly once", || {
                    format!("{key}: {runs} runs")
                });
                let logged = executions.by_key.get(key).and_then(|runs| runs.first());
                let stored = stored_value(record);
                let stored = stored.as_ref().and_then(|value| value["execution"].as_str());
                violations.check(logged.map(String::as_str) == stored, "a stored result from another run", || {
                    format!("{key}: log {logged:?}, store {stored:?}")
                });
            }
            (ApprovalState::Denied, Some(false)) => {
                violations.check(runs == 0, "a denied call that ran", || format!("{key}: {runs} runs"));
                violations.check(racing_key(key), "a call nobody denied was denied", || key.clone());
            }
            (state, approved) => violations.add(
                "an approval neither executed nor denied after every answer",
                format!("{key}: {state:?}, approved {approved:?}, {runs} runs"),
            ),
        }
    }
    for key in executions.by_key.keys() {
        violations.check(records.contains_key(key), "an execution of no issued approval", || key.clone());
    }
    for line in &executions.malformed {
        violations.add("a malformed executions line", line.clone());
    }

    // The stored conversations agree with the ledger.
    for key in &keys {
        let Some(record) = records.get(key) else { continue };
        match get(&client, &bases[0], &format!("/api/chats/{key}")).await {
            Ok(reply) if reply.status == 200 => {
                let stored: Value = serde_json::from_str(&reply.body).unwrap_or_default();
                let part = stored["messages"][1]["parts"]
                    .as_array()
                    .and_then(|parts| parts.iter().find(|part| part["toolCallId"] == CALL_ID))
                    .cloned()
                    .unwrap_or_default();
                let agrees = match record.state {
                    ApprovalState::Executed => {
                        part["state"] == "output-available" && Some(&part["output"]) == stored_value(record).as_ref()
                    }
                    ApprovalState::Denied => part["state"] == "output-denied",
                    _ => true,
                };
                violations.check(agrees, "a stored conversation that disagrees with the ledger", || {
                    format!("{key}: ledger {:?} {:?}, conversation part {part}", record.state, stored_value(record))
                });
            }
            other => violations.add("a stored conversation that cannot be read", format!("{key}: {other:?}")),
        }
    }

    let executed = records.values().filter(|record| record.state == ApprovalState::Executed).count();
    eprintln!(
        "{test}: responses {tallies:?}; {executed} executed, {} denied, {} execution lines; total {:?}",
        records.len() - executed,
        executions.lines,
        started.elapsed()
    );
    violations.assert_none(test);
}

/// What a request that loses the claim to a concurrent one is told (`approval::lifecycle::claim`, `busy`).
const BUSY_TEXT: &str = "is being settled by another request at the same time";

/// The stored conversation's part for the call, for failure reports.
async fn stored_part(client: &reqwest::Client, base: &str, key: &str) -> String {
    match get(client, base, &format!("/api/chats/{key}")).await {
        Ok(reply) if reply.status == 200 => {
            let stored: Value = serde_json::from_str(&reply.body).unwrap_or_default();
            let parts = stored["messages"][1]["parts"].as_array().cloned().unwrap_or_default();
            let part = parts.into_iter().find(|part| part["toolCallId"] == CALL_ID).unwrap_or_default();
            format!(
                "state {}, approval {}, output {}, error {}",
                part["state"], part["approval"], part["output"], part["errorText"]
            )
        }
        other => format!("unreadable: {other:?}"),
    }
}

fn racing_key(key: &str) -> bool {
    key[1..].parse::<usize>().is_ok_and(|index| index.is_multiple_of(RACE_EVERY))
}

// ---------------------------------------------------------------------------
// 2. SIGKILL mid-execution, then a new process on the same store.
// ---------------------------------------------------------------------------

const SLOW_TOOL: Duration = Duration::from_millis(1500);
const KILL_LEASE: Duration = Duration::from_secs(3);

#[test]
fn a_replica_killed_mid_execution_on_sqlite_runs_nothing_twice_and_resolves_as_interrupted() {
    run(async {
        let fixture = Fixture::new("kill-sqlite", None).await;
        killed_mid_execution("kill -9 (sqlite)", &fixture).await;
    });
}

#[test]
fn a_replica_killed_mid_execution_on_postgres_runs_nothing_twice_and_resolves_as_interrupted() {
    let test = "a_replica_killed_mid_execution_on_postgres_runs_nothing_twice_and_resolves_as_interrupted";
    let Some(url) = postgres_url(test) else { return };
    run(async {
        let database = fresh_database(&url).await;
        {
            let fixture = Fixture::new("kill-postgres", Some(database.clone())).await;
            killed_mid_execution("kill -9 (postgres)", &fixture).await;
        }
        drop_database(&url, &database).await;
    });
}

#[test]
fn replicas_killed_at_random_under_load_on_sqlite_run_nothing_twice() {
    run(async {
        let fixture = Fixture::new("load-sqlite", None).await;
        killed_under_load("kill -9 under load (sqlite)", &fixture).await;
    });
}

#[test]
fn replicas_killed_at_random_under_load_on_postgres_run_nothing_twice() {
    let Some(url) = postgres_url("replicas_killed_at_random_under_load_on_postgres_run_nothing_twice") else {
        return;
    };
    run(async {
        let database = fresh_database(&url).await;
        {
            let fixture = Fixture::new("load-postgres", Some(database.clone())).await;
            killed_under_load("kill -9 under load (postgres)", &fixture).await;
        }
        drop_database(&url, &database).await;
    });
}

async fn answer(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    asked: &HashMap<String, Asked>,
    approve: bool,
) -> Reply {
    post_json(client, base, "/api/chat", &answered(key, &asked[key], approve))
        .await
        .unwrap_or_else(|error| panic!("answering {key}: {error}"))
}

fn expect_status(reply: &Reply, status: u16, what: &str) {
    assert_eq!(reply.status, status, "{what}: {}", reply.body);
}

async fn killed_mid_execution(test: &str, fixture: &Fixture) {
    let started = Instant::now();
    let client = client();
    let mut replica = fixture.spawn(SLOW_TOOL, KILL_LEASE);
    let base = replica.base();
    let keys = ["running-1", "running-2", "pending-1", "pending-2", "executed", "denied"].map(str::to_owned);
    let asked = ask_all(&client, std::slice::from_ref(&base), &keys, 6).await;

    // Before the kill: one call executed, one denied.
    let executed = answer(&client, &base, "executed", &asked, true).await;
    expect_status(&executed, 200, "executed before the kill");
    let executed_output = match executed.outcome() {
        Ok(Outcome::Output(output)) => output,
        other => panic!("executed before the kill: {other:?}"),
    };
    expect_status(&answer(&client, &base, "denied", &asked, false).await, 200, "denied before the kill");

    // Two calls in flight: kill -9 while their tool sleeps.
    let in_flight: Vec<_> = ["running-1", "running-2"]
        .into_iter()
        .map(|key| {
            let (client, base, body) = (client.clone(), base.clone(), answered(key, &asked[key], true));
            tokio::spawn(async move { post_json(&client, &base, "/api/chat", &body).await })
        })
        .collect();
    let running = wait_until(Duration::from_secs(10), Duration::from_millis(10), async || {
        let started = fixture.started();
        ["running-1", "running-2"].iter().all(|key| started.iter().any(|started| started == key))
    })
    .await;
    assert!(running, "{test}: the two calls never started");
    let records = fixture.records(&asked).await;
    for key in ["running-1", "running-2"] {
        assert_eq!(records[key].state, ApprovalState::Executing, "{test}: {key} is executing");
        assert_eq!(fixture.executions().count(key), 0, "{test}: {key} has not finished");
    }
    replica.kill9();
    let killed_at = Instant::now();
    for task in in_flight {
        let reply = tokio::time::timeout(Duration::from_secs(10), task).await.expect("the request ends").unwrap();
        assert!(reply.is_err(), "{test}: a request answered although its server was killed: {reply:?}");
    }
    let mut replica = fixture.spawn(SLOW_TOOL, KILL_LEASE);
    let base = replica.base();
    eprintln!("{test}: killed mid-execution, restarted in {:?}", killed_at.elapsed());

    // (a) The calls that were executing: 409 while the old lease lives, then interrupted.
    let records = fixture.records(&asked).await;
    for key in ["running-1", "running-2"] {
        let record = &records[key];
        assert_eq!(record.state, ApprovalState::Executing, "{test}: {key} after the restart");
        let until = record.lease.as_ref().expect("an executing record has a lease").until;
        let left = until - now_millis();
        assert!(left > 300, "{test}: {key}'s lease ran out {left} ms before the restart was done: too slow a restart");
        let reply = answer(&client, &base, key, &asked, true).await;
        expect_status(&reply, 409, &format!("{test}: {key} under the old lease"));
        assert_eq!(reply.error_code().as_deref(), Some("approval_in_progress"), "{}", reply.body);
    }
    for key in ["running-1", "running-2"] {
        let mut reply = None;
        for _ in 0..60 {
            let attempt = answer(&client, &base, key, &asked, true).await;
            if attempt.status == 409 && attempt.error_code().as_deref() == Some("approval_in_progress") {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            reply = Some(attempt);
            break;
        }
        let reply = reply.unwrap_or_else(|| panic!("{test}: {key} still in progress 12 s after the kill"));
        expect_status(&reply, 200, &format!("{test}: {key} after its lease lapsed"));
        assert_eq!(reply.outcome(), Ok(Outcome::Error(INTERRUPTED_TEXT.to_owned())), "{test}: {key}");
        assert!(reply.warnings().iter().any(|code| code == WARNING_INTERRUPTED), "{test}: {key}: {}", reply.body);
        // Asked again: the same outcome, from the record.
        let again = answer(&client, &base, key, &asked, true).await;
        expect_status(&again, 200, &format!("{test}: {key} asked again"));
        assert_eq!(again.outcome(), Ok(Outcome::Error(INTERRUPTED_TEXT.to_owned())), "{test}: {key} again");
    }
    eprintln!("{test}: interrupted calls resolved {:?} after the kill", killed_at.elapsed());

    // (b) Approvals issued before the kill are answerable after it.
    let approved = answer(&client, &base, "pending-1", &asked, true).await;
    expect_status(&approved, 200, "pending-1 approved after the restart");
    let Ok(Outcome::Output(output)) = approved.outcome() else { panic!("pending-1: {}", approved.body) };
    let denied = answer(&client, &base, "pending-2", &asked, false).await;
    assert_eq!(denied.outcome(), Ok(Outcome::Denied), "pending-2 denied after the restart");

    // (c) What ran before the kill is replayed, not run again.
    let replayed = answer(&client, &base, "executed", &asked, true).await;
    assert_eq!(replayed.outcome(), Ok(Outcome::Output(executed_output.clone())), "executed, replayed");
    let replayed = answer(&client, &base, "denied", &asked, false).await;
    assert_eq!(replayed.outcome(), Ok(Outcome::Denied), "denied, replayed");

    let executions = fixture.executions();
    let records = fixture.records(&asked).await;
    assert!(executions.malformed.is_empty(), "{:?}", executions.malformed);
    for key in ["running-1", "running-2"] {
        assert_eq!(records[key].state, ApprovalState::Interrupted, "{test}: {key}");
        assert!(executions.count(key) <= 1, "{test}: {key} ran {} times", executions.count(key));
    }
    let logged = |key: &str| executions.by_key.get(key).cloned().unwrap_or_default();
    assert_eq!(logged("executed"), [executed_output["execution"].as_str().unwrap_or_default().to_owned()]);
    assert_eq!(logged("pending-1"), [output["execution"].as_str().unwrap_or_default().to_owned()]);
    assert_eq!((executions.count("pending-2"), executions.count("denied")), (0, 0));
    assert_eq!(records["executed"].state, ApprovalState::Executed);
    assert_eq!((records["pending-2"].state, records["denied"].state), (ApprovalState::Denied, ApprovalState::Denied));
    replica.kill9();
    eprintln!(
        "{test}: running calls ran {} and {} times; done in {:?}",
        executions.count("running-1"),
        executions.count("running-2"),
        started.elapsed()
    );
}

const LOAD_APPROVALS: usize = 60;
const LOAD_ROUNDS: usize = 3;
const LOAD_ANSWERS: usize = 50;
/// The most the tool sleeps under load (a random time up to it per call).
const LOAD_TOOL: Duration = Duration::from_millis(250);
const LOAD_LEASE: Duration = Duration::from_secs(1);

async fn killed_under_load(test: &str, fixture: &Fixture) {
    let started = Instant::now();
    let client = client();
    let mut rng = Rng::from_clock(test);
    let keys: Vec<String> = (0..LOAD_APPROVALS).map(|index| format!("l{index:03}")).collect();
    let mut replica = fixture.spawn_with(LOAD_TOOL, true, LOAD_LEASE);
    let asked = ask_all(&client, &[replica.base()], &keys, 8).await;
    let asked = Arc::new(asked);

    let mut violations = Violations::default();
    let mut tallies = BTreeMap::new();
    let mut outputs: Vec<(String, Outcome)> = Vec::new();
    for round in 0..LOAD_ROUNDS {
        if round > 0 {
            replica = fixture.spawn_with(LOAD_TOOL, true, LOAD_LEASE);
        }
        let base = replica.base();
        warm_up(&client, &base).await;
        let tasks: Vec<_> = (0..LOAD_ANSWERS)
            .map(|_| {
                let key = keys[rng.below(keys.len())].clone();
                let approve = rng.below(5) > 0;
                let (client, base, asked) = (client.clone(), base.clone(), asked.clone());
                tokio::spawn(async move {
                    let reply = post_json(&client, &base, "/api/chat", &answered(&key, &asked[&key], approve)).await;
                    (key, approve, reply)
                })
            })
            .collect();
        let delay = Duration::from_millis(rng.below(301) as u64);
        tokio::time::sleep(delay).await;
        replica.kill9();
        for task in tasks {
            let (key, approve, reply) =
                tokio::time::timeout(Duration::from_secs(30), task).await.expect("the request ends").unwrap();
            tally(&mut tallies, &reply);
            let Ok(reply) = reply else { continue };
            let context = || format!("round {round}, {key} ({}): {} {}", approve, reply.status, reply.body);
            match reply.status {
                // A stream may be cut by the kill.
                200 => {
                    if let Ok(outcome) = reply.outcome() {
                        outputs.push((key.clone(), outcome));
                    }
                }
                409 => {
                    let code = reply.error_code().unwrap_or_default();
                    let allowed = code == "approval_in_progress" || code == "approval_already_decided";
                    violations.check(allowed, "a 409 with an unexpected code", context);
                }
                status if status >= 500 => violations.add("a 5xx", context()),
                _ => violations.add("an unexpected status", context()),
            }
        }
        eprintln!("{test}: round {round}: killed after {delay:?}");
    }

    // A last replica settles what the kills left executing, once their leases lapse.
    let replica = fixture.spawn_with(LOAD_TOOL, true, LOAD_LEASE);
    let base = replica.base();
    let mut settled = false;
    let mut last_reply = HashMap::new();
    let mut fruitless = 0;
    for _ in 0..40 {
        let records = fixture.records(&asked).await;
        let open: Vec<&String> =
            keys.iter().filter(|key| records.get(*key).is_some_and(|r| r.state == ApprovalState::Executing)).collect();
        // Still executing after a round in which no lease was live: retrying cannot help.
        if open.is_empty() || fruitless >= 2 {
            settled = open.is_empty();
            break;
        }
        let mut leased = false;
        for key in open {
            let reply = answer(&client, &base, key, &asked, true).await;
            let seen = match reply.status {
                200 => {
                    let outcome = reply.outcome().unwrap_or(Outcome::Missing);
                    outputs.push((key.clone(), outcome.clone()));
                    let source = if reply.replayed() { "replayed from the stored conversation" } else { "run" };
                    format!("200 ({source}) with {outcome:?}")
                }
                409 if reply.error_code().as_deref() == Some("approval_in_progress") => {
                    leased = true;
                    continue;
                }
                status => format!("{status} {}", reply.body),
            };
            last_reply.insert(key.clone(), seen);
        }
        fruitless = if leased { 0 } else { fruitless + 1 };
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    if !settled {
        let records = fixture.records(&asked).await;
        for key in keys.iter().filter(|key| records.get(*key).is_some_and(|r| r.state == ApprovalState::Executing)) {
            let decision = records[key].decision.as_ref().map(|decision| decision.approved);
            let refusal = last_reply.get(key).cloned().unwrap_or_default();
            let part = stored_part(&client, &base, key).await;
            violations.add(
                "a call left executing that approving again cannot settle (its lease lapsed)",
                format!(
                    "{key}: ledger approved {decision:?}; approving again gets {refusal}; stored conversation: {part}"
                ),
            );
        }
    }

    let records = fixture.records(&asked).await;
    let executions = fixture.executions();
    let mut states: BTreeMap<&str, usize> = BTreeMap::new();
    for key in &keys {
        let Some(record) = records.get(key) else {
            violations.add("an issued approval missing from the store", key.clone());
            continue;
        };
        *states.entry(record.state.as_str()).or_default() += 1;
        let runs = executions.count(key);
        violations.check(runs <= 1, "a call that ran twice", || format!("{key}: {runs} runs"));
        let fits = match record.state {
            ApprovalState::Pending | ApprovalState::Denied => runs == 0,
            ApprovalState::Executed => runs == 1,
            ApprovalState::Interrupted => runs <= 1,
            // Reported above, with the reason it could not be settled.
            ApprovalState::Executing => !settled,
            _ => false,
        };
        violations.check(fits, "an approval in an unexpected state or run count", || {
            format!("{key}: {:?}, {runs} runs", record.state)
        });
        if record.state == ApprovalState::Executed {
            let logged = executions.by_key.get(key).and_then(|runs| runs.first()).cloned();
            let stored = stored_value(record).and_then(|value| value["execution"].as_str().map(str::to_owned));
            violations.check(logged == stored, "a stored result from another run", || {
                format!("{key}: log {logged:?}, store {stored:?}")
            });
        }
    }
    for (key, outcome) in &outputs {
        if let Outcome::Output(output) = outcome {
            let logged = executions.by_key.get(key).cloned().unwrap_or_default();
            let execution = output["execution"].as_str().unwrap_or_default();
            violations.check(logged.iter().any(|run| run == execution), "a result streamed from no logged run", || {
                format!("{key}: {output}, log {logged:?}")
            });
        }
    }
    for line in &executions.malformed {
        violations.add("a malformed executions line", line.clone());
    }
    eprintln!(
        "{test}: responses {tallies:?}; final states {states:?}; {} execution lines; {:?}",
        executions.lines,
        started.elapsed()
    );
    drop(replica);
    violations.assert_none(test);
}
