//! Checking an exported log offline: every signature, and the chain from its
//! start (or from a signed prune) to its last event.
//!
//! An export is JSON lines ([`LogLine`]): an optional header, then the
//! signed records (checkpoints, prunes, receipts), then the events in `seq`
//! order, each with its link. [`Verifier`] reads them one at a time, in
//! memory linear in the number of signed records (not events), and stops at
//! the first [`Break`]:
//! - an event whose content does not match its link: *edited* (or
//!   *reordered*, when its content is the one the next link was made for);
//! - an event whose `prev` is not the hash before it and no signed prune
//!   covers the gap: *missing* (or *inserted*, when it links to the event
//!   two back: the one between is not part of the chain);
//! - `seq` going backwards: *reordered*;
//! - a checkpoint whose head is not the chain's at that event, or names an
//!   event that is not there: *edited* or *missing*;
//! - a signature by a key not in the key set, or one that does not match:
//!   *unknown key*, *bad signature*;
//! - a receipt whose event is not the chain's event at that place, or names
//!   another approval (a call receipt: another call): *edited* (a receipt
//!   moved between approvals or events).
//!
//! Events after the last checkpoint verify as a chain but no signature vouches
//! for them yet; the report counts them.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chain::{self, ChainLink, GENESIS, Hash, decode, encode, value_digest};
use super::deferred::Deferred;
use super::json::Fields;
use super::keys::{Jwks, KeyRing};
use super::seal::{Checkpoint, PruneSeal, PrunedRange, Receipt, SealError, SealKind, Signed};

/// The first line of an export that starts after the chain's start (`toolgate audit export --since`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportHeader {
    /// The checkpoint the export starts after (its head is the first event's `prev`).
    pub after_checkpoint: i64,
}

/// One event of an export, with its place in the chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventLine {
    /// Its link (`seq`, `prev`, `digest`, `hash`).
    #[serde(flatten)]
    pub link: ChainLink,
    /// The event as stored (an [`crate::ledger::AuditEvent`]'s JSON).
    pub event: Value,
}

/// One line of an export.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LogLine {
    /// The export starts after a checkpoint.
    Header(ExportHeader),
    /// A checkpoint, a prune or a receipt.
    Signed(Signed),
    /// An event.
    Event(EventLine),
}

impl LogLine {
    /// The line as exported.
    pub fn to_json(&self) -> String {
        let value = match self {
            Self::Header(header) => serde_json::json!({"type": "export", "afterCheckpoint": header.after_checkpoint}),
            Self::Signed(signed) => serde_json::to_value(signed).unwrap_or(Value::Null),
            Self::Event(line) => {
                let mut value = serde_json::to_value(line).unwrap_or(Value::Null);
                value["type"] = "event".into();
                value
            }
        };
        value.to_string()
    }

    /// The line in this text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let value: Value = serde_json::from_str(text).map_err(|error| format!("not JSON: {error}"))?;
        match value.get("type").and_then(Value::as_str) {
            Some("event") => serde_json::from_value(value).map(Self::Event).map_err(|error| error.to_string()),
            Some("export") => serde_json::from_value(value).map(Self::Header).map_err(|error| error.to_string()),
            Some(_) => serde_json::from_value(value).map(Self::Signed).map_err(|error| error.to_string()),
            None => Err("a line without `type`".to_owned()),
        }
    }
}

/// What is wrong at a break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BreakKind {
    /// Content changed after it was chained or signed.
    Edited,
    /// Events removed without a signed prune.
    Missing,
    /// An event that is not part of the chain.
    Inserted,
    /// Events out of their chained order.
    Reordered,
    /// Signed by a key the key set does not hold.
    UnknownKey,
    /// A signature that does not match.
    BadSignature,
    /// A line that is not what an export holds.
    Malformed,
}

impl std::fmt::Display for BreakKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            Self::Edited => "edited",
            Self::Missing => "missing",
            Self::Inserted => "inserted",
            Self::Reordered => "reordered",
            Self::UnknownKey => "signed by an unknown key",
            Self::BadSignature => "bad signature",
            Self::Malformed => "malformed",
        };
        f.write_str(name)
    }
}

/// The first thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{kind}: {detail}", seq.map(|seq| format!("event {seq}: ")).unwrap_or_default())]
pub struct Break {
    /// The event where it shows (`None`: a signed record or a line).
    pub seq: Option<i64>,
    /// What is wrong.
    pub kind: BreakKind,
    /// In words.
    pub detail: String,
}

fn broke(seq: Option<i64>, kind: BreakKind, detail: impl Into<String>) -> Break {
    Break { seq, kind, detail: detail.into() }
}

/// What a log that verified holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Events checked.
    pub events: u64,
    /// Events removed by signed prunes.
    pub pruned: u64,
    /// Checkpoints checked against the chain.
    pub checkpoints: u64,
    /// Receipts checked against the chain.
    pub receipts: u64,
    /// Events after the last checkpoint: chained, not yet signed for.
    pub unsealed: u64,
    /// The head hash after the last event.
    pub head: String,
    /// The checkpoint a partial export starts after, if any.
    pub starts_after: Option<i64>,
}

/// Checks an export line by line (see the module docs).
#[derive(Debug)]
pub struct Verifier {
    header: Option<ExportHeader>,
    checkpoints: BTreeMap<i64, Checkpoint>,
    ranges: HashMap<Hash, PrunedRange>,
    receipts: BTreeMap<i64, Vec<ReceiptRef>>,
    pub(super) ring: KeyRing,
    deferred: Deferred,
    /// The first receipt checked already (`texts`) whose signature does not hold: whose it is, and why.
    bad_receipt: Option<(String, String)>,
    /// The event read but not yet checked (checked when the next arrives).
    pending: Option<Linked>,
    running: Hash,
    before_last: Option<Hash>,
    last_seq: Option<i64>,
    count: u64,
    report: Report,
    sealed_at: Option<u64>,
    /// The first and last events read that have no link (the unsealed tail, so far).
    unlinked_first: Option<i64>,
    unlinked_last: Option<i64>,
}

impl Verifier {
    /// A verifier trusting these keys.
    pub fn new(keys: Jwks) -> Self {
        Self {
            header: None,
            checkpoints: BTreeMap::new(),
            ranges: HashMap::new(),
            receipts: BTreeMap::new(),
            ring: keys.ring(),
            deferred: Deferred::default(),
            bad_receipt: None,
            pending: None,
            running: GENESIS,
            before_last: None,
            last_seq: None,
            count: 0,
            report: Report::default(),
            sealed_at: None,
            unlinked_first: None,
            unlinked_last: None,
        }
    }

    /// Reads one line of text (blank lines are skipped).
    pub fn text(&mut self, text: &str) -> Result<(), Break> {
        if text.trim().is_empty() {
            return Ok(());
        }
        let line = LogLine::parse(text).map_err(|why| broke(None, BreakKind::Malformed, why))?;
        self.line(line)
    }

    /// Reads one line.
    pub fn line(&mut self, line: LogLine) -> Result<(), Break> {
        match line {
            LogLine::Header(header) => self.header(header),
            LogLine::Signed(signed) => self.signed(signed),
            LogLine::Event(event) => self.event(event),
        }
    }

    fn header(&mut self, header: ExportHeader) -> Result<(), Break> {
        if self.header.is_some() || self.last_seq.is_some() || self.pending.is_some() {
            return Err(broke(None, BreakKind::Malformed, "an export header after the first line"));
        }
        self.header = Some(header);
        Ok(())
    }

    fn signed(&mut self, signed: Signed) -> Result<(), Break> {
        if self.pending.is_some() || self.last_seq.is_some() {
            return Err(broke(
                None,
                BreakKind::Malformed,
                "a signed record after the events (an export lists them first)",
            ));
        }
        if signed.kind == SealKind::Receipt {
            let at = ReceiptRef::of(&signed.payload);
            let kid = signed.kid.clone();
            return self.receipt(Placed { kid, at, check: Check::Queued(Box::new(signed)) });
        }
        let label = format!("{:?}", signed.kind).to_lowercase();
        if self.ring.get(&signed.kid).is_none() {
            return Err(broke(None, BreakKind::UnknownKey, format!("a {label} signed by `{}`", signed.kid)));
        }
        signed
            .verify_in(&self.ring)
            .map_err(|error| broke(None, BreakKind::BadSignature, format!("a {label}: {error}")))?;
        let malformed = |error: SealError| broke(None, BreakKind::Malformed, error.to_string());
        match signed.kind {
            SealKind::Checkpoint => {
                let checkpoint: Checkpoint = signed.payload().map_err(malformed)?;
                self.checkpoints.insert(checkpoint.head_seq, checkpoint);
            }
            SealKind::Prune => {
                let prune: PruneSeal = signed.payload().map_err(malformed)?;
                for range in prune.ranges {
                    let prev = decode(&range.prev)
                        .ok_or_else(|| broke(None, BreakKind::Malformed, "a pruned range's `prev` is not a hash"))?;
                    self.ranges.insert(prev, range);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn event(&mut self, line: EventLine) -> Result<(), Break> {
        let linked = Linked::of_line(&line)?;
        self.linked(linked)
    }

    /// Reads an event whose own link was checked already.
    pub(super) fn linked(&mut self, event: Linked) -> Result<(), Break> {
        if let Some(pending) = self.pending.take() {
            self.check(&pending, Some(&event))?;
        }
        self.pending = Some(event);
        Ok(())
    }

    /// Checks every line read; the report, or the first break.
    pub fn finish(mut self) -> Result<Report, Break> {
        if let Some(pending) = self.pending.take() {
            self.check(&pending, None)?;
        }
        self.check_deferred()?;
        if let Some((seq, checkpoint)) = self.checkpoints.iter().next() {
            let at = self.last_seq.map_or("no events".to_owned(), |last| format!("the log ends at event {last}"));
            return Err(broke(
                Some(*seq),
                BreakKind::Missing,
                format!("the checkpoint signed at {} names event {seq}, but {at}", checkpoint.at),
            ));
        }
        if let Some((seq, receipts)) = self.receipts.iter().next() {
            let of = receipts[0].label();
            return Err(broke(
                Some(*seq),
                BreakKind::Missing,
                format!("the receipt of {of} names event {seq}, which is not in the log"),
            ));
        }
        let sealed = self.sealed_at.unwrap_or(0).min(self.count);
        self.report.unsealed += self.count - sealed;
        self.report.head = encode(&self.running);
        self.report.starts_after = self.header.map(|header| header.after_checkpoint);
        Ok(self.report)
    }

    /// Checks one event, knowing the next one's link (for telling a reorder from an edit).
    fn check(&mut self, event: &Linked, next: Option<&Linked>) -> Result<(), Break> {
        let seq = event.seq;
        let at = Some(seq);
        if let Some(last) = self.last_seq.max(self.unlinked_last)
            && seq <= last
        {
            return Err(broke(at, BreakKind::Reordered, format!("comes after event {last}")));
        }
        if event.unlinked {
            // Not chained yet: only the log's tail may be.
            self.unlinked_first.get_or_insert(seq);
            self.unlinked_last = Some(seq);
            self.report.events += 1;
            self.report.unsealed += 1;
            return Ok(());
        }
        if let Some(unlinked) = self.unlinked_first {
            return Err(broke(
                Some(unlinked),
                BreakKind::Inserted,
                format!("it is not part of the chain, yet event {seq} after it is"),
            ));
        }
        if event.inner_seq.is_some_and(|inner| inner != seq) {
            return Err(broke(at, BreakKind::Edited, "its event names another `seq` than its link"));
        }
        let prev = event.prev.ok_or_else(|| broke(at, BreakKind::Malformed, "`prev` is not a hash"))?;
        if !event.intact {
            let moved = next.is_some_and(|next| next.digest == Some(event.content));
            return Err(if moved {
                broke(
                    at,
                    BreakKind::Reordered,
                    format!("its content is the event chained after it ({})", next.map_or(0, |n| n.seq)),
                )
            } else {
                broke(at, BreakKind::Edited, "its content does not match the hash it was chained with")
            });
        }
        let expected = self.running;
        if let Err(found) = self.follow(seq, prev) {
            // The event that belongs here comes next: the two traded places.
            if found.kind == BreakKind::Missing && next.is_some_and(|next| next.prev == Some(expected)) {
                let next = next.map_or(0, |next| next.seq);
                return Err(broke(
                    at,
                    BreakKind::Reordered,
                    format!("it was chained after event {next}, which comes after it"),
                ));
            }
            return Err(found);
        }
        self.check_checkpoints_before(seq)?;
        self.before_last = Some(self.running);
        self.running = event.hash;
        self.count += 1;
        self.report.events += 1;
        self.last_seq = Some(seq);
        self.check_checkpoint_at(seq)?;
        self.check_receipts(event)
    }

    /// Moves the running hash to `prev`: across signed prunes, or from a
    /// partial export's checkpoint; a break when `prev` cannot be reached.
    fn follow(&mut self, seq: i64, prev: Hash) -> Result<(), Break> {
        if self.last_seq.is_none()
            && let Some(header) = &self.header
        {
            let checkpoint = self.checkpoints.get(&header.after_checkpoint).ok_or_else(|| {
                broke(Some(seq), BreakKind::Missing, "the export starts after a checkpoint it does not hold")
            })?;
            let after = header.after_checkpoint;
            self.running = decode(&checkpoint.head_hash)
                .ok_or_else(|| broke(Some(seq), BreakKind::Malformed, "a checkpoint's head is not a hash"))?;
            self.count = checkpoint.count;
            self.sealed_at = Some(checkpoint.count);
            self.last_seq = Some(after);
            // What the export left out: the checkpoints up to its start.
            self.checkpoints = self.checkpoints.split_off(&(after + 1));
            self.report.checkpoints += 1;
        }
        while prev != self.running {
            let Some(range) = self.ranges.remove(&self.running) else {
                let kind = if self.before_last == Some(prev) { BreakKind::Inserted } else { BreakKind::Missing };
                let detail = match (kind, self.last_seq) {
                    (BreakKind::Inserted, Some(last)) => {
                        format!("it links to the event before {last}: event {last} is not part of the chain")
                    }
                    (_, Some(last)) => format!("events between {last} and it are gone, and no signed prune says so"),
                    _ => "events before it are gone, and no signed prune says so".to_owned(),
                };
                return Err(broke(Some(seq), kind, detail));
            };
            let head = decode(&range.head)
                .ok_or_else(|| broke(Some(seq), BreakKind::Malformed, "a pruned range's head is not a hash"))?;
            // Checkpoints inside a pruned range cannot be checked; the one at its end can.
            let inside: Vec<i64> = self.checkpoints.range(..range.to_seq).map(|(seq, _)| *seq).collect();
            for seq in inside {
                self.checkpoints.remove(&seq);
            }
            self.receipts.retain(|seq, _| *seq > range.to_seq);
            self.running = head;
            self.count += range.count;
            self.report.pruned += range.count;
            self.last_seq = Some(range.to_seq);
            self.check_checkpoint_at(range.to_seq)?;
        }
        Ok(())
    }

    /// A checkpoint naming an event before `seq` that was never seen: it is missing.
    fn check_checkpoints_before(&mut self, seq: i64) -> Result<(), Break> {
        match self.checkpoints.first_key_value().filter(|(head, _)| **head < seq) {
            Some((head, _)) => Err(broke(
                Some(*head),
                BreakKind::Missing,
                format!("a checkpoint names event {head}, which is not in the log (the next is {seq})"),
            )),
            None => Ok(()),
        }
    }

    fn check_checkpoint_at(&mut self, seq: i64) -> Result<(), Break> {
        let Some(checkpoint) = self.checkpoints.remove(&seq) else {
            return Ok(());
        };
        if decode(&checkpoint.head_hash) != Some(self.running) {
            return Err(broke(
                Some(seq),
                BreakKind::Edited,
                format!(
                    "the checkpoint signed at {} saw another chain up to here (an event before it was changed, added or removed)",
                    checkpoint.at
                ),
            ));
        }
        if checkpoint.count != self.count && self.header.is_none() {
            return Err(broke(
                Some(seq),
                BreakKind::Missing,
                format!("the checkpoint counts {} events up to here, the log {}", checkpoint.count, self.count),
            ));
        }
        self.report.checkpoints += 1;
        self.sealed_at = Some(self.count);
        Ok(())
    }

    fn check_receipts(&mut self, event: &Linked) -> Result<(), Break> {
        let Some(receipts) = self.receipts.remove(&event.seq) else {
            return Ok(());
        };
        let (approval, kind, call) = (event.approval.as_str(), event.kind.as_str(), event.call.as_str());
        for receipt in receipts {
            let other_call = receipt.approval.is_empty() && receipt.call.as_deref() != Some(call);
            if receipt.hash != Some(event.hash) || receipt.approval != approval || receipt.kind != kind || other_call {
                // A receipt whose signature fails is that, before anything else.
                self.check_deferred()?;
                let this = if approval.is_empty() { format!("call {call}") } else { format!("approval {approval}") };
                return Err(broke(
                    Some(event.seq),
                    BreakKind::Edited,
                    format!("the receipt of {} was not signed for this event (of {this})", receipt.label()),
                ));
            }
            self.report.receipts += 1;
        }
        Ok(())
    }

    /// Places a receipt for the walk: the event it names, and its signature's
    /// check (done already, or queued for the workers).
    pub(super) fn receipt(&mut self, receipt: Placed) -> Result<(), Break> {
        if self.pending.is_some() || self.last_seq.is_some() {
            return Err(broke(
                None,
                BreakKind::Malformed,
                "a signed record after the events (an export lists them first)",
            ));
        }
        if self.ring.get(&receipt.kid).is_none() {
            return Err(broke(None, BreakKind::UnknownKey, format!("a receipt signed by `{}`", receipt.kid)));
        }
        let (seq, placed) = receipt
            .at
            .ok_or_else(|| broke(None, BreakKind::Malformed, "a receipt without its approval (or call) and event"))?;
        match receipt.check {
            Check::Queued(signed) => self.deferred.push(*signed, &self.ring),
            Check::Done(Err(why)) if self.bad_receipt.is_none() => self.bad_receipt = Some((placed.label(), why)),
            Check::Done(_) => {}
        }
        self.receipts.entry(seq).or_default().push(placed);
        Ok(())
    }

    fn check_deferred(&mut self) -> Result<(), Break> {
        if let Some((of, why)) = self.bad_receipt.take() {
            return Err(broke(None, BreakKind::BadSignature, format!("the receipt of {of}: {why}")));
        }
        match std::mem::take(&mut self.deferred).finish(&self.ring) {
            Some((signed, why)) => {
                let of = ReceiptRef::of(&signed.payload).map_or_else(String::new, |(_, placed)| placed.label());
                Err(broke(None, BreakKind::BadSignature, format!("the receipt of {of}: {why}")))
            }
            None => Ok(()),
        }
    }
}

/// An event as the walk reads it: its place, and its own link checked
/// against its content already (the part that needs no other line).
#[derive(Debug)]
pub(super) struct Linked {
    pub(super) seq: i64,
    /// Its link is empty: not chained yet.
    pub(super) unlinked: bool,
    /// The `seq` inside the event, when it is an integer.
    pub(super) inner_seq: Option<i64>,
    /// Its link's `prev` and `digest` (`None`: not a hash).
    pub(super) prev: Option<Hash>,
    pub(super) digest: Option<Hash>,
    /// The digest of its content.
    pub(super) content: Hash,
    /// `SHA-256(prev ‖ content)`: its hash, when intact.
    pub(super) hash: Hash,
    /// Whether its link's digest is `content` and its hash is `hash`.
    pub(super) intact: bool,
    /// Its approval and kind (empty if it names none), for the receipts naming it.
    pub(super) approval: String,
    pub(super) kind: String,
    /// Its call, when it names no approval (a call receipt is bound to it); empty otherwise.
    pub(super) call: String,
}

impl Linked {
    /// An event's link (its four fields as exported) checked against its content's digest.
    pub(super) fn new(link: [&str; 3], seq: i64, content: Hash, event: &impl Fields) -> Self {
        let [prev, digest, hash] = link;
        let (prev_hash, digest_hash) = (decode(prev), decode(digest));
        let own = prev_hash.map(|prev| chain::link(&prev, &content));
        let text = |key: &str| event.member(key).and_then(Fields::text).unwrap_or_default().to_owned();
        let approval = text("approvalId");
        let call = if approval.is_empty() { text("toolCallId") } else { String::new() };
        Self {
            seq,
            unlinked: hash.is_empty(),
            inner_seq: event.member("seq").and_then(Fields::integer),
            prev: prev_hash,
            digest: digest_hash,
            content,
            hash: own.unwrap_or_default(),
            intact: digest_hash == Some(content) && own.is_some() && decode(hash) == own,
            approval,
            kind: text("kind"),
            call,
        }
    }

    /// An event line read as a `Value`.
    pub(super) fn of_line(line: &EventLine) -> Result<Self, Break> {
        let content = value_digest(&line.event)
            .map_err(|error| broke(Some(line.link.seq), BreakKind::Malformed, error.to_string()))?;
        let link = &line.link;
        Ok(Self::new([&link.prev, &link.digest, &link.hash], link.seq, content, &line.event))
    }
}

/// A receipt as the walk reads it.
#[derive(Debug)]
pub(super) struct Placed {
    /// The key that signed it.
    pub(super) kid: String,
    /// The event it names, and what must match it (`None`: it names none).
    pub(super) at: Option<(i64, ReceiptRef)>,
    /// Its signature's check.
    pub(super) check: Check,
}

/// Where a receipt's signature check stands.
#[derive(Debug)]
pub(super) enum Check {
    /// Not done: the verifier queues it for its workers.
    Queued(Box<Signed>),
    /// Done (`Err`: why it does not hold).
    Done(Result<(), String>),
}

/// What the walk checks of a receipt: the event it names (and the approval,
/// or for a call receipt, which has none, the call).
#[derive(Debug)]
pub(super) struct ReceiptRef {
    approval: String,
    call: Option<String>,
    kind: String,
    /// The event's hash as the receipt names it (`None`: not a hash).
    hash: Option<Hash>,
}

impl ReceiptRef {
    /// The event's `seq` and what must match it, from a receipt's payload.
    pub(super) fn of<F: Fields>(payload: &F) -> Option<(i64, Self)> {
        let text = |value: &F| value.text().map(str::to_owned);
        let event = payload.member("event")?;
        // A call receipt (no approval) is bound to its call too; an approval's, to its approval.
        let (approval, call) = match payload.member("approvalId") {
            Some(approval) => (text(approval)?, None),
            None => (String::new(), Some(text(payload.member("toolCallId")?)?)),
        };
        let placed =
            Self { approval, call, kind: text(event.member("kind")?)?, hash: decode(event.member("hash")?.text()?) };
        Some((event.member("seq")?.integer()?, placed))
    }

    /// Whose receipt it is, in words.
    fn label(&self) -> String {
        match &self.call {
            Some(call) if self.approval.is_empty() => format!("call {call}"),
            _ => format!("approval {}", self.approval),
        }
    }
}

/// Checks one receipt on its own: its signature under the key set; the receipt.
pub fn verify_receipt(signed: &Signed, keys: &Jwks) -> Result<Receipt, Break> {
    if signed.kind != SealKind::Receipt {
        return Err(broke(None, BreakKind::Malformed, "not a receipt"));
    }
    signed.verify(keys).map_err(|error| match error {
        SealError::UnknownKey(kid) => broke(None, BreakKind::UnknownKey, format!("the receipt is signed by `{kid}`")),
        other => broke(None, BreakKind::BadSignature, other.to_string()),
    })?;
    signed.payload().map_err(|error| broke(None, BreakKind::Malformed, error.to_string()))
}
