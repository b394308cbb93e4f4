//! The conversation held by a client, without IO: messages, the response
//! being streamed, status, error, and which answers are not sent yet.
//!
//! Contract:
//! - A response extends the last message when that is an assistant message
//!   (a continuation), else it becomes a new assistant message.
//! - An answer (approval or client tool result) is recorded at once, even
//!   while a response streams, and stays *unsent* until a request carries it.
//!   [`ChatState::ready_to_continue`] is true only when there are unsent
//!   answers and every tool call of the last step is settled, so a state
//!   that was sent is never sent again.
//! - A request that the server refuses leaves the conversation as it was
//!   and its answers unsent.
//! - Every change is emitted as events, in order, while the state is locked.

use std::collections::{BTreeSet, HashSet};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolgate_ui::{ToolState, UiApproval, UiChunk, UiMessage, UiMessageBuilder, UiPart, UiRole, UiToolPart};

use crate::decision::Decision;
use crate::error::ClientError;
use crate::event::{ChatEvent, Listeners, MessageChange, Status};
use crate::options::{ApprovalForm, ChatOptions, EditForm};
use crate::transport::{TransportRequest, Trigger};

/// A result a client computed for a client-executed tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    /// The tool's output.
    Output(Value),
    /// The tool failed with this message.
    Error(String),
}

/// How a response stream ended.
#[derive(Debug)]
pub(crate) enum StreamEnd {
    /// It finished.
    Completed,
    /// `stop` cut it short.
    Stopped,
    /// It failed.
    Failed(ClientError),
}

/// The response being streamed.
struct InFlight {
    /// The continued message as it was before the response (`None` for a new message).
    base: Option<UiMessage>,
    builder: UiMessageBuilder,
    /// Whether `MessageAdded` went out for a new message.
    announced: bool,
    /// The answers this request carries (unsent again if it is refused).
    sent: BTreeSet<String>,
    /// Whether any chunk arrived.
    received: bool,
    /// The user message of `tool-approval` parts this request added (user-message form).
    approval_message: Option<String>,
}

/// What a broken-off response leaves to resume from.
struct Resumable {
    base: Option<UiMessage>,
    message_id: String,
}

/// The state of one chat.
pub(crate) struct ChatState {
    pub(crate) id: String,
    options: ChatOptions,
    messages: Vec<UiMessage>,
    in_flight: Option<InFlight>,
    resumable: Option<Resumable>,
    status: Status,
    error: Option<ClientError>,
    unsent: BTreeSet<String>,
    /// A continuation is being sent (seed 003's `continuationPending`).
    pub(crate) continuation_pending: bool,
    /// A continuation check was skipped while busy (seed 003's `continuationSkipped`).
    pub(crate) continuation_skipped: bool,
    cancel: Option<CancellationToken>,
    listeners: Listeners,
}

impl ChatState {
    pub(crate) fn new(id: String, options: ChatOptions, messages: Vec<UiMessage>) -> Self {
        Self {
            id,
            options,
            messages,
            in_flight: None,
            resumable: None,
            status: Status::Ready,
            error: None,
            unsent: BTreeSet::new(),
            continuation_pending: false,
            continuation_skipped: false,
            cancel: None,
            listeners: Listeners::default(),
        }
    }

    pub(crate) fn listeners(&mut self) -> &mut Listeners {
        &mut self.listeners
    }

    /// Every message, the one streaming included.
    pub(crate) fn messages(&self) -> Vec<UiMessage> {
        let mut messages = self.messages.clone();
        messages.extend(self.in_flight.as_ref().map(|flight| flight.builder.message().clone()));
        messages
    }

    pub(crate) fn status(&self) -> Status {
        self.status
    }

    pub(crate) fn error(&self) -> Option<&ClientError> {
        self.error.as_ref()
    }

    pub(crate) fn is_busy(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Cancels the response in flight, if any.
    pub(crate) fn stop(&mut self) {
        if let Some(cancel) = &self.cancel {
            cancel.cancel();
        }
        self.continuation_skipped = false;
    }

    fn set_status(&mut self, to: Status) {
        if self.status != to {
            let from = std::mem::replace(&mut self.status, to);
            self.listeners.emit([ChatEvent::StatusChanged { from, to }]);
        }
    }

    /// Adds a user message.
    pub(crate) fn push_user_message(&mut self, parts: Vec<UiPart>) -> Result<(), ClientError> {
        if self.is_busy() {
            return Err(ClientError::Busy);
        }
        self.push_message(UiMessage {
            id: new_id("user"),
            role: UiRole::User,
            parts,
            metadata: None,
            extra: Default::default(),
        });
        Ok(())
    }

    fn push_message(&mut self, message: UiMessage) {
        self.listeners.emit([ChatEvent::MessageAdded { message: message.clone() }]);
        self.messages.push(message);
    }

    /// Drops the last response (and anything after the last user message) for `regenerate`.
    pub(crate) fn drop_last_response(&mut self) -> Result<Option<String>, ClientError> {
        if self.is_busy() {
            return Err(ClientError::Busy);
        }
        let Some(last_user) = self.messages.iter().rposition(|message| message.role == UiRole::User) else {
            return Err(ClientError::NothingToRegenerate);
        };
        let removed = self.messages.split_off(last_user + 1);
        self.unsent.clear();
        self.resumable = None;
        Ok(removed.first().map(|message| message.id.clone()))
    }

    /// Starts a request: builds its body, takes the unsent answers, opens the response.
    pub(crate) fn begin(
        &mut self,
        trigger: Trigger,
        message_id: Option<String>,
    ) -> Result<(TransportRequest, CancellationToken), ClientError> {
        if self.is_busy() {
            return Err(ClientError::Busy);
        }
        let sent = std::mem::take(&mut self.unsent);
        let approval_message = match self.options.approval_form {
            ApprovalForm::UserMessage => self.push_approval_message(&sent),
            ApprovalForm::ResponsePart => None,
        };
        let message_id = message_id.or_else(|| self.messages.last().map(|message| message.id.clone()));
        let request =
            TransportRequest { chat_id: self.id.clone(), messages: self.outgoing_messages(), trigger, message_id };
        let continues = self.messages.last().is_some_and(|message| message.role == UiRole::Assistant);
        let flight = if continues {
            let message = self.messages.pop().expect("checked above");
            InFlight {
                base: Some(message.clone()),
                builder: UiMessageBuilder::continuing(message),
                announced: true,
                sent,
                received: false,
                approval_message: None,
            }
        } else {
            InFlight {
                base: None,
                builder: UiMessageBuilder::new(new_id("msg")),
                announced: false,
                sent,
                received: false,
                approval_message: None,
            }
        };
        Ok((request, self.open(InFlight { approval_message, ..flight })))
    }

    /// Starts applying a resumed response, which replays its message from the
    /// start (the broken-off response's, or the last assistant message's,
    /// kept to restore if nothing arrives).
    pub(crate) fn begin_resume(&mut self) -> Result<CancellationToken, ClientError> {
        if self.is_busy() {
            return Err(ClientError::Busy);
        }
        let flight = match self.resumable.take() {
            Some(Resumable { base, message_id }) => {
                if self.messages.last().is_some_and(|message| message.id == message_id) {
                    self.messages.pop();
                }
                // The resumed stream replays the whole message from its start (a continuation's
                // too: the server sends the message as it stood first), as the AI SDK reads it.
                let builder = UiMessageBuilder::new(message_id);
                InFlight {
                    base,
                    builder,
                    announced: true,
                    sent: BTreeSet::new(),
                    received: false,
                    approval_message: None,
                }
            }
            None if self.messages.last().is_some_and(|message| message.role == UiRole::Assistant) => {
                let message = self.messages.pop().expect("checked above");
                InFlight {
                    builder: UiMessageBuilder::new(message.id.clone()),
                    base: Some(message),
                    announced: true,
                    sent: BTreeSet::new(),
                    received: false,
                    approval_message: None,
                }
            }
            None => InFlight {
                base: None,
                builder: UiMessageBuilder::new(new_id("msg")),
                announced: false,
                sent: BTreeSet::new(),
                received: false,
                approval_message: None,
            },
        };
        Ok(self.open(flight))
    }

    fn open(&mut self, flight: InFlight) -> CancellationToken {
        self.in_flight = Some(flight);
        self.resumable = None;
        self.error = None;
        let cancel = CancellationToken::new();
        self.cancel = Some(cancel.clone());
        self.set_status(Status::Submitted);
        cancel
    }

    /// The server accepted the request; its response starts.
    pub(crate) fn accepted(&mut self) {
        self.set_status(Status::Streaming);
    }

    /// Applies one chunk of the response.
    pub(crate) fn apply(&mut self, chunk: UiChunk) {
        let Some(flight) = self.in_flight.as_mut() else { return };
        flight.received = true;
        let call_id = tool_call_id(&chunk).map(str::to_owned);
        let call_id = call_id.as_deref();
        if let Some(call_id) = call_id
            && flight.builder.tool_part(call_id).is_none()
            && is_output(&chunk)
        {
            self.apply_to_earlier(call_id, chunk);
            return;
        }
        let before = call_id.and_then(|id| flight.builder.tool_part(id)).map(|part| part.state);
        flight.builder.apply(&chunk);
        let message = flight.builder.message();
        let mut events = Vec::new();
        if !flight.announced {
            flight.announced = true;
            events.push(ChatEvent::MessageAdded { message: message.clone() });
        }
        let message_id = message.id.clone();
        let part = call_id.and_then(|id| flight.builder.tool_part(id));
        let tool_event = part.and_then(|part| state_change(&message_id, part, before));
        // The copy of a sub-agent's approval on the agent call waiting for it is not one more request.
        let copy = |approval_id: &str, part: &UiToolPart| {
            !is_surfaced(part)
                && flight.builder.message().parts.iter().any(|other| {
                    matches!(other, UiPart::Tool(tool) if is_surfaced(tool)
                        && tool.approval.as_ref().is_some_and(|approval| approval.id == approval_id))
                })
        };
        let approval_event = match (&chunk, part) {
            (UiChunk::ToolApprovalRequest { approval_id, .. }, Some(part)) if !copy(approval_id, part) => {
                Some(ChatEvent::ApprovalRequested {
                    message_id: message_id.clone(),
                    approval_id: approval_id.clone(),
                    tool_call_id: part.tool_call_id.clone(),
                    tool_name: part.tool_name.clone(),
                    input: part.input.clone().unwrap_or(Value::Null),
                    reason: flight
                        .builder
                        .reason(&part.tool_call_id)
                        .and_then(|data| data["reason"].as_str())
                        .map(str::to_owned),
                })
            }
            _ => None,
        };
        let error = match &chunk {
            UiChunk::Error { error_text } => Some(ClientError::Stream(error_text.clone())),
            _ => None,
        };
        events.push(ChatEvent::MessageUpdated { message_id, change: MessageChange::Streamed(chunk) });
        events.extend(tool_event);
        events.extend(approval_event);
        if let Some(error) = error {
            events.push(ChatEvent::Error { error: error.clone() });
            self.error = Some(error);
        }
        self.listeners.emit(events);
    }

    /// An output for a call of an earlier message (the answers went in a
    /// user message, so the response is a new message).
    fn apply_to_earlier(&mut self, call_id: &str, chunk: UiChunk) {
        let Some(index) = self.messages.iter().rposition(|message| find_tool(message, call_id).is_some()) else {
            tracing::debug!(call_id, "output for a tool call this chat does not hold");
            return;
        };
        let before = find_tool(&self.messages[index], call_id).map(|part| part.state);
        let mut builder = UiMessageBuilder::continuing(self.messages.remove(index));
        builder.apply(&chunk);
        self.messages.insert(index, builder.finish());
        let message = &self.messages[index];
        let message_id = message.id.clone();
        let tool_event = find_tool(message, call_id).and_then(|part| state_change(&message_id, part, before));
        self.listeners.emit(
            std::iter::once(ChatEvent::MessageUpdated {
                message_id: message_id.clone(),
                change: MessageChange::Streamed(chunk),
            })
            .chain(tool_event),
        );
    }

    /// Ends the response.
    pub(crate) fn finish(&mut self, end: StreamEnd) {
        self.cancel = None;
        let Some(flight) = self.in_flight.take() else { return };
        if !flight.received {
            // Nothing of the response arrived: the conversation is as it was,
            // and answers the server may not have seen stay unsent.
            self.messages.extend(flight.base);
            if !matches!(end, StreamEnd::Completed) {
                self.unsent.extend(flight.sent);
                // The answers go again in a new approval message next time.
                if let Some(id) = flight.approval_message {
                    self.messages.retain(|message| message.id != id);
                }
            }
        } else {
            let message = flight.builder.finish();
            if matches!(end, StreamEnd::Failed(ClientError::Disconnected)) {
                self.resumable = Some(Resumable { base: flight.base, message_id: message.id.clone() });
            }
            self.messages.push(message);
        }
        match end {
            StreamEnd::Completed | StreamEnd::Stopped => {
                let status = if self.error.is_some() { Status::Error } else { Status::Ready };
                self.set_status(status);
            }
            StreamEnd::Failed(error) => {
                self.listeners.emit([ChatEvent::Error { error: error.clone() }]);
                self.error = Some(error);
                self.set_status(Status::Error);
            }
        }
    }

    /// Records a person's answer to an approval request.
    pub(crate) fn answer(&mut self, approval_id: &str, decision: Decision) -> Result<(), ClientError> {
        let options = self.options;
        if options.approval_form == ApprovalForm::UserMessage && matches!(decision, Decision::ApproveWithInput(_)) {
            return Err(ClientError::EditNotSupported);
        }
        let asks = |part: &UiToolPart| part.approval.as_ref().is_some_and(|approval| approval.id == approval_id);
        // A sub-agent's call surfaced here holds the approval; the agent call waiting for it shows a copy.
        let approved = decision.approves();
        let surfaced = self.tool_part_mut(|part| asks(part) && is_surfaced(part)).is_some();
        let (message_id, part) = self
            .tool_part_mut(|part| asks(part) && (!surfaced || is_surfaced(part)))
            .ok_or_else(|| ClientError::UnknownApproval(approval_id.to_owned()))?;
        let pending = part.state == ToolState::ApprovalRequested
            && part.approval.as_ref().is_some_and(|approval| approval.approved.is_none());
        if !pending {
            return Err(ClientError::ApprovalNotPending { approval_id: approval_id.to_owned(), state: part.state });
        }
        let approval = part.approval.as_mut().expect("checked above");
        approval.approved = Some(decision.approves());
        match decision {
            Decision::Approve => {}
            Decision::ApproveWithInput(input) => match options.edit_form {
                EditForm::EditedInput => approval.edited_input = Some(input),
                EditForm::ReplaceInput => part.input = Some(input),
            },
            Decision::Deny { reason } => approval.reason = reason,
        }
        let before = part.state;
        part.state = ToolState::ApprovalResponded;
        let tool_call_id = part.tool_call_id.clone();
        let event = state_change(&message_id, part, Some(before));
        self.unsent.insert(tool_call_id.clone());
        self.listeners.emit(
            [ChatEvent::MessageUpdated { message_id, change: MessageChange::Answered { tool_call_id } }]
                .into_iter()
                .chain(event),
        );
        self.answer_copies(approval_id, approved);
        Ok(())
    }

    /// Marks the copies of a sub-agent's approval (on the agent calls waiting for it) answered.
    fn answer_copies(&mut self, approval_id: &str, approved: bool) {
        let streaming = self.in_flight.as_mut().map(|flight| flight.builder.message_mut());
        for message in streaming.into_iter().chain(self.messages.iter_mut()) {
            for part in &mut message.parts {
                if let UiPart::Tool(tool) = part
                    && !is_surfaced(tool)
                    && tool.state == ToolState::ApprovalRequested
                    && let Some(approval) = tool.approval.as_mut().filter(|approval| approval.id == approval_id)
                {
                    approval.approved = Some(approved);
                    tool.state = ToolState::ApprovalResponded;
                }
            }
        }
    }

    /// Records the result of a client-executed tool call.
    pub(crate) fn add_output(&mut self, tool_call_id: &str, output: ToolOutput) -> Result<(), ClientError> {
        let (message_id, part) = self
            .tool_part_mut(|part| part.tool_call_id == tool_call_id)
            .ok_or_else(|| ClientError::UnknownToolCall(tool_call_id.to_owned()))?;
        let awaiting = match part.state {
            ToolState::InputAvailable => part.approval.is_none(),
            ToolState::ApprovalResponded => part.approval.as_ref().and_then(|a| a.approved) == Some(true),
            _ => false,
        };
        if !awaiting {
            return Err(ClientError::ToolCallNotAwaitingOutput {
                tool_call_id: tool_call_id.to_owned(),
                state: part.state,
            });
        }
        let before = part.state;
        match output {
            ToolOutput::Output(output) => {
                part.state = ToolState::OutputAvailable;
                part.output = Some(output);
            }
            ToolOutput::Error(error) => {
                part.state = ToolState::OutputError;
                part.error_text = Some(error);
            }
        }
        let event = state_change(&message_id, part, Some(before));
        self.unsent.insert(tool_call_id.to_owned());
        let tool_call_id = tool_call_id.to_owned();
        self.listeners.emit(
            [ChatEvent::MessageUpdated { message_id, change: MessageChange::ToolOutput { tool_call_id } }]
                .into_iter()
                .chain(event),
        );
        Ok(())
    }

    /// Whether the answers given so far should be sent now: some are unsent,
    /// nothing is in flight, and every tool call of the last assistant step
    /// (provider-executed ones aside) has an answer or a result.
    pub(crate) fn ready_to_continue(&self) -> bool {
        if self.is_busy() || self.unsent.is_empty() {
            return false;
        }
        let Some(last) = self.messages.last().filter(|message| message.role == UiRole::Assistant) else {
            return false;
        };
        let step_start = last.parts.iter().rposition(|part| matches!(part, UiPart::StepStart)).map_or(0, |i| i + 1);
        last.parts[step_start..]
            .iter()
            .filter_map(|part| match part {
                UiPart::Tool(tool) if tool.provider_executed != Some(true) => Some(tool),
                _ => None,
            })
            .all(|tool| {
                matches!(
                    tool.state,
                    ToolState::ApprovalResponded
                        | ToolState::OutputAvailable
                        | ToolState::OutputError
                        | ToolState::OutputDenied
                )
            })
    }

    /// The tool part matching `matches`, newest first, the streaming message included.
    fn tool_part_mut(&mut self, matches: impl Fn(&UiToolPart) -> bool) -> Option<(String, &mut UiToolPart)> {
        let streaming = self.in_flight.as_mut().map(|flight| flight.builder.message_mut());
        streaming.into_iter().chain(self.messages.iter_mut().rev()).find_map(|message| {
            let UiMessage { id, parts, .. } = message;
            parts.iter_mut().find_map(|part| match part {
                UiPart::Tool(tool) if matches(tool) => Some((id.clone(), &mut **tool)),
                _ => None,
            })
        })
    }

    /// The answers of `sent` that are approvals, as one user message of
    /// `tool-approval` parts; returns its id when there was one to add.
    fn push_approval_message(&mut self, sent: &BTreeSet<String>) -> Option<String> {
        let parts: Vec<UiPart> = self
            .messages
            .iter()
            .flat_map(|message| message.tool_parts())
            .filter(|(_, tool)| sent.contains(&tool.tool_call_id))
            .filter_map(|(_, tool)| {
                let approval = tool.approval.as_ref()?;
                Some(UiPart::ToolApproval {
                    tool_call_id: tool.tool_call_id.clone(),
                    approved: approval.approved?,
                    reason: approval.reason.clone(),
                })
            })
            .collect();
        if !parts.is_empty() {
            let mut message =
                UiMessage { id: new_id("user"), role: UiRole::User, parts, metadata: None, extra: Default::default() };
            message.metadata = Some(serde_json::json!({"isToolApproval": true}));
            let id = message.id.clone();
            self.push_message(message);
            return Some(id);
        }
        None
    }

    /// The messages as the server should see them. In the user-message form,
    /// answers travel only in the user messages, so the tool parts they
    /// answer go out unanswered.
    fn outgoing_messages(&self) -> Vec<UiMessage> {
        let mut messages = self.messages.clone();
        if self.options.approval_form == ApprovalForm::ResponsePart {
            return messages;
        }
        let answered: HashSet<String> = self
            .messages
            .iter()
            .filter(|message| message.role == UiRole::User)
            .flat_map(|message| &message.parts)
            .filter_map(|part| match part {
                UiPart::ToolApproval { tool_call_id, .. } => Some(tool_call_id.clone()),
                _ => None,
            })
            .collect();
        for part in messages.iter_mut().flat_map(|message| message.parts.iter_mut()) {
            if let UiPart::Tool(tool) = part
                && answered.contains(&tool.tool_call_id)
                && let Some(approval) = &mut tool.approval
            {
                *approval = UiApproval { approved: None, reason: None, edited_input: None, ..approval.clone() };
                if tool.state == ToolState::ApprovalResponded {
                    tool.state = ToolState::ApprovalRequested;
                }
            }
        }
        messages
    }
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::now_v7().simple())
}

fn find_tool<'m>(message: &'m UiMessage, call_id: &str) -> Option<&'m UiToolPart> {
    message.tool_parts().map(|(_, tool)| tool).find(|tool| tool.tool_call_id == call_id)
}

fn state_change(message_id: &str, part: &UiToolPart, before: Option<ToolState>) -> Option<ChatEvent> {
    (before != Some(part.state)).then(|| ChatEvent::ToolStateChanged {
        message_id: message_id.to_owned(),
        tool_call_id: part.tool_call_id.clone(),
        tool_name: part.tool_name.clone(),
        from: before,
        to: part.state,
    })
}

fn tool_call_id(chunk: &UiChunk) -> Option<&str> {
    match chunk {
        UiChunk::ToolInputStart { tool_call_id, .. }
        | UiChunk::ToolInputDelta { tool_call_id, .. }
        | UiChunk::ToolInputAvailable { tool_call_id, .. }
        | UiChunk::ToolInputError { tool_call_id, .. }
        | UiChunk::ToolApprovalRequest { tool_call_id, .. }
        | UiChunk::ToolOutputAvailable { tool_call_id, .. }
        | UiChunk::ToolOutputError { tool_call_id, .. }
        | UiChunk::ToolOutputDenied { tool_call_id } => Some(tool_call_id),
        UiChunk::Start { .. }
        | UiChunk::Finish { .. }
        | UiChunk::StartStep
        | UiChunk::FinishStep
        | UiChunk::Error { .. }
        | UiChunk::Warning { .. }
        | UiChunk::Reason { .. }
        | UiChunk::Approval { .. }
        | UiChunk::TextStart { .. }
        | UiChunk::TextDelta { .. }
        | UiChunk::TextEnd { .. }
        | UiChunk::ReasoningStart { .. }
        | UiChunk::ReasoningDelta { .. }
        | UiChunk::ReasoningEnd { .. } => None,
    }
}

fn is_output(chunk: &UiChunk) -> bool {
    matches!(
        chunk,
        UiChunk::ToolOutputAvailable { .. } | UiChunk::ToolOutputError { .. } | UiChunk::ToolOutputDenied { .. }
    )
}

/// True for a sub-agent's call surfaced in a message (its `callProviderMetadata.toolgate.subAgent`).
fn is_surfaced(part: &UiToolPart) -> bool {
    part.call_provider_metadata.as_ref().and_then(|metadata| metadata.get("toolgate")?.get("subAgent")).is_some()
}
