//! Receipts over HTTP: a call decided by a quorum of two, run and finished;
//! its receipt downloaded from `GET /api/approvals/{id}/receipt` verifies
//! alone under the JWKS of `GET /.well-known/toolgate/receipt-keys` and names
//! both votes, the rule that asked, the digest of the rules config that held
//! it and of the tool's definition as the caller offered it; after a reload
//! a later call's receipt names the new config's digest; an outsider gets
//! 404; at shutdown the last checkpoint is signed and the whole log
//! verifies, nothing left unsealed.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderName;
use common::*;
use serde_json::json;
use toolgate::ledger::{LedgerConfig, LedgerStore};
use toolgate::receipt::{Jwks, ReceiptKey, ReceiptStore, Signed, verify_receipt, verify_store};
use toolgate_policy::{Policy, PolicyHandle};
use toolgate_server::{PrincipalSource, ServerConfig};
use toolgate_store::{SqlStore, StoreSpec};

const RULES: &str = r#"
[[rule]]
name = "payments"
action = "ask"
tool = "transfer"
approvers = ["group:finance"]
quorum = 2
reason = "finance signs off payments"
"#;

/// The rules after a reload: the same rule, one approver enough.
const RELOADED: &str = r#"
[[rule]]
name = "payments"
action = "ask"
tool = "transfer"
approvers = ["group:finance"]
reason = "finance signs off payments"
"#;

fn configure(config: &mut ServerConfig, store: Arc<SqlStore>, policy: &PolicyHandle) {
    config.policy = policy.clone();
    config.principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
    config.groups = BTreeMap::from([("finance".to_owned(), vec!["bob".to_owned(), "carol".to_owned()])]);
    let ledger: Arc<dyn LedgerStore> = store.clone();
    config.ledger = Some(LedgerConfig::new(ledger).ttl(Duration::from_secs(3600)));
    config.receipts = Some(store);
}

#[tokio::test]
async fn a_decided_call_has_a_receipt_that_verifies_alone_and_the_log_verifies_after_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let spec = StoreSpec::Sqlite(dir.path().join("ledger.db"));
    let key = ReceiptKey::load_or_create(&dir.path().join("receipt-key.jwk")).unwrap();
    let store = Arc::new(SqlStore::open(&spec).await.unwrap().sign_with(key).await.unwrap());
    let loaded = Policy::from_toml_str(RULES).unwrap();
    let config_digest = loaded.digest().unwrap().to_owned();
    let policy = PolicyHandle::new(loaded);
    let (server, stop) = start_stoppable(default_script(), |config| configure(config, store.clone(), &policy)).await;

    let schema = json!({"type": "object", "properties": {"amount": {"type": "number"}}});
    let transfer = json!({"tool": "transfer", "input": {"amount": 100}, "description": "Pay", "inputSchema": schema});
    let asked = call(&server, "POST", "/api/calls", "alice", Some(transfer)).await.json();
    let (call_id, approval) = (asked["callId"].as_str().unwrap(), asked["approvalId"].as_str().unwrap());
    let none = call(&server, "GET", &format!("/api/approvals/{approval}/receipt"), "alice", None).await;
    assert_eq!((none.status, none.json()["error"]["code"].clone()), (404, json!("no_receipt")), "{}", none.body);
    for voter in ["bob", "carol"] {
        let voted =
            call(&server, "POST", &format!("/api/approvals/{approval}"), voter, Some(json!({"decision": "approve"})))
                .await;
        assert_eq!(voted.status, 200, "{}", voted.body);
    }
    call(&server, "POST", &format!("/api/calls/{call_id}/start"), "alice", None).await;
    let finished =
        call(&server, "POST", &format!("/api/calls/{call_id}/finish"), "alice", Some(json!({"output": {"paid": 100}})))
            .await;
    assert_eq!(finished.status, 200, "{}", finished.body);

    let keys = get(&server, "/.well-known/toolgate/receipt-keys").await;
    assert_eq!(keys.status, 200, "{}", keys.body);
    let keys = Jwks::parse(&keys.body).expect("a JWKS");
    assert_eq!((keys.keys.len(), keys.keys[0].kty.as_str(), keys.keys[0].crv.as_str()), (1, "OKP", "Ed25519"));

    let reply = call(&server, "GET", &format!("/api/approvals/{approval}/receipt"), "alice", None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.header("content-disposition").unwrap().contains(&format!("receipt-{approval}.json")));
    let signed: Signed = serde_json::from_str(&reply.body).unwrap();
    let receipt = verify_receipt(&signed, &keys).expect("the receipt verifies alone");
    assert_eq!(receipt.approval_id, approval);
    assert_eq!(receipt.owner.as_deref(), Some("alice"));
    assert_eq!(receipt.tool_name, "transfer");
    assert_eq!(receipt.rule.as_deref(), Some("rule `payments` matched tool `transfer`: finance signs off payments"));
    assert_eq!(receipt.config_digest.as_deref(), Some(config_digest.as_str()), "the loaded rules' digest");
    let offered = toolgate::receipt::definition_digest("transfer", Some("Pay"), &schema).unwrap();
    assert_eq!(receipt.tool_digest.as_deref(), Some(offered.as_str()), "the definition as the caller offered it");
    let voters: Vec<_> = receipt.votes.iter().map(|vote| vote.principal.clone().unwrap_or_default()).collect();
    assert_eq!(voters, ["bob", "carol"]);
    assert_eq!(receipt.input_digest, toolgate::approval::input_digest(&json!({"amount": 100})).unwrap());
    assert!(receipt.result_digest.is_some(), "{receipt:?}");

    let outsider = call(&server, "GET", &format!("/api/approvals/{approval}/receipt"), "mallory", None).await;
    assert_eq!((outsider.status, outsider.json()["error"]["code"].clone()), (404, json!("unknown_approval")));

    // A reload: later receipts name the new config.
    let reloaded = Policy::from_toml_str(RELOADED).unwrap();
    let new_digest = reloaded.digest().unwrap().to_owned();
    assert_ne!(new_digest, config_digest);
    policy.replace(reloaded);
    let later = json!({"tool": "transfer", "input": {"amount": 5}});
    let asked = call(&server, "POST", "/api/calls", "alice", Some(later)).await.json();
    let approval = asked["approvalId"].as_str().unwrap();
    let voted =
        call(&server, "POST", &format!("/api/approvals/{approval}"), "bob", Some(json!({"decision": "approve"}))).await;
    assert_eq!(voted.status, 200, "{}", voted.body);
    let reply = call(&server, "GET", &format!("/api/approvals/{approval}/receipt"), "alice", None).await;
    let receipt = verify_receipt(&serde_json::from_str(&reply.body).unwrap(), &keys).unwrap();
    assert_eq!(receipt.config_digest.as_deref(), Some(new_digest.as_str()), "the reloaded rules' digest");
    assert_eq!(receipt.tool_digest, None, "no definition offered");

    drop(stop);
    // The launcher signs a last checkpoint once the server stopped.
    let mut report = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let verified = verify_store(store.as_ref(), store.receipt_keys().await.unwrap()).await.unwrap().unwrap();
        if verified.unsealed == 0 && verified.events > 0 {
            report = Some(verified);
            break;
        }
    }
    let report = report.expect("everything sealed and checkpointed at shutdown");
    assert!(report.receipts >= 2, "{report:?}");
    store.close().await;
}

#[tokio::test]
async fn a_server_without_receipts_says_so() {
    let server = start(None).await;
    let keys = get(&server, "/.well-known/toolgate/receipt-keys").await;
    assert_eq!((keys.status, keys.json()["error"]["code"].clone()), (404, json!("receipts_off")));
}
