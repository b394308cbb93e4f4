//! `toolgate serve`: the HTTP server with the web page.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use axum::http::HeaderName;
use clap::Args;
use toolgate_server::{AppState, ApprovalSecret, PrincipalSource, ServerConfig, serve, shutdown_signal};

use crate::config::ConfigArgs;
use crate::model_spec::model_or_default;
use crate::run::Tools;
use crate::store::{LedgerArgs, StoreArgs};
use crate::tools::ToolSetup;

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
    /// The toolkit to offer the model (MCP tools of `--config` join it).
    #[arg(long, value_enum, default_value_t = Tools::Demo)]
    tools: Tools,
    #[command(flatten)]
    config: ConfigArgs,
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
    /// A JSON object mapping bearer tokens (or `sha256:HEX`, a token's digest) to principals;
    /// requests without a known token get 401.
    #[arg(long)]
    tokens_file: Option<PathBuf>,
    /// A principal who sees every owner's audit events (repeatable; also `admins = [...]` in --config).
    #[arg(long = "admin", value_name = "PRINCIPAL")]
    admins: Vec<String>,
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
    let setup = Arc::new(ToolSetup::load(args.tools, args.config.config.as_deref()).await?);
    let _rules_watcher = setup.watch_rules()?;
    let mut config = ServerConfig::new(args.addr, setup.toolkit()?.unwrap_or_default(), secret);
    config.policy = setup.policy.clone();
    config.signature_field = args.signature_field;
    config.trace_prompts = args.trace_prompts;
    config.max_steps = args.max_steps;
    config.system = args.system;
    config.max_body_bytes = args.max_body_bytes;
    config.ledger = store.map(|store| args.ledger.config(store));
    config.admins = args.admins.iter().chain(setup.admins()).cloned().collect();
    config.principals = match (&args.principal_header, &args.tokens_file) {
        (Some(header), _) => PrincipalSource::Header(
            HeaderName::try_from(header.as_str()).with_context(|| format!("--principal-header `{header}`"))?,
        ),
        (None, Some(path)) => PrincipalSource::tokens_file(path)?,
        (None, None) => PrincipalSource::None,
    };
    let state = AppState::new(config, model).context("cannot open the --trace-prompts file")?;
    let refresher =
        setup.changes().map(|changes| tokio::spawn(offer_new_tools(changes, Arc::clone(&setup), state.clone())));
    // The server logs `toolgate serving on http://ADDR` (the bound address) at info level.
    let served = serve(state, shutdown_signal()).await.with_context(|| format!("cannot serve on {}", args.addr));
    if let Some(refresher) = refresher {
        refresher.abort();
    }
    setup.shutdown().await;
    served?;
    Ok(ExitCode::SUCCESS)
}

/// Offers the MCP servers' new tool lists from the next request on.
async fn offer_new_tools(mut changes: tokio::sync::watch::Receiver<u64>, setup: Arc<ToolSetup>, state: AppState) {
    while changes.changed().await.is_ok() {
        match setup.toolkit() {
            Ok(toolkit) => {
                let toolkit = toolkit.unwrap_or_default();
                tracing::info!(tools = ?toolkit.names(), "MCP tool list changed; offering the new toolkit");
                state.set_toolkit(toolkit);
            }
            Err(error) => {
                tracing::error!("MCP tool list changed but the toolkit is refused, keeping the old one: {error:#}")
            }
        }
    }
}
