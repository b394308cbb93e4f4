//! One AG-UI run end to end: prepare the history, run the engine, encode.

use futures::{Stream, StreamExt};
use toolgate::{LanguageModel, ModelMessage, TextRequest, stream_text};

use crate::convert::to_model_messages;
use crate::encode::{EncoderOptions, EventEncoder};
use crate::error::{AguiError, InputError};
use crate::events::Event;
use crate::input::RunAgentInput;
use crate::resume::{Resolution, inject, pending_approvals, resolve_entries};

/// A run's history, ready for the engine, and what its resume decided.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedRun {
    /// The conversation as toolgate model messages, with the resume's
    /// approval requests and responses injected.
    pub messages: Vec<ModelMessage>,
    /// The decision for each pending interrupt, in pending order (empty when not resuming).
    pub resolutions: Vec<Resolution>,
}

/// Converts the messages and applies the resume (see [`crate::resume`]).
/// Fails, before anything runs, on bad input and on a resume that does not
/// answer every pending interrupt exactly once.
pub fn prepare_run(input: &RunAgentInput) -> Result<PreparedRun, AguiError> {
    if input.state.as_ref().is_some_and(|state| !state.is_object()) {
        return Err(InputError::StateNotObject.into());
    }
    let mut messages = to_model_messages(&input.messages)?;
    let pending = pending_approvals(input.state.as_ref())?;
    let resolutions = resolve_entries(&pending, input.resume.as_deref().unwrap_or_default())?;
    inject(&mut messages, &resolutions)?;
    Ok(PreparedRun { messages, resolutions })
}

/// Runs one AG-UI run: [`prepare_run`], then `stream_text` on the request
/// `build` makes from the prepared messages (add the toolkit, signer,
/// system prompt, ... there), encoded by an [`EventEncoder`].
///
/// The stream always starts with `RUN_STARTED` and ends with exactly one
/// `RUN_FINISHED` or `RUN_ERROR`; a preparation or engine error is a
/// `RUN_ERROR` with a stable code and nothing runs. Dropping the stream
/// cancels the engine.
pub fn run_events<'a, M, F>(
    model: M,
    input: RunAgentInput,
    options: EncoderOptions,
    build: F,
) -> impl Stream<Item = Event> + Send + 'a
where
    M: LanguageModel + 'a,
    F: FnOnce(Vec<ModelMessage>) -> TextRequest + Send + 'a,
{
    async_stream::stream! {
        let mut encoder = EventEncoder::new(&input, options);
        let prepared = match prepare_run(&input) {
            Ok(prepared) => prepared,
            Err(error) => {
                for event in encoder.agui_error(&error) {
                    yield event;
                }
                return;
            }
        };
        let mut encoder = encoder.resuming(&prepared.resolutions);
        let mut stream = match stream_text(model, build(prepared.messages)).await {
            Ok(stream) => stream,
            Err(error) => {
                for event in encoder.engine_error(&error) {
                    yield event;
                }
                return;
            }
        };
        while let Some(part) = stream.next().await {
            for event in encoder.encode(&part) {
                yield event;
            }
            if encoder.is_done() {
                break;
            }
        }
        if !encoder.is_done() {
            let error = match stream.finish().await {
                Err(error) => encoder.engine_error(&error),
                Ok(_) => encoder.error_event(Event::run_error("the engine stream ended without a finish part", "internal_error")),
            };
            for event in error {
                yield event;
            }
        }
    }
}
