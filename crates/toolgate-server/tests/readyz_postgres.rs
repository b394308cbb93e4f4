//! `GET /readyz` on Postgres: 503 `not_ready` with the reason while the
//! database is down, 200 again once it is back, `/healthz` 200 throughout.
//!
//! It stops and starts the test cluster (`TOOLGATE_TEST_POSTGRES_CTL`, from
//! `scripts/with-postgres.sh`), so it is a test binary of its own with one
//! test: cargo runs test binaries one at a time, and no other test is using
//! the cluster meanwhile. Skipped without a cluster, unless
//! `TOOLGATE_TEST_REQUIRE_POSTGRES=1`.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use toolgate::ledger::LedgerConfig;
use toolgate_server::ServerConfig;

/// The cluster's URL and its stop/start script: `None` (with a note) to skip.
fn cluster() -> Option<(String, String)> {
    let var = |name: &str| std::env::var(name).ok().filter(|value| !value.trim().is_empty());
    match (var("TOOLGATE_TEST_POSTGRES_URL"), var("TOOLGATE_TEST_POSTGRES_CTL")) {
        (Some(url), Some(ctl)) => Some((url, ctl)),
        _ => {
            assert_ne!(
                std::env::var("TOOLGATE_TEST_REQUIRE_POSTGRES").as_deref(),
                Ok("1"),
                "TOOLGATE_TEST_REQUIRE_POSTGRES=1 but TOOLGATE_TEST_POSTGRES_URL or TOOLGATE_TEST_POSTGRES_CTL is not set"
            );
            eprintln!(
                "note: readyz_postgres: skipped: no Postgres test cluster to stop and start \
                 (run under scripts/with-postgres.sh)"
            );
            None
        }
    }
}

/// Runs `CTL stop` or `CTL start`, and fails the test if it fails.
fn control(ctl: &str, what: &str) {
    let output = Command::new(ctl).arg(what).output().expect("the cluster's control script runs");
    assert!(output.status.success(), "{ctl} {what}: {}", String::from_utf8_lossy(&output.stderr));
}

/// Asks `/readyz` until it answers `status` (the store's pool may take a
/// moment to see the database go or come back); returns the last reply.
async fn readyz_until(server: &Server, status: u16) -> Reply {
    for _ in 0..60 {
        let reply = get(server, "/readyz").await;
        if reply.status == status {
            return reply;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let reply = get(server, "/readyz").await;
    panic!("`/readyz` did not answer {status} within 15 s: {} {}", reply.status, reply.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_database_going_away_and_coming_back() {
    let Some((url, ctl)) = cluster() else { return };
    let spec = toolgate_store::StoreSpec::parse(&url, &std::env::temp_dir()).expect("a Postgres store spec");
    let store = toolgate_store::open_store(&spec).await.expect("the store opens").expect("a SQL store");
    let server = start_configured(default_script(), move |config: &mut ServerConfig| {
        config.ledger = Some(LedgerConfig::new(store));
    })
    .await;
    let ready = get(&server, "/readyz").await;
    assert_eq!((ready.status, ready.body.as_str()), (200, "ready"));

    control(&ctl, "stop");
    // Whatever happens next, the cluster is started again for the tests after this one.
    let restart = scopeguard(|| control(&ctl, "start"));
    let down = readyz_until(&server, 503).await;
    assert_eq!(down.json()["error"]["code"], "not_ready", "{}", down.body);
    let reason = down.json()["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(!reason.is_empty(), "a reason: {}", down.body);
    assert_eq!(get(&server, "/healthz").await.status, 200, "alive all the same");

    drop(restart);
    let back = readyz_until(&server, 200).await;
    assert_eq!(back.body, "ready");
}

/// Runs `action` when dropped (also when the test panics).
fn scopeguard(action: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(action) = self.0.take() {
                action();
            }
        }
    }
    Guard(Some(action))
}
