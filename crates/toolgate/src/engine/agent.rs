//! Sub-agents: an agent used as a tool, whose gated calls are asked, answered
//! and run exactly once from the root conversation, at any depth.
//!
//! ```text
//! Tool::agent("researcher", Agent::new(model).instructions("...").toolkit(tools))
//! ```
//!
//! An [`Agent`] has its own model, instructions, toolkit, gate (rules; the
//! caller's when it sets none) and step limit. Called as a tool, it runs an
//! engine call of its own on the tool's input (a `task` text, or a typed
//! input, [`Agent::input`]) and its final answer (text, or JSON checked
//! against [`Agent::output`]) is the tool's result. Agents may call agents.
//!
//! # A gated call below the root
//!
//! A sub-agent whose call needs approval *pauses*: it stores its history and
//! ends its tool call with its approval requests instead of a result. Every
//! level above surfaces them in its own step (see the `nested` module of the
//! engine) and pauses in turn, so the root's step ends with an approval
//! request for the nested call, as a call of the tool that was called
//! (`tool_call.tool_name` is the nested tool's, `tool_call.tool_call_id` is
//! the path of call ids, `ApprovalRequest::lineage` names each agent call
//! from the root down). Several pending calls of one step, in one sub-agent
//! or in siblings, are one batch, answered together as any batch is.
//!
//! After the answer, each level *resumes* the agent call leading to it: the
//! sub-agent continues from its stored history with the answers appended
//! (nothing it ran before runs again, no model call that answered is made
//! again); its engine call checks and claims the answers as any engine call
//! does, at the depth of the call, so the approved call runs under the
//! ledger's claim exactly once, with the tool's rules, the agent's gate,
//! edits checked again ([`crate::approval::lifecycle::check_edit`]) and the
//! approval's expiry. Its answer becomes its parent's tool result, up to the
//! root. Everything that can refuse an answer refuses it before anything
//! runs, at every depth: resumed sub-runs are prepared (checked and claimed)
//! while their root request is prepared.
//!
//! # Data model
//!
//! - **A sub-run** is one agent call: the root conversation's key and the
//!   lineage (each level's agent name and call id) name it.
//! - **Its ledger conversation** is its own: the root conversation's key
//!   followed by the lineage's call ids, each after an ASCII record
//!   separator (`U+001E`, which no conversation id may hold, so no client
//!   can name it), with the root's owner, client and principal. Its
//!   approvals are recorded there (`ApprovalRecord::conversation_id`), its
//!   call ids (chosen by its own model) never meet another level's, and the
//!   claim finds an answer's record by its approval id and binds it to that
//!   conversation, call, tool and input, as at the root.
//! - **Its stored state** is a stored conversation under that same key
//!   (owner-scoped like every conversation): a JSON object
//!   (`toolgateSubRun: 1`, `status` `paused` or `finished`, `agent`,
//!   `lineage`, the root conversation's key `root`, and the history
//!   `messages` while paused or the `output` once finished). A paused
//!   sub-run is read when it is resumed, and kept while its approvals are
//!   open (retention keeps a conversation that holds an open approval).
//!   A finished one answers a retried call with the stored output, so a
//!   root request that is sent again after a crash runs nothing twice.
//! - **The root answer** names the approval id the depth-n engine issued;
//!   each level routes it down by the marked call's lineage, and only the
//!   depth-n claim decides it.
//!
//! # Outcomes
//!
//! A denial at depth n is an `execution-denied` result in that sub-agent,
//! whose model decides what to do next. A sub-agent that reaches its step
//! limit, fails, or has nowhere to store its pause (no ledger) gives its
//! parent a tool error, as JSON: `{"error": CODE, "agent": NAME, "message":
//! ...}` with the codes [`STEP_LIMIT`], [`FAILED`], [`NEEDS_LEDGER`],
//! [`CLIENT_TOOL`], [`INVALID_OUTPUT`] and [`CONFLICT`]. An approval nobody
//! answers expires at its depth like any other; an answer after that is
//! `expired` there, and the sub-agent goes on with that result.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_protocol::{FinishReason, ModelMessage, ToolApprovalResponsePart, ToolCallPart};

use super::nested::{answers_message, failure, lift};
use super::stream::Emitter;
use super::{DEFAULT_MAX_STEPS, Prepared, TextRequest, drive};
use crate::ledger::{ConversationStore, Ledger, SUB_RUN_SEPARATOR};
use crate::{
    CallGate, EngineError, GateCall, LanguageModel, SharedModel, Tool, ToolContext, ToolError, Toolkit, Verdict,
};

/// The error code of a sub-agent that reached its step limit while still calling tools.
pub const STEP_LIMIT: &str = "subagent_step_limit";
/// The error code of a sub-agent whose engine call failed.
pub const FAILED: &str = "subagent_failed";
/// The error code of a sub-agent that paused on an approval without a ledger to keep its history.
pub const NEEDS_LEDGER: &str = "subagent_needs_ledger";
/// The error code of a sub-agent that called a client-executed tool (no client runs it).
pub const CLIENT_TOOL: &str = "subagent_client_tool";
/// The error code of a sub-agent whose final answer does not match its output schema.
pub const INVALID_OUTPUT: &str = "subagent_invalid_output";
/// The error code of a sub-agent whose stored state another request changed meanwhile.
pub const CONFLICT: &str = "subagent_conflict";

pub use crate::ledger::LineageStep;

/// Where a sub-agent's run stands under the root conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubRunPlace {
    /// The root conversation's ledger key (empty without a ledger).
    pub root: String,
    /// The agent calls from the root down to this one.
    pub lineage: Vec<LineageStep>,
}

type OutputCheck = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

/// An agent: a model with its instructions, tools, rules and step limit,
/// used as a tool through [`Tool::agent`]. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    model: SharedModel,
    instructions: Option<String>,
    toolkit: Option<Toolkit>,
    gate: Option<Arc<dyn CallGate>>,
    max_steps: usize,
    description: Option<String>,
    input_schema: Value,
    output: Option<(Value, OutputCheck)>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.model.model_id())
            .field("toolkit", &self.toolkit.as_ref().map(Toolkit::names))
            .field("max_steps", &self.max_steps)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent on this model, with no tools, taking a `task` text.
    pub fn new(model: impl LanguageModel + 'static) -> Self {
        Self::shared(Arc::new(model))
    }

    /// An agent on a model chosen at runtime.
    pub fn shared(model: SharedModel) -> Self {
        Self {
            model,
            instructions: None,
            toolkit: None,
            gate: None,
            max_steps: DEFAULT_MAX_STEPS,
            description: None,
            input_schema: json!({
                "type": "object",
                "properties": { "task": { "type": "string", "description": "What the agent is asked to do" } },
                "required": ["task"],
                "additionalProperties": false
            }),
            output: None,
        }
    }

    /// The system prompt of each of its model calls.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// The tools it may call (other agents among them).
    pub fn toolkit(mut self, toolkit: Toolkit) -> Self {
        self.toolkit = Some(toolkit);
        self
    }

    /// Rules of its own for its calls, added to its caller's: both are
    /// asked, and the stricter verdict wins (deny, then ask, then allow; a
    /// gate with no verdict leaves the other's). The caller's gate (the
    /// root's rules and sticky decisions) always applies at every depth.
    pub fn gate(mut self, gate: Arc<dyn CallGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Model steps at most per run (at least 1; default [`DEFAULT_MAX_STEPS`]).
    pub fn max_steps(mut self, max_steps: usize) -> Self {
        self.max_steps = max_steps.max(1);
        self
    }

    /// What the agent does, as its caller's model reads it.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Takes an input of type `I` (its JSON Schema), sent to the agent's model as JSON text.
    pub fn input<I: JsonSchema + DeserializeOwned + 'static>(mut self) -> Self {
        self.input_schema = schemars::SchemaGenerator::default().into_root_schema_for::<I>().to_value();
        self
    }

    /// Answers with a value of type `O`: the final text must be its JSON
    /// (else the caller gets an [`INVALID_OUTPUT`] error), and is the tool's result.
    pub fn output<O: JsonSchema + DeserializeOwned + 'static>(mut self) -> Self {
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<O>().to_value();
        let check: OutputCheck = Arc::new(|value| O::deserialize(value).map(drop).map_err(|error| error.to_string()));
        self.output = Some((schema, check));
        self
    }

    /// The tools it may call.
    pub fn tools(&self) -> Option<&Toolkit> {
        self.toolkit.as_ref()
    }

    /// The final answer as the tool's result.
    fn answer(&self, name: &str, text: String) -> Result<Value, ToolError> {
        let Some((_, check)) = &self.output else { return Ok(Value::String(text)) };
        let value: Value = serde_json::from_str(text.trim()).map_err(|error| {
            ToolError::json(failure(name, INVALID_OUTPUT, format!("the answer is not JSON: {error}")))
        })?;
        check(&value).map_err(|detail| ToolError::json(failure(name, INVALID_OUTPUT, detail)))?;
        Ok(value)
    }

    /// The first message of a fresh run: the task text, or the input as JSON.
    fn prompt(input: &Value) -> ModelMessage {
        match input.get("task").and_then(Value::as_str) {
            Some(task) if input.as_object().is_some_and(|object| object.len() == 1) => ModelMessage::user(task),
            _ => ModelMessage::user(input.to_string()),
        }
    }
}

impl Tool {
    /// A tool that runs `agent` (see [`crate::agent`]): its input is the
    /// agent's, its result the agent's answer; approvals of calls the agent
    /// makes surface in the caller's step.
    pub fn agent(name: impl Into<String>, agent: Agent) -> Tool {
        let name = name.into();
        let description = agent.description.clone().unwrap_or_else(|| format!("Ask the `{name}` agent"));
        let tool_name = name.clone();
        let shared = Arc::new(agent.clone());
        Tool::dynamic(name, agent.input_schema.clone())
            .description(description)
            .handler(move |input: Value, context: ToolContext| {
                let agent = agent.clone();
                let name = tool_name.clone();
                async move { run(&agent, &name, input, context).await }
            })
            .with_agent(shared)
    }
}

/// What an agent tool's run gets from the engine call that runs it.
pub(crate) struct Nesting {
    /// The caller's request (its messages taken): what a sub-run inherits.
    pub parent: TextRequest,
    /// A resumed sub-run, prepared (checked and claimed) with the caller's request.
    pub prepared: Mutex<Option<PreparedSubRun>>,
}

impl Nesting {
    /// The context of a fresh call of an agent tool under `parent`.
    pub(crate) fn fresh(parent: &TextRequest) -> crate::tool::Nesting {
        Arc::new(Nesting { parent: parent.clone(), prepared: Mutex::new(None) })
    }
}

/// A sub-run ready to continue: its engine call prepared, and where to store it.
pub(crate) struct PreparedSubRun {
    prepared: Prepared,
    stored: Stored,
    /// The history it continues from, as it will be stored (with marked parts).
    history: Vec<ModelMessage>,
}

/// Where a sub-run's state lives and the version read.
struct Stored {
    ledger: Option<Ledger>,
    version: Option<i64>,
    place: SubRunPlace,
}

/// A sub-run's stored state (see the module docs).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct State {
    toolgate_sub_run: u32,
    #[serde(flatten)]
    status: Status,
    agent: String,
    lineage: Vec<LineageStep>,
    root: String,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "camelCase")]
enum Status {
    Paused { messages: Vec<ModelMessage> },
    Finished { output: Value, error: bool },
}

/// The place, ledger and stored state of the call `call_id` of `agent` under `parent`.
async fn open(parent: &TextRequest, agent: &str, call_id: &str) -> Result<(Stored, Option<Status>), EngineError> {
    let mut lineage = parent.sub_run.as_ref().map(|place| place.lineage.clone()).unwrap_or_default();
    lineage.push(LineageStep { agent: agent.to_owned(), tool_call_id: call_id.to_owned() });
    let root = match (&parent.sub_run, &parent.ledger) {
        (Some(place), _) => place.root.clone(),
        (None, Some(ledger)) => ledger.conversation_id.clone(),
        (None, None) => String::new(),
    };
    let place = SubRunPlace { root, lineage };
    let Some(parent_ledger) = &parent.ledger else {
        return Ok((Stored { ledger: None, version: None, place }, None));
    };
    let mut key = place.root.clone();
    for step in &place.lineage {
        key.push(SUB_RUN_SEPARATOR);
        key.push_str(&step.tool_call_id);
    }
    let ledger = Ledger { conversation_id: key, sub_run: Some(place.clone()), ..parent_ledger.clone() };
    let stored = ConversationStore::conversation(ledger.config.store.as_ref(), &ledger.conversation_id).await?;
    let (version, status) = match stored {
        None => (None, None),
        Some(conversation) => {
            let state: State = serde_json::from_value(conversation.messages).map_err(|error| {
                EngineError::Store(crate::ledger::StoreError::Corrupt(format!("sub-agent state: {error}")))
            })?;
            (Some(conversation.version), Some(state.status))
        }
    };
    Ok((Stored { ledger: Some(ledger), version, place }, status))
}

/// The ledger key of the root conversation of a stored sub-run, when
/// `stored` (a stored conversation's value) is one: a decision made out of
/// band on a sub-agent's approval marks the sub-run's conversation due, and
/// the root conversation is what continues (it hands the decision down).
pub fn sub_run_root(stored: &Value) -> Option<&str> {
    stored.get("toolgateSubRun")?;
    stored.get("root")?.as_str()
}

/// The agent whose progress a preliminary output of an agent call is
/// (`{"status": "running" | "awaiting-approval", "agent", ...}`, as the
/// engine reports it while the agent works or waits), or `None` for any
/// other output. An encoder tags the progress with the sub-run by it.
pub fn progress_agent(output: &Value) -> Option<&str> {
    let status = output.get("status")?.as_str()?;
    if status != "running" && status != "awaiting-approval" {
        return None;
    }
    output.get("agent")?.as_str()
}

/// The engine call of a sub-run on `history`, inheriting what `parent` sets.
fn sub_request(agent: &Agent, parent: &TextRequest, stored: &Stored, history: Vec<ModelMessage>) -> TextRequest {
    let caller = parent.caller();
    let mut request = TextRequest::new(history).max_steps(agent.max_steps);
    request.system = agent.instructions.clone();
    request.toolkit = agent.toolkit.clone();
    request.tool_concurrency = parent.tool_concurrency;
    request.hold_batch_for_approval = parent.hold_batch_for_approval;
    request.signer = parent.signer.clone();
    request.id_generator = Arc::clone(&parent.id_generator);
    request.gate = match (&agent.gate, &parent.gate) {
        (Some(own), Some(caller)) => Some(Arc::new(Layered { caller: Arc::clone(caller), own: Arc::clone(own) })),
        (own, caller) => own.clone().or_else(|| caller.clone()),
    };
    request.conversation_id = caller.conversation_id.map(str::to_owned);
    request.principal = caller.principal.map(str::to_owned);
    request.groups = parent.groups.clone();
    request.ledger = stored.ledger.clone();
    request.sub_run = Some(stored.place.clone());
    request
}

/// An agent's gate added to its caller's (see [`Agent::gate`]).
struct Layered {
    caller: Arc<dyn CallGate>,
    own: Arc<dyn CallGate>,
}

impl CallGate for Layered {
    fn check<'a>(&'a self, call: GateCall<'a>) -> BoxFuture<'a, Option<Verdict>> {
        Box::pin(async move {
            let caller = self.caller.check(call).await;
            let own = self.own.check(call).await;
            match (caller, own) {
                (Some(caller), Some(own)) => Some(if caller.action > own.action { caller } else { own }),
                (caller, own) => own.or(caller),
            }
        })
    }

    /// The rule that allowed the call: the caller's, else the agent's own.
    fn allowed_by(&self, tool_call_id: &str) -> Option<String> {
        self.caller.allowed_by(tool_call_id).or_else(|| self.own.allowed_by(tool_call_id))
    }

    /// The caller's config (the server's rules), else the agent's own.
    fn config_digest(&self) -> Option<String> {
        self.caller.config_digest().or_else(|| self.own.config_digest())
    }
}

/// Prepares the resumption of the agent call `call` (of `tool`) with `answers`,
/// under `parent`: reads its paused state and checks and claims the answers
/// there (see the module docs). `None`: it finished already, and a run of
/// the call gives its stored output.
pub(crate) fn prepare_resume<'a>(
    parent: &'a TextRequest,
    tool: &'a Tool,
    call: &'a ToolCallPart,
    answers: Vec<ToolApprovalResponsePart>,
) -> BoxFuture<'a, Result<Option<PreparedSubRun>, EngineError>> {
    Box::pin(prepare_resume_boxed(parent, tool, call, answers))
}

async fn prepare_resume_boxed(
    parent: &TextRequest,
    tool: &Tool,
    call: &ToolCallPart,
    answers: Vec<ToolApprovalResponsePart>,
) -> Result<Option<PreparedSubRun>, EngineError> {
    let first = answers.first().map(|answer| answer.approval_id.clone()).unwrap_or_default();
    let mismatch =
        |detail: &str| EngineError::ApprovalMismatch { approval_id: first.clone(), detail: detail.to_owned() };
    let agent = tool
        .agent_def()
        .and_then(|agent| Arc::clone(agent).downcast::<Agent>().ok())
        .ok_or_else(|| mismatch("its call leads to a tool that is not an agent"))?;
    let (stored, status) = open(parent, tool.name(), &call.tool_call_id).await?;
    let mut history = match status {
        Some(Status::Paused { messages }) => messages,
        Some(Status::Finished { .. }) => return Ok(None),
        None => return Err(mismatch("no paused sub-agent run holds it")),
    };
    history.push(answers_message(answers));
    let request = sub_request(&agent, parent, &stored, history.clone());
    Ok(Some(PreparedSubRun { prepared: super::prepare(request).await?, stored, history }))
}

/// Runs an agent tool's call: a prepared resumption, or a fresh run (or the stored output of a finished one).
async fn run(agent: &Agent, name: &str, input: Value, context: ToolContext) -> Result<Value, ToolError> {
    let nesting = context.nesting().and_then(|nesting| Arc::clone(nesting).downcast::<Nesting>().ok());
    let Some(nesting) = nesting else {
        return Err(ToolError::json(failure(name, FAILED, "an agent runs only as a tool of an engine call")));
    };
    let resumed = nesting.prepared.lock().map(|mut prepared| prepared.take()).unwrap_or(None);
    let sub_run = match resumed {
        Some(sub_run) => sub_run,
        None => {
            let failed = |error: EngineError| ToolError::json(failure(name, FAILED, error.to_string()));
            let (stored, status) = open(&nesting.parent, name, context.tool_call_id()).await.map_err(failed)?;
            match status {
                Some(Status::Finished { output, error: false }) => return Ok(output),
                Some(Status::Finished { output, error: true }) => return Err(ToolError::json(output)),
                Some(Status::Paused { .. }) => {
                    let message = "the agent is waiting for approvals: answer them to continue it";
                    return Err(ToolError::json(failure(name, CONFLICT, message)));
                }
                None => {}
            }
            let history = vec![Agent::prompt(&input)];
            let request = sub_request(agent, &nesting.parent, &stored, history.clone());
            PreparedSubRun { prepared: super::prepare(request).await.map_err(failed)?, stored, history }
        }
    };
    let PreparedSubRun { prepared, stored, mut history } = sub_run;
    let (emitter, parts) = Emitter::channel();
    let driven: futures::future::BoxFuture<'_, _> =
        Box::pin(drive(&agent.model, prepared, true, context.cancellation().clone(), emitter));
    let (result, ()) = futures::join!(driven, report_progress(name, parts, &context));
    let result = match result {
        Ok(result) => result,
        Err(error) => return Err(ToolError::json(failure(name, FAILED, error.to_string()))),
    };
    history.extend(result.response_messages.iter().cloned());
    let step = stored
        .place
        .lineage
        .last()
        .cloned()
        .unwrap_or(LineageStep { agent: name.to_owned(), tool_call_id: context.tool_call_id().to_owned() });
    if !result.approval_requests().is_empty() {
        if stored.ledger.is_none() {
            let message = "a call of the agent needs approval, and only a ledger can keep the agent while it waits";
            return Err(ToolError::json(failure(name, NEEDS_LEDGER, message)));
        }
        let lifted = lift(result.approval_requests(), &step);
        save(&stored, name, Status::Paused { messages: history }).await?;
        return Err(ToolError::paused(lifted));
    }
    let outcome = if !result.client_tool_calls().is_empty() {
        Err(ToolError::json(failure(name, CLIENT_TOOL, "the agent called a tool only a client can run")))
    } else if result.finish_reason == FinishReason::ToolCalls {
        let message = format!("the agent reached its limit of {} steps before answering", agent.max_steps);
        Err(ToolError::json(failure(name, STEP_LIMIT, message)))
    } else {
        agent.answer(name, result.text())
    };
    let status = match &outcome {
        Ok(output) => Status::Finished { output: output.clone(), error: false },
        Err(error) => Status::Finished { output: error.to_value(), error: true },
    };
    save(&stored, name, status).await?;
    outcome
}

/// Reports the sub-agent's progress as preliminary outputs of its call
/// (`{"status": "running", "agent", "steps", "calls": [{"toolCallId", "toolName", "state"}], "text"}`):
/// once per step and per call event, never per text delta, each the whole
/// progress so far (a client shows the latest).
async fn report_progress(
    agent: &str,
    mut parts: tokio::sync::mpsc::Receiver<toolgate_protocol::StreamPart>,
    context: &ToolContext,
) {
    use toolgate_protocol::StreamPart;
    let mut steps = 0;
    let mut calls: Vec<Value> = Vec::new();
    let mut text = String::new();
    let state = |calls: &mut Vec<Value>, id: &str, name: &str, state: &str| match calls
        .iter_mut()
        .find(|call| call["toolCallId"] == id)
    {
        Some(call) => call["state"] = json!(state),
        None => calls.push(json!({ "toolCallId": id, "toolName": name, "state": state })),
    };
    while let Some(part) = parts.recv().await {
        match &part {
            StreamPart::StartStep => {
                text.clear();
                continue;
            }
            StreamPart::TextDelta { text: delta, .. } => {
                text.push_str(delta);
                continue;
            }
            StreamPart::FinishStep { .. } => steps += 1,
            StreamPart::ToolCall(call) => state(&mut calls, &call.tool_call_id, &call.tool_name, "called"),
            StreamPart::ToolApprovalRequest { tool_call, .. } => {
                state(&mut calls, &tool_call.tool_call_id, &tool_call.tool_name, "awaiting-approval")
            }
            StreamPart::ToolResult { tool_call_id, tool_name, preliminary: None | Some(false), .. } => {
                state(&mut calls, tool_call_id, tool_name, "done")
            }
            StreamPart::ToolError { tool_call_id, tool_name, .. } => {
                state(&mut calls, tool_call_id, tool_name, "failed")
            }
            StreamPart::ToolOutputDenied { tool_call_id, tool_name, .. } => {
                state(&mut calls, tool_call_id, tool_name, "denied")
            }
            _ => continue,
        }
        context.report(json!({ "status": "running", "agent": agent, "steps": steps, "calls": calls, "text": text }));
    }
}

/// Stores a sub-run's state (nothing without a ledger); another writer first is a [`CONFLICT`].
async fn save(stored: &Stored, agent: &str, status: Status) -> Result<(), ToolError> {
    let Some(ledger) = &stored.ledger else { return Ok(()) };
    let state = State {
        toolgate_sub_run: 1,
        status,
        agent: agent.to_owned(),
        lineage: stored.place.lineage.clone(),
        root: stored.place.root.clone(),
    };
    let value =
        serde_json::to_value(&state).map_err(|error| ToolError::json(failure(agent, FAILED, error.to_string())))?;
    let now = ledger.config.clock.now();
    let store = ledger.config.store.as_ref();
    let saved = ConversationStore::save_conversation(
        store,
        &ledger.conversation_id,
        ledger.owner.as_deref(),
        &value,
        stored.version,
        now,
    )
    .await
    .map_err(|error| ToolError::json(failure(agent, FAILED, error.to_string())))?;
    match saved {
        Some(_) => Ok(()),
        None => Err(ToolError::json(failure(agent, CONFLICT, "another request continued the agent meanwhile"))),
    }
}
