//! `toolgate audit`: the approval audit log, as JSON lines, from the store.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use toolgate::ledger::{AuditKind, AuditQuery, AuditView};

use crate::store::StoreArgs;

/// How often `--follow` looks for new events.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(500);

/// Arguments of `toolgate audit`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    /// The signed audit chain: `keys`, `export`, `verify`.
    #[command(subcommand)]
    action: Option<crate::receipts::AuditAction>,
    #[command(flatten)]
    store: StoreArgs,
    /// Only this conversation's events (the chat id or AG-UI thread id).
    #[arg(long)]
    conversation: Option<String>,
    /// Only events at or after this time (milliseconds since the epoch or RFC 3339).
    #[arg(long)]
    since: Option<String>,
    /// Only events of this kind (`executed`, `denied`, `shadowed`, ...).
    #[arg(long, value_parser = parse_kind)]
    kind: Option<AuditKind>,
    /// Keep printing new events as they are recorded, until interrupted.
    #[arg(long)]
    follow: bool,
}

/// An audit kind by its name.
fn parse_kind(text: &str) -> Result<AuditKind, String> {
    AuditKind::parse(text).ok_or_else(|| {
        let names: Vec<&str> = AuditKind::ALL.iter().map(|kind| kind.as_str()).collect();
        format!("unknown kind `{text}` (expected one of {})", names.join(", "))
    })
}

/// Prints the matching events, one JSON object per line; with `--follow`, keeps going.
pub async fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    if let Some(action) = args.action {
        return crate::receipts::run(action).await;
    }
    let Some(store) = args.store.open().await? else {
        bail!("`toolgate audit` needs a store; --store none keeps no audit log");
    };
    let since = args.since.as_deref().map(toolgate_server::parse_time).transpose().map_err(|e| anyhow::anyhow!(e))?;
    // The machine's operator opens the store file itself: every owner's events.
    let mut query = AuditQuery {
        conversation_id: args.conversation,
        since,
        after_seq: None,
        limit: Some(10_000),
        view: AuditView::All,
    };
    loop {
        let events = store.audit(&query).await.context("cannot read the audit log")?;
        let mut stdout = std::io::stdout().lock();
        for event in events.iter().filter(|event| args.kind.is_none_or(|kind| event.kind == kind)) {
            writeln!(stdout, "{}", serde_json::to_string(event)?)?;
        }
        stdout.flush()?;
        drop(stdout);
        if let Some(last) = events.last() {
            query.after_seq = Some(last.seq);
        }
        if !args.follow {
            return Ok(ExitCode::SUCCESS);
        }
        if events.len() < query.limit.unwrap_or(usize::MAX) {
            tokio::select! {
                () = tokio::time::sleep(FOLLOW_INTERVAL) => {}
                _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
            }
        }
    }
}
