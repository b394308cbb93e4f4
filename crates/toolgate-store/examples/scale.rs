//! The store at scale: `cargo run --release -p toolgate-store --example scale -- [SPEC] [APPROVALS] [EVENTS] [CONVERSATIONS]`.
//!
//! Measures the store's side of an approval round trip (issue with its event,
//! the claim `pending → approved → executing`, the outcome, the conversation
//! save: what one first turn and its approved continuation write) on an empty
//! store, then fills it with APPROVALS pending approvals (default 100,000) and
//! EVENTS audit events (default 1,000,000) spread over CONVERSATIONS
//! conversations (default 10,000), and measures the round trip again, the
//! audit query of one conversation (as `GET /api/audit?conversation=ID`
//! runs it) and, on SQLite, the file's growth per approval and per event.
//! SPEC is a `--store` value (default: a fresh SQLite file in a temporary
//! directory). Prints a markdown table.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::ledger::{
    ApprovalRecord, ApprovalState, AuditEvent, AuditKind, AuditQuery, Guard, Lease, LedgerStore, RecordedDecision,
    Transition, Update,
};
use toolgate::{Decision, ToolResultOutput};
use toolgate_store::{StoreSpec, open_store};

/// Round trips timed on each store size.
const ROUND_TRIPS: usize = 2_000;
/// Audit queries timed.
const AUDIT_QUERIES: usize = 1_000;
/// Rows written per fill transaction.
const BATCH: usize = 2_000;
/// The audit query's limit (`toolgate_server::MAX_AUDIT_EVENTS`, the endpoint's default).
const AUDIT_LIMIT: usize = 10_000;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = tempfile::tempdir()?;
    let spec = StoreSpec::parse(&args.next().unwrap_or_else(|| "sqlite".into()), dir.path())?;
    let approvals: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(100_000);
    let events: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(1_000_000);
    let conversations: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(10_000).max(1);
    let store: Arc<dyn LedgerStore> = open_store(&spec).await?.ok_or("this example needs a store")?;
    let run = uuid::Uuid::now_v7().simple().to_string();
    let file = match &spec {
        StoreSpec::Sqlite(path) => Some(path.clone()),
        _ => None,
    };

    // Warm-up (connections, caches, the log's first growth), not counted.
    round_trips(store.as_ref(), &format!("{run}-warm")).await?;
    let empty = round_trips(store.as_ref(), &format!("{run}-empty")).await?;
    let size_empty = file.as_deref().map(settled_size);
    let started = Instant::now();
    fill_approvals(store.as_ref(), &run, approvals, conversations).await?;
    let size_approvals = file.as_deref().map(settled_size);
    fill_events(store.as_ref(), &run, events.saturating_sub(approvals), conversations).await?;
    let size_full = file.as_deref().map(settled_size);
    let fill = started.elapsed();
    let full = round_trips(store.as_ref(), &format!("{run}-full")).await?;
    let audit = audit_queries(store.as_ref(), &run, conversations).await?;

    println!("store: {spec}; {approvals} pending approvals, {events} audit events, {conversations} conversations");
    println!("filled in {:.1} s", fill.as_secs_f64());
    println!();
    println!("| measure | mean | p50 | p99 |");
    println!("|---|---:|---:|---:|");
    println!("| store round trip, empty store | {} |", empty.row());
    println!("| store round trip, full store | {} |", full.row());
    println!("| audit of one conversation (~{} events), full store | {} |", events / conversations, audit.row());
    if let (Some(empty), Some(approvals_size), Some(full_size)) = (size_empty, size_approvals, size_full) {
        let per_approval = approvals_size.saturating_sub(empty) as f64 / approvals.max(1) as f64;
        let per_event =
            full_size.saturating_sub(approvals_size) as f64 / events.saturating_sub(approvals).max(1) as f64;
        println!();
        println!(
            "file: {:.1} MiB; {per_approval:.0} bytes per pending approval with its `issued` event, {per_event:.0} bytes per further audit event",
            full_size as f64 / (1 << 20) as f64
        );
    }
    Ok(())
}

/// Latencies, summarised.
struct Timings(Vec<Duration>);

impl Timings {
    fn row(&self) -> String {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let at = |q: f64| sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)];
        let mean = sorted.iter().sum::<Duration>() / sorted.len().max(1) as u32;
        format!("{:.3} ms | {:.3} ms | {:.3} ms", ms(mean), ms(at(0.5)), ms(at(0.99)))
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn record(id: &str, conversation: &str) -> ApprovalRecord {
    ApprovalRecord {
        approval_id: id.to_owned(),
        conversation_id: conversation.to_owned(),
        owner: None,
        client: None,
        tool_call_id: format!("call-{id}"),
        tool_name: "delete_file".into(),
        input: json!({"path": "notes.txt"}),
        input_digest: "digest".into(),
        issued_at: 1,
        expires_at: i64::MAX,
        state: ApprovalState::Pending,
        decision: None,
        output: None,
        lease: None,
        updated_at: 1,
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

fn event(kind: AuditKind, id: &str, conversation: &str, at: i64) -> AuditEvent {
    AuditEvent {
        seq: 0,
        at,
        kind,
        approval_id: id.to_owned(),
        tool_call_id: format!("call-{id}"),
        conversation_id: conversation.to_owned(),
        owner: None,
        principal: Some("alice".into()),
        data: json!({"toolName": "delete_file", "input": {"path": "notes.txt"}}),
    }
}

fn transition(
    id: &str,
    (from, to): (ApprovalState, ApprovalState),
    update: Update,
    events: Vec<AuditEvent>,
) -> Transition {
    Transition { approval_id: id.to_owned(), from, to, guard: Guard::None, update, at: 2, events }
}

/// The store operations of ROUND_TRIPS approval round trips, one after the other.
async fn round_trips(store: &dyn LedgerStore, run: &str) -> Result<Timings, Box<dyn std::error::Error>> {
    let mut timings = Vec::with_capacity(ROUND_TRIPS);
    for n in 0..ROUND_TRIPS {
        let (id, chat) = (format!("rt-{run}-{n}"), format!("rt-chat-{run}-{n}"));
        let started = Instant::now();
        store.issue(&[record(&id, &chat)], &[event(AuditKind::Issued, &id, &chat, 1)]).await?;
        store.save_conversation(&chat, None, &json!([{"id": "u1"}, {"id": "a1"}]), None, 1).await?;
        let decided = RecordedDecision::new(Decision::APPROVE, Some("alice".into()), 2);
        let approve = Update { decision: Some(decided), ..Update::default() };
        let lease = Update { lease: Some(Lease { executor: "bench".into(), until: i64::MAX }), ..Update::default() };
        let claim = [
            transition(
                &id,
                (ApprovalState::Pending, ApprovalState::Approved),
                approve,
                vec![event(AuditKind::Approved, &id, &chat, 2)],
            ),
            transition(&id, (ApprovalState::Approved, ApprovalState::Executing), lease, Vec::new()),
        ];
        store.apply(&claim, &[]).await?;
        let output =
            Update { output: Some(ToolResultOutput::json(json!({"deleted": "notes.txt"}))), ..Update::default() };
        let finish = [transition(
            &id,
            (ApprovalState::Executing, ApprovalState::Executed),
            output,
            vec![event(AuditKind::Executed, &id, &chat, 3)],
        )];
        store.apply(&finish, &[]).await?;
        store.save_conversation(&chat, None, &json!([{"id": "u1"}, {"id": "a1"}, {"id": "a2"}]), Some(1), 3).await?;
        timings.push(started.elapsed());
    }
    Ok(Timings(timings))
}

/// APPROVALS pending approvals with their `issued` events, round-robin over the conversations.
async fn fill_approvals(
    store: &dyn LedgerStore,
    run: &str,
    approvals: usize,
    conversations: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    for start in (0..approvals).step_by(BATCH) {
        let ids: Vec<(String, String)> = (start..(start + BATCH).min(approvals))
            .map(|n| (format!("fill-{run}-{n}"), format!("chat-{run}-{}", n % conversations)))
            .collect();
        let records: Vec<ApprovalRecord> = ids.iter().map(|(id, chat)| record(id, chat)).collect();
        let events: Vec<AuditEvent> = ids.iter().map(|(id, chat)| event(AuditKind::Issued, id, chat, 1)).collect();
        store.issue(&records, &events).await?;
    }
    Ok(())
}

/// EVENTS more audit events, round-robin over the conversations.
async fn fill_events(
    store: &dyn LedgerStore,
    run: &str,
    events: usize,
    conversations: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    for start in (0..events).step_by(BATCH) {
        let batch: Vec<AuditEvent> = (start..(start + BATCH).min(events))
            .map(|n| {
                let chat = format!("chat-{run}-{}", n % conversations);
                event(AuditKind::Rejected, &format!("fill-{run}-{n}"), &chat, 4)
            })
            .collect();
        store.append(&batch).await?;
    }
    Ok(())
}

/// AUDIT_QUERIES audit reads of one conversation each.
async fn audit_queries(
    store: &dyn LedgerStore,
    run: &str,
    conversations: usize,
) -> Result<Timings, Box<dyn std::error::Error>> {
    let mut timings = Vec::with_capacity(AUDIT_QUERIES);
    for n in 0..AUDIT_QUERIES {
        // A spread of conversations (a multiplicative step, so consecutive reads are not neighbours).
        let chat = format!("chat-{run}-{}", (n * 7_919) % conversations);
        let query = AuditQuery { conversation_id: Some(chat), limit: Some(AUDIT_LIMIT), ..AuditQuery::default() };
        let started = Instant::now();
        let found = store.audit(&query).await?;
        timings.push(started.elapsed());
        assert!(!found.is_empty(), "every conversation has events");
    }
    Ok(Timings(timings))
}

/// The SQLite file and its log, after the log was given a moment to be copied back.
fn settled_size(path: &Path) -> u64 {
    std::thread::sleep(Duration::from_millis(1_500));
    let size = |path: &Path| std::fs::metadata(path).map(|metadata| metadata.len()).unwrap_or(0);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    size(path) + size(Path::new(&wal))
}
