//! `toolgate audit keys | export | verify`: a sealed SQLite log's keys and
//! export, verified offline from the file and from the store; an edited line
//! and an untrusted key set are refused with the first break and exit 1; a
//! receipt verifies alone. `serve --no-receipts` loads no key and signs
//! nothing; `serve` without it does.

mod support;

use serde_json::json;
use support::{approval, now, toolgate};
use toolgate::approval::lifecycle::{Decision, Vote};
use toolgate::ledger::{
    ApprovalState, ApprovalStore, AuditEvent, AuditKind, Guard, RecordedDecision, Transition, Update,
};
use toolgate::receipt::{ReceiptKey, ReceiptStore};
use toolgate_store::{SqlStore, StoreSpec};

fn event(kind: AuditKind, id: &str, principal: &str, data: serde_json::Value) -> AuditEvent {
    AuditEvent {
        seq: 0,
        at: now(),
        kind,
        approval_id: id.into(),
        tool_call_id: format!("call-{id}"),
        conversation_id: "chat-1".into(),
        owner: Some("alice".into()),
        principal: Some(principal.into()),
        data,
    }
}

/// A store with three approvals issued and approved, sealed and checkpointed.
async fn sealed_store(path: &std::path::Path) -> SqlStore {
    let store = SqlStore::open(&StoreSpec::Sqlite(path.to_owned())).await.unwrap();
    let store = store.sign_with(ReceiptKey::from_secret([5; 32])).await.unwrap();
    for n in 1..=3 {
        let id = format!("apr_{n}");
        let input = json!({"amount": n * 1000, "to": "bob"});
        let record = approval(&id, "alice", "chat-1", "transfer", input.clone(), false);
        let issued = event(AuditKind::Issued, &id, "alice", json!({"toolName": "transfer", "input": input}));
        store.issue(&[record], &[issued]).await.unwrap();
        let decision = RecordedDecision::new(Decision::Approve { edited_input: None }, Some("alice".into()), now());
        let vote = Vote {
            principal: Some("alice".into()),
            decision: Decision::Approve { edited_input: None },
            reason: None,
            at: now(),
        };
        let approve = Transition {
            approval_id: id.clone(),
            from: ApprovalState::Pending,
            to: ApprovalState::Approved,
            guard: Guard::None,
            update: Update { decision: Some(decision), votes: Some(vec![vote]), ..Update::default() },
            at: now(),
            events: vec![event(AuditKind::Approved, &id, "alice", json!({}))],
        };
        store.apply(&[approve], &[]).await.unwrap();
    }
    store.seal(100).await.unwrap();
    store.checkpoint(now()).await.unwrap();
    store
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn an_export_verifies_offline_and_an_edited_line_or_an_unknown_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let store = sealed_store(&path).await;
    let receipt = store.receipt("apr_2").await.unwrap().unwrap();
    store.close().await;
    let spec = format!("sqlite://{}", path.display());

    let keys = toolgate(&["audit", "keys", "--store", &spec]);
    assert!(keys.status.success(), "{}", String::from_utf8_lossy(&keys.stderr));
    let jwks = dir.path().join("keys.json");
    std::fs::write(&jwks, &keys.stdout).unwrap();
    let jwks_arg = jwks.display().to_string();

    let chain_only = toolgate(&["audit", "export", "--store", &spec]);
    assert!(!String::from_utf8_lossy(&chain_only.stdout).contains("\"type\":\"receipt\""));
    let export = toolgate(&["audit", "export", "--store", &spec, "--receipts"]);
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
    let log = dir.path().join("log.jsonl");
    std::fs::write(&log, &export.stdout).unwrap();
    let log_arg = log.display().to_string();

    let verified = toolgate(&["audit", "verify", "--file", &log_arg, "--keys", &jwks_arg]);
    assert!(verified.status.success(), "{}", stdout(&verified));
    assert!(
        stdout(&verified).starts_with("verified: 6 events (0 pruned with a signed record), 1 checkpoints, 3 receipts"),
        "{}",
        stdout(&verified)
    );
    let from_store = toolgate(&["audit", "verify", "--store", &spec, "--keys", &jwks_arg]);
    assert!(from_store.status.success(), "{}", stdout(&from_store));

    // One byte of one input changed in the file.
    let text = String::from_utf8(export.stdout.clone()).unwrap();
    std::fs::write(&log, text.replacen("\"amount\":2000", "\"amount\":2001", 1)).unwrap();
    let broken = toolgate(&["audit", "verify", "--file", &log_arg, "--keys", &jwks_arg]);
    assert_eq!(broken.status.code(), Some(1));
    assert!(stdout(&broken).starts_with("BROKEN event 3: edited"), "{}", stdout(&broken));

    // Keys the log was not signed with.
    let other = dir.path().join("other.json");
    let stranger = ReceiptKey::from_secret([6; 32]);
    std::fs::write(&other, serde_json::to_string(&json!({"keys": [stranger.public()]})).unwrap()).unwrap();
    let untrusted = toolgate(&["audit", "verify", "--store", &spec, "--keys", &other.display().to_string()]);
    assert_eq!(untrusted.status.code(), Some(1));
    assert!(stdout(&untrusted).contains("signed by an unknown key"), "{}", stdout(&untrusted));

    // A receipt alone, and the same receipt with a vote's time changed.
    let file = dir.path().join("receipt.json");
    std::fs::write(&file, serde_json::to_string(&receipt).unwrap()).unwrap();
    let alone = toolgate(&["audit", "verify", "--receipt", &file.display().to_string(), "--keys", &jwks_arg]);
    assert!(alone.status.success(), "{}", stdout(&alone));
    assert!(stdout(&alone).contains("\"approvalId\": \"apr_2\""), "{}", stdout(&alone));
    let mut edited = receipt.clone();
    edited.payload["votes"][0]["at"] = json!(1);
    std::fs::write(&file, serde_json::to_string(&edited).unwrap()).unwrap();
    let refused = toolgate(&["audit", "verify", "--receipt", &file.display().to_string(), "--keys", &jwks_arg]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(stdout(&refused).starts_with("BROKEN bad signature"), "{}", stdout(&refused));

    let neither = toolgate(&["audit", "verify", "--keys", &jwks_arg]);
    assert_eq!(neither.status.code(), Some(2), "clap asks for --store, --file or --receipt");
}

/// `GET /.well-known/toolgate/receipt-keys` of a server: its status and error code.
async fn receipt_keys(served: &support::Served) -> (u16, serde_json::Value) {
    let answer = reqwest::get(format!("{}/.well-known/toolgate/receipt-keys", served.url)).await.unwrap();
    let status = answer.status().as_u16();
    let body: serde_json::Value = answer.json().await.unwrap();
    (status, body["error"]["code"].clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_no_receipts_signs_nothing_and_the_default_signs() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().display().to_string();
    let key_file = dir.path().join("receipt-key.jwk");
    let script = format!("script:{}", support::examples().join("request-approval/script.json").display());
    let args = ["--model", &script, "--data-dir", &data_dir, "--no-receipts"];
    let served = tokio::task::block_in_place(|| support::Served::start(&args));
    assert_eq!(receipt_keys(&served).await, (404, json!("receipts_off")));
    served.stop();
    assert!(!key_file.exists(), "--no-receipts loads no key, so none is created");

    let served = tokio::task::block_in_place(|| support::Served::start(&args[..4]));
    assert_eq!(receipt_keys(&served).await.0, 200);
    served.stop();
    assert!(key_file.exists(), "by default the server creates its key and signs");

    let both = toolgate(&["serve", "--no-receipts", "--receipt-key", &key_file.display().to_string()]);
    assert!(!both.status.success());
    assert!(String::from_utf8_lossy(&both.stderr).contains("cannot be used with"), "{both:?}");
}
