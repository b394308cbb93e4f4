//! Receipts of calls decided without an approval, over HTTP: a chat call the
//! rules allow runs and its `executed` event's receipt is fetched from
//! `GET /api/audit/{seq}/receipt`; a call-gating API call run on a grant has
//! its `granted` event's receipt there too (naming the grant and its
//! granter), and its outcome's from `GET /api/calls/{id}/receipt`. Each
//! verifies alone under the served JWKS; another user gets 404 for all of
//! them; the whole log verifies.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderName;
use common::*;
use serde_json::{Value, json};
use toolgate::ledger::{LedgerConfig, LedgerStore};
use toolgate::receipt::{Jwks, ReceiptKey, ReceiptStore, Signed, verify_call_receipt, verify_receipt, verify_store};
use toolgate_policy::{Policy, PolicyHandle};
use toolgate_server::{PrincipalSource, ServerConfig};
use toolgate_store::{SqlStore, StoreSpec};

const RULES: &str = r#"
[[rule]]
name = "not-mallory"
action = "deny"
tool = "delete_file"
principal = "mallory"

[[rule]]
name = "tidy-up"
action = "allow"
tool = "delete_file"

[[rule]]
name = "payments"
action = "ask"
tool = "transfer"
approvers = ["group:finance"]
"#;

/// The audit events `user` sees.
async fn audit(server: &Server, user: &str) -> Vec<Value> {
    let reply = call(server, "GET", "/api/audit", user, None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

fn seq_of(events: &[Value], kind: &str, call_id: Option<&str>) -> i64 {
    let found = events.iter().find(|event| {
        event["kind"] == kind && call_id.is_none_or(|id| event["toolCallId"] == id) && event["approvalId"] == ""
    });
    found.unwrap_or_else(|| panic!("a `{kind}` event without an approval in {events:?}"))["seq"].as_i64().unwrap()
}

/// `user`'s download of `path`: the receipt, or the error code.
async fn fetch(server: &Server, path: &str, user: &str) -> Result<Signed, (u16, Value)> {
    let reply = call(server, "GET", path, user, None).await;
    if reply.status != 200 {
        return Err((reply.status, reply.json()["error"]["code"].clone()));
    }
    assert!(reply.header("content-disposition").unwrap().starts_with("attachment; filename=\"receipt-"));
    Ok(serde_json::from_str(&reply.body).unwrap())
}

#[tokio::test]
async fn calls_without_an_approval_have_receipts_their_owner_can_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let spec = StoreSpec::Sqlite(dir.path().join("ledger.db"));
    let key = ReceiptKey::from_secret([3; 32]);
    let store = Arc::new(SqlStore::open(&spec).await.unwrap().sign_with(key).await.unwrap());
    let policy = Policy::from_toml_str(RULES).unwrap();
    let digest = policy.digest().unwrap().to_owned();
    let configured = store.clone();
    let server = start_configured(default_script(), move |config: &mut ServerConfig| {
        config.policy = PolicyHandle::new(policy);
        config.principals = PrincipalSource::Header(HeaderName::from_static("x-user"), Vec::new());
        config.groups = BTreeMap::from([("finance".to_owned(), vec!["bob".to_owned()])]);
        let ledger: Arc<dyn LedgerStore> = configured.clone();
        config.ledger = Some(LedgerConfig::new(ledger).ttl(Duration::from_secs(3600)));
        config.receipts = Some(configured);
    })
    .await;
    let keys = Jwks::parse(&get(&server, "/.well-known/toolgate/receipt-keys").await.body).unwrap();

    // A chat call the rules allow: it runs at once, no approval.
    let body = json!({"id": "chat-1", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]});
    let chat = call(&server, "POST", "/api/chat", "alice", Some(body)).await;
    assert_eq!(chat.status, 200, "{}", chat.body);
    assert!(chat.chunks().iter().all(|chunk| chunk["type"] != "tool-approval-request"), "{}", chat.body);
    let ran = seq_of(&audit(&server, "alice").await, "executed", Some("call-1"));
    // Mallory's own call of it, denied by a rule: hers is an approval-less event too (principal mallory),
    // which must not open everybody else's approval-less events to her.
    let body = json!({"id": "chat-m", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "text", "text": "delete notes.txt"}]}]});
    assert_eq!(call(&server, "POST", "/api/chat", "mallory", Some(body)).await.status, 200);
    let hers = audit(&server, "mallory").await;
    let denied = seq_of(&hers, "denied", Some("call-1"));
    assert!(hers.iter().all(|event| event["owner"] == "mallory"), "mallory sees only her own: {hers:?}");
    let refused =
        verify_call_receipt(&fetch(&server, &format!("/api/audit/{denied}/receipt"), "mallory").await.unwrap(), &keys);
    assert!(refused.unwrap().rule.is_some_and(|rule| rule.contains("`not-mallory`")));
    let path = format!("/api/audit/{ran}/receipt");
    let receipt = verify_call_receipt(&fetch(&server, &path, "alice").await.unwrap(), &keys).unwrap();
    assert_eq!((receipt.tool_name.as_str(), receipt.tool_call_id.as_str()), ("delete_file", "call-1"));
    assert_eq!((receipt.decision.as_str(), receipt.decided_by.as_deref()), ("allow", Some("policy")));
    assert_eq!((receipt.owner.as_deref(), receipt.conversation_id.as_str()), (Some("alice"), "chat-1"));
    assert_eq!(receipt.config_digest.as_deref(), Some(digest.as_str()), "the rules that decided");
    assert!(receipt.rule.as_deref().is_some_and(|rule| rule.contains("`tidy-up`")), "{:?}", receipt.rule);
    assert!(receipt.tool_digest.is_some() && receipt.result_digest.is_some(), "{receipt:?}");
    assert_eq!(receipt.event.seq, ran);
    for outsider in ["mallory", "bob"] {
        assert_eq!(fetch(&server, &path, outsider).await.unwrap_err(), (404, json!("unknown_event")), "{outsider}");
    }

    // A call-gating API call run on bob's grant.
    let transfer = json!({"tool": "transfer", "input": {"amount": 5}});
    let first = call(&server, "POST", "/api/calls", "alice", Some(transfer.clone())).await.json();
    let approval = first["approvalId"].as_str().unwrap();
    let grant = json!({"decision": "approve", "grant": {"uses": 1}});
    let voted = call(&server, "POST", &format!("/api/approvals/{approval}"), "bob", Some(grant)).await;
    assert_eq!(voted.status, 200, "{}", voted.body);
    let second =
        call(&server, "POST", "/api/calls", "alice", Some(json!({"tool": "transfer", "input": {"amount": 6}})))
            .await
            .json();
    assert_eq!(second["state"], "approved", "{second}");
    let call_id = second["callId"].as_str().unwrap();
    let events = audit(&server, "alice").await;
    // The held call's grant use is bound to its approval record: an approval's receipt naming the grant.
    let spent = events.iter().find(|event| event["kind"] == "granted" && event["toolCallId"] != "call-1").unwrap();
    let granted = spent["seq"].as_i64().unwrap();
    let path = format!("/api/audit/{granted}/receipt");
    let grant_use = verify_receipt(&fetch(&server, &path, "alice").await.unwrap(), &keys).unwrap();
    assert_eq!(grant_use.approval_id, spent["approvalId"].as_str().unwrap());
    assert_eq!(
        (grant_use.grant.as_deref(), grant_use.granted_by.as_deref()),
        (spent["data"]["grant"].as_str(), Some("bob"))
    );
    assert_eq!((grant_use.event.kind.as_str(), grant_use.decision.as_deref()), ("granted", Some("approve")));
    assert_eq!(grant_use.run_input_digest, toolgate::approval::input_digest(&json!({"amount": 6})).unwrap());
    assert_eq!(grant_use.config_digest.as_deref(), Some(digest.as_str()), "the rules that asked");
    assert_eq!(grant_use.tool_digest, None, "the caller offered no definition (not the server's stand-in's)");
    assert_eq!(fetch(&server, &path, "mallory").await.unwrap_err(), (404, json!("unknown_event")));

    // Its outcome.
    call(&server, "POST", &format!("/api/calls/{call_id}/start"), "alice", None).await;
    let output = json!({"output": {"paid": 6}});
    let finished = call(&server, "POST", &format!("/api/calls/{call_id}/finish"), "alice", Some(output)).await;
    assert_eq!(finished.status, 200, "{}", finished.body);
    let path = format!("/api/calls/{call_id}/receipt");
    let outcome = verify_receipt(&fetch(&server, &path, "alice").await.unwrap(), &keys).unwrap();
    assert_eq!((outcome.state.as_str(), outcome.event.kind.as_str()), ("executed", "executed"));
    assert!(outcome.result_digest.is_some());
    assert_eq!(fetch(&server, &path, "mallory").await.unwrap_err(), (404, json!("unknown_call")));

    // Events that get no receipt, and positions that are no event.
    let issued = events.iter().find(|event| event["kind"] == "issued").unwrap()["seq"].as_i64().unwrap();
    let none = fetch(&server, &format!("/api/audit/{issued}/receipt"), "alice").await.unwrap_err();
    assert_eq!(none, (404, json!("no_receipt")));
    for seq in ["0", "999999", "x", "-9223372036854775808"] {
        let unknown = fetch(&server, &format!("/api/audit/{seq}/receipt"), "alice").await.unwrap_err();
        assert_eq!(unknown, (404, json!("unknown_event")), "{seq}");
    }

    store.seal(10_000).await.unwrap();
    store.checkpoint(i64::MAX / 2).await.unwrap();
    let report = verify_store(store.as_ref(), keys).await.unwrap().expect("the log verifies");
    assert!(report.receipts >= 4, "{report:?}");
}

/// The names in the web page's `const NAME = new Set([...]);` list.
fn page_set(script: &str, name: &str) -> std::collections::BTreeSet<String> {
    let start = script.find(&format!("const {name} = new Set([")).unwrap_or_else(|| panic!("no {name} in app.js"));
    let list = &script[start..];
    let list = &list[list.find('[').unwrap() + 1..list.find("]);").unwrap()];
    list.split(',').map(|item| item.trim().trim_matches('\'').to_owned()).filter(|item| !item.is_empty()).collect()
}

/// The web page's audit panel offers a receipt download on exactly the events
/// the sealer signs one for (`has_receipt` with an approval, `has_call_receipt`
/// without one).
#[test]
fn the_page_offers_a_receipt_for_every_kind_that_gets_one() {
    use toolgate::ledger::{AuditEvent, AuditKind};
    use toolgate::receipt::{has_call_receipt, has_receipt};
    let script = include_str!("../assets/app.js");
    let receiptless = page_set(script, "RECEIPTLESS_KINDS");
    let call_kinds = page_set(script, "CALL_RECEIPT_KINDS");
    let names: Vec<String> =
        AuditKind::ALL.iter().map(|kind| serde_json::to_value(kind).unwrap().as_str().unwrap().to_owned()).collect();
    for name in receiptless.iter().chain(&call_kinds) {
        assert!(names.contains(name), "the page names `{name}`, which is no audit kind");
    }
    for (kind, name) in AuditKind::ALL.into_iter().zip(&names) {
        assert_eq!(!receiptless.contains(name), has_receipt(kind), "an approval's `{name}` event");
        let event = AuditEvent {
            seq: 1,
            at: 0,
            kind,
            approval_id: String::new(),
            tool_call_id: "call-1".to_owned(),
            conversation_id: "chat-1".to_owned(),
            owner: None,
            principal: None,
            data: json!({}),
        };
        assert_eq!(call_kinds.contains(name), has_call_receipt(&event), "a `{name}` event without an approval");
    }
}
