//! `toolgate mcp-gateway`: the MCP gateway (see the `toolgate-gateway`
//! crate) in front of the `[[mcp]]` servers of `--config`, over stdio or,
//! with `--listen`, streamable HTTP at `/mcp`.
//!
//! On stdio, stdout carries the protocol: logs go to stderr (as everywhere
//! in this CLI). The rules reload when the config file changes; the servers
//! are read once. The store must keep state (`sqlite`, the default, or
//! `postgres://`): the approvals, their audit log and the retries live there.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{ArgGroup, Args};
use tokio_util::sync::CancellationToken;
use toolgate::ledger::LedgerConfig;
use toolgate_gateway::http::{Principals, router};
use toolgate_gateway::{Gateway, GatewayOptions, Identity, serve_stdio};
use toolgate_mcp::McpTools;
use toolgate_policy::PolicyHandle;
use toolgate_server::PrincipalSource;
use toolgate_server::host::HostGuard;

use crate::config::{Config, parse_policy};
use crate::store::{LedgerArgs, StoreArgs, os_user};

/// Arguments of `toolgate mcp-gateway`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("principal_sources").args(["tokens_file", "jwt_jwks"])))]
pub struct GatewayArgs {
    /// The config file: `[[mcp]]` servers to put behind the gateway, `[[rule]]`s, `[groups]`, and
    /// `[gateway]` (`permission_prompt_tool = true` offers Claude Code's `approval_prompt`).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    ledger: LedgerArgs,
    /// Who the calls are from when the transport names nobody (stdio, or HTTP without --tokens-file or
    /// --jwt-jwks). Default: the OS user name.
    #[arg(long, value_name = "NAME")]
    principal: Option<String>,
    /// File approvals under this client name instead of the `clientInfo.name` the client sends.
    #[arg(long, value_name = "NAME")]
    client_name: Option<String>,
    /// How long a call waits for an out-of-band decision before it returns the pending result.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_duration, default_value = "50s")]
    hold: Duration,
    /// How many calls one principal may have waiting for approval through the gateway at once; a
    /// call that would hold one more is refused with an error result.
    #[arg(long, value_name = "N", default_value_t = toolgate_gateway::DEFAULT_MAX_HELD_CALLS)]
    max_held_calls: usize,
    /// How long after its decision an identical call still gets the stored outcome.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_duration, default_value = "10m")]
    retry_window: Duration,
    /// Where people reach a `toolgate serve` on the same store: pending results link to
    /// PUBLIC_URL/approvals/ID.
    #[arg(long, value_name = "URL", value_parser = crate::serve::parse_public_url)]
    public_url: Option<String>,
    /// With --listen: also answer requests whose `Host` is NAME (or NAME:PORT); repeatable. Loopback
    /// names and the --public-url's host are always answered; any other `Host` gets 421.
    #[arg(long = "allowed-host", value_name = "NAME", requires = "listen")]
    allowed_hosts: Vec<String>,
    /// With --listen: a JSON object mapping bearer tokens (or `sha256:HEX`) to principals; requests
    /// without a known token get 401.
    #[arg(long, requires = "listen")]
    tokens_file: Option<PathBuf>,
    /// With --listen: accept JWT bearer tokens verified against this JWKS (a file, or an https URL).
    #[arg(long, value_name = "FILE_OR_URL", requires = "listen")]
    jwt_jwks: Option<String>,
    /// The `iss` a JWT must carry.
    #[arg(long, value_name = "ISS", requires = "jwt_jwks")]
    jwt_issuer: Option<String>,
    /// The `aud` a JWT must carry.
    #[arg(long, value_name = "AUD", requires = "jwt_jwks")]
    jwt_audience: Option<String>,
    /// The JWT claim naming the principal.
    #[arg(long, value_name = "CLAIM", default_value = "sub")]
    jwt_principal_claim: String,
    /// The JWT claim listing the principal's groups.
    #[arg(long, value_name = "CLAIM", default_value = "groups")]
    jwt_groups_claim: String,
}

/// Runs the gateway until the client disconnects (stdio) or Ctrl-C (HTTP).
pub async fn run(args: GatewayArgs) -> anyhow::Result<std::process::ExitCode> {
    let config = Config::load(&args.config)?;
    anyhow::ensure!(
        config.agents.is_empty(),
        "mcp-gateway serves the [[mcp]] servers' tools only; the [[agent]] tables of --config {} are for \
         `serve`, `chat` and `run`",
        args.config.display()
    );
    let (store, sealer) = args.store.open_sealed().await?;
    let store = store.context(
        "mcp-gateway needs a store that keeps approvals (`--store sqlite`, the default, or `postgres://...`), not `none`",
    )?;
    let ledger = LedgerConfig { groups: Arc::new(config.groups.clone()), ..args.ledger.config(store) };
    let mcp = McpTools::connect(config.mcp.clone())
        .await
        .with_context(|| format!("cannot start the MCP servers of --config {}", args.config.display()))?;
    let policy = PolicyHandle::new(config.policy.clone());
    let _watcher = toolgate_policy::watch_file(&config.path, policy.clone(), parse_policy)
        .with_context(|| format!("cannot watch --config {}", config.path.display()))?;
    let principal = match &args.principal {
        Some(principal) => principal.clone(),
        None => os_user()?,
    };
    toolgate::ledger::check_principal(&principal).context("--principal (or the OS user name) cannot name a caller")?;
    if let Some(name) = &args.client_name {
        toolgate::ledger::check_client_name(name).context("--client-name cannot be filed under")?;
    }
    let mut options = GatewayOptions::new(principal.clone());
    options.client_name = args.client_name.clone();
    options.hold = args.hold;
    options.retry_window = args.retry_window;
    options.max_held_calls = args.max_held_calls;
    options.public_url = args.public_url.clone();
    options.permission_prompt_tool = config.gateway.permission_prompt_tool;
    let mcp = Arc::new(mcp);
    let gateway = Gateway::new(Arc::clone(&mcp), policy, ledger, options);
    let groups = toolgate::ledger::groups_listing(&config.groups, &principal);
    let identity = Identity { principal, groups };
    let served = match args.listen {
        None => serve_stdio(gateway, identity).await.map_err(anyhow::Error::from),
        Some(addr) => serve_http(&args, &config, gateway, identity, addr).await,
    };
    mcp.shutdown().await;
    if let Some(sealer) = sealer {
        sealer.finish().await;
    }
    served.map(|()| std::process::ExitCode::SUCCESS)
}

/// Without a principal source every HTTP request acts for the default
/// principal, and its approvals land in that person's inbox as their own: so
/// only a loopback address may be served that way.
fn anonymous_listen_refused(addr: SocketAddr, identified: bool) -> anyhow::Result<()> {
    anyhow::ensure!(
        identified || addr.ip().is_loopback(),
        "--listen {addr} is not a loopback address: pass --tokens-file or --jwt-jwks so every request names its \
         principal (without them anyone who reaches it would call as --principal)"
    );
    Ok(())
}

/// Serves streamable HTTP on `addr` until Ctrl-C.
async fn serve_http(
    args: &GatewayArgs,
    config: &Config,
    gateway: Arc<Gateway>,
    identity: Identity,
    addr: SocketAddr,
) -> anyhow::Result<()> {
    anonymous_listen_refused(addr, args.tokens_file.is_some() || args.jwt_jwks.is_some())?;
    let source = match (&args.tokens_file, &args.jwt_jwks) {
        (Some(path), _) => PrincipalSource::tokens_file(path)?,
        (None, Some(jwks)) => {
            let claims = (args.jwt_principal_claim.clone(), args.jwt_groups_claim.clone());
            PrincipalSource::Jwt(
                crate::serve::verifier(jwks, args.jwt_issuer.clone(), args.jwt_audience.clone(), claims).await?,
            )
        }
        (None, None) => PrincipalSource::None,
    };
    let principals = Principals { source: Arc::new(source), groups: Arc::new(config.groups.clone()) };
    let mut hosts = crate::serve::allowed_hosts(&args.allowed_hosts, args.public_url.as_deref());
    if !addr.ip().is_unspecified() {
        hosts.extend([addr.ip().to_string(), addr.to_string()]);
    }
    let shutdown = CancellationToken::new();
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
    let guard = HostGuard::new(bound, &hosts).map_err(|detail| anyhow::anyhow!("--allowed-host: {detail}"))?;
    eprintln!("toolgate: MCP gateway at http://{bound}/mcp, answering Host {}", guard.describe());
    let app = router(gateway, identity, principals, hosts, shutdown.clone())
        .layer(axum::middleware::from_fn_with_state(Arc::new(guard), toolgate_server::host::guard));
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            toolgate_server::shutdown_signal().await;
            shutdown.cancel();
        })
        .await
        .context("the HTTP server failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_is_served_without_a_principal_source() {
        let loopback: SocketAddr = "127.0.0.1:3100".parse().unwrap();
        let open: SocketAddr = "0.0.0.0:3100".parse().unwrap();
        assert!(anonymous_listen_refused(loopback, false).is_ok());
        assert!(anonymous_listen_refused("[::1]:3100".parse().unwrap(), false).is_ok());
        let refused = anonymous_listen_refused(open, false).unwrap_err().to_string();
        assert!(refused.contains("--tokens-file or --jwt-jwks"), "{refused}");
        assert!(anonymous_listen_refused(open, true).is_ok());
    }
}
