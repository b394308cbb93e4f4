//! Receipts and the audit chain, offline: a log sealed as a store seals it,
//! exported as lines, verifies; every kind of tampering is found at the
//! right event and named; keys rotate; a receipt verifies alone.

use std::collections::HashMap;

use serde_json::{Value, json};
use toolgate::approval::input_digest;
use toolgate::approval::lifecycle::{ApprovalState, Decision, Vote};
use toolgate::ledger::{ApprovalRecord, AuditEvent, AuditKind, RecordedDecision};
use toolgate::receipt::{
    BreakKind, ChainLink, EventLine, GENESIS, Jwks, LogLine, ReceiptKey, Signed, Verifier, chain, seal_events,
    sign_checkpoint, sign_prune, verify_receipt,
};

fn key(byte: u8) -> ReceiptKey {
    ReceiptKey::from_secret([byte; 32])
}

fn keys(of: &[&ReceiptKey]) -> Jwks {
    Jwks { keys: of.iter().map(|key| key.public().clone()).collect() }
}

fn record(id: &str, input: &Value) -> ApprovalRecord {
    let output = serde_json::from_value(json!({"type": "json", "value": {"done": id}})).unwrap();
    ApprovalRecord {
        approval_id: id.into(),
        conversation_id: "chat-1".into(),
        owner: Some("alice".into()),
        client: None,
        tool_call_id: format!("call-{id}"),
        tool_name: "transfer".into(),
        input: input.clone(),
        input_digest: input_digest(input).unwrap(),
        issued_at: 1_000,
        expires_at: 90_000,
        state: ApprovalState::Executed,
        decision: Some(RecordedDecision::new(Decision::Approve { edited_input: None }, Some("bob".into()), 2_000)),
        output: Some(output),
        lease: None,
        updated_at: 3_000,
        routing: None,
        votes: vec![Vote {
            principal: Some("bob".into()),
            decision: Decision::Approve { edited_input: None },
            reason: None,
            at: 2_000,
        }],
        reason: Some("rule transfers".into()),
        supersedes: None,
        superseded_by: None,
        origin: Default::default(),
        input_schema: None,
        lineage: Vec::new(),
    }
}

fn event(seq: i64, kind: AuditKind, id: &str, principal: &str, data: Value) -> AuditEvent {
    AuditEvent {
        seq,
        at: 1_000 + seq,
        kind,
        approval_id: id.into(),
        tool_call_id: format!("call-{id}"),
        conversation_id: "chat-1".into(),
        owner: Some("alice".into()),
        principal: Some(principal.into()),
        data,
    }
}

/// A sealed log: `approvals` approvals, four events each, a checkpoint at the end.
struct Log {
    signed: Vec<Signed>,
    events: Vec<EventLine>,
}

impl Log {
    fn new(approvals: usize, key: &ReceiptKey) -> Self {
        let mut log = Self { signed: Vec::new(), events: Vec::new() };
        log.append(approvals, key, 1);
        log.checkpoint(key);
        log
    }

    fn head(&self) -> [u8; 32] {
        self.events.last().map_or(GENESIS, |line| chain::decode(&line.link.hash).unwrap())
    }

    /// Appends `approvals` approvals' events, sealed under `key`.
    fn append(&mut self, approvals: usize, key: &ReceiptKey, first: usize) {
        let mut events = Vec::new();
        let mut records = HashMap::new();
        let mut seq = self.events.last().map_or(0, |line| line.link.seq);
        for n in first..first + approvals {
            let id = format!("apr_{n}");
            let input = json!({"amount": 100 + n, "to": "carol"});
            records.insert(id.clone(), record(&id, &input));
            for (kind, principal, data) in [
                (AuditKind::Issued, "alice", json!({"toolName": "transfer", "input": input})),
                (AuditKind::Voted, "bob", json!({"decision": "approve"})),
                (AuditKind::Approved, "bob", json!({})),
                (AuditKind::Executed, "bob", json!({"toolName": "transfer", "result": {"done": id}})),
            ] {
                seq += 1;
                events.push(event(seq, kind, &id, principal, data));
            }
        }
        let sealed = seal_events(self.head(), &events, &records, &HashMap::new(), key, 9_000).unwrap();
        for (event, link) in events.into_iter().zip(sealed.links) {
            self.events.push(EventLine { link, event: serde_json::to_value(event).unwrap() });
        }
        self.signed.extend(sealed.receipts.into_iter().map(|(_, _, receipt)| receipt));
    }

    fn checkpoint(&mut self, key: &ReceiptKey) {
        let head = &self.events.last().unwrap().link;
        let count = self.events.len() as u64;
        self.signed.push(sign_checkpoint(head, count, key, 9_500).unwrap());
    }

    fn lines(&self) -> Vec<String> {
        let signed = self.signed.iter().map(|signed| LogLine::Signed(signed.clone()).to_json());
        signed.chain(self.events.iter().map(|line| LogLine::Event(line.clone()).to_json())).collect()
    }

    fn index(&self, seq: i64) -> usize {
        self.events.iter().position(|line| line.link.seq == seq).unwrap()
    }
}

/// Verifies line by line, a chunk at a time on every core (`texts`), as
/// lines read already (`lines`) and as a stream (`read`); all must find the same.
fn verify(lines: &[String], keys: Jwks) -> Result<toolgate::receipt::Report, toolgate::receipt::Break> {
    let one_by_one = one_by_one(lines, keys.clone());
    assert_eq!(one_by_one, chunked(lines, keys.clone(), 7), "texts agrees");
    assert_eq!(one_by_one, streamed(lines, keys.clone()), "read agrees");
    if let Some(parsed) = lines.iter().map(|line| LogLine::parse(line).ok()).collect::<Option<Vec<_>>>() {
        let mut verifier = Verifier::new(keys);
        let typed = verifier.lines(parsed).and_then(|()| verifier.finish());
        assert_eq!(one_by_one, typed, "lines agrees");
    }
    one_by_one
}

fn streamed(lines: &[String], keys: Jwks) -> Result<toolgate::receipt::Report, toolgate::receipt::Break> {
    let text = lines.join("\n");
    let mut verifier = Verifier::new(keys);
    verifier.read(text.as_bytes()).unwrap()?;
    verifier.finish()
}

fn one_by_one(lines: &[String], keys: Jwks) -> Result<toolgate::receipt::Report, toolgate::receipt::Break> {
    let mut verifier = Verifier::new(keys);
    for line in lines {
        verifier.text(line)?;
    }
    verifier.finish()
}

fn chunked(lines: &[String], keys: Jwks, size: usize) -> Result<toolgate::receipt::Report, toolgate::receipt::Break> {
    let mut verifier = Verifier::new(keys);
    for chunk in lines.chunks(size) {
        verifier.texts(chunk)?;
    }
    verifier.finish()
}

#[test]
fn a_large_log_verifies_on_every_core_and_a_bad_receipt_among_many_is_named() {
    let key = key(1);
    let log = Log::new(400, &key);
    let lines = log.lines();
    let report = chunked(&lines, keys(&[&key]), 4096).unwrap();
    assert_eq!((report.events, report.receipts, report.unsealed), (1600, 800, 0));
    assert_eq!(Ok(report.clone()), one_by_one(&lines, keys(&[&key])));
    assert_eq!(Ok(report), streamed(&lines, keys(&[&key])));
    // One receipt in the middle of a batch made to name another approval: its batch fails, and it is named.
    let mut moved = Log { signed: log.signed.clone(), events: log.events.clone() };
    let index = moved.signed.iter().rposition(|signed| signed.payload["approvalId"] == json!("apr_200")).unwrap();
    moved.signed[index].payload["approvalId"] = json!("apr_9999");
    let found = chunked(&moved.lines(), keys(&[&key]), 4096).unwrap_err();
    assert_eq!(found.kind, BreakKind::BadSignature, "{found}");
    assert!(found.detail.contains("apr_9999"), "{found}");
    assert_eq!(Err(found.clone()), streamed(&moved.lines(), keys(&[&key])));
    assert_eq!(Err(found), one_by_one(&moved.lines(), keys(&[&key])));
}

fn broken(lines: &[String], keys: Jwks) -> (Option<i64>, BreakKind, String) {
    let found = verify(lines, keys).expect_err("the tampering is found");
    (found.seq, found.kind, found.to_string())
}

#[test]
fn a_sealed_log_verifies_with_every_receipt_and_checkpoint() {
    let key = key(1);
    let log = Log::new(5, &key);
    let report = verify(&log.lines(), keys(&[&key])).unwrap();
    assert_eq!((report.events, report.checkpoints, report.receipts, report.unsealed), (20, 1, 10, 0));
}

/// The lines with event `seq`'s JSON changed by `edit`.
fn edited(log: &Log, seq: i64, edit: impl FnOnce(&mut Value)) -> Vec<String> {
    let mut log = Log { signed: log.signed.clone(), events: log.events.clone() };
    let index = log.index(seq);
    edit(&mut log.events[index].event);
    log.lines()
}

#[test]
fn an_edited_input_vote_or_time_is_found_at_its_event() {
    let key = key(1);
    let log = Log::new(3, &key);
    let input = edited(&log, 5, |event| event["data"]["input"]["amount"] = json!(1102));
    let (seq, kind, text) = broken(&input, keys(&[&key]));
    assert_eq!((seq, kind), (Some(5), BreakKind::Edited), "{text}");
    assert!(text.contains("event 5: edited"), "{text}");

    let vote = edited(&log, 6, |event| event["principal"] = json!("mallory"));
    assert_eq!(broken(&vote, keys(&[&key])).0, Some(6));
    assert_eq!(broken(&vote, keys(&[&key])).1, BreakKind::Edited);

    let time = edited(&log, 8, |event| event["at"] = json!(1_009));
    assert_eq!(broken(&time, keys(&[&key])).0, Some(8));
}

#[test]
fn a_deleted_event_is_missing_and_a_deleted_tail_too() {
    let key = key(1);
    let mut log = Log::new(3, &key);
    log.events.remove(log.index(6));
    let (seq, kind, text) = broken(&log.lines(), keys(&[&key]));
    assert_eq!((seq, kind), (Some(7), BreakKind::Missing), "{text}");

    let mut tail = Log::new(3, &key);
    tail.events.truncate(10);
    let (seq, kind, text) = broken(&tail.lines(), keys(&[&key]));
    assert_eq!((seq, kind), (Some(12), BreakKind::Missing), "{text}");
}

#[test]
fn an_inserted_event_is_named() {
    let key = key(1);
    // Chained properly after event 6 (a forger who recomputed its link).
    let mut log = Log::new(3, &key);
    let at = log.index(6);
    let prev = chain::decode(&log.events[at].link.hash).unwrap();
    let forged = event(6, AuditKind::Approved, "apr_2", "mallory", json!({}));
    let digest = chain::event_digest(&forged).unwrap();
    let mut forged_value = serde_json::to_value(&forged).unwrap();
    forged_value["seq"] = json!(6);
    let hash = chain::link(&prev, &digest);
    let link =
        ChainLink { seq: 6, prev: chain::encode(&prev), digest: chain::encode(&digest), hash: chain::encode(&hash) };
    // Renumber it between 6 and 7 by giving event 6 and on room: its seq is 6, so shift the rest up.
    for line in &mut log.events[at + 1..] {
        line.link.seq += 100;
        line.event["seq"] = json!(line.link.seq);
    }
    let mut link = link;
    link.seq = 7;
    forged_value["seq"] = json!(7);
    log.events.insert(at + 1, EventLine { link, event: forged_value });
    log.signed.clear();
    let (seq, kind, text) = broken(&log.lines(), keys(&[&key]));
    assert_eq!((seq, kind), (Some(107), BreakKind::Inserted), "{text}");

    // Without a link, between chained events.
    let mut log = Log::new(3, &key);
    let at = log.index(6);
    let mut loose = log.events[at].clone();
    loose.link = ChainLink { seq: 6, prev: String::new(), digest: String::new(), hash: String::new() };
    for line in &mut log.events[at..] {
        line.link.seq += 1;
        line.event["seq"] = json!(line.link.seq);
    }
    log.events.insert(at, loose);
    log.signed.clear();
    let (seq, kind, _) = broken(&log.lines(), keys(&[&key]));
    assert_eq!((seq, kind), (Some(6), BreakKind::Inserted));
}

#[test]
fn reordered_lines_or_swapped_positions_are_reordered() {
    let key = key(1);
    let log = Log::new(3, &key);
    let mut lines = log.lines();
    let first_event = lines.len() - 12;
    lines.swap(first_event + 4, first_event + 5);
    let (seq, kind, text) = broken(&lines, keys(&[&key]));
    assert_eq!((seq, kind), (Some(6), BreakKind::Reordered), "{text}");

    // Two events trade their places in the store (their seq swapped, links left).
    let mut swapped = Log { signed: log.signed.clone(), events: log.events.clone() };
    let (a, b) = (swapped.index(5), swapped.index(6));
    let (left, right) = (swapped.events[a].event.clone(), swapped.events[b].event.clone());
    swapped.events[a].event = right;
    swapped.events[a].event["seq"] = json!(5);
    swapped.events[b].event = left;
    swapped.events[b].event["seq"] = json!(6);
    let (seq, kind, text) = broken(&swapped.lines(), keys(&[&key]));
    assert_eq!((seq, kind), (Some(5), BreakKind::Reordered), "{text}");
}

#[test]
fn a_receipt_moved_to_another_approval_or_resigned_is_found() {
    let key = key(1);
    let log = Log::new(2, &key);
    // The receipt of apr_1's approval, its payload made to name apr_2: the signature breaks.
    let mut moved = Log { signed: log.signed.clone(), events: log.events.clone() };
    moved.signed[0].payload["approvalId"] = json!("apr_2");
    let (_, kind, _) = broken(&moved.lines(), keys(&[&key]));
    assert_eq!(kind, BreakKind::BadSignature);
    // Re-signed by a key the verifier does not know.
    let other = self::key(2);
    let payload = moved.signed[0].payload.clone();
    moved.signed[0] = Signed::sign(toolgate::receipt::SealKind::Receipt, &payload, &other).unwrap();
    let (_, kind, text) = broken(&moved.lines(), keys(&[&key]));
    assert_eq!(kind, BreakKind::UnknownKey, "{text}");
    // Re-signed by a trusted key (a server that lies): the chain still says it is apr_1's event.
    let payload = moved.signed[0].payload.clone();
    moved.signed[0] = Signed::sign(toolgate::receipt::SealKind::Receipt, &payload, &key).unwrap();
    let (seq, kind, text) = broken(&moved.lines(), keys(&[&key]));
    assert_eq!((seq, kind), (Some(3), BreakKind::Edited), "{text}");
}

#[test]
fn a_checkpoint_signed_by_another_key_is_refused() {
    let key = key(1);
    let mut log = Log::new(2, &key);
    let last = log.signed.len() - 1;
    // Another key under the trusted key's id.
    let mut forged = sign_checkpoint(&log.events[7].link, 8, &self::key(3), 9_600).unwrap();
    forged.kid = key.kid().to_owned();
    log.signed[last] = forged;
    let (_, kind, _) = broken(&log.lines(), keys(&[&key]));
    assert_eq!(kind, BreakKind::BadSignature);
}

#[test]
fn a_recomputed_chain_is_caught_by_the_checkpoint() {
    let key = key(1);
    let log = Log::new(2, &key);
    // A forger edits event 3 and recomputes every link after it.
    let mut forged = Log { signed: log.signed.clone(), events: Vec::new() };
    let mut prev = GENESIS;
    for (index, line) in log.events.iter().enumerate() {
        let mut value = line.event.clone();
        if index == 2 {
            value["principal"] = json!("mallory");
        }
        let digest = chain::value_digest(&value).unwrap();
        let hash = chain::link(&prev, &digest);
        let link = ChainLink {
            seq: line.link.seq,
            prev: chain::encode(&prev),
            digest: chain::encode(&digest),
            hash: chain::encode(&hash),
        };
        forged.events.push(EventLine { link, event: value });
        prev = hash;
    }
    forged.signed.retain(|signed| signed.kind == toolgate::receipt::SealKind::Checkpoint);
    let (seq, kind, text) = broken(&forged.lines(), keys(&[&key]));
    assert_eq!((seq, kind), (Some(8), BreakKind::Edited), "{text}");
}

#[test]
fn a_signed_prune_verifies_and_an_unsigned_one_is_missing() {
    let key = key(1);
    let log = Log::new(4, &key);
    // Retention removes apr_1's and apr_3's events but keeps apr_2's (still open, say).
    let removed = |line: &EventLine| matches!(line.event["approvalId"].as_str(), Some("apr_1" | "apr_3"));
    let links: Vec<(ChainLink, u64, bool)> =
        log.events.iter().enumerate().map(|(at, line)| (line.link.clone(), at as u64 + 1, removed(line))).collect();
    let seal = sign_prune(&links, 5_000, &key, 9_700).unwrap().expect("something was pruned");
    let mut pruned = Log { signed: log.signed.clone(), events: log.events.clone() };
    pruned.events.retain(|line| !removed(line));
    pruned.signed.retain(|signed| {
        let approval = signed.payload["approvalId"].as_str();
        !matches!(approval, Some("apr_1" | "apr_3"))
    });
    pruned.signed.push(seal);
    let report = verify(&pruned.lines(), keys(&[&key])).unwrap();
    assert_eq!((report.events, report.pruned, report.checkpoints), (8, 8, 1));

    let mut unsigned = pruned;
    unsigned.signed.pop();
    let (seq, kind, text) = broken(&unsigned.lines(), keys(&[&key]));
    assert_eq!((seq, kind), (Some(5), BreakKind::Missing), "{text}");
}

#[test]
fn old_receipts_verify_after_rotation_while_the_old_key_is_published() {
    let (old, new) = (key(1), key(2));
    let mut log = Log::new(2, &old);
    log.append(2, &new, 3);
    log.checkpoint(&new);
    let report = verify(&log.lines(), keys(&[&old, &new])).unwrap();
    assert_eq!((report.events, report.checkpoints, report.receipts), (16, 2, 8));
    let (_, kind, text) = broken(&log.lines(), keys(&[&new]));
    assert_eq!(kind, BreakKind::UnknownKey, "{text}");
    assert!(text.contains(old.kid()), "{text}");
}

#[test]
fn a_receipt_verifies_alone_and_names_what_was_approved() {
    let key = key(1);
    let log = Log::new(1, &key);
    let executed = log.signed.iter().find(|signed| signed.payload["event"]["kind"] == "executed").unwrap();
    let text = serde_json::to_string(executed).unwrap();
    let receipt = verify_receipt(&serde_json::from_str(&text).unwrap(), &keys(&[&key])).unwrap();
    assert_eq!(receipt.approval_id, "apr_1");
    assert_eq!(receipt.decided_by.as_deref(), Some("bob"));
    assert_eq!(receipt.votes[0].principal.as_deref(), Some("bob"));
    assert_eq!(receipt.input_digest, input_digest(&json!({"amount": 101, "to": "carol"})).unwrap());
    assert_eq!(receipt.run_input_digest, receipt.input_digest);
    assert!(receipt.result_digest.is_some());

    let mut tampered: Signed = serde_json::from_str(&text).unwrap();
    tampered.payload["votes"][0]["at"] = json!(2_001);
    let found = verify_receipt(&tampered, &keys(&[&key])).unwrap_err();
    assert_eq!(found.kind, BreakKind::BadSignature);
    let found = verify_receipt(&serde_json::from_str(&text).unwrap(), &keys(&[&self::key(9)])).unwrap_err();
    assert_eq!(found.kind, BreakKind::UnknownKey);
}

#[test]
fn a_key_file_is_created_private_and_read_back() {
    let dir = std::env::temp_dir().join(format!("toolgate-receipt-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("receipt-key.jwk");
    let _ = std::fs::remove_file(&path);
    let created = ReceiptKey::load_or_create(&path).unwrap();
    let again = ReceiptKey::load_or_create(&path).unwrap();
    assert_eq!(created.kid(), again.kid());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let jwks = Jwks::parse(&serde_json::to_string(&keys(&[&created])).unwrap()).unwrap();
    assert_eq!(jwks.keys[0].kid, created.kid());
    std::fs::write(&path, "{}").unwrap();
    assert!(ReceiptKey::load(&path).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A gate with no rule for anything, whose config has the digest `cfg-1`.
struct Configured;

impl toolgate::CallGate for Configured {
    fn check<'a>(
        &'a self,
        _call: toolgate::tool::GateCall<'a>,
    ) -> futures::future::BoxFuture<'a, Option<toolgate::tool::Verdict>> {
        Box::pin(async { None })
    }

    fn config_digest(&self) -> Option<String> {
        Some("cfg-1".to_owned())
    }
}

#[tokio::test]
async fn a_chat_approval_records_its_tools_definition_and_config_digests_and_its_receipt_names_them() {
    use std::sync::Arc;
    use toolgate::ledger::{AuditQuery, AuditStore, LedgerConfig, MemoryStore};
    use toolgate::{ModelMessage, ScriptedModel, TextRequest, Tool, ToolError, Toolkit, generate_text};

    let tool = Tool::dynamic("transfer", json!({"type": "object", "properties": {"amount": {"type": "number"}}}))
        .description("Moves money.")
        .needs_approval(true)
        .handler(|_input: Value, _context| async { Ok::<_, ToolError>(json!({"ok": true})) });
    let store = Arc::new(MemoryStore::new());
    let ledger = LedgerConfig::new(store.clone());
    let model = ScriptedModel::from_json(
        &json!({"turns": [[{"type": "tool-call", "toolCallId": "t", "toolName": "transfer", "input": {"amount": 5}},
                           {"type": "finish", "finishReason": "tool-calls"}]]})
        .to_string(),
    )
    .unwrap();
    let request = TextRequest::new(vec![ModelMessage::user("pay")])
        .toolkit(Toolkit::new([tool.clone()]).unwrap())
        .gate(Arc::new(Configured))
        .ledger(ledger.conversation("chat-1"));
    let asked = generate_text(&model, request).await.unwrap();
    let approval = asked.approval_requests()[0].approval_id.clone();
    let events = store.audit(&AuditQuery::default()).await.unwrap();
    let issued = events.iter().find(|event| event.kind == AuditKind::Issued).unwrap();
    let digest = toolgate::receipt::tool_digest(&tool).unwrap();
    assert_eq!(issued.data["toolDigest"], json!(digest));
    assert_eq!(issued.data["configDigest"], json!("cfg-1"), "the gate's config");

    let mut decided = record(&approval, &json!({"amount": 5}));
    decided.tool_name = "transfer".into();
    let approved = event(2, AuditKind::Approved, &approval, "bob", json!({}));
    let issued_data = HashMap::from([(approval.clone(), issued.data.clone())]);
    let records = HashMap::from([(approval.clone(), decided)]);
    let sealed = seal_events(GENESIS, &[approved], &records, &issued_data, &key(1), 9).unwrap();
    assert_eq!(sealed.receipts[0].2.payload["toolDigest"], json!(digest));
    assert_eq!(sealed.receipts[0].2.payload["configDigest"], json!("cfg-1"));
}

#[test]
fn lines_the_fast_reader_cannot_vouch_for_are_judged_as_a_value_judges_them() {
    let key = key(1);
    let log = Log::new(3, &key);
    let mut lines = log.lines();
    // A key twice in an event: a `Value` keeps the last (the one chained), so it still verifies.
    let last = lines.len() - 1;
    lines[last] = lines[last].replacen("\"event\":{", "\"event\":{\"approvalId\":\"apr_other\",", 1);
    assert!(lines[last].contains("apr_other"));
    // Line ends of another system, and blank lines.
    lines[0].push('\r');
    lines.insert(1, "  ".to_owned());
    let report = verify(&lines, keys(&[&key])).unwrap();
    assert_eq!((report.events, report.receipts), (12, 6));
    // The same key twice with the forged value last is an edit, on every path.
    lines[last] = log.lines()[log.lines().len() - 1].replacen(
        "\"approvalId\":\"apr_3\"",
        "\"approvalId\":\"apr_3\",\"approvalId\":\"apr_9\"",
        1,
    );
    let (seq, kind, _) = broken(&lines, keys(&[&key]));
    assert_eq!((seq, kind), (Some(12), BreakKind::Edited));
    // A line that is not UTF-8 text is malformed.
    let mut bytes = log.lines().join("\n").into_bytes();
    bytes.extend(b"\n\xff\xfe{}\n");
    let found = Verifier::new(keys(&[&key])).read(&bytes[..]).unwrap().unwrap_err();
    assert_eq!(found.kind, BreakKind::Malformed, "{found}");
}
