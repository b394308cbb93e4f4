//! The verifier on every core: lines are prepared ([`super::prepare`]:
//! parsed, digested, signatures checked) on worker threads and handed back
//! in order to the walk, which stays sequential and only compares.
//!
//! [`Verifier::read`] is a pipeline: one thread reads the export in blocks
//! of a few MiB cut at line ends, a worker per core prepares whole blocks,
//! and the calling thread walks each block as soon as it and those before it
//! are ready, so reading and walking overlap the parallel work. The blocks
//! in flight are bounded (a few per worker), and so is the memory.
//! [`Verifier::texts`] and [`Verifier::lines`] prepare a slice of lines on
//! every core and then walk it.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use super::keys::KeyRing;
use super::prepare::{Prepared, Preparer};
use super::verify::{Break, BreakKind, LogLine, Verifier};

/// Bytes read per block (cut at the last line end).
const BLOCK: usize = 4 << 20;
/// Fewer lines than this per thread are not worth a thread.
const MIN_PER_THREAD: usize = 256;

impl Verifier {
    /// Reads lines of text in order, as [`Self::text`] one at a time would,
    /// but with what each costs alone (parsing, an event's digest, a
    /// receipt's signature) done on every core first; the chain is walked in
    /// order after. Give it thousands of lines at a time.
    pub fn texts(&mut self, lines: &[String]) -> Result<(), Break> {
        let parts = lines.chunks(lines.len().div_ceil(threads(lines.len())).max(1)).collect();
        let prepared = in_parts(parts, |part: &[String]| {
            let mut preparer = Preparer::new(&self.ring);
            part.iter().for_each(|text| preparer.text(text));
            preparer.finish()
        });
        self.walk(prepared)
    }

    /// Reads lines read already, in order, as [`Self::line`] one at a time
    /// would, with each line's own checks done on every core first.
    pub fn lines(&mut self, lines: Vec<LogLine>) -> Result<(), Break> {
        let per_thread = lines.len().div_ceil(threads(lines.len())).max(1);
        let mut parts = Vec::new();
        let mut rest = lines;
        while rest.len() > per_thread {
            let tail = rest.split_off(per_thread);
            parts.push(std::mem::replace(&mut rest, tail));
        }
        parts.push(rest);
        let prepared = in_parts(parts, |part: Vec<LogLine>| {
            let mut preparer = Preparer::new(&self.ring);
            part.into_iter().for_each(|line| preparer.line(line));
            preparer.finish()
        });
        self.walk(prepared)
    }

    /// Reads an export from `reader` to its end, as [`Self::text`] line by
    /// line would: blocks of lines are prepared on every core while the
    /// walk goes on in order (see the module docs). The outer error: the
    /// export could not be read; the inner one: the first break.
    pub fn read(&mut self, reader: impl Read + Send) -> std::io::Result<Result<(), Break>> {
        let workers = threads(usize::MAX);
        let stop = AtomicBool::new(false);
        let ring = &self.ring.clone();
        std::thread::scope(|scope| {
            let (blocks, for_workers) = sync_channel::<(usize, Vec<u8>)>(workers);
            let for_workers = Arc::new(Mutex::new(for_workers));
            let (done, prepared) = sync_channel::<(usize, Vec<Prepared>)>(workers);
            let stop = &stop;
            let reading = scope.spawn(move || read_blocks(reader, &blocks, stop));
            let working: Vec<_> = (0..workers)
                .map(|_| {
                    let (for_workers, done) = (Arc::clone(&for_workers), done.clone());
                    scope.spawn(move || work(&for_workers, &done, ring, stop))
                })
                .collect();
            drop((for_workers, done));
            let (walked, found) = self.walk_in_order(&prepared);
            stop.store(true, Ordering::Relaxed);
            drop(prepared);
            let failed = working.into_iter().map(|worker| worker.join()).any(|joined| joined.is_err());
            let read = reading.join().unwrap_or_else(|_| Err(std::io::Error::other("the reading thread failed")));
            Ok(match found {
                Some(broken) => Err(broken),
                None if failed || walked != read? => Err(thread_failed()),
                None => Ok(()),
            })
        })
    }

    /// Walks blocks as they arrive, each once it and those before it are
    /// ready; the blocks walked, and the first break.
    fn walk_in_order(&mut self, prepared: &Receiver<(usize, Vec<Prepared>)>) -> (usize, Option<Break>) {
        let mut waiting = BTreeMap::new();
        let mut next = 0;
        for (index, block) in prepared {
            waiting.insert(index, block);
            while let Some(block) = waiting.remove(&next) {
                next += 1;
                if let Err(broken) = self.walk(block) {
                    return (next, Some(broken));
                }
            }
        }
        (next, None)
    }

    /// Reads prepared lines in order.
    fn walk(&mut self, prepared: Vec<Prepared>) -> Result<(), Break> {
        for prepared in prepared {
            match prepared {
                Prepared::Event(event) => self.linked(event)?,
                Prepared::Receipt(receipt) => self.receipt(receipt)?,
                Prepared::Other(line) => self.line(line)?,
                Prepared::Bad(broken) => return Err(broken),
            }
        }
        Ok(())
    }
}

/// Threads worth starting for `lines` lines: every core, at least `MIN_PER_THREAD` lines each.
fn threads(lines: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    cores.min(lines / MIN_PER_THREAD).max(1)
}

/// `prepare` run on each part on a thread of its own (on this one if there
/// is one part), the results in order.
fn in_parts<P: Send>(parts: Vec<P>, prepare: impl Fn(P) -> Vec<Prepared> + Sync) -> Vec<Prepared> {
    if parts.len() <= 1 {
        return parts.into_iter().flat_map(&prepare).collect();
    }
    let prepare = &prepare;
    std::thread::scope(|scope| {
        let parts: Vec<_> = parts.into_iter().map(|part| scope.spawn(move || prepare(part))).collect();
        let mut prepared = Vec::new();
        for part in parts {
            match part.join() {
                Ok(part) => prepared.extend(part),
                Err(_) => {
                    prepared.push(Prepared::Bad(thread_failed()));
                    break;
                }
            }
        }
        prepared
    })
}

fn thread_failed() -> Break {
    Break { seq: None, kind: BreakKind::Malformed, detail: "a verifying thread failed".to_owned() }
}

/// Reads `reader` in blocks cut after a line end and sends them, numbered;
/// the blocks sent. Stops early when told or when nobody takes them.
fn read_blocks(
    mut reader: impl Read,
    blocks: &SyncSender<(usize, Vec<u8>)>,
    stop: &AtomicBool,
) -> std::io::Result<usize> {
    let mut sent = 0;
    let mut carried = Vec::new();
    loop {
        let mut block = std::mem::take(&mut carried);
        block.reserve(BLOCK);
        let full = fill(&mut reader, &mut block, BLOCK)?;
        if full {
            // The part after the last line end goes with the next block (a
            // line longer than a block grows this one until it ends).
            match block.iter().rposition(|byte| *byte == b'\n') {
                Some(end) => carried = block.split_off(end + 1),
                None => {
                    carried = block;
                    continue;
                }
            }
        }
        if block.is_empty() && !full {
            return Ok(sent);
        }
        if stop.load(Ordering::Relaxed) || blocks.send((sent, block)).is_err() {
            return Ok(sent);
        }
        sent += 1;
        if !full {
            return Ok(sent);
        }
    }
}

/// Reads into `block` until it holds `more` bytes more, or the reader ends
/// (`false`: it ended).
fn fill(reader: &mut impl Read, block: &mut Vec<u8>, more: usize) -> std::io::Result<bool> {
    let target = block.len() + more;
    let mut taken = reader.take(more as u64);
    taken.read_to_end(block)?;
    Ok(block.len() == target)
}

/// A worker: prepares blocks until there are none or nobody waits for them.
fn work(
    blocks: &Mutex<Receiver<(usize, Vec<u8>)>>,
    done: &SyncSender<(usize, Vec<Prepared>)>,
    ring: &KeyRing,
    stop: &AtomicBool,
) {
    loop {
        let next = match blocks.lock() {
            Ok(blocks) => blocks.recv(),
            Err(_) => return,
        };
        let Ok((index, block)) = next else { return };
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let mut preparer = Preparer::new(ring);
        for line in block.split(|byte| *byte == b'\n') {
            match std::str::from_utf8(line) {
                Ok(text) => preparer.text(text),
                Err(_) => preparer.bad(Break {
                    seq: None,
                    kind: BreakKind::Malformed,
                    detail: "a line that is not UTF-8 text".to_owned(),
                }),
            }
        }
        if done.send((index, preparer.finish())).is_err() {
            return;
        }
    }
}
