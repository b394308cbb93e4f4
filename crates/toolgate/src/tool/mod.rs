//! Tools: what the model may call, who runs it, and whether a person must approve.
//!
//! A [`Tool`] is built in one of four ways:
//! - [`Tool::function`]: typed input (`Deserialize + JsonSchema`), the schema
//!   is generated; an input is valid when it satisfies that schema (so
//!   constraints such as `minLength` or `exclusiveMinimum` hold) and decodes;
//!   run by a [`Tool::handler`].
//! - [`Tool::dynamic`]: a JSON Schema known only at runtime (e.g. MCP),
//!   checked with a JSON Schema validator.
//! - `.client_executed()` on either: the caller runs it; the engine stops
//!   and hands the call back.
//! - [`Tool::provider`]: hosted by the model provider; never run here.
//!
//! Approval ([`Tool::needs_approval`], [`Tool::approval_when`],
//! [`Tool::approval_when_async`], and [`Tool::policy`] /
//! [`Tool::policy_async`], which may also deny) is decided per call and
//! **fails closed**: input that does not decode, a policy that errors, and a
//! policy that panics all mean "approval required".
//!
//! **Edits.** A person approving a call may replace its input. An edit is a
//! new input: it must pass the schema and the tool's policy must not deny it,
//! as for a call the model made. Tools whose input must not be edited say
//! [`Tool::editable`]`(false)`; provider-executed tools are never editable.

mod context;
mod error;
mod gate;
mod policy;
mod toolkit;
mod verdict;

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use toolgate_protocol::{ToolResultOutput, ToolSpec};

pub use context::SharedMessages;
pub use context::{ApprovalContext, ToolContext};
pub(crate) use context::{Nesting, PreliminarySink};
pub use error::ToolError;
pub use gate::{CallGate, Caller, GateAction, GateCall, Shadowed, decide_call};
pub use policy::ApprovalPolicy;
pub use toolkit::{Toolkit, ToolkitError};
pub use verdict::Verdict;

type Handler = Arc<dyn Fn(Value, ToolContext) -> BoxFuture<'static, Result<Value, ToolError>> + Send + Sync>;
type Validator = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;
type OutputMapper = Arc<dyn Fn(&Value) -> ToolResultOutput + Send + Sync>;

/// Who runs a tool.
#[derive(Clone)]
pub(crate) enum Execution {
    /// toolgate runs it with this handler.
    Local(Handler),
    /// The caller runs it.
    Client,
    /// The model provider runs it.
    Provider { id: String, args: Value },
    /// Nothing was configured: a toolkit refuses such a tool.
    Unset,
}

/// A tool definition with its schema, runner and approval policy. Cheap to clone.
#[derive(Clone)]
pub struct Tool {
    def: Arc<ToolDef>,
}

#[derive(Clone)]
struct ToolDef {
    name: String,
    description: Option<String>,
    input_schema: Value,
    validator: Result<Validator, String>,
    execution: Execution,
    approval: ApprovalPolicy,
    dynamic: bool,
    editable: bool,
    approval_ttl: Option<std::time::Duration>,
    idempotent: bool,
    approval_reason: Option<String>,
    model_output: Option<OutputMapper>,
    /// The agent this tool runs, for a tool built by [`Tool::agent`] (opaque here).
    agent: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.def.name)
            .field("kind", &self.kind_name())
            .field("approval", &self.def.approval)
            .finish_non_exhaustive()
    }
}

/// A provider-hosted tool described by a provider crate becomes [`Tool::provider`].
impl From<crate::model::ProviderTool> for Tool {
    fn from(tool: crate::model::ProviderTool) -> Self {
        let (name, id, args) = tool.into_parts();
        Self::provider(name, id, args)
    }
}

impl Tool {
    /// A tool with a typed input. Its JSON Schema comes from `I`, and an input
    /// is valid when it satisfies that schema and decodes into `I`.
    pub fn function<I: DeserializeOwned + JsonSchema + 'static>(name: impl Into<String>) -> Self {
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<I>().to_value();
        let validator = schema_validator(&schema).map(|check_schema| {
            let validator: Validator = Arc::new(move |input| {
                check_schema(input)?;
                decode::<I>(input).map(drop)
            });
            validator
        });
        Self::with_schema(name.into(), schema, validator, false)
    }

    /// A tool whose input schema is only known at runtime. An input is valid
    /// when it satisfies `input_schema`; a schema that does not compile makes
    /// the toolkit refuse the tool.
    pub fn dynamic(name: impl Into<String>, input_schema: Value) -> Self {
        let validator = schema_validator(&input_schema);
        Self::with_schema(name.into(), input_schema, validator, true)
    }

    /// A tool the model provider hosts and runs (e.g. `openai.mcp`). toolgate
    /// never runs it; approvals for it come from the provider and the answers
    /// go back to the provider.
    pub fn provider(name: impl Into<String>, id: impl Into<String>, args: Value) -> Self {
        let accept_any: Validator = Arc::new(|_| Ok(()));
        let execution = Execution::Provider { id: id.into(), args };
        Self::with_schema(name.into(), Value::Object(Default::default()), Ok(accept_any), true)
            .edit(|def| def.execution = execution)
    }

    fn with_schema(name: String, input_schema: Value, validator: Result<Validator, String>, dynamic: bool) -> Self {
        Self {
            def: Arc::new(ToolDef {
                name,
                description: None,
                input_schema,
                validator,
                execution: Execution::Unset,
                approval: ApprovalPolicy::Never,
                dynamic,
                editable: true,
                approval_ttl: None,
                idempotent: false,
                approval_reason: None,
                model_output: None,
                agent: None,
            }),
        }
    }

    fn edit(mut self, change: impl FnOnce(&mut ToolDef)) -> Self {
        change(Arc::make_mut(&mut self.def));
        self
    }

    /// Sets what the tool does, as the model reads it.
    pub fn description(self, description: impl Into<String>) -> Self {
        let description = description.into();
        self.edit(|def| def.description = Some(description))
    }

    /// Sets the async handler. It receives the input decoded as `I` (use
    /// `serde_json::Value` for dynamic tools) and returns a serializable
    /// output or an error that converts into [`ToolError`].
    pub fn handler<I, O, E, F, Fut>(self, handler: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + 'static,
        E: Into<ToolError> + 'static,
        F: Fn(I, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let execution = Execution::Local(Arc::new(move |input: Value, context: ToolContext| {
            let handler = Arc::clone(&handler);
            async move {
                let input = decode::<I>(&input).map_err(ToolError::text)?;
                let output = handler(input, context).await.map_err(Into::into)?;
                serde_json::to_value(output).map_err(|e| ToolError::text(format!("tool output is not JSON: {e}")))
            }
            .boxed()
        }));
        self.edit(|def| def.execution = execution)
    }

    /// Declares that the caller runs this tool: the engine returns its calls
    /// instead of running them. Client-executed tools take no approval policy;
    /// the client runs them in front of the person.
    pub fn client_executed(self) -> Self {
        self.edit(|def| {
            def.execution = Execution::Client;
            def.approval = ApprovalPolicy::Never;
        })
    }

    /// Every call needs approval (`true`) or none does (`false`, the default).
    pub fn needs_approval(self, always: bool) -> Self {
        self.edit(|def| def.approval = if always { ApprovalPolicy::Always } else { ApprovalPolicy::Never })
    }

    /// Approval decided per call by a function of the decoded input.
    pub fn approval_when<I, F>(self, policy: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        F: Fn(&I, &ApprovalContext) -> bool + Send + Sync + 'static,
    {
        let policy = ApprovalPolicy::when(policy);
        self.edit(|def| def.approval = policy)
    }

    /// Approval decided per call by an async function of the decoded input,
    /// which may consult application state (capture it in the closure).
    pub fn approval_when_async<I, F, Fut, E>(self, policy: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        F: Fn(I, ApprovalContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<bool, E>> + Send + 'static,
        E: std::fmt::Display + 'static,
    {
        let policy = ApprovalPolicy::when_async(policy);
        self.edit(|def| def.approval = policy)
    }

    /// Approval decided per call by a function of the decoded input that may
    /// also deny outright, or say why it asks and who approves (see [`Verdict`]).
    pub fn policy<I, F>(self, policy: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        F: Fn(&I, &ApprovalContext) -> Verdict + Send + Sync + 'static,
    {
        let policy = ApprovalPolicy::deciding(policy);
        self.edit(|def| def.approval = policy)
    }

    /// Like [`Tool::policy`], with an async function that may consult application state.
    pub fn policy_async<I, F, Fut, E>(self, policy: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        F: Fn(I, ApprovalContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Verdict, E>> + Send + 'static,
        E: std::fmt::Display + 'static,
    {
        let policy = ApprovalPolicy::deciding_async(policy);
        self.edit(|def| def.approval = policy)
    }

    /// Whether a person approving a call may replace its input (default `true`).
    /// An edit of a tool that is not editable is refused with
    /// [`crate::EngineError::EditNotAllowed`] and nothing runs.
    pub fn editable(self, editable: bool) -> Self {
        self.edit(|def| def.editable = editable)
    }

    /// True when a person may edit this tool's input on approval.
    pub fn is_editable(&self) -> bool {
        self.def.editable && !self.is_provider_executed()
    }

    /// How long this tool's approval requests stay answerable, instead of the
    /// ledger's default ([`crate::ledger::LedgerConfig::ttl`]).
    pub fn approval_ttl(self, ttl: std::time::Duration) -> Self {
        self.edit(|def| def.approval_ttl = Some(ttl))
    }

    /// This tool's own approval lifetime, if it sets one.
    pub fn approval_ttl_override(&self) -> Option<std::time::Duration> {
        self.def.approval_ttl
    }

    /// Declares that running a call twice has the same effect as running it
    /// once (default `false`). With a ledger, an approved call whose process
    /// died while it ran is run again only for idempotent tools; otherwise it
    /// resolves as interrupted (outcome unknown).
    pub fn idempotent(self, idempotent: bool) -> Self {
        self.edit(|def| def.idempotent = idempotent)
    }

    /// True when the tool is declared idempotent.
    pub fn is_idempotent(&self) -> bool {
        self.def.idempotent
    }

    /// Why this tool's own policy asks a person, as approval cards show it
    /// (default: ``tool `NAME` requires approval``).
    pub fn approval_reason(self, reason: impl Into<String>) -> Self {
        let reason = reason.into();
        self.edit(|def| def.approval_reason = Some(reason))
    }

    /// Why a person is asked when this tool's own policy asks.
    pub fn ask_reason(&self) -> String {
        match &self.def.approval_reason {
            Some(reason) => reason.clone(),
            None => format!("tool `{}` requires approval", self.def.name),
        }
    }

    /// Maps the handler's output to what the model reads (AI SDK
    /// `toModelOutput`), e.g. images as content parts. By default a string is
    /// a text result and anything else a JSON result.
    pub fn to_model_output(self, mapper: impl Fn(&Value) -> ToolResultOutput + Send + Sync + 'static) -> Self {
        let mapper: OutputMapper = Arc::new(mapper);
        self.edit(|def| def.model_output = Some(mapper))
    }

    /// The tool result the model reads for a handler output.
    pub fn model_output(&self, output: &Value) -> ToolResultOutput {
        match &self.def.model_output {
            Some(mapper) => mapper(output),
            None => ToolResultOutput::from_value(output.clone()),
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The JSON Schema of the input.
    pub fn input_schema(&self) -> &Value {
        &self.def.input_schema
    }

    /// The approval policy.
    pub fn approval_policy(&self) -> &ApprovalPolicy {
        &self.def.approval
    }

    /// True for tools built with [`Tool::dynamic`] or [`Tool::provider`].
    pub fn is_dynamic(&self) -> bool {
        self.def.dynamic
    }

    /// True when toolgate runs this tool itself.
    pub fn is_local(&self) -> bool {
        matches!(self.def.execution, Execution::Local(_))
    }

    /// True when the caller runs this tool.
    pub fn is_client_executed(&self) -> bool {
        matches!(self.def.execution, Execution::Client)
    }

    /// True when the model provider runs this tool.
    pub fn is_provider_executed(&self) -> bool {
        matches!(self.def.execution, Execution::Provider { .. })
    }

    /// Why its input schema is not a JSON Schema a validator compiles, if it
    /// is not (every input is then refused, see [`Tool::validate_input`]).
    pub fn schema_error(&self) -> Option<&str> {
        self.def.validator.as_ref().err().map(String::as_str)
    }

    /// Checks an input against the tool's schema.
    pub fn validate_input(&self, input: &Value) -> Result<(), String> {
        match &self.def.validator {
            Ok(validate) => validate(input),
            Err(schema_error) => Err(format!("the tool's input schema is invalid: {schema_error}")),
        }
    }

    /// Whether this call needs a person's approval. Fails closed: see the module docs.
    pub async fn requires_approval(&self, input: &Value, context: ApprovalContext) -> bool {
        self.def.approval.requires_approval(&self.def.name, input, context).await
    }

    /// What the tool's policy decides for this call. Fails closed: see the module docs.
    pub async fn decide(&self, input: &Value, context: ApprovalContext) -> Verdict {
        self.def.approval.decide(&self.def.name, input, context).await
    }

    /// How the model sees this tool.
    pub fn spec(&self) -> ToolSpec {
        match &self.def.execution {
            Execution::Provider { id, args } => {
                ToolSpec::Provider { name: self.def.name.clone(), id: id.clone(), args: args.clone() }
            }
            Execution::Local(_) | Execution::Client | Execution::Unset => ToolSpec::Function {
                name: self.def.name.clone(),
                description: self.def.description.clone(),
                input_schema: self.def.input_schema.clone(),
            },
        }
    }

    /// Runs the handler, turning a panic into an error. Not for client or provider tools.
    pub(crate) async fn run(&self, input: Value, context: ToolContext) -> Result<Value, ToolError> {
        let Execution::Local(handler) = &self.def.execution else {
            return Err(ToolError::text(format!("tool `{}` is not executed by toolgate", self.def.name)));
        };
        let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(input, context)));
        let future = match started {
            Ok(future) => future,
            Err(panic) => return Err(panicked(&self.def.name, panic.as_ref())),
        };
        match std::panic::AssertUnwindSafe(future).catch_unwind().await {
            Ok(outcome) => outcome,
            Err(panic) => Err(panicked(&self.def.name, panic.as_ref())),
        }
    }

    /// Marks this tool as running `agent` (only [`Tool::agent`] does).
    pub(crate) fn with_agent(self, agent: Arc<dyn std::any::Any + Send + Sync>) -> Self {
        self.edit(|def| def.agent = Some(agent))
    }

    /// The agent this tool runs, if it is an agent tool.
    pub(crate) fn agent_def(&self) -> Option<&Arc<dyn std::any::Any + Send + Sync>> {
        self.def.agent.as_ref()
    }

    /// True for a tool built by [`Tool::agent`].
    pub fn is_agent(&self) -> bool {
        self.def.agent.is_some()
    }

    fn kind_name(&self) -> &'static str {
        match self.def.execution {
            Execution::Local(_) => "local",
            Execution::Client => "client",
            Execution::Provider { .. } => "provider",
            Execution::Unset => "unset",
        }
    }
}

/// A validator for a JSON Schema, or why the schema does not compile.
fn schema_validator(schema: &Value) -> Result<Validator, String> {
    let compiled = jsonschema::validator_for(schema).map_err(|error| error.to_string())?;
    Ok(Arc::new(move |input| {
        let errors: Vec<String> = compiled
            .iter_errors(input)
            .map(|error| {
                let path = error.instance_path().to_string();
                if path.is_empty() { error.to_string() } else { format!("{path}: {error}") }
            })
            .collect();
        if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
    }))
}

fn decode<I: DeserializeOwned>(input: &Value) -> Result<I, String> {
    I::deserialize(input).map_err(|e| e.to_string())
}

fn panicked(tool_name: &str, payload: &(dyn std::any::Any + Send)) -> ToolError {
    tracing::error!(tool = tool_name, "tool handler panicked");
    ToolError::text(format!("tool `{tool_name}` failed: {}", panic_message(payload)))
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic".to_owned()
    }
}
