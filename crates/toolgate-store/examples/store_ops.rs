//! The cost of single store operations: `cargo run --release -p toolgate-store --example store_ops -- [SPEC] [N]`.
//!
//! Times N reads of one approval, N conversation saves and N one-transition
//! transactions against SPEC (default: a fresh SQLite file in a temporary
//! directory), one at a time, and prints the mean of each.

use std::time::Instant;

use serde_json::json;
use toolgate::ledger::{ApprovalRecord, ApprovalState, Guard, Transition, Update};
use toolgate_store::{StoreSpec, open_store};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = tempfile::tempdir()?;
    let spec = StoreSpec::parse(&args.next().unwrap_or_else(|| "sqlite".into()), dir.path())?;
    let n: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(5000);
    let store = open_store(&spec).await?.ok_or("this example needs a store")?;
    let run = uuid::Uuid::now_v7().simple().to_string();
    let record = |id: String| ApprovalRecord {
        approval_id: id,
        conversation_id: format!("bench-{run}"),
        owner: None,
        client: None,
        tool_call_id: "call-1".into(),
        tool_name: "delete_file".into(),
        input: json!({"path": "a.txt"}),
        input_digest: "digest".into(),
        issued_at: 0,
        expires_at: i64::MAX,
        state: ApprovalState::Pending,
        decision: None,
        output: None,
        lease: None,
        updated_at: 0,
        routing: None,
        votes: Vec::new(),
        reason: None,
        supersedes: None,
        superseded_by: None,
        origin: Default::default(),
        input_schema: None,
        lineage: Vec::new(),
    };
    let ids: Vec<String> = (0..n).map(|i| format!("apr-{run}-{i}")).collect();
    let started = Instant::now();
    for id in &ids {
        store.issue(&[record(id.clone())], &[]).await?;
    }
    let issue = started.elapsed() / n as u32;
    let started = Instant::now();
    for id in &ids {
        store.approvals(std::slice::from_ref(id)).await?;
    }
    let read = started.elapsed() / n as u32;
    let started = Instant::now();
    for id in &ids {
        let denied = Transition {
            approval_id: id.clone(),
            from: ApprovalState::Pending,
            to: ApprovalState::Denied,
            guard: Guard::None,
            update: Update::default(),
            at: 1,
            events: Vec::new(),
        };
        store.apply(&[denied], &[]).await?;
    }
    let transition = started.elapsed() / n as u32;
    let messages = json!([{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}]);
    let started = Instant::now();
    let mut version = None;
    for _ in 0..n {
        version = store.save_conversation(&format!("conv-{run}"), None, &messages, version, 1).await?;
    }
    let save = started.elapsed() / n as u32;
    println!(
        "{spec}: issue {issue:?}, read {read:?}, one-transition transaction {transition:?}, conversation save {save:?}"
    );
    Ok(())
}
