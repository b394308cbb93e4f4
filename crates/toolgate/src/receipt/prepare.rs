//! What each line of an export costs on its own, before the walk: parsing,
//! an event's digest and its own link, a receipt's signed message and its
//! signature. None of it needs another line, so it runs on every core
//! ([`super::parallel`]); the walk that follows only compares.
//!
//! A line of text is read into a borrowed tree ([`Json`]) whose canonical
//! text is computed in one pass; a line that tree cannot vouch for (a key
//! twice, a number without a canonical form, anything not shaped as an
//! event or a receipt) is read again as a `Value` ([`LogLine::parse`]), so
//! every line is judged exactly as [`super::Verifier::text`] judges it.
//!
//! Receipt signatures are checked in batches ([`ed25519_dalek::verify_batch`],
//! one multi-scalar check per batch, about a third of the cost of checking
//! each alone); a batch that fails is checked again one receipt at a time
//! (`verify_strict`), which names the receipt that does not hold. Whether a
//! receipt's key is known is left to the walk, which reports it in order.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signature, VerifyingKey};
use sha2::{Digest, Sha256};

use super::json::{Fallback, Fields, Json};
use super::keys::KeyRing;
use super::seal::{SealKind, framed, message};
use super::verify::{Break, BreakKind, Check, Linked, LogLine, Placed, ReceiptRef};

/// Receipts checked in one batch equation (the cost per signature falls
/// with the batch's size: about 14 µs at 64, 11.5 at 256, 10.5 at 1,024 on
/// the benchmarks' machine).
const BATCH: usize = 1024;

/// One line, its costly part done.
#[derive(Debug)]
pub(super) enum Prepared {
    /// An event, its own link checked.
    Event(Linked),
    /// A receipt, its signature checked (or queued) when its key is known.
    Receipt(Placed),
    /// Any other line, to be read as it is.
    Other(LogLine),
    /// A line that is not what an export holds.
    Bad(Break),
}

/// A receipt whose signature is still to be checked: its message, signature and key.
type Pending = (usize, String, Signature, VerifyingKey);

/// Prepares lines one after the other, checking receipts a batch at a time.
pub(super) struct Preparer<'r> {
    ring: &'r KeyRing,
    /// The canonical text of the line at hand (kept to reuse its memory).
    scratch: String,
    prepared: Vec<Prepared>,
    batch: Vec<Pending>,
}

impl<'r> Preparer<'r> {
    /// A preparer checking signatures under `ring`.
    pub(super) fn new(ring: &'r KeyRing) -> Self {
        Self { ring, scratch: String::with_capacity(2048), prepared: Vec::new(), batch: Vec::with_capacity(BATCH) }
    }

    /// Prepares one line of text (a blank one is left out).
    pub(super) fn text(&mut self, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        let fast = match Json::parse(text) {
            Ok(json) => self.json(json),
            Err(_) => Err(Fallback),
        };
        if fast.is_err() {
            let prepared = match LogLine::parse(text) {
                Ok(line) => return self.line(line),
                Err(why) => Prepared::Bad(Break { seq: None, kind: BreakKind::Malformed, detail: why }),
            };
            self.prepared.push(prepared);
        }
    }

    /// Prepares a line read already.
    pub(super) fn line(&mut self, line: LogLine) {
        let prepared = match line {
            LogLine::Event(line) => match Linked::of_line(&line) {
                Ok(linked) => Prepared::Event(linked),
                Err(broken) => Prepared::Bad(broken),
            },
            LogLine::Signed(signed) if signed.kind == SealKind::Receipt => {
                let at = ReceiptRef::of(&signed.payload);
                let parts = message(signed.kind, &signed.kid, &signed.payload).ok().zip(signature(&signed.sig));
                return self.receipt(signed.kid, at, parts);
            }
            other => Prepared::Other(other),
        };
        self.prepared.push(prepared);
    }

    /// A line found bad before it could be read.
    pub(super) fn bad(&mut self, broken: Break) {
        self.prepared.push(Prepared::Bad(broken));
    }

    /// The lines prepared, every receipt's signature checked.
    pub(super) fn finish(mut self) -> Vec<Prepared> {
        self.check_batch();
        self.prepared
    }

    /// An event or a receipt read into a tree; `Fallback`: read it as a `Value`.
    fn json(&mut self, mut line: Json<'_>) -> Result<(), Fallback> {
        match line.member("type").and_then(Fields::text) {
            Some("event") => {
                let mut event = line.take("event").ok_or(Fallback)?;
                let (seq, link) = event_link(&line).ok_or(Fallback)?;
                self.scratch.clear();
                event.write_canonical(Some("seq"), &mut self.scratch)?;
                let content: [u8; 32] = Sha256::digest(self.scratch.as_bytes()).into();
                self.prepared.push(Prepared::Event(Linked::new(link, seq, content, &event)));
                Ok(())
            }
            Some("receipt") => {
                let text = |key: &str| line.member(key).and_then(Fields::text).map(str::to_owned).ok_or(Fallback);
                let (kid, sig) = (text("kid")?, text("sig")?);
                let mut payload = line.take("payload").ok_or(Fallback)?;
                let message = framed(SealKind::Receipt, &kid, |out| payload.write_canonical(None, out))?;
                let at = ReceiptRef::of(&payload);
                self.receipt(kid, at, signature(&sig).map(|signature| (message, signature)));
                Ok(())
            }
            _ => Err(Fallback),
        }
    }

    /// Queues a receipt's signature for the batch when its key is known.
    fn receipt(&mut self, kid: String, at: Option<(i64, ReceiptRef)>, parts: Option<(String, Signature)>) {
        let check = match (self.ring.get(&kid), parts) {
            (None, _) => Check::Done(Ok(())),
            (Some(key), Some((message, signature))) => {
                self.batch.push((self.prepared.len(), message, signature, *key));
                Check::Done(Ok(()))
            }
            (Some(_), None) => Check::Done(Err(mismatch(&kid))),
        };
        self.prepared.push(Prepared::Receipt(Placed { kid, at, check }));
        if self.batch.len() == BATCH {
            self.check_batch();
        }
    }

    /// One batch equation; when it fails, each receipt of the batch alone.
    fn check_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let messages: Vec<&[u8]> = self.batch.iter().map(|(_, message, ..)| message.as_bytes()).collect();
        let signatures: Vec<Signature> = self.batch.iter().map(|(_, _, signature, _)| *signature).collect();
        let keys: Vec<VerifyingKey> = self.batch.iter().map(|(.., key)| *key).collect();
        if ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_err() {
            for (index, message, signature, key) in &self.batch {
                if let Prepared::Receipt(placed) = &mut self.prepared[*index]
                    && key.verify_strict(message.as_bytes(), signature).is_err()
                {
                    placed.check = Check::Done(Err(mismatch(&placed.kid)));
                }
            }
        }
        self.batch.clear();
    }
}

/// An event line's `seq` and its link's `prev`, `digest` and `hash`, when all are there and of their type.
fn event_link<'j>(line: &'j Json<'_>) -> Option<(i64, [&'j str; 3])> {
    let text = |key: &str| line.member(key).and_then(Fields::text);
    Some((line.member("seq")?.integer()?, [text("prev")?, text("digest")?, text("hash")?]))
}

/// Why a receipt's signature does not hold (as [`super::SealError::BadSignature`] says it).
fn mismatch(kid: &str) -> String {
    super::SealError::BadSignature(kid.to_owned()).to_string()
}

fn signature(text: &str) -> Option<Signature> {
    let mut bytes = [0u8; 64];
    match URL_SAFE_NO_PAD.decode_slice(text, &mut bytes) {
        Ok(64) => Some(Signature::from_bytes(&bytes)),
        _ => None,
    }
}
