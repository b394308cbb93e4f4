//! The SQLite write-ahead log stays bounded under sustained load (writers and
//! readers at once, as a busy server has) and gives the disk back when the
//! writes pause.
#![allow(missing_docs)]

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::ledger::{ApprovalState, ApprovalStore, AuditKind, AuditQuery, AuditStore, ConversationStore, Guard};
use toolgate_store::{SqlStore, StoreSpec};

use support::{event, record, transition};

/// Writer tasks, each running approval round trips back to back.
const WRITERS: usize = 8;
/// Reader tasks, each reading the ledger back to back.
const READERS: usize = 4;
/// The round trips the load runs (it also stops after [`MAX_LOAD`]).
const ROUND_TRIPS: u64 = 12_000;
/// The longest the load runs.
const MAX_LOAD: Duration = Duration::from_secs(40);
/// The most the `-wal` file may hold at any moment: 16 MiB of log before a
/// truncation plus what the writers add while the checkpoints run, with room
/// for a loaded machine (the log grew past 400 MiB in this test when the
/// checkpoints could not cut it).
const WAL_BOUND: u64 = 64 << 20;

fn wal_path(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

fn wal_size(path: &Path) -> u64 {
    std::fs::metadata(wal_path(path)).map(|meta| meta.len()).unwrap_or(0)
}

/// One stored round trip as the server makes it: the approval issued with
/// its event, the conversation saved, the answer's transition with its
/// event, and the conversation saved again, longer.
async fn round_trip(store: &SqlStore, n: u64) {
    let (id, conversation) = (format!("a{n}"), format!("c{n}"));
    let issued = event(AuditKind::Issued, &id, &conversation, 10, json!({"tool": "send_email"}));
    store.issue(&[record(&id, &conversation)], &[issued]).await.unwrap();
    let turn = json!([{"role": "user", "parts": [{"type": "text", "text": "send the report ".repeat(20)}]}]);
    let version =
        store.save_conversation(&conversation, None, &turn, None, 10).await.unwrap().expect("a new conversation");
    let mut answer = transition(&id, ApprovalState::Pending, ApprovalState::Approved, Guard::NotExpiredAt(20), 20);
    answer.events = vec![event(AuditKind::Approved, &id, &conversation, 20, json!({"principal": "alice"}))];
    store.apply(&[answer], &[]).await.unwrap();
    let longer = json!([turn[0], {"role": "assistant", "parts": [{"type": "text", "text": "done ".repeat(40)}]}]);
    store
        .save_conversation(&conversation, None, &longer, Some(version), 20)
        .await
        .unwrap()
        .expect("saved over its version");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_log_stays_bounded_under_sustained_load_and_shrinks_when_idle() {
    let (_dir, path) = support::sqlite_path();
    let store = Arc::new(SqlStore::open(&StoreSpec::Sqlite(path.clone())).await.unwrap());
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));

    let sampler = {
        let (path, done, peak) = (path.clone(), Arc::clone(&done), Arc::clone(&peak));
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(wal_size(&path), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let readers: Vec<_> = (0..READERS)
        .map(|reader| {
            let (store, done, next) = (Arc::clone(&store), Arc::clone(&done), Arc::clone(&next));
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    let n = next.load(Ordering::Relaxed).saturating_sub(reader as u64 + 1);
                    let query = AuditQuery { conversation_id: Some(format!("c{n}")), ..AuditQuery::default() };
                    store.audit(&query).await.unwrap();
                    store.approvals(&[format!("a{n}")]).await.unwrap();
                }
            })
        })
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (store, next) = (Arc::clone(&store), Arc::clone(&next));
            tokio::spawn(async move {
                // Every number drawn is written (the time is checked before a number is drawn), so
                // `next`, capped at ROUND_TRIPS, counts the round trips written.
                while started.elapsed() <= MAX_LOAD {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= ROUND_TRIPS {
                        return;
                    }
                    round_trip(&store, n).await;
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let written = next.load(Ordering::Relaxed).min(ROUND_TRIPS);
    done.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.await.unwrap();
    }
    sampler.await.unwrap();
    let peak = peak.load(Ordering::Relaxed).max(wal_size(&path));
    eprintln!("{written} round trips; the log peaked at {} KiB", peak >> 10);
    assert!(written >= 2_000, "the load ran too few round trips to tell ({written})");
    assert!(peak < WAL_BOUND, "the log reached {peak} bytes over {written} round trips (bound {WAL_BOUND})");

    // Idle: the log is copied back and the file cut to nothing.
    let deadline = Instant::now() + Duration::from_secs(15);
    while wal_size(&path) > 0 {
        assert!(Instant::now() < deadline, "the log kept {} bytes once the writes stopped", wal_size(&path));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let file = std::fs::metadata(&path).unwrap().len();
    eprintln!("the database file holds {} bytes per round trip once checkpointed", file / written.max(1));
    let ids: Vec<String> = (0..written).step_by(997).map(|n| format!("a{n}")).collect();
    let stored = store.approvals(&ids).await.unwrap();
    assert_eq!(stored.len(), ids.len(), "every sampled approval is stored");
    assert!(stored.iter().all(|record| record.state == ApprovalState::Approved));
    store.close().await;
}
