//! Server-sent events over a `reqwest` response body.

use std::pin::Pin;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use toolgate_model::ModelError;

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name (`message` when absent).
    pub event: String,
    /// The `data:` payload (lines joined by `\n`).
    pub data: String,
}

/// A stream of events; its reader stops at the first `Err`.
pub(crate) type SseStream = Pin<Box<dyn Stream<Item = Result<SseEvent, ModelError>> + Send>>;

/// Decodes a response body as server-sent events.
///
/// A body that breaks off (connection reset, read timeout, truncated chunked
/// encoding) yields [`ModelError::StreamInterrupted`] and ends the stream;
/// bytes that are not UTF-8 or not SSE yield [`ModelError::InvalidResponse`].
/// A clean end of the body simply ends the stream: whether that is complete
/// is the provider's protocol to judge. The stream itself may go on after an
/// `Err`; [`crate::decode_sse`] stops reading there.
pub(crate) fn sse_events(response: reqwest::Response) -> SseStream {
    let events = response.bytes_stream().eventsource().map(|item| match item {
        Ok(event) => Ok(SseEvent { event: event.event, data: event.data }),
        Err(EventStreamError::Transport(error)) => {
            Err(ModelError::StreamInterrupted { message: format!("the response body broke off: {error}") })
        }
        Err(EventStreamError::Utf8(error)) => {
            Err(ModelError::InvalidResponse { message: format!("the event stream is not UTF-8: {error}") })
        }
        Err(EventStreamError::Parser(error)) => {
            Err(ModelError::InvalidResponse { message: format!("the event stream is malformed: {error}") })
        }
    });
    Box::pin(events)
}
