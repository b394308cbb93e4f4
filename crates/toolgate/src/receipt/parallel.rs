//! What each line of an export costs on its own, done on every core: a
//! chunk of lines is parsed, each event's digest computed and each receipt's
//! signature checked in parallel, and the results handed back in order for
//! the walk, which stays sequential ([`Verifier::texts`]).
//!
//! Receipt signatures are checked in batches ([`ed25519_dalek::verify_batch`]:
//! one multi-scalar check per batch, about half the cost of checking each);
//! a batch that fails is checked again one by one (`verify_strict`), which
//! names the receipt that does not hold. Whether a receipt's key is known is
//! left to the walk, which reports it in order.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signature, VerifyingKey};

use super::chain::Hash;
use super::keys::KeyRing;
use super::seal::{SealKind, Signed, message};
use super::verify::{Break, BreakKind, EventLine, LogLine, Verifier, event_digest};

/// Receipts checked in one batch equation.
const BATCH: usize = 256;
/// Fewer lines than this per thread are not worth a thread.
const MIN_PER_THREAD: usize = 256;

impl Verifier {
    /// Reads lines of text in order, as [`Self::text`] one at a time would,
    /// but with what each costs alone (parsing, an event's digest, a
    /// receipt's signature) done on every core first; the chain is walked in
    /// order after. Give it thousands of lines at a time.
    pub fn texts(&mut self, lines: &[String]) -> Result<(), Break> {
        for prepared in prepare(lines, &self.ring) {
            match prepared {
                Prepared::Event(line, digest) => self.digested(line, digest?)?,
                Prepared::Receipt(signed, checked) => self.receipt(signed, Some(checked))?,
                Prepared::Other(line) => self.line(line)?,
                Prepared::Bad(broken) => return Err(broken),
            }
        }
        Ok(())
    }
}

/// One line, its costly part done.
#[derive(Debug)]
pub(super) enum Prepared {
    /// An event and its digest (or why it has none).
    Event(EventLine, Result<Hash, Break>),
    /// A receipt and whether its signature holds (`Err`: why not), when its key is known.
    Receipt(Signed, Result<(), String>),
    /// Any other line, to be read as it is.
    Other(LogLine),
    /// A line that is not what an export holds.
    Bad(Break),
}

/// Prepares `lines` on every core (blank lines left out), in their order.
pub(super) fn prepare(lines: &[String], ring: &KeyRing) -> Vec<Prepared> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let threads = cores.min(lines.len() / MIN_PER_THREAD).max(1);
    if threads == 1 {
        return prepare_part(lines, ring);
    }
    let per_thread = lines.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let parts: Vec<_> =
            lines.chunks(per_thread).map(|part| scope.spawn(move || prepare_part(part, ring))).collect();
        let mut prepared = Vec::with_capacity(lines.len());
        for part in parts {
            match part.join() {
                Ok(part) => prepared.extend(part),
                Err(_) => {
                    prepared.push(Prepared::Bad(Break {
                        seq: None,
                        kind: BreakKind::Malformed,
                        detail: "a verifying thread failed".to_owned(),
                    }));
                    break;
                }
            }
        }
        prepared
    })
}

fn prepare_part(lines: &[String], ring: &KeyRing) -> Vec<Prepared> {
    let mut prepared = Vec::with_capacity(lines.len());
    for text in lines.iter().filter(|text| !text.trim().is_empty()) {
        prepared.push(match LogLine::parse(text) {
            Err(why) => Prepared::Bad(Break { seq: None, kind: BreakKind::Malformed, detail: why }),
            Ok(LogLine::Event(mut line)) => {
                let digest = event_digest(&mut line);
                Prepared::Event(line, digest)
            }
            Ok(LogLine::Signed(signed)) if signed.kind == SealKind::Receipt => Prepared::Receipt(signed, Ok(())),
            Ok(other) => Prepared::Other(other),
        });
    }
    check_receipts(&mut prepared, ring);
    prepared
}

/// Checks the signatures of the receipts among `prepared` whose key is known, a batch at a time.
fn check_receipts(prepared: &mut [Prepared], ring: &KeyRing) {
    let mut batch: Vec<(usize, String, Signature, VerifyingKey)> = Vec::with_capacity(BATCH);
    for index in 0..prepared.len() {
        let Prepared::Receipt(signed, checked) = &mut prepared[index] else { continue };
        let Some(key) = ring.get(&signed.kid) else { continue };
        let parts = message(signed.kind, &signed.kid, &signed.payload).ok().zip(signature(&signed.sig));
        match parts {
            Some((message, signature)) => batch.push((index, message, signature, *key)),
            None => {
                *checked = Err(format!(
                    "the signature does not match (edited, or signed by another key than `{}`)",
                    signed.kid
                ))
            }
        }
        if batch.len() == BATCH {
            check_batch(prepared, &mut batch);
        }
    }
    check_batch(prepared, &mut batch);
}

/// One batch equation; when it fails, each receipt of the batch alone.
fn check_batch(prepared: &mut [Prepared], batch: &mut Vec<(usize, String, Signature, VerifyingKey)>) {
    if batch.is_empty() {
        return;
    }
    let messages: Vec<&[u8]> = batch.iter().map(|(_, message, ..)| message.as_bytes()).collect();
    let signatures: Vec<Signature> = batch.iter().map(|(_, _, signature, _)| *signature).collect();
    let keys: Vec<VerifyingKey> = batch.iter().map(|(.., key)| *key).collect();
    if ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_err() {
        for (index, _, _, key) in batch.iter() {
            if let Prepared::Receipt(signed, checked) = &mut prepared[*index] {
                *checked = signed.verify_under(key).map_err(|error| error.to_string());
            }
        }
    }
    batch.clear();
}

fn signature(text: &str) -> Option<Signature> {
    let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
    Some(Signature::from_bytes(&<[u8; 64]>::try_from(bytes).ok()?))
}
