//! An export of a store's chain, as the lines [`super::Verifier`] reads, and
//! a store verified the same way.

use super::verify::{ExportHeader, LogLine, Report, Verifier};
use super::{Break, Jwks, ReceiptStore};
use crate::ledger::{Millis, StoreError};

/// Events read per page.
const PAGE: usize = 2000;
/// Events read per page to verify (split between the cores).
const VERIFY_PAGE: usize = 8192;

/// Hands every line of `store`'s export to `sink`, in order: a header when
/// `since` starts after a checkpoint (the export then starts right after the
/// newest checkpoint before `since`), the signed records (checkpoints and
/// prunes, and with `receipts` every receipt), then the events page by page.
/// Returns the events exported. The chain and its checkpoints prove the log;
/// receipts add one signature each to check (see the benchmarks).
pub async fn export<E: From<StoreError>>(
    store: &dyn ReceiptStore,
    since: Option<Millis>,
    receipts: bool,
    mut sink: impl FnMut(LogLine) -> Result<(), E>,
) -> Result<u64, E> {
    let after = match since {
        Some(since) => store.checkpoint_before(since).await?.map(|checkpoint| checkpoint.head_seq),
        None => None,
    };
    if let Some(after) = after {
        sink(LogLine::Header(ExportHeader { after_checkpoint: after }))?;
    }
    let mut cursor = after.unwrap_or(i64::MIN);
    for signed in store.signed_records(cursor).await? {
        if receipts || signed.kind != super::SealKind::Receipt {
            sink(LogLine::Signed(signed))?;
        }
    }
    let mut events = 0u64;
    loop {
        let page = store.chained_events(cursor, PAGE).await?;
        let Some(last) = page.last() else {
            return Ok(events);
        };
        cursor = last.link.seq;
        for line in page {
            events += 1;
            sink(LogLine::Event(line))?;
        }
    }
}

/// Verifies `store`'s whole chain and every receipt under `keys`, a page
/// at a time on every core as [`Verifier::lines`] reads it: the report, or
/// the first break (the outer error: the store could not be read).
pub async fn verify_store(store: &dyn ReceiptStore, keys: Jwks) -> Result<Result<Report, Break>, StoreError> {
    let mut verifier = Verifier::new(keys);
    let signed = store.signed_records(i64::MIN).await?;
    if let Err(broken) = verifier.lines(signed.into_iter().map(LogLine::Signed).collect()) {
        return Ok(Err(broken));
    }
    let mut cursor = i64::MIN;
    loop {
        let page = store.chained_events(cursor, VERIFY_PAGE).await?;
        let Some(last) = page.last() else {
            return Ok(verifier.finish());
        };
        cursor = last.link.seq;
        if let Err(broken) = verifier.lines(page.into_iter().map(LogLine::Event).collect()) {
            return Ok(Err(broken));
        }
    }
}
