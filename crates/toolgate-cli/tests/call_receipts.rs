//! `toolgate audit export --receipts | verify` with calls decided without an
//! approval: a rule-allowed call's outcome and a denied call each have a
//! receipt in the export, the export verifies, and each verifies alone with
//! `verify --receipt`; an edited one is refused.

mod support;

use std::sync::Arc;

use serde_json::json;
use support::{now, toolgate};
use toolgate::approval::lifecycle::direct::{self, DirectCall};
use toolgate::ledger::{LedgerConfig, LedgerStore};
use toolgate::receipt::{ReceiptKey, ReceiptStore};
use toolgate_store::{SqlStore, StoreSpec};

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn call_receipts_are_exported_and_verify_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let store = SqlStore::open(&StoreSpec::Sqlite(path.clone())).await.unwrap();
    let store = Arc::new(store.sign_with(ReceiptKey::from_secret([5; 32])).await.unwrap());
    let ledger_store: Arc<dyn LedgerStore> = store.clone();
    let ledger = LedgerConfig::new(ledger_store).owned(Some("alice"), "chat-1").principal("alice");
    let input = json!({"path": "notes.txt"});
    let ran = DirectCall { tool_call_id: "call-ran", tool_name: "read_file", input: &input };
    let refused = DirectCall { tool_call_id: "call-refused", tool_name: "delete_file", input: &input };
    let events = [
        direct::ran(&ledger, ran, Ok(&json!("hello")), now()),
        direct::refused(&ledger, refused, "rule `no-deletes` matched tool `delete_file`", now()),
    ];
    direct::record(&ledger, &events).await.unwrap();
    store.seal(100).await.unwrap();
    store.checkpoint(now()).await.unwrap();
    let receipt = store.receipt_at(1).await.unwrap().expect("the executed call's receipt");
    store.close().await;
    let spec = format!("sqlite://{}", path.display());

    let keys = toolgate(&["audit", "keys", "--store", &spec]);
    let jwks = dir.path().join("keys.json");
    std::fs::write(&jwks, &keys.stdout).unwrap();
    let jwks_arg = jwks.display().to_string();
    let export = toolgate(&["audit", "export", "--store", &spec, "--receipts"]);
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
    let text = stdout(&export);
    assert_eq!(text.matches("\"type\":\"receipt\"").count(), 2, "{text}");
    assert!(text.contains("\"toolCallId\":\"call-refused\""), "{text}");
    let log = dir.path().join("log.jsonl");
    std::fs::write(&log, &export.stdout).unwrap();
    let verified = toolgate(&["audit", "verify", "--file", &log.display().to_string(), "--keys", &jwks_arg]);
    assert!(
        stdout(&verified).starts_with("verified: 2 events (0 pruned with a signed record), 1 checkpoints, 2 receipts"),
        "{}",
        stdout(&verified)
    );

    let file = dir.path().join("receipt.json");
    std::fs::write(&file, serde_json::to_string(&receipt).unwrap()).unwrap();
    let alone = toolgate(&["audit", "verify", "--receipt", &file.display().to_string(), "--keys", &jwks_arg]);
    assert!(alone.status.success(), "{}", stdout(&alone));
    assert!(stdout(&alone).contains("\"toolCallId\": \"call-ran\""), "{}", stdout(&alone));
    assert!(stdout(&alone).contains("\"decidedBy\": \"policy\""), "{}", stdout(&alone));
    let mut edited = receipt.clone();
    edited.payload["at"] = json!(1);
    std::fs::write(&file, serde_json::to_string(&edited).unwrap()).unwrap();
    let refused = toolgate(&["audit", "verify", "--receipt", &file.display().to_string(), "--keys", &jwks_arg]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(stdout(&refused).starts_with("BROKEN bad signature"), "{}", stdout(&refused));
}
