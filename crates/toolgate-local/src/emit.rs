//! Turns the output splitter's events into stream parts, and says when generation ends.

use serde_json::Value;
use tokio::sync::mpsc as async_mpsc;
use toolgate_model::ModelError;
use toolgate_protocol::{ModelStreamPart, ModelToolCall};

use crate::decide;
use crate::format::{self, Event, FunctionTool};

/// The parts channel of one generation.
pub(crate) type Parts = async_mpsc::UnboundedSender<Result<ModelStreamPart, ModelError>>;

/// How a generation ended.
pub(crate) enum End {
    Stop,
    Length,
    ToolCall,
    /// The consumer went away.
    Dropped,
    /// The call repeated an earlier one; nothing was sent (see [`crate::decide`]).
    Repeat,
}

/// Turns splitter events into stream parts.
pub(crate) struct Emitter<'a> {
    parts: &'a Parts,
    text_open: bool,
    tools: &'a [FunctionTool],
    /// Earlier calls a call may not repeat, when guarded.
    repeats_of: Option<&'a [(String, Value)]>,
}

/// The id of the (single) text block of a response.
const TEXT_ID: &str = "text-0";

impl<'a> Emitter<'a> {
    /// An emitter sending to `parts`; with `repeats_of`, a call repeating one of those ends the generation
    /// with [`End::Repeat`] and is not sent.
    pub(crate) fn new(parts: &'a Parts, tools: &'a [FunctionTool], repeats_of: Option<&'a [(String, Value)]>) -> Self {
        Self { parts, text_open: false, tools, repeats_of }
    }

    fn send(&self, part: ModelStreamPart) {
        let _ = self.parts.send(Ok(part));
    }

    /// Ends the text block, if one is open.
    pub(crate) fn close_text(&mut self) {
        if std::mem::take(&mut self.text_open) {
            self.send(ModelStreamPart::TextEnd { id: TEXT_ID.to_owned() });
        }
    }

    /// Sends an event's parts; `Some` when generation should end.
    pub(crate) fn event(&mut self, event: Event) -> Result<Option<End>, ModelError> {
        match event {
            Event::Text(delta) => {
                if !self.text_open {
                    self.text_open = true;
                    self.send(ModelStreamPart::TextStart { id: TEXT_ID.to_owned() });
                }
                self.send(ModelStreamPart::TextDelta { id: TEXT_ID.to_owned(), delta });
                Ok(None)
            }
            Event::Stop => Ok(Some(End::Stop)),
            Event::Call(json) => {
                self.close_text();
                let call = format::parse_tool_call(&json, self.tools)
                    .map_err(|error| ModelError::InvalidResponse { message: error.to_string() })?;
                if self.repeats_of.is_some_and(|earlier| decide::is_repeat(&call.name, &call.arguments, earlier)) {
                    return Ok(Some(End::Repeat));
                }
                let id = format!("call_{}", uuid::Uuid::now_v7().simple());
                self.send(ModelStreamPart::ToolInputStart {
                    id: id.clone(),
                    tool_name: call.name.clone(),
                    provider_executed: None,
                });
                self.send(ModelStreamPart::ToolInputDelta { id: id.clone(), delta: call.arguments.clone() });
                self.send(ModelStreamPart::ToolInputEnd { id: id.clone() });
                self.send(ModelStreamPart::ToolCall(ModelToolCall {
                    tool_call_id: id,
                    tool_name: call.name,
                    input: call.arguments,
                    provider_executed: None,
                    provider_metadata: None,
                }));
                Ok(Some(End::ToolCall))
            }
        }
    }
}
