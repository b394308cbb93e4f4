//! `--retain`: a serving server prunes what finished before its retention
//! period (at start, then hourly) and never anything open.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::json;
use toolgate::ledger::{
    ApprovalRecord, ApprovalState, ApprovalStore, AuditEvent, AuditKind, AuditStore, ConversationStore, LedgerConfig,
    ManualClock, MemoryStore,
};

const HOUR_MS: i64 = 60 * 60 * 1000;
const NOW: i64 = 1_700_000_000_000;

fn record(id: &str, conversation: &str, state: ApprovalState, updated_at: i64) -> ApprovalRecord {
    ApprovalRecord {
        approval_id: id.to_owned(),
        conversation_id: conversation.to_owned(),
        owner: None,
        client: None,
        tool_call_id: format!("call-{id}"),
        tool_name: "delete_file".to_owned(),
        input: json!({"path": "notes.txt"}),
        input_digest: "digest".to_owned(),
        issued_at: updated_at,
        expires_at: updated_at + HOUR_MS,
        state,
        decision: None,
        output: None,
        lease: None,
        updated_at,
        routing: None,
        votes: Vec::new(),
        reason: None,
        supersedes: None,
        superseded_by: None,
        origin: Default::default(),
        input_schema: None,
        lineage: Vec::new(),
    }
}

fn issued(id: &str, conversation: &str, at: i64) -> AuditEvent {
    AuditEvent {
        seq: 0,
        at,
        kind: AuditKind::Issued,
        approval_id: id.to_owned(),
        tool_call_id: format!("call-{id}"),
        conversation_id: conversation.to_owned(),
        owner: None,
        principal: None,
        data: json!({}),
    }
}

#[tokio::test]
async fn a_serving_server_prunes_what_finished_before_its_retention_period() {
    let store = Arc::new(MemoryStore::new());
    let two_days_ago = NOW - 48 * HOUR_MS;
    // Issued pending, then moved straight to their states for the test (the store keeps what it is given).
    let records = [
        record("old-executed", "old-chat", ApprovalState::Executed, two_days_ago),
        record("old-pending", "waiting-chat", ApprovalState::Pending, two_days_ago),
        record("recent-denied", "recent-chat", ApprovalState::Denied, NOW - HOUR_MS),
    ];
    store.issue(&records, &[]).await.unwrap();
    let events = [
        issued("old-executed", "old-chat", two_days_ago),
        issued("old-pending", "waiting-chat", two_days_ago),
        issued("recent-denied", "recent-chat", NOW - HOUR_MS),
    ];
    store.append(&events).await.unwrap();
    for (chat, at) in [("old-chat", two_days_ago), ("waiting-chat", two_days_ago), ("recent-chat", NOW - HOUR_MS)] {
        store.save_conversation(chat, None, &json!([]), None, at).await.unwrap();
    }

    let clock = Arc::new(ManualClock::new(NOW));
    let ledger = LedgerConfig::new(store.clone()).clock(clock);
    let _server = start_configured(default_script(), move |config| {
        config.ledger = Some(ledger);
        config.retain = Some(Duration::from_secs(24 * 60 * 60));
    })
    .await;

    let ids: Vec<String> = ["old-executed", "old-pending", "recent-denied"].map(str::to_owned).to_vec();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while store.approvals(&ids).await.unwrap().len() == 3 {
        assert!(tokio::time::Instant::now() < deadline, "nothing was pruned at start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left: Vec<String> = store.approvals(&ids).await.unwrap().into_iter().map(|r| r.approval_id).collect();
    assert_eq!(left, ["old-pending", "recent-denied"], "pending stays however old; recent stays");
    let events = store.audit(&Default::default()).await.unwrap();
    let kept: Vec<&str> = events.iter().map(|event| event.approval_id.as_str()).collect();
    assert_eq!(kept, ["old-pending", "recent-denied"]);
    assert!(store.conversation("old-chat").await.unwrap().is_none());
    assert!(store.conversation("waiting-chat").await.unwrap().is_some(), "it holds a pending approval");
    assert!(store.conversation("recent-chat").await.unwrap().is_some());
}
