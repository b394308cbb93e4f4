//! A UI message stream read from server-sent events.
//!
//! Each event's data is one JSON chunk; `[DONE]` ends the stream. A body
//! that ends before `[DONE]` or a `finish` chunk, or breaks off, ends with
//! [`ClientError::Disconnected`]. Chunk types this crate does not know
//! (`message-metadata`, `source-url`, other `data-*` parts, ...) are skipped;
//! a known type with malformed fields is [`ClientError::MalformedChunk`].
//! An `abort` chunk ends the stream.

use eventsource_stream::{EventStreamError, Eventsource};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use serde_json::Value;
use toolgate_ui::UiChunk;

use crate::error::ClientError;
use crate::transport::ChunkStream;

/// The `type`s [`UiChunk`] reads.
const KNOWN_TYPES: &[&str] = &[
    "start",
    "finish",
    "start-step",
    "finish-step",
    "error",
    "data-toolgate-warning",
    "text-start",
    "text-delta",
    "text-end",
    "reasoning-start",
    "reasoning-delta",
    "reasoning-end",
    "tool-input-start",
    "tool-input-delta",
    "tool-input-available",
    "tool-input-error",
    "tool-approval-request",
    "tool-output-available",
    "tool-output-error",
    "tool-output-denied",
];

/// What one event's data says.
#[derive(Debug, PartialEq)]
pub(crate) enum Decoded {
    /// A chunk to apply.
    Chunk(UiChunk),
    /// A chunk to skip.
    Skip,
    /// The stream is over.
    End,
}

/// Reads one event's data.
pub(crate) fn decode_data(data: &str) -> Result<Decoded, ClientError> {
    if data.trim() == "[DONE]" {
        return Ok(Decoded::End);
    }
    // Nearly every chunk is one this client reads: decode it directly, and
    // look at the type only when that fails.
    if let Ok(chunk) = serde_json::from_str::<UiChunk>(data) {
        return Ok(Decoded::Chunk(chunk));
    }
    let value: Value = serde_json::from_str(data)
        .map_err(|error| ClientError::MalformedChunk(format!("not JSON ({error}): {}", preview(data))))?;
    let kind = value.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
    if kind == "abort" {
        return Ok(Decoded::End);
    }
    if !KNOWN_TYPES.contains(&kind.as_str()) {
        tracing::debug!(kind, "skipping a chunk type this client does not read");
        return Ok(Decoded::Skip);
    }
    serde_json::from_value(value)
        .map(Decoded::Chunk)
        .map_err(|error| ClientError::MalformedChunk(format!("`{kind}` chunk: {error}")))
}

fn preview(data: &str) -> String {
    let cut: String = data.chars().take(80).collect();
    if cut.len() < data.len() { format!("{cut}…") } else { cut }
}

/// The data of each server-sent event of a body. A body that breaks off
/// ends with [`ClientError::Disconnected`]; bytes that are not UTF-8 or not
/// SSE end it with [`ClientError::MalformedChunk`].
pub(crate) fn data_stream<B, E>(body: B) -> BoxStream<'static, Result<String, ClientError>>
where
    B: Stream<Item = Result<bytes::Bytes, E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    body.eventsource()
        .map(|event| match event {
            Ok(event) => Ok(event.data),
            Err(EventStreamError::Transport(error)) => {
                tracing::debug!(%error, "the response body broke off");
                Err(ClientError::Disconnected)
            }
            Err(EventStreamError::Utf8(error)) => {
                Err(ClientError::MalformedChunk(format!("the event stream is not UTF-8: {error}")))
            }
            Err(EventStreamError::Parser(error)) => {
                Err(ClientError::MalformedChunk(format!("the event stream is malformed: {error}")))
            }
        })
        // Nothing after the first error.
        .scan(false, |failed, item| {
            let item = (!*failed).then_some(item);
            *failed = item.as_ref().is_some_and(Result::is_err);
            std::future::ready(item)
        })
        .boxed()
}

/// The chunks of a UI message stream body.
pub(crate) fn chunk_stream<B, E>(body: B) -> ChunkStream
where
    B: Stream<Item = Result<bytes::Bytes, E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    Box::pin(async_stream::stream! {
        let mut events = data_stream(body);
        let mut finished = false;
        while let Some(data) = events.next().await {
            let data = match data {
                Ok(data) => data,
                Err(error) => {
                    yield Err(error);
                    return;
                }
            };
            match decode_data(&data) {
                Ok(Decoded::Chunk(chunk)) => {
                    finished |= matches!(chunk, UiChunk::Finish { .. });
                    yield Ok(chunk);
                }
                Ok(Decoded::Skip) => {}
                Ok(Decoded::End) => return,
                Err(error) => {
                    yield Err(error);
                    return;
                }
            }
        }
        if !finished {
            yield Err(ClientError::Disconnected);
        }
    })
}
