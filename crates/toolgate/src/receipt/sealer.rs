//! What a store does when it seals, as pure functions: chain a batch of
//! events and sign their receipts ([`seal_events`]), sign the head
//! ([`sign_checkpoint`]), and sign what a prune removes ([`sign_prune`]).
//! The stores run these inside the transaction that writes the result.

use std::collections::HashMap;

use serde_json::Value;

use super::call::{CallReceipt, has_call_receipt};
use super::chain::{ChainLink, Hash, chain_after};
use super::seal::{Checkpoint, PruneSeal, PrunedRange, Receipt, SealKind, Signed};
use super::{ReceiptError, ReceiptKey, has_receipt};
use crate::ledger::{ApprovalRecord, AuditEvent, Millis};

/// A chained batch.
#[derive(Debug, Clone, PartialEq)]
pub struct SealedBatch {
    /// One link per event, in order.
    pub links: Vec<ChainLink>,
    /// The receipts signed: the event's `seq`, its approval id (empty for a
    /// call decided without an approval), the receipt.
    pub receipts: Vec<(i64, String, Signed)>,
}

/// Chains `events` (in `seq` order) after `head` and signs a receipt for each
/// that decides or ends an approval found in `records` (by approval id), and
/// a [`CallReceipt`] for each that decides or ends a call without an approval
/// ([`has_call_receipt`]); `issued` holds the data of the approvals' first
/// events (`issued`, or a rule's decision as it was issued).
pub fn seal_events(
    head: Hash,
    events: &[AuditEvent],
    records: &HashMap<String, ApprovalRecord>,
    issued: &HashMap<String, Value>,
    key: &ReceiptKey,
    now: Millis,
) -> Result<SealedBatch, ReceiptError> {
    let links = chain_after(head, events)?;
    let mut receipts = Vec::new();
    for (event, link) in events.iter().zip(&links) {
        if has_call_receipt(event) {
            let receipt = CallReceipt::of(event, link, now)?;
            receipts.push((link.seq, String::new(), Signed::sign(SealKind::Receipt, &receipt, key)?));
            continue;
        }
        if event.approval_id.is_empty() || !has_receipt(event.kind) {
            continue;
        }
        let Some(record) = records.get(&event.approval_id) else {
            continue;
        };
        let receipt = Receipt::of(record, event, link, issued.get(&event.approval_id), now)?;
        receipts.push((link.seq, event.approval_id.clone(), Signed::sign(SealKind::Receipt, &receipt, key)?));
    }
    Ok(SealedBatch { links, receipts })
}

/// The signed checkpoint of a chain whose head is `head` after `count` events.
pub fn sign_checkpoint(head: &ChainLink, count: u64, key: &ReceiptKey, at: Millis) -> Result<Signed, ReceiptError> {
    let checkpoint = Checkpoint { head_seq: head.seq, head_hash: head.hash.clone(), count, at };
    Signed::sign(SealKind::Checkpoint, &checkpoint, key)
}

/// The signed record of a prune: `links` are the chain's links still kept
/// over the span pruned, in `seq` order, each with its position in the chain
/// (`n`: the events chained up to it, 1 for the first) and whether it is
/// removed now; every run of consecutive removed links becomes a range. A
/// range counts every position it spans, those an earlier prune removed
/// between its links too. `None` when nothing is removed.
pub fn sign_prune(
    links: &[(ChainLink, u64, bool)],
    before: Millis,
    key: &ReceiptKey,
    at: Millis,
) -> Result<Option<Signed>, ReceiptError> {
    let mut ranges: Vec<PrunedRange> = Vec::new();
    let mut open = false;
    let mut first_n = 0;
    for (link, n, removed) in links {
        match (removed, open, ranges.last_mut()) {
            (true, true, Some(range)) => {
                range.to_seq = link.seq;
                range.count = n - first_n + 1;
                range.head = link.hash.clone();
            }
            (true, _, _) => {
                first_n = *n;
                ranges.push(PrunedRange {
                    from_seq: link.seq,
                    to_seq: link.seq,
                    count: 1,
                    prev: link.prev.clone(),
                    head: link.hash.clone(),
                });
            }
            (false, _, _) => {}
        }
        open = *removed;
    }
    if ranges.is_empty() {
        return Ok(None);
    }
    Signed::sign(SealKind::Prune, &PruneSeal { ranges, before, at }, key).map(Some)
}
