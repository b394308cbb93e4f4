//! `toolgate audit keys | export | verify`: the signed audit chain
//! ([`toolgate::receipt`]) from the store, and its offline check.
//!
//! - `keys`: the JWKS of every key that signed on the store (what
//!   `GET /.well-known/toolgate/receipt-keys` serves);
//! - `export [--since T] [--receipts]`: the chain as JSON lines (signed
//!   records first, then the events with their links), for `verify --file`;
//! - `verify (--store URL | --file log.jsonl) --keys JWKS_FILE`: every
//!   signature and the chain; prints the first break and exits 1;
//! - `verify --receipt FILE --keys JWKS_FILE`: one receipt alone.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use toolgate::ledger::StoreError;
use toolgate::receipt::{
    Break, Jwks, Report, Signed, Verifier, export, is_call_receipt, verify_call_receipt, verify_receipt, verify_store,
};

use crate::store::StoreArgs;

/// `toolgate audit` subcommands for the signed chain.
#[derive(Debug, Subcommand)]
pub enum AuditAction {
    /// Print the public keys receipts and checkpoints are signed with, as a JWKS.
    Keys {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print the signed audit log as JSON lines (`toolgate audit export > log.jsonl`), for `verify --file`.
    Export {
        #[command(flatten)]
        store: StoreArgs,
        /// Start at the newest checkpoint before this time (milliseconds since the epoch or RFC 3339).
        #[arg(long)]
        since: Option<String>,
        /// Also export every receipt (each one more signature for `verify` to check).
        #[arg(long)]
        receipts: bool,
    },
    /// Check every signature and the hash chain offline; print the first break and exit 1.
    Verify(VerifyArgs),
}

/// What `toolgate audit verify` checks, and against which keys.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["store", "file", "receipt"])))]
pub struct VerifyArgs {
    /// The store to read the log from (`sqlite://PATH`, `postgres://...`, or `sqlite` for the data directory's).
    #[arg(long)]
    store: Option<String>,
    /// With `--store sqlite`: the data directory.
    #[arg(long, requires = "store")]
    data_dir: Option<PathBuf>,
    /// An export (`toolgate audit export > log.jsonl`).
    #[arg(long)]
    file: Option<PathBuf>,
    /// One receipt (`GET /api/approvals/{id}/receipt`, the inbox's "download receipt", or a call's: `GET /api/audit/{seq}/receipt`).
    #[arg(long)]
    receipt: Option<PathBuf>,
    /// The trusted keys, a JWKS file (from `toolgate audit keys` or `/.well-known/toolgate/receipt-keys`).
    #[arg(long, value_name = "JWKS_FILE")]
    keys: PathBuf,
}

/// Runs a subcommand.
pub async fn run(action: AuditAction) -> anyhow::Result<ExitCode> {
    match action {
        AuditAction::Keys { store } => {
            let keys = store.open_receipts().await?.receipt_keys().await.context("cannot read the receipt keys")?;
            println!("{}", serde_json::to_string_pretty(&keys)?);
            Ok(ExitCode::SUCCESS)
        }
        AuditAction::Export { store, since, receipts: with_receipts } => {
            let since =
                since.as_deref().map(toolgate_server::parse_time).transpose().map_err(|e| anyhow::anyhow!(e))?;
            let receipts = store.open_receipts().await?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let write = |line: toolgate::receipt::LogLine| Ok(writeln!(out, "{}", line.to_json())?);
            export::<ExportError>(receipts.as_ref(), since, with_receipts, write).await?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        AuditAction::Verify(args) => verify(args).await,
    }
}

/// An export's failure: the store, or writing.
#[derive(Debug, thiserror::Error)]
enum ExportError {
    #[error("cannot read the audit log: {0}")]
    Store(#[from] StoreError),
    #[error("cannot write the export: {0}")]
    Write(#[from] std::io::Error),
}

async fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.keys).with_context(|| format!("cannot read {}", args.keys.display()))?;
    let keys = Jwks::parse(&text).with_context(|| format!("--keys {}", args.keys.display()))?;
    if let Some(path) = &args.receipt {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let signed: Signed =
            serde_json::from_str(&text).with_context(|| format!("{} is not a receipt", path.display()))?;
        // A call decided without an approval has a receipt of its own shape.
        let verified = if is_call_receipt(&signed) {
            verify_call_receipt(&signed, &keys).map(|receipt| serde_json::to_string_pretty(&receipt))
        } else {
            verify_receipt(&signed, &keys).map(|receipt| serde_json::to_string_pretty(&receipt))
        };
        return Ok(match verified {
            Ok(receipt) => {
                println!("receipt verified: signed by {}", signed.kid);
                println!("{}", receipt?);
                ExitCode::SUCCESS
            }
            Err(broken) => broke(&broken),
        });
    }
    let outcome = match (&args.file, &args.store) {
        (Some(path), _) => verify_file(path, keys)?,
        (None, Some(store)) => {
            let data_dir = args.data_dir.clone().unwrap_or_else(crate::store::default_data_dir);
            let receipts = crate::store::open_receipts(store, &data_dir).await?;
            verify_store(receipts.as_ref(), keys).await.context("cannot read the audit log")?
        }
        (None, None) => unreachable!("clap requires one of --store, --file, --receipt"),
    };
    Ok(match outcome {
        Ok(report) => {
            print_report(&report);
            ExitCode::SUCCESS
        }
        Err(broken) => broke(&broken),
    })
}

fn verify_file(path: &std::path::Path, keys: Jwks) -> anyhow::Result<Result<Report, Break>> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut verifier = Verifier::new(keys);
    // Blocks of lines are parsed, digested and their signatures checked on every core while the chain is walked.
    match verifier.read(file).with_context(|| format!("cannot read {}", path.display()))? {
        Ok(()) => Ok(verifier.finish()),
        Err(broken) => Ok(Err(broken)),
    }
}

fn print_report(report: &Report) {
    println!(
        "verified: {} events ({} pruned with a signed record), {} checkpoints, {} receipts; head {}",
        report.events, report.pruned, report.checkpoints, report.receipts, report.head
    );
    if let Some(after) = report.starts_after {
        println!("the export starts after the checkpoint at event {after}");
    }
    if report.unsealed > 0 {
        println!("{} events after the last checkpoint are chained but not yet signed for", report.unsealed);
    }
}

fn broke(broken: &Break) -> ExitCode {
    println!("BROKEN {broken}");
    ExitCode::FAILURE
}
