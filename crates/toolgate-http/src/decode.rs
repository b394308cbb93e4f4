//! Turning a provider's event stream into model stream parts.

use futures::StreamExt;
use toolgate::ModelStream;
use toolgate::protocol::ModelStreamPart;

use crate::{ModelError, SseEvent, sse_events};

/// Parts a decoder produced for one event; an `Err` ends the stream after the parts before it.
pub type Parts = Vec<Result<ModelStreamPart, ModelError>>;

/// A provider's stream protocol: events in, parts out. Implementations hold
/// the per-response state and do no IO.
pub trait StreamDecoder: Send + 'static {
    /// Decodes one event into `out`.
    fn decode(&mut self, event: SseEvent, out: &mut Parts);

    /// The body ended: cleanly (`None`) or because it broke off (`Some`).
    /// A decoder that has not finished pushes what it can still salvage
    /// (e.g. complete tool calls) and then an error.
    fn end(&mut self, error: Option<ModelError>, out: &mut Parts);

    /// True once the response is complete; later events are not read.
    fn is_done(&self) -> bool;
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
