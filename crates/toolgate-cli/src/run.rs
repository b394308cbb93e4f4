//! `toolgate run`: one `stream_text` call, printed as JSON lines.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use futures::StreamExt;
use toolgate::approval::ApprovalSigner;
use toolgate::protocol::parse_messages_str;
use toolgate::{EngineError, RecordingModel, TextRequest, stream_text};
use toolgate_policy::StoredGate;
use toolgate_store::StoreSync;

use crate::config::ConfigArgs;
use crate::model_spec::model_or_default;
use crate::store::{self, LedgerArgs, default_data_dir};
use crate::tools::{ToolSetup, Tools};

/// What `toolgate run` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Emit {
    /// The stream parts, one per line.
    Parts,
    /// The response messages, one per line.
    Messages,
    /// The prompt of each model call, one per line.
    Prompts,
}

/// Arguments of `toolgate run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The model, e.g. `local:PATH.gguf`, `openai:gpt-4o-mini` or `script:examples/request-approval/script.json`
    /// (default: the local model `toolgate model pull` installs).
    #[arg(long)]
    model: Option<String>,
    /// A JSON file holding an array of AI SDK ModelMessages.
    #[arg(long)]
    messages: PathBuf,
    /// The toolkit to offer the model (MCP tools of `--config` join it).
    #[arg(long, value_enum, default_value_t = Tools::Demo)]
    tools: Tools,
    #[command(flatten)]
    config: ConfigArgs,
    /// Sign approval requests with this secret and require valid signatures on approvals.
    #[arg(long, env = "TOOLGATE_APPROVAL_SECRET", hide_env_values = true)]
    approval_secret: Option<String>,
    /// Also write the AI SDK's separate `signature` field on approval requests.
    #[arg(long, requires = "approval_secret")]
    signature_field: bool,
    /// Hold a step's other calls while some of them wait for approval.
    #[arg(long)]
    hold_batch: bool,
    /// Model steps at most.
    #[arg(long, default_value_t = toolgate::DEFAULT_MAX_STEPS)]
    max_steps: usize,
    /// A system prompt.
    #[arg(long)]
    system: Option<String>,
    /// What to print.
    #[arg(long, value_enum, default_value_t = Emit::Parts)]
    emit: Emit,
    /// Record and settle approvals in a store (`sqlite`, `sqlite://PATH`, `postgres://…`, `memory`); without it
    /// the run is stateless over the history it is given (`TOOLGATE_STORE` does not apply here).
    #[arg(long)]
    store: Option<String>,
    /// Where the default SQLite store is kept (with `--store sqlite`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    #[command(flatten)]
    ledger: LedgerArgs,
    /// The conversation the history belongs to (approvals are bound to it when a store is used).
    #[arg(long, default_value = "cli")]
    conversation: String,
}

/// Runs the command; exit code 1 with a message on stderr when the history is rejected or the model fails.
pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.messages)
        .with_context(|| format!("cannot read --messages {}", args.messages.display()))?;
    let messages = parse_messages_str(&text).with_context(|| format!("--messages {}", args.messages.display()))?;
    let model = RecordingModel::new(model_or_default(args.model.as_deref())?);

    let mut request = TextRequest::new(messages).max_steps(args.max_steps).hold_batch_for_approval(args.hold_batch);
    let setup = ToolSetup::load(args.tools, args.config.config.as_deref()).await?;
    if let Some(toolkit) = setup.toolkit()? {
        request = request.toolkit(toolkit);
    }
    if let Some(system) = args.system {
        request = request.system(system);
    }
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let store = store::open(args.store.as_deref().unwrap_or("none"), &data_dir, StoreSync::default()).await?;
    // Sticky decisions live in the store; a stateless run has only the file's rules.
    let decisions = store.clone().unwrap_or_else(|| std::sync::Arc::new(toolgate::ledger::MemoryStore::new()));
    let now = toolgate::ledger::Clock::now(&toolgate::ledger::SystemClock);
    let gate = StoredGate::new(setup.policy.current(), decisions, Some(args.conversation.clone()), None, now);
    // History terms count the calls the store recorded (without one they are unknown).
    let gate = match &store {
        Some(store) => gate.with_history(std::sync::Arc::clone(store), std::sync::Arc::new(setup.groups())),
        None => gate,
    };
    request = request.gate(std::sync::Arc::new(gate)).conversation_id(&args.conversation);
    if let Some(store) = store {
        request = request.ledger(args.ledger.config(store).conversation(&args.conversation));
    }
    if let Some(secret) = &args.approval_secret {
        let signer = ApprovalSigner::new(secret).context("--approval-secret")?;
        request = request.approval_signer(signer.with_signature_field(args.signature_field));
    }

    let mut stdout = std::io::stdout().lock();
    let mut stream = match stream_text(&model, request).await {
        Ok(stream) => stream,
        Err(error) => bail!("the history was rejected: {error}"),
    };
    while let Some(part) = stream.next().await {
        if args.emit == Emit::Parts {
            writeln!(stdout, "{}", serde_json::to_string(&part)?)?;
        }
    }
    let (messages, failure) = match stream.finish().await {
        Ok(result) => (result.response_messages, None),
        Err(error @ (EngineError::Model { .. } | EngineError::Incomplete { .. })) => {
            (error.response_messages().to_vec(), Some(error))
        }
        Err(other) => bail!("{other}"),
    };
    match args.emit {
        Emit::Parts => {}
        Emit::Messages => {
            for message in &messages {
                writeln!(stdout, "{}", serde_json::to_string(message)?)?;
            }
        }
        Emit::Prompts => {
            for request in model.requests() {
                writeln!(stdout, "{}", serde_json::to_string(&request.prompt)?)?;
            }
        }
    }
    stdout.flush()?;
    setup.shutdown().await;
    match failure {
        None => Ok(ExitCode::SUCCESS),
        Some(error) => {
            eprintln!("toolgate: the run failed after it started: {error}");
            Ok(ExitCode::FAILURE)
        }
    }
}
