//! Receipts of calls decided without an approval, offline: a chat whose gate
//! lets one call run and refuses another records both (with the tool's
//! definition digest and the gate's config digest); sealed, each decision and
//! outcome has a receipt bound to its event that verifies alone and in an
//! export; a byte of its input digest edited, the receipt moved to another
//! event, or signed by another key is caught.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use toolgate::ledger::{AuditEvent, AuditQuery, AuditStore, LedgerConfig, MemoryStore};
use toolgate::receipt::{
    Break, BreakKind, CallReceipt, EventLine, GENESIS, Jwks, LogLine, ReceiptKey, Report, SealKind, Signed, Verifier,
    is_call_receipt, seal_events, sign_checkpoint, verify_call_receipt, verify_receipt,
};
use toolgate::tool::{GateCall, Verdict};
use toolgate::{ModelMessage, ScriptedModel, TextRequest, Tool, ToolError, Toolkit, generate_text};

fn key(byte: u8) -> ReceiptKey {
    ReceiptKey::from_secret([byte; 32])
}

fn keys(of: &[&ReceiptKey]) -> Jwks {
    Jwks { keys: of.iter().map(|key| key.public().clone()).collect() }
}

/// Rules: `transfer` allowed, `wipe` denied by rule `no-wipe`; config digest `cfg-7`.
struct Rules;

impl toolgate::CallGate for Rules {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<Verdict>> {
        let verdict = match call.tool_name {
            "transfer" => Some(Verdict::allow()),
            "wipe" => Some(Verdict::deny("rule `no-wipe` matched tool `wipe`")),
            _ => None,
        };
        Box::pin(async move { verdict })
    }

    fn config_digest(&self) -> Option<String> {
        Some("cfg-7".to_owned())
    }
}

fn tool(name: &str) -> Tool {
    Tool::dynamic(name, json!({"type": "object", "properties": {"amount": {"type": "number"}}}))
        .description("Moves money.")
        .needs_approval(true)
        .handler(|input: Value, _context| async move { Ok::<_, ToolError>(json!({"paid": input["amount"]})) })
}

/// The events of a chat in which `transfer` ran on the rules and `wipe` was refused.
async fn chat_events() -> (Vec<AuditEvent>, Tool) {
    let store = Arc::new(MemoryStore::new());
    let ledger = LedgerConfig::new(store.clone());
    let script = json!({"turns": [
        [{"type": "tool-call", "toolCallId": "t1", "toolName": "transfer", "input": {"amount": 5}},
         {"type": "tool-call", "toolCallId": "w1", "toolName": "wipe", "input": {"amount": 1}},
         {"type": "finish", "finishReason": "tool-calls"}],
        [{"type": "text", "text": "Done."}]
    ]});
    let model = ScriptedModel::from_json(&script.to_string()).unwrap();
    let transfer = tool("transfer");
    let request = TextRequest::new(vec![ModelMessage::user("pay")])
        .toolkit(Toolkit::new([transfer.clone(), tool("wipe")]).unwrap())
        .gate(Arc::new(Rules))
        .principal("alice")
        .ledger(ledger.owned(Some("alice"), "chat-1").principal("alice"));
    generate_text(&model, request).await.unwrap();
    (store.audit(&AuditQuery::default()).await.unwrap(), transfer)
}

/// The events sealed under `key`, a checkpoint after them: an export's lines.
fn sealed(events: &[AuditEvent], key: &ReceiptKey) -> (Vec<Signed>, Vec<EventLine>) {
    let batch = seal_events(GENESIS, events, &HashMap::new(), &HashMap::new(), key, 9_000).unwrap();
    let mut signed: Vec<Signed> = batch.receipts.iter().map(|(_, _, receipt)| receipt.clone()).collect();
    signed.push(sign_checkpoint(batch.links.last().unwrap(), events.len() as u64, key, 9_500).unwrap());
    let lines = events
        .iter()
        .zip(batch.links)
        .map(|(event, link)| EventLine { link, event: serde_json::to_value(event).unwrap() });
    (signed, lines.collect())
}

fn lines(signed: &[Signed], events: &[EventLine]) -> Vec<String> {
    let signed = signed.iter().map(|signed| LogLine::Signed(signed.clone()).to_json());
    signed.chain(events.iter().map(|line| LogLine::Event(line.clone()).to_json())).collect()
}

/// Verifies line by line and a chunk at a time; both must agree.
fn verify(lines: &[String], keys: Jwks) -> Result<Report, Break> {
    let mut one = Verifier::new(keys.clone());
    let one = lines.iter().try_for_each(|line| one.text(line)).and_then(|()| one.finish());
    let mut chunked = Verifier::new(keys);
    let chunked = lines.chunks(3).try_for_each(|chunk| chunked.texts(chunk)).and_then(|()| chunked.finish());
    assert_eq!(one, chunked, "both paths agree");
    one
}

#[tokio::test]
async fn a_rule_allowed_and_a_rule_denied_chat_call_get_receipts_that_verify() {
    let (events, transfer) = chat_events().await;
    let kinds: Vec<(&str, &str)> =
        events.iter().map(|event| (event.kind.as_str(), event.tool_call_id.as_str())).collect();
    assert_eq!(kinds, [("executed", "t1"), ("denied", "w1")], "{events:?}");
    let digest = toolgate::receipt::tool_digest(&transfer).unwrap();
    assert_eq!((&events[0].data["toolDigest"], &events[0].data["configDigest"]), (&json!(digest), &json!("cfg-7")));

    let key = key(1);
    let (signed, chained) = sealed(&events, &key);
    assert_eq!(signed.len(), 3, "a receipt for each event, and the checkpoint");
    let ran = verify_call_receipt(&signed[0], &keys(&[&key])).expect("the outcome's receipt verifies alone");
    assert_eq!(
        (ran.tool_call_id.as_str(), ran.tool_name.as_str(), ran.decision.as_str(), ran.decided_by.as_deref()),
        ("t1", "transfer", "allow", Some("policy"))
    );
    assert_eq!((ran.owner.as_deref(), ran.principal.as_deref()), (Some("alice"), Some("alice")));
    assert_eq!(ran.conversation_id, "chat-1");
    assert_eq!((ran.tool_digest.as_deref(), ran.config_digest.as_deref()), (Some(digest.as_str()), Some("cfg-7")));
    assert_eq!(ran.input_digest, Some(toolgate::approval::input_digest(&json!({"amount": 5})).unwrap()));
    assert!(ran.result_digest.is_some());
    assert_eq!((ran.event.seq, ran.event.kind.as_str(), &ran.event.hash), (1, "executed", &chained[0].link.hash));
    let refused: CallReceipt = verify_call_receipt(&signed[1], &keys(&[&key])).unwrap();
    assert_eq!((refused.decision.as_str(), refused.result_digest), ("deny", None));
    assert_eq!(refused.rule.as_deref(), Some("rule `no-wipe` matched tool `wipe`"));
    assert!(is_call_receipt(&signed[0]));
    assert_eq!(verify_receipt(&signed[0], &keys(&[&key])).unwrap_err().kind, BreakKind::Malformed, "not an approval's");

    let report = verify(&lines(&signed, &chained), keys(&[&key])).expect("the export verifies");
    assert_eq!((report.events, report.receipts, report.checkpoints, report.unsealed), (2, 2, 1, 0));
}

#[tokio::test]
async fn a_tampered_call_receipt_is_caught() {
    let (events, _) = chat_events().await;
    let key = key(1);
    let (signed, chained) = sealed(&events, &key);

    // A byte of its input digest changed.
    let mut edited = signed.clone();
    let digest = edited[0].payload["inputDigest"].as_str().unwrap().to_owned();
    let flipped = if digest.starts_with('A') { "B" } else { "A" };
    edited[0].payload["inputDigest"] = json!(format!("{flipped}{}", &digest[1..]));
    let found = verify(&lines(&edited, &chained), keys(&[&key])).unwrap_err();
    assert_eq!(found.kind, BreakKind::BadSignature, "{found}");
    assert!(found.detail.contains("call t1"), "{found}");
    assert_eq!(verify_call_receipt(&edited[0], &keys(&[&key])).unwrap_err().kind, BreakKind::BadSignature);

    // Moved to the other event (re-signed by the trusted key: a server that lies).
    let mut moved = signed.clone();
    let mut payload = moved[0].payload.clone();
    payload["event"]["seq"] = json!(2);
    moved[0] = Signed::sign(SealKind::Receipt, &payload, &key).unwrap();
    let found = verify(&lines(&moved, &chained), keys(&[&key])).unwrap_err();
    assert_eq!((found.seq, found.kind), (Some(2), BreakKind::Edited), "{found}");
    // Naming another call at its own event.
    let mut payload = signed[0].payload.clone();
    payload["toolCallId"] = json!("w1");
    moved[0] = Signed::sign(SealKind::Receipt, &payload, &key).unwrap();
    let found = verify(&lines(&moved, &chained), keys(&[&key])).unwrap_err();
    assert_eq!((found.seq, found.kind), (Some(1), BreakKind::Edited), "{found}");

    // Signed by another key.
    let other = self::key(2);
    let mut resigned = signed.clone();
    resigned[1] = Signed::sign(SealKind::Receipt, &signed[1].payload, &other).unwrap();
    let found = verify(&lines(&resigned, &chained), keys(&[&key])).unwrap_err();
    assert_eq!(found.kind, BreakKind::UnknownKey, "{found}");
    assert_eq!(verify_call_receipt(&resigned[1], &keys(&[&key])).unwrap_err().kind, BreakKind::UnknownKey);
    // ... under the other key's kid, with a forged signature.
    resigned[1].kid = key.kid().to_owned();
    let found = verify(&lines(&resigned, &chained), keys(&[&key])).unwrap_err();
    assert_eq!(found.kind, BreakKind::BadSignature, "{found}");

    // The event it names edited: the chain and the receipt both say so.
    let mut chained = chained;
    chained[0].event["data"]["input"]["amount"] = json!(500);
    let found = verify(&lines(&signed, &chained), keys(&[&key])).unwrap_err();
    assert_eq!((found.seq, found.kind), (Some(1), BreakKind::Edited), "{found}");
}
