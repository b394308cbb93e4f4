//! `toolgate serve`: the HTTP server with the web page.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use axum::http::HeaderName;
use clap::Args;
use toolgate_server::{AppState, ApprovalSecret, PrincipalSource, ServerConfig, serve, shutdown_signal};

use crate::model_spec::model_or_default;
use crate::run::Tools;
use crate::store::{LedgerArgs, StoreArgs};

/// Arguments of `toolgate serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:3000")]
    addr: SocketAddr,
    /// The model, e.g. `local:PATH.gguf`, `openai:gpt-4o-mini` or `script:examples/request-approval/script.json`
    /// (default: the local model `toolgate model pull` installs).
    #[arg(long)]
    model: Option<String>,
    /// The toolkit to offer the model.
    #[arg(long, value_enum, default_value_t = Tools::Demo)]
    tools: Tools,
    /// The approval signing secret (else `TOOLGATE_APPROVAL_SECRET`, else one generated and kept in the data directory).
    #[arg(long)]
    approval_secret: Option<String>,
    /// Also send the AI SDK `signature` field (for clients from ai@6.0.231 on; older ones reject it).
    #[arg(long)]
    signature_field: bool,
    /// Append every model prompt to this file as JSON lines.
    #[arg(long)]
    trace_prompts: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    ledger: LedgerArgs,
    /// Record the value of this header (set by a trusted proxy) as the principal of each answer.
    #[arg(long, conflicts_with = "tokens_file")]
    principal_header: Option<String>,
    /// A JSON object mapping bearer tokens to principals; requests without a known token get 401.
    #[arg(long)]
    tokens_file: Option<PathBuf>,
    /// Model steps per request at most.
    #[arg(long, default_value_t = toolgate::DEFAULT_MAX_STEPS)]
    max_steps: usize,
    /// A system prompt.
    #[arg(long)]
    system: Option<String>,
    /// The largest accepted request body, in bytes.
    #[arg(long, default_value_t = toolgate_server::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
}

/// Runs the server until SIGINT or SIGTERM.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let model = model_or_default(args.model.as_deref())?;
    let data_dir = args.store.data_dir();
    let secret = ApprovalSecret::resolve(args.approval_secret.as_deref(), &data_dir)?;
    let store = args.store.open().await?;
    let mut config = ServerConfig::new(args.addr, args.tools.toolkit().unwrap_or_default(), secret);
    config.signature_field = args.signature_field;
    config.trace_prompts = args.trace_prompts;
    config.max_steps = args.max_steps;
    config.system = args.system;
    config.max_body_bytes = args.max_body_bytes;
    config.ledger = store.map(|store| args.ledger.config(store));
    config.principals = match (&args.principal_header, &args.tokens_file) {
        (Some(header), _) => PrincipalSource::Header(
            HeaderName::try_from(header.as_str()).with_context(|| format!("--principal-header `{header}`"))?,
        ),
        (None, Some(path)) => PrincipalSource::tokens_file(path)?,
        (None, None) => PrincipalSource::None,
    };
    let state = AppState::new(config, model).context("cannot open the --trace-prompts file")?;
    // The server logs `toolgate serving on http://ADDR` (the bound address) at info level.
    serve(state, shutdown_signal()).await.with_context(|| format!("cannot serve on {}", args.addr))?;
    Ok(ExitCode::SUCCESS)
}
