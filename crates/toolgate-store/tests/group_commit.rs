//! SQLite writes share transactions under concurrency (group commit) and
//! checkpoint the write-ahead log off the write path: what that must not
//! change, and what it must do.
#![allow(missing_docs)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::json;
use toolgate::ledger::{
    ApprovalState, ApprovalStore, AuditKind, AuditQuery, AuditStore, Guard, StoreError, TransitionOutcome,
};
use toolgate_store::{SqlStore, StoreSpec};

use support::{event, record, transition};

async fn sqlite() -> (tempfile::TempDir, std::path::PathBuf, Arc<SqlStore>) {
    let (dir, path) = support::sqlite_path();
    let store = Arc::new(SqlStore::open(&StoreSpec::Sqlite(path.clone())).await.unwrap());
    (dir, path, store)
}

/// Many concurrent issues, every fourth one reusing an id: each id is
/// recorded once with its event, each duplicate fails alone, and no failure
/// takes another call's writes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_write_does_not_undo_the_writes_committed_with_it() {
    let (_dir, _path, store) = sqlite().await;
    let calls = (0..200).map(|n| {
        let store = Arc::clone(&store);
        // 150 ids; every fourth call reuses the id of the call three before it.
        let id = if n % 4 == 3 { format!("a{}", n - 3) } else { format!("a{n}") };
        async move {
            let issued = [record(&id, "c")];
            let events = [event(AuditKind::Issued, &id, "c", 10, json!({"call": n}))];
            (id.clone(), store.issue(&issued, &events).await)
        }
    });
    let results = join_all(calls).await;
    let mut recorded = std::collections::HashMap::new();
    for (id, result) in &results {
        match result {
            Ok(()) => assert!(recorded.insert(id.clone(), ()).is_none(), "`{id}` issued twice"),
            Err(StoreError::DuplicateApproval(duplicate)) => assert_eq!(duplicate, id),
            Err(error) => panic!("issue `{id}`: {error}"),
        }
    }
    let ids: Vec<String> = (0..200).map(|n| format!("a{n}")).filter(|id| recorded.contains_key(id)).collect();
    assert_eq!(recorded.len(), 150, "every distinct id recorded once");
    assert_eq!(store.approvals(&ids).await.unwrap().len(), 150);
    let log = store.audit(&AuditQuery { conversation_id: Some("c".into()), ..AuditQuery::default() }).await.unwrap();
    assert_eq!(log.len(), 150, "one issued event per recorded approval, none for a duplicate");
    store.close().await;
}

/// Concurrent answers racing for the same approvals through one writer:
/// exactly one moves each, the rest see the winner's record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_transitions_in_shared_transactions_move_each_approval_once() {
    let (_dir, _path, store) = sqlite().await;
    let records: Vec<_> = (0..20).map(|n| record(&format!("r{n}"), "c")).collect();
    store.issue(&records, &[]).await.unwrap();
    let answers = (0..200).map(|n| {
        let store = Arc::clone(&store);
        async move {
            let id = format!("r{}", n % 20);
            let to = if n % 3 == 0 { ApprovalState::Denied } else { ApprovalState::Approved };
            let mut claim = transition(&id, ApprovalState::Pending, to, Guard::NotExpiredAt(50), 50);
            claim.events = vec![event(AuditKind::Approved, &id, "c", 50, json!({"answer": n}))];
            store.apply(&[claim], &[]).await.unwrap().remove(0)
        }
    });
    let outcomes = join_all(answers).await;
    let moved = outcomes.iter().filter(|outcome| matches!(outcome, TransitionOutcome::Moved(_))).count();
    assert_eq!(moved, 20, "one winner per approval");
    for outcome in &outcomes {
        if let TransitionOutcome::Unmoved(record) = outcome {
            assert!(matches!(record.state, ApprovalState::Approved | ApprovalState::Denied), "{record:?}");
        }
    }
    let log = store.audit(&AuditQuery::default()).await.unwrap();
    assert_eq!(log.len(), 20, "only the winners' events are appended");
    store.close().await;
}

/// Writes queued before `close` complete; writes after it fail as unavailable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_lets_queued_writes_finish_and_refuses_later_ones() {
    let (_dir, path, store) = sqlite().await;
    let writes: Vec<_> = (0..50)
        .map(|n| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.issue(&[record(&format!("q{n}"), "c")], &[]).await })
        })
        .collect();
    let done = join_all(writes).await;
    store.close().await;
    assert!(done.iter().all(|result| matches!(result, Ok(Ok(())))), "{done:?}");
    let refused = store.issue(&[record("late", "c")], &[]).await;
    assert!(matches!(refused, Err(StoreError::Unavailable(_))), "{refused:?}");

    let reopened = SqlStore::open(&StoreSpec::Sqlite(path)).await.unwrap();
    let ids: Vec<String> = (0..50).map(|n| format!("q{n}")).collect();
    assert_eq!(reopened.approvals(&ids).await.unwrap().len(), 50);
    reopened.close().await;
}

/// The log is copied into the database file while the store is open (not
/// only when it closes), without any write waiting for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_ahead_log_is_checkpointed_in_the_background() {
    let (_dir, path, store) = sqlite().await;
    let before = std::fs::metadata(&path).unwrap().len();
    let records: Vec<_> = (0..400).map(|n| record(&format!("w{n}"), "c")).collect();
    for chunk in records.chunks(20) {
        store.issue(chunk, &[]).await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&path).unwrap().len() <= before {
        assert!(Instant::now() < deadline, "the database file never grew: no checkpoint ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    store.close().await;
}
