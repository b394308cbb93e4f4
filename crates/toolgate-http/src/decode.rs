//! Turning a provider's event stream into model stream parts.

use futures::StreamExt;
use toolgate_model::ModelStream;
use toolgate_protocol::ModelStreamPart;

use crate::{ModelError, SseEvent, sse_events};

/// Parts a decoder produced for one event; an `Err` ends the stream after the parts before it.
pub type Parts = Vec<Result<ModelStreamPart, ModelError>>;

/// A provider's stream protocol: events in, parts out. Implementations hold
/// the per-response state and do no IO.
pub trait StreamDecoder: Send + 'static {
    /// What a body that ends cleanly before the response is complete says
    /// (the message of its [`ModelError::StreamInterrupted`]).
    const UNFINISHED: &'static str;

    /// Decodes one event into `out`.
    fn decode(&mut self, event: SseEvent, out: &mut Parts);

    /// True once the response is complete; later events are not read.
    fn is_done(&self) -> bool;

    /// Pushes what can still be salvaged (e.g. tool calls whose input is
    /// complete JSON), then `error`; the decoder is done.
    fn salvage(&mut self, error: ModelError, out: &mut Parts);

    /// The body ended cleanly before the closing event: completes the
    /// response and returns true when the model had said it finished (a
    /// finish reason arrived), else returns false. None by default.
    fn finish_on_end(&mut self, out: &mut Parts) -> bool {
        let _ = out;
        false
    }

    /// The body ended: cleanly (`None`) or because it broke off (`Some`). A
    /// decoder not yet done finishes if it can ([`Self::finish_on_end`]), or
    /// else [salvages](Self::salvage) with the error (or
    /// [`Self::UNFINISHED`]). The one ending every provider shares.
    fn end(&mut self, error: Option<ModelError>, out: &mut Parts) {
        if self.is_done() {
            return;
        }
        let error = match error {
            None if self.finish_on_end(out) => return,
            None => ModelError::StreamInterrupted { message: Self::UNFINISHED.into() },
            Some(error) => error,
        };
        self.salvage(error, out);
    }
}

/// Streams the parts `decoder` makes of the response's server-sent events.
/// The stream ends after the first `Err` or once the decoder is done.
pub fn decode_sse<D: StreamDecoder>(response: reqwest::Response, mut decoder: D) -> ModelStream {
    let mut events = sse_events(response);
    Box::pin(async_stream::stream! {
        let mut out = Parts::new();
        loop {
            let ended = match events.next().await {
                Some(Ok(event)) => {
                    decoder.decode(event, &mut out);
                    false
                }
                Some(Err(error)) => {
                    decoder.end(Some(error), &mut out);
                    true
                }
                None => {
                    decoder.end(None, &mut out);
                    true
                }
            };
            for item in out.drain(..) {
                let failed = item.is_err();
                yield item;
                if failed {
                    return;
                }
            }
            if ended || decoder.is_done() {
                return;
            }
        }
    })
}
