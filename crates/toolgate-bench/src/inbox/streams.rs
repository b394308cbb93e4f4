//! Many open inbox streams: each is opened, its first event read (the
//! approver's pending approvals), then drained in a task of its own that
//! counts the events and bytes that follow, until it is closed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use http_body_util::BodyExt;
use tokio::task::{JoinHandle, JoinSet};

use super::client::{Client, Stream};

/// The longest a stream may take to send its first event (a loaded server
/// answers the streams already open first).
pub const FIRST_EVENT_TIMEOUT: Duration = Duration::from_secs(120);
/// The marker of one event.
const EVENT: &[u8] = b"event: approval\n";

/// What the streams received after their first event.
#[derive(Debug, Default)]
pub struct Received {
    /// `event: approval` events.
    pub events: AtomicU64,
    /// Bytes.
    pub bytes: AtomicU64,
    /// Streams the server ended or broke while held.
    pub ended: AtomicU64,
}

/// Open streams, drained in the background.
#[derive(Debug)]
pub struct OpenStreams {
    tasks: Vec<JoinHandle<()>>,
    /// From each open to its first event, sorted.
    pub first_event: Vec<Duration>,
    /// Bytes of the first events, all together.
    pub first_bytes: u64,
    /// Events in the first reads, all together.
    pub first_events: u64,
    /// Streams that could not be opened, or sent no first event in time.
    pub failed: usize,
    /// Why the first of them failed.
    pub first_failure: Option<String>,
    /// What came after.
    pub received: Arc<Received>,
}

impl OpenStreams {
    /// How many are open.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Closes them all (their connections close with them).
    pub async fn close(self) {
        for task in &self.tasks {
            task.abort();
        }
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Opens `count` streams, stream `i` as `tokens[i % tokens.len()]`,
/// `parallel` at a time, each read up to its first event; those that fail
/// are counted, not retried.
pub async fn open(addr: SocketAddr, tokens: &[String], count: usize, parallel: usize) -> anyhow::Result<OpenStreams> {
    let received = Arc::new(Received::default());
    let mut pending: JoinSet<anyhow::Result<(Stream, Duration, Vec<u8>)>> = JoinSet::new();
    let mut open = OpenStreams {
        tasks: Vec::with_capacity(count),
        first_event: Vec::with_capacity(count),
        first_bytes: 0,
        first_events: 0,
        failed: 0,
        first_failure: None,
        received: Arc::clone(&received),
    };
    let mut started = 0;
    while open.len() + open.failed < count {
        while started < count && pending.len() < parallel.max(1) {
            let client = Client::new(addr, &tokens[started % tokens.len()])?;
            pending.spawn(async move {
                let begun = Instant::now();
                let mut stream = client.open_stream().await?;
                let first = tokio::time::timeout(FIRST_EVENT_TIMEOUT, first_event(&mut stream))
                    .await
                    .context("no first event within the timeout")??;
                Ok((stream, begun.elapsed(), first))
            });
            started += 1;
        }
        let joined = pending.join_next().await.context("no stream is being opened")?;
        let (stream, elapsed, first) = match joined.context("a stream task failed")? {
            Ok(opened) => opened,
            Err(error) => {
                open.failed += 1;
                open.first_failure.get_or_insert_with(|| format!("{error:#}"));
                continue;
            }
        };
        open.first_event.push(elapsed);
        open.first_bytes += first.len() as u64;
        open.first_events += count_events(&first) as u64;
        open.tasks.push(tokio::spawn(drain(stream, Arc::clone(&received))));
        if open.len().is_multiple_of(100) {
            eprintln!("inbox_bench: {} streams open", open.len());
        }
    }
    open.first_event.sort_unstable();
    Ok(open)
}

/// Reads the stream up to the end of its first event (or keep-alive comment).
async fn first_event(stream: &mut Stream) -> anyhow::Result<Vec<u8>> {
    let mut read = Vec::new();
    loop {
        let Some(frame) = stream.body.frame().await else { bail!("the stream ended before its first event") };
        if let Ok(data) = frame?.into_data() {
            read.extend_from_slice(&data);
            if read.ends_with(b"\n\n") {
                return Ok(read);
            }
        }
    }
}

/// Counts what the stream sends until it ends or the task is aborted.
async fn drain(mut stream: Stream, received: Arc<Received>) {
    // The tail of the previous chunk, so an event marker split between two chunks counts once.
    let mut carry: Vec<u8> = Vec::new();
    while let Some(frame) = stream.body.frame().await {
        let Ok(frame) = frame else { break };
        let Ok(data) = frame.into_data() else { continue };
        received.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
        carry.extend_from_slice(&data);
        received.events.fetch_add(count_events(&carry) as u64, Ordering::Relaxed);
        let keep = carry.len().min(EVENT.len() - 1);
        carry.drain(..carry.len() - keep);
    }
    received.ended.fetch_add(1, Ordering::Relaxed);
}

/// The events in `bytes`.
fn count_events(bytes: &[u8]) -> usize {
    bytes.windows(EVENT.len()).filter(|window| *window == EVENT).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_counted_by_their_marker() {
        let text = b"event: approval\ndata: {}\n\nevent: approval\ndata: {}\n\n: keep-alive\n\n";
        assert_eq!(count_events(text), 2);
        assert_eq!(count_events(b": keep-alive\n\n"), 0);
    }
}
