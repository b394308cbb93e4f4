//! The stream `stream_text` returns, and the emitter the engine writes to.
//!
//! The engine runs as a future that writes [`StreamPart`]s into a bounded
//! channel; [`TextStream`] polls that future only when the channel is empty,
//! so nothing runs ahead of the reader and nothing needs a spawned task.
//! Dropping the stream cancels the engine and every tool it is running.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};
use toolgate_protocol::StreamPart;

use super::TextResult;
use crate::EngineError;

const CHANNEL_CAPACITY: usize = 64;

/// Where the engine writes stream parts; silent for `generate_text`.
#[derive(Clone)]
pub(crate) struct Emitter {
    sender: Option<mpsc::Sender<StreamPart>>,
}

impl Emitter {
    pub(crate) fn silent() -> Self {
        Self { sender: None }
    }

    /// An emitter whose parts are read from the returned receiver (a sub-agent's, see `super::agent`).
    pub(crate) fn channel() -> (Self, mpsc::Receiver<StreamPart>) {
        let (sender, parts) = mpsc::channel(CHANNEL_CAPACITY);
        (Self { sender: Some(sender) }, parts)
    }

    pub(crate) async fn emit(&self, part: StreamPart) {
        if let Some(sender) = &self.sender {
            // A send fails only when the reader is gone, and then the engine is being dropped too.
            let _ = sender.send(part).await;
        }
    }
}

type Driver<'a> = BoxFuture<'a, Result<TextResult, EngineError>>;

/// The engine's full stream. Read it to the end, then call [`TextStream::finish`]
/// for the [`TextResult`] (or call `finish` at once to drain it).
pub struct TextStream<'a> {
    driver: Option<Driver<'a>>,
    parts: mpsc::Receiver<StreamPart>,
    outcome: Option<Result<TextResult, EngineError>>,
    _cancel_on_drop: DropGuard,
}

impl<'a> TextStream<'a> {
    pub(crate) fn new(cancellation: CancellationToken, driver: impl FnOnce(Emitter) -> Driver<'a>) -> Self {
        let (sender, parts) = mpsc::channel(CHANNEL_CAPACITY);
        let driver = driver(Emitter { sender: Some(sender) });
        Self { driver: Some(driver), parts, outcome: None, _cancel_on_drop: cancellation.drop_guard() }
    }

    /// Reads the rest of the stream and returns the outcome.
    pub async fn finish(mut self) -> Result<TextResult, EngineError> {
        while self.next().await.is_some() {}
        self.outcome.take().expect("the engine finishes before its stream ends")
    }
}

impl Stream for TextStream<'_> {
    type Item = StreamPart;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StreamPart>> {
        let this = &mut *self;
        loop {
            let Some(driver) = this.driver.as_mut() else {
                // The engine is done: drain what it sent. `Pending` here can mean the
                // runtime's cooperative budget ran out, not that the channel is empty.
                return this.parts.poll_recv(cx);
            };
            if let Poll::Ready(Some(part)) = this.parts.poll_recv(cx) {
                return Poll::Ready(Some(part));
            }
            match driver.as_mut().poll(cx) {
                Poll::Ready(outcome) => {
                    this.outcome = Some(outcome);
                    this.driver = None;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
