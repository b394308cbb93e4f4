//! Fills the store with the data set ([`Layout`]) through
//! [`toolgate::ledger::ApprovalStore::issue`], as the engine would have issued it, and writes
//! what `toolgate serve` needs to know the principals: a tokens file (a token
//! per approver and requester) and a config with the `[groups]`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use toolgate::ledger::{ApprovalRecord, AuditEvent, LedgerStore};

use super::layout::Layout;

/// Writes approvals `0..layout.approvals` in batches of `batch` (one
/// `issue` call, one transaction each), oldest first; returns how long it took.
pub async fn fill(store: &dyn LedgerStore, layout: &Layout, batch: usize) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let batch = batch.max(1);
    let mut reported = 0;
    for start in (0..layout.approvals).step_by(batch) {
        let records: Vec<ApprovalRecord> =
            (start..(start + batch).min(layout.approvals)).map(|n| layout.record(n)).collect();
        let events: Vec<AuditEvent> = records.iter().map(Layout::issued_event).collect();
        store.issue(&records, &events).await.with_context(|| format!("issuing approvals from {start}"))?;
        let done = start + records.len();
        if done * 10 / layout.approvals > reported {
            reported = done * 10 / layout.approvals;
            eprintln!("inbox_bench: filled {done} approvals ({:.1} s)", started.elapsed().as_secs_f64());
        }
    }
    Ok(started.elapsed())
}

/// The bearer token of `principal` in this run.
pub fn token(layout: &Layout, principal: &str) -> String {
    format!("tok-{}-{principal}", layout.run)
}

/// Writes the tokens file (`{"TOKEN": "PRINCIPAL"}`, readable by its owner
/// only, as the server asks) with a token per approver and requester.
pub fn write_tokens(layout: &Layout, path: &Path) -> anyhow::Result<()> {
    let principals = (0..layout.approvers).map(Layout::approver).chain((0..layout.requesters).map(Layout::requester));
    let tokens: BTreeMap<String, String> = principals.map(|principal| (token(layout, &principal), principal)).collect();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(serde_json::to_string_pretty(&tokens)?.as_bytes())?;
    Ok(())
}

/// Writes the config: `[groups]` with each group's members.
pub fn write_config(layout: &Layout, path: &Path) -> anyhow::Result<()> {
    let mut text = String::from("# inbox_bench: the approver groups of the filled approvals.\n[groups]\n");
    for group in 0..layout.groups() {
        let members: Vec<String> =
            layout.members(group).into_iter().map(|i| format!("\"{}\"", Layout::approver(i))).collect();
        text.push_str(&format!("{} = [{}]\n", Layout::group_name(group), members.join(", ")));
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// A scripted model that answers "Done." to every turn: the inbox never
/// needs the model, and this one never needs the network.
pub fn write_script(path: &Path) -> anyhow::Result<()> {
    std::fs::write(path, r#"{"turns": [[{"type": "text", "text": "Done."}]]}"#)
        .with_context(|| format!("cannot write {}", path.display()))
}
