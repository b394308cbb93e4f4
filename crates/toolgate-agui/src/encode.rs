//! The engine's [`StreamPart`]s → AG-UI events, in order.
//!
//! Contract of one run's events:
//! - `RUN_STARTED` first; then exactly one terminal event, `RUN_FINISHED` or
//!   `RUN_ERROR`; the encoder emits nothing after it.
//! - Each model step is one assistant message with a generated id: its text
//!   streams as `TEXT_MESSAGE_START/CONTENT/END` (opened on the first
//!   non-empty delta, so no empty text messages), its tool calls as
//!   `TOOL_CALL_START/ARGS/END` with `parentMessageId` = that id (a
//!   `tool-call` without input streaming emits all three at once, with the
//!   whole arguments). Reasoning streams as `REASONING_*`.
//! - Tool outcomes become `TOOL_CALL_RESULT` with the content of
//!   [`crate::content`] (preliminary results are skipped, but a sub-agent's
//!   progress is a `CUSTOM` event, [`crate::SUBAGENT_PROGRESS_EVENT`],
//!   naming its sub-run). Results before the
//!   first step answer calls of the previous run: they go against the
//!   original `toolCallId`, with no `TOOL_CALL_START/ARGS/END`.
//! - Approval requests are collected. At `finish`, a run that has any emits
//!   `MESSAGES_SNAPSHOT`, `STATE_SNAPSHOT` (the caller's state plus toolgate's
//!   pending list) and `RUN_FINISHED {outcome: interrupt}`; otherwise
//!   `RUN_FINISHED {outcome: success}` (listing client-executed calls left
//!   open in `pendingToolCallIds`), preceded by `MESSAGES_SNAPSHOT` when an
//!   edit replaced a call's arguments and by `STATE_SNAPSHOT` when the input
//!   state carried toolgate's key (so it is cleared).
//! - An `error` part (fatal), or an engine error, is `RUN_ERROR {message, code}`.
//!   A `warning` part (the engine recovered) is a `CUSTOM` event named
//!   `toolgate.warning` with `value: {code, message}`, and the run goes on.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolgate::{EngineError, IdGenerator, StreamPart};
use toolgate_protocol::ToolCallInfo;

use crate::content::{denial_content, error_content, output_content};
use crate::error::{AguiError, engine_error_event};
use crate::events::approval_response_schema;
use crate::events::{
    APPROVAL_EVENT, Event, Interrupt, ReasoningRole, RunOutcome, SUBAGENT_PROGRESS_EVENT, TOOL_CALL_REASON, TextRole,
    ToolRole,
};
use crate::input::RunAgentInput;
use crate::resume::{Decision, PendingApproval, Resolution, STATE_KEY, state_with_pending, state_without_pending};
use crate::transcript::Transcript;

/// The `RUN_ERROR.code` of an `error` part in the stream (a model failure).
pub const MODEL_ERROR_CODE: &str = "model_error";

/// How the encoder names things.
#[derive(Clone)]
pub struct EncoderOptions {
    id_generator: IdGenerator,
    interrupt_expires_at: Option<String>,
}

impl Default for EncoderOptions {
    fn default() -> Self {
        Self { id_generator: Arc::new(|| uuid::Uuid::now_v7().to_string()), interrupt_expires_at: None }
    }
}

impl std::fmt::Debug for EncoderOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncoderOptions")
            .field("interrupt_expires_at", &self.interrupt_expires_at)
            .finish_non_exhaustive()
    }
}

impl EncoderOptions {
    /// Ids for messages (assistant steps, tool results, reasoning); UUID v7 by default.
    pub fn id_generator(mut self, generator: impl Fn() -> String + Send + Sync + 'static) -> Self {
        self.id_generator = Arc::new(generator);
        self
    }

    /// The `expiresAt` (RFC 3339) written on this run's interrupts. Advisory:
    /// `@ag-ui/client` refuses late answers; the stateless server does not check it.
    pub fn interrupt_expires_at(mut self, expires_at: impl Into<String>) -> Self {
        self.interrupt_expires_at = Some(expires_at.into());
        self
    }
}

/// Turns one run's stream parts into AG-UI events (see the module docs).
#[derive(Debug)]
pub struct EventEncoder {
    thread_id: String,
    run_id: String,
    parent_run_id: Option<String>,
    options: EncoderOptions,
    state: Option<Value>,
    clears_state: bool,
    transcript: Transcript,
    edits: HashMap<String, Value>,
    edited: bool,
    started: bool,
    streamed: bool,
    stepped: bool,
    done: bool,
    step_message: Option<String>,
    text_blocks: HashSet<String>,
    text_open: bool,
    reasoning_blocks: HashSet<String>,
    reasoning_open: Option<String>,
    open_calls: Vec<String>,
    run_calls: Vec<String>,
    answered: HashSet<String>,
    interrupts: Vec<Interrupt>,
    pending: Vec<PendingApproval>,
}

impl EventEncoder {
    /// An encoder for the run `input` describes.
    pub fn new(input: &RunAgentInput, options: EncoderOptions) -> Self {
        Self {
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            parent_run_id: input.parent_run_id.clone(),
            options,
            state: input.state.clone(),
            clears_state: input.state.as_ref().is_some_and(|state| state.get(STATE_KEY).is_some()),
            transcript: Transcript::new(input.messages.clone()),
            edits: HashMap::new(),
            edited: false,
            started: false,
            streamed: false,
            stepped: false,
            done: false,
            step_message: None,
            text_blocks: HashSet::new(),
            text_open: false,
            reasoning_blocks: HashSet::new(),
            reasoning_open: None,
            open_calls: Vec::new(),
            run_calls: Vec::new(),
            answered: HashSet::new(),
            interrupts: Vec::new(),
            pending: Vec::new(),
        }
    }

    /// Tells the encoder what the resume decided: an edit that ran replaces
    /// the call's arguments in the snapshot (so later turns show the edited
    /// call). Denial reasons need nothing here: the engine's
    /// `tool-output-denied` part carries them.
    pub fn resuming(mut self, resolutions: &[Resolution]) -> Self {
        for resolution in resolutions {
            if let Decision::Approve { edited_args: Some(args), .. } = &resolution.decision {
                self.edits.insert(resolution.pending.tool_call_id.clone(), args.clone());
            }
        }
        self
    }

    /// True once `RUN_FINISHED` or `RUN_ERROR` was emitted.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// `RUN_STARTED`, unless already emitted.
    pub fn start(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        self.ensure_started(&mut out);
        out
    }

    /// The events for one stream part (none once the run is over).
    pub fn encode(&mut self, part: &StreamPart) -> Vec<Event> {
        let mut out = Vec::new();
        if self.done {
            return out;
        }
        self.ensure_started(&mut out);
        match part {
            StreamPart::Start => self.streamed = true,
            StreamPart::StartStep => {
                self.close_open(&mut out);
                self.stepped = true;
                self.step_message = Some(self.next_id());
            }
            StreamPart::TextStart { id } => {
                self.text_blocks.insert(id.clone());
            }
            StreamPart::TextDelta { text, .. } => self.text(text, &mut out),
            StreamPart::TextEnd { id } => {
                self.text_blocks.remove(id);
                if self.text_blocks.is_empty() {
                    self.close_text(&mut out);
                }
            }
            StreamPart::ReasoningStart { id } => {
                self.reasoning_blocks.insert(id.clone());
            }
            StreamPart::ReasoningDelta { text, .. } => self.reasoning(text, &mut out),
            StreamPart::ReasoningEnd { id } => {
                self.reasoning_blocks.remove(id);
                if self.reasoning_blocks.is_empty() {
                    self.close_reasoning(&mut out);
                }
            }
            StreamPart::ToolInputStart { id, tool_name, .. } => self.open_call(id, tool_name, &mut out),
            StreamPart::ToolInputDelta { id, delta } => {
                if !delta.is_empty() && self.open_calls.contains(id) {
                    self.transcript.append_arguments(id, delta);
                    out.push(Event::ToolCallArgs { tool_call_id: id.clone(), delta: delta.clone() });
                }
            }
            StreamPart::ToolInputEnd { id } => self.close_call(id, &mut out),
            StreamPart::ToolCall(info) => self.tool_call(info, &mut out),
            StreamPart::ToolResult { tool_call_id, output, preliminary: Some(true), .. } => {
                if let Some(agent) = toolgate::agent::progress_agent(output) {
                    // A sub-agent's progress, tagged with its sub-run (other preliminary results are skipped).
                    let lineage = json!([{"agent": agent, "toolCallId": tool_call_id}]);
                    let value = json!({"toolCallId": tool_call_id, "subagentRunId": tool_call_id,
                        "lineage": lineage, "progress": output});
                    out.push(Event::Custom { name: SUBAGENT_PROGRESS_EVENT.to_owned(), value });
                }
            }
            StreamPart::ToolResult { tool_call_id, input, output, .. } => {
                self.apply_edit(tool_call_id, input);
                self.result(tool_call_id, output_content(output), &mut out);
            }
            StreamPart::ToolError { tool_call_id, input, error, .. } => {
                self.apply_edit(tool_call_id, input);
                self.result(tool_call_id, error_content(error), &mut out);
            }
            StreamPart::ToolApprovalRequest { approval_id, tool_call, signature, reason, routing } => {
                self.approval_request(approval_id, tool_call, signature.clone(), reason.clone(), routing.as_ref());
                if let Some(routing) = routing {
                    // Routed to others: the client shows who it waits for, not approve/deny.
                    let value = json!({"approvalId": approval_id, "toolCallId": tool_call.tool_call_id,
                        "state": "pending", "approvers": routing.approvers, "quorum": routing.quorum, "votes": []});
                    out.push(Event::Custom { name: APPROVAL_EVENT.to_owned(), value });
                }
            }
            StreamPart::ToolOutputDenied { tool_call_id, reason, .. } => {
                self.result(tool_call_id, denial_content(reason.as_deref()), &mut out);
            }
            StreamPart::FinishStep { .. } => self.close_open(&mut out),
            StreamPart::Finish { .. } => self.finish(&mut out),
            StreamPart::Error { error } => self.fail(Event::run_error(error.clone(), MODEL_ERROR_CODE), &mut out),
            StreamPart::Warning { code, message } => out.push(Event::warning(code.clone(), message.clone())),
        }
        out
    }

    /// `RUN_ERROR` for an engine error (from `stream_text` before streaming,
    /// or from `TextStream::finish`); nothing if the run already ended.
    pub fn engine_error(&mut self, error: &EngineError) -> Vec<Event> {
        self.error_event(engine_error_event(error))
    }

    /// `RUN_ERROR` for an error preparing the run; nothing if the run already ended.
    pub fn agui_error(&mut self, error: &AguiError) -> Vec<Event> {
        self.error_event(error.to_event())
    }

    /// `RUN_ERROR` with this event (which should be a `RUN_ERROR`); nothing if the run already ended.
    pub fn error_event(&mut self, error: Event) -> Vec<Event> {
        let mut out = Vec::new();
        if !self.done {
            self.ensure_started(&mut out);
            self.fail(error, &mut out);
        }
        out
    }

    fn ensure_started(&mut self, out: &mut Vec<Event>) {
        if !self.started {
            self.started = true;
            out.push(Event::RunStarted {
                thread_id: self.thread_id.clone(),
                run_id: self.run_id.clone(),
                parent_run_id: self.parent_run_id.clone(),
            });
        }
    }

    fn next_id(&self) -> String {
        (self.options.id_generator)()
    }

    fn step_id(&mut self) -> String {
        if self.step_message.is_none() {
            self.step_message = Some(self.next_id());
        }
        self.step_message.clone().unwrap_or_default()
    }

    fn text(&mut self, delta: &str, out: &mut Vec<Event>) {
        if delta.is_empty() {
            return;
        }
        let message_id = self.step_id();
        if !self.text_open {
            self.text_open = true;
            out.push(Event::TextMessageStart { message_id: message_id.clone(), role: TextRole::Assistant });
        }
        self.transcript.append_text(&message_id, delta);
        out.push(Event::TextMessageContent { message_id, delta: delta.to_owned() });
    }

    fn close_text(&mut self, out: &mut Vec<Event>) {
        if std::mem::take(&mut self.text_open) {
            out.push(Event::TextMessageEnd { message_id: self.step_id() });
        }
    }

    fn reasoning(&mut self, delta: &str, out: &mut Vec<Event>) {
        if delta.is_empty() {
            return;
        }
        let message_id = match &self.reasoning_open {
            Some(id) => id.clone(),
            None => {
                let id = self.next_id();
                self.reasoning_open = Some(id.clone());
                out.push(Event::ReasoningStart { message_id: id.clone() });
                out.push(Event::ReasoningMessageStart { message_id: id.clone(), role: ReasoningRole::Reasoning });
                id
            }
        };
        self.transcript.append_reasoning(&message_id, delta);
        out.push(Event::ReasoningMessageContent { message_id, delta: delta.to_owned() });
    }

    fn close_reasoning(&mut self, out: &mut Vec<Event>) {
        if let Some(message_id) = self.reasoning_open.take() {
            out.push(Event::ReasoningMessageEnd { message_id: message_id.clone() });
            out.push(Event::ReasoningEnd { message_id });
        }
    }

    fn open_call(&mut self, tool_call_id: &str, tool_name: &str, out: &mut Vec<Event>) {
        if self.run_calls.iter().any(|id| id == tool_call_id) {
            return;
        }
        let parent = self.step_id();
        self.transcript.start_tool_call(&parent, tool_call_id, tool_name);
        self.open_calls.push(tool_call_id.to_owned());
        self.run_calls.push(tool_call_id.to_owned());
        out.push(Event::ToolCallStart {
            tool_call_id: tool_call_id.to_owned(),
            tool_call_name: tool_name.to_owned(),
            parent_message_id: Some(parent),
        });
    }

    fn close_call(&mut self, tool_call_id: &str, out: &mut Vec<Event>) {
        if let Some(position) = self.open_calls.iter().position(|id| id == tool_call_id) {
            self.open_calls.remove(position);
            out.push(Event::ToolCallEnd { tool_call_id: tool_call_id.to_owned() });
        }
    }

    fn tool_call(&mut self, info: &ToolCallInfo, out: &mut Vec<Event>) {
        let id = &info.tool_call_id;
        if !self.run_calls.contains(id) {
            self.open_call(id, &info.tool_name, out);
            let arguments = info.input.to_string();
            self.transcript.append_arguments(id, &arguments);
            out.push(Event::ToolCallArgs { tool_call_id: id.clone(), delta: arguments });
            let mark = info.provider_metadata.as_ref().and_then(|options| options.get("toolgate")?.get("subAgent"));
            if let Some(mark) = mark {
                self.transcript.mark_sub_agent(id, mark);
            }
        }
        self.close_call(id, out);
    }

    /// Before the first step, a result of an edited call ran with the edit: show it.
    fn apply_edit(&mut self, tool_call_id: &str, input: &Value) {
        if self.stepped {
            return;
        }
        if let Some(edit) = self.edits.remove(tool_call_id)
            && edit == *input
            && self.transcript.edit_arguments(tool_call_id, edit.to_string())
        {
            self.edited = true;
        }
    }

    fn result(&mut self, tool_call_id: &str, content: String, out: &mut Vec<Event>) {
        let message_id = self.next_id();
        self.transcript.add_result(&message_id, tool_call_id, content.clone());
        self.answered.insert(tool_call_id.to_owned());
        out.push(Event::ToolCallResult {
            message_id,
            tool_call_id: tool_call_id.to_owned(),
            content,
            role: ToolRole::Tool,
        });
    }

    fn approval_request(
        &mut self,
        approval_id: &str,
        call: &ToolCallInfo,
        signature: Option<String>,
        reason: Option<String>,
        routing: Option<&toolgate_protocol::ApprovalRouting>,
    ) {
        // `kind: "approval"` with the tool and its input is the approval marker TanStack's
        // client resumes (its legacy, pre-binding form); other clients ignore it.
        let mut metadata = Map::from_iter([
            ("kind".to_owned(), json!("approval")),
            ("toolName".to_owned(), json!(call.tool_name)),
            ("input".to_owned(), call.input.clone()),
        ]);
        // Routed to named approvers: the requester cannot answer it here.
        if let Some(routing) = routing {
            metadata.insert("approvers".to_owned(), json!(routing.approvers));
            metadata.insert("quorum".to_owned(), json!(routing.quorum));
        }
        // A sub-agent's call: where it comes from, and the sub-run that waits.
        let lineage = call.sub_agent_lineage();
        let subagent_run_id = lineage.and_then(Value::as_array).map(|steps| {
            let ids: Vec<&str> = steps.iter().filter_map(|step| step.get("toolCallId")?.as_str()).collect();
            ids.join("/")
        });
        if let Some(lineage) = lineage {
            metadata.insert("lineage".to_owned(), lineage.clone());
        }
        self.interrupts.push(Interrupt {
            id: approval_id.to_owned(),
            reason: TOOL_CALL_REASON.to_owned(),
            message: Some(match reason {
                Some(reason) => format!("{} needs approval: {reason}", call.tool_name),
                None => format!("{} needs approval", call.tool_name),
            }),
            tool_call_id: Some(call.tool_call_id.clone()),
            response_schema: Some(approval_response_schema()),
            expires_at: self.options.interrupt_expires_at.clone(),
            subagent_run_id,
            metadata: Some(metadata),
        });
        self.pending.push(PendingApproval {
            interrupt_id: approval_id.to_owned(),
            tool_call_id: call.tool_call_id.clone(),
            tool_name: call.tool_name.clone(),
            signature,
        });
    }

    fn close_open(&mut self, out: &mut Vec<Event>) {
        self.text_blocks.clear();
        self.close_text(out);
        self.reasoning_blocks.clear();
        self.close_reasoning(out);
        for id in std::mem::take(&mut self.open_calls) {
            out.push(Event::ToolCallEnd { tool_call_id: id });
        }
    }

    fn finish(&mut self, out: &mut Vec<Event>) {
        self.close_open(out);
        let outcome = if self.interrupts.is_empty() {
            if self.edited {
                out.push(Event::MessagesSnapshot { messages: self.transcript.messages() });
            }
            if self.clears_state {
                out.push(Event::StateSnapshot { snapshot: state_without_pending(self.state.as_ref()) });
            }
            let pending_tool_call_ids =
                self.run_calls.iter().filter(|id| !self.answered.contains(*id)).cloned().collect();
            RunOutcome::Success { pending_tool_call_ids }
        } else {
            out.push(Event::MessagesSnapshot { messages: self.transcript.messages() });
            out.push(Event::StateSnapshot { snapshot: state_with_pending(self.state.as_ref(), &self.pending) });
            RunOutcome::Interrupt { interrupts: std::mem::take(&mut self.interrupts) }
        };
        self.done = true;
        out.push(Event::RunFinished {
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            result: None,
            outcome: Some(outcome),
        });
    }

    fn fail(&mut self, error: Event, out: &mut Vec<Event>) {
        if self.streamed {
            self.close_open(out);
            if self.edited {
                out.push(Event::MessagesSnapshot { messages: self.transcript.messages() });
            }
        }
        self.done = true;
        out.push(error);
    }
}
