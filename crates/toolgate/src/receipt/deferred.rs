//! Receipt signatures checked beside the chain walk, on worker threads.
//!
//! An export holds about one receipt per decision and one per outcome, and
//! an Ed25519 check costs more than chaining an event; the verifier hands
//! them to [`Deferred`], which checks them on every core but one (at least
//! one thread) while the walk goes on, and reports the first bad one when
//! the verifier finishes. Whether the key is known is checked at once, on the
//! verifier's thread.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::keys::KeyRing;
use super::seal::Signed;

/// Receipts sent to the workers at once.
const BATCH: usize = 256;

/// The receipts waiting to be checked, and the workers checking them.
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    batch: Vec<Signed>,
    sender: Option<SyncSender<Vec<Signed>>>,
    workers: Vec<JoinHandle<Option<(Signed, String)>>>,
}

impl Deferred {
    /// Queues a receipt's signature check.
    pub(crate) fn push(&mut self, signed: Signed, ring: &KeyRing) {
        self.batch.push(signed);
        if self.batch.len() >= BATCH {
            self.send(ring);
        }
    }

    fn send(&mut self, ring: &KeyRing) {
        let batch = std::mem::take(&mut self.batch);
        if batch.is_empty() {
            return;
        }
        let sender = self.sender.get_or_insert_with(|| {
            let (sender, receiver) = sync_channel::<Vec<Signed>>(64);
            let receiver = Arc::new(Mutex::new(receiver));
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1));
            for _ in 0..threads {
                let (receiver, ring) = (Arc::clone(&receiver), ring.clone());
                self.workers.push(std::thread::spawn(move || check(&receiver, &ring)));
            }
            sender
        });
        if let Err(unsent) = sender.send(batch) {
            // The workers are gone (one panicked): check here.
            self.batch = unsent.0;
            self.sender = None;
        }
    }

    /// Checks what is left; the first receipt whose signature does not hold, and why.
    pub(crate) fn finish(mut self, ring: &KeyRing) -> Option<(Signed, String)> {
        let mut found = None;
        if self.sender.is_some() {
            self.send(ring);
        }
        for signed in std::mem::take(&mut self.batch) {
            if let Err(error) = signed.verify_in(ring) {
                found.get_or_insert((signed, error.to_string()));
            }
        }
        self.sender = None;
        for worker in self.workers {
            let failed = worker.join().unwrap_or_else(|_| None);
            if found.is_none() {
                found = failed;
            }
        }
        found
    }
}

/// A worker: checks batches until the sender is dropped; the first failure.
fn check(receiver: &Mutex<Receiver<Vec<Signed>>>, ring: &KeyRing) -> Option<(Signed, String)> {
    let mut found = None;
    loop {
        let batch = match receiver.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_) => return found,
        };
        let Ok(batch) = batch else {
            return found;
        };
        for signed in batch {
            if found.is_none()
                && let Err(error) = signed.verify_in(ring)
            {
                found = Some((signed, error.to_string()));
            }
        }
    }
}
