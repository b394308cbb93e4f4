//! An export of a store's chain, as the lines [`super::Verifier`] reads, and
//! a store verified the same way.

use super::verify::{ExportHeader, LogLine, Report, Verifier};
use super::{Break, Jwks, ReceiptStore};
use crate::ledger::{Millis, StoreError};

/// Events read per page.
const PAGE: usize = 2000;

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

/// Verifies `store`'s whole chain and every receipt under `keys`: the
/// report, or the first break (the outer error: the store could not be read).
pub async fn verify_store(store: &dyn ReceiptStore, keys: Jwks) -> Result<Result<Report, Break>, StoreError> {
    let mut verifier = Verifier::new(keys);
    let mut found: Option<Break> = None;
    export::<StoreError>(store, None, true, |line| {
        if found.is_none()
            && let Err(broken) = verifier.line(line)
        {
            found = Some(broken);
        }
        Ok(())
    })
    .await?;
    Ok(match found {
        Some(broken) => Err(broken),
        None => verifier.finish(),
    })
}
