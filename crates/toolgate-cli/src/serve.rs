//! `toolgate serve`: the HTTP server with the web page.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::http::HeaderName;
use clap::{ArgGroup, Args};
use ipnet::IpNet;
use toolgate_server::oidc::DEFAULT_SCOPES;
use toolgate_server::{
    AppState, ApprovalSecret, JwksSource, JwtConfig, JwtVerifier, Notifications, OidcConfig, OidcSignIn,
    PrincipalSource, ServerConfig, serve, shutdown_signal,
};

use crate::config::ConfigArgs;
use crate::model_spec::model_or_default;
use crate::store::{LedgerArgs, StoreArgs};
use crate::tools::ToolSetup;
use crate::tools::Tools;

/// Arguments of `toolgate serve`.
#[derive(Debug, Args)]
// The claim flags apply to JWT bearer tokens and to OIDC ID tokens: one of them must be configured.
#[command(group(ArgGroup::new("token_claims").args(["jwt_jwks", "oidc_issuer"]).multiple(true)))]
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
    /// Record tool inputs and outputs on the exported trace spans (`gen_ai.tool.call.arguments` and
    /// `gen_ai.tool.call.result`); they may hold secrets, so they are left out unless this is given.
    /// Traces are exported when an OTEL_* variable is set (OTEL_EXPORTER_OTLP_ENDPOINT, ...).
    #[arg(long)]
    pub(crate) trace_content: bool,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    ledger: LedgerArgs,
    /// Keep finished approvals, their audit events and finished conversations this long, e.g. `90d`, then
    /// remove them (checked at start and hourly; nothing pending is ever removed). Default: keep everything.
    #[arg(long, value_name = "DURATION", value_parser = parse_retain)]
    retain: Option<Duration>,
    /// The Ed25519 key receipts and audit checkpoints are signed with: a private JWK (OKP, Ed25519). Default:
    /// `receipt-key.jwk` in the data directory, created (0600) on first use. To rotate, point this at a new
    /// key: the old one stays in the store's key set (GET /.well-known/toolgate/receipt-keys), verify-only.
    #[arg(long, value_name = "FILE", conflicts_with = "no_receipts")]
    receipt_key: Option<PathBuf>,
    /// Sign no receipts and run no receipts worker: the audit events are written unchained (a later start
    /// without this flag chains and seals them). For measuring what receipts cost; `GET
    /// /api/approvals/{id}/receipt` and the published keys answer as with a store that keeps no chain.
    #[arg(long)]
    no_receipts: bool,
    /// Record the value of this header (set by a trusted proxy) as the principal of each answer.
    #[arg(long, conflicts_with = "tokens_file")]
    principal_header: Option<String>,
    /// A proxy network (CIDR, or one address) whose requests may set --principal-header; loopback always may
    /// (repeatable). From any other peer a request is refused with 401.
    #[arg(long = "trusted-proxy", value_name = "CIDR", value_parser = parse_network, requires = "principal_header")]
    trusted_proxies: Vec<IpNet>,
    /// Accept JWT bearer tokens verified against this JWKS (a file, or an https URL fetched and cached).
    #[arg(long, value_name = "FILE_OR_URL", conflicts_with_all = ["principal_header", "tokens_file"])]
    jwt_jwks: Option<String>,
    /// The `iss` a JWT must carry.
    #[arg(long, value_name = "ISS", requires = "jwt_jwks")]
    jwt_issuer: Option<String>,
    /// The `aud` a JWT must carry.
    #[arg(long, value_name = "AUD", requires = "jwt_jwks")]
    jwt_audience: Option<String>,
    /// The JWT (or OIDC ID token) claim naming the principal.
    #[arg(long, value_name = "CLAIM", default_value = "sub", requires = "token_claims")]
    jwt_principal_claim: String,
    /// The JWT (or OIDC ID token) claim listing the principal's groups (an array of strings).
    #[arg(long, value_name = "CLAIM", default_value = "groups", requires = "token_claims")]
    jwt_groups_claim: String,
    /// Sign people in on the web page with this OpenID Connect provider (its issuer URL: https, or http on a
    /// loopback address). Bearer tokens (--jwt-jwks or --tokens-file) keep working beside it.
    #[arg(long, value_name = "URL", requires_all = ["oidc_client_id", "public_url"], conflicts_with = "principal_header")]
    oidc_issuer: Option<String>,
    /// This server's client id at the OIDC provider.
    #[arg(long, value_name = "ID", requires = "oidc_issuer")]
    oidc_client_id: Option<String>,
    /// The environment variable holding the OIDC client secret (for a confidential client).
    #[arg(long, value_name = "VAR", requires = "oidc_issuer")]
    oidc_client_secret_env: Option<String>,
    /// The scopes asked for at sign-in (space-separated).
    #[arg(long, value_name = "SCOPES", default_value = DEFAULT_SCOPES, requires = "oidc_issuer")]
    oidc_scopes: String,
    /// Where people reach this server, e.g. https://toolgate.example.com: notifications' one-time
    /// approval links are PUBLIC_URL/a/TOKEN (without it they carry no links); the OIDC callback is
    /// PUBLIC_URL/auth/callback (the session cookie is `Secure` when it is https).
    #[arg(long, value_name = "URL", value_parser = parse_public_url)]
    public_url: Option<String>,
    /// How long after its final state an identical call to POST /api/calls (same tool and input, no
    /// idempotencyKey) still attaches to it instead of being gated again.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_duration, default_value = "10m")]
    retry_window: Duration,
    /// Also answer requests whose `Host` is NAME (or NAME:PORT); repeatable. Loopback names and the
    /// --public-url's host are always answered; any other `Host` gets 421 (against DNS rebinding).
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// Also serve GET /metrics alone, without sign-in, on this address (e.g. 127.0.0.1:9464), for
    /// Prometheus scrapers: whoever reaches it reads the metrics (on --addr they are for admins only).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
    /// Serve a non-loopback --addr without sign-in: only on a network nobody else reaches (anyone who
    /// reaches it could read every conversation and approve any call).
    #[arg(long)]
    insecure_anonymous: bool,
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
    let (store, receipts) = match args.no_receipts {
        true => (args.store.open().await?, None),
        false => args.store.open_signed(args.receipt_key.as_deref()).await?,
    };
    let jwt = match args.jwt_jwks {
        Some(_) => Some(jwt_verifier(&args).await?),
        None => None,
    };
    let oidc = match args.oidc_issuer {
        Some(_) => Some(oidc_sign_in(&args, &secret).await?),
        None => None,
    };
    let setup = Arc::new(ToolSetup::load(args.tools, args.config.config.as_deref()).await?);
    let _rules_watcher = setup.watch_rules()?;
    let mut config = ServerConfig::new(args.addr, setup.toolkit()?.unwrap_or_default(), secret);
    config.policy = setup.policy.clone();
    config.signature_field = args.signature_field;
    config.trace_prompts = args.trace_prompts;
    config.max_steps = args.max_steps;
    config.system = args.system;
    config.max_body_bytes = args.max_body_bytes;
    if args.retain.is_some() && store.is_none() {
        anyhow::bail!("--retain needs a store: with --store none nothing is kept");
    }
    config.ledger = store.map(|store| args.ledger.config(store));
    config.receipts = receipts;
    config.retain = args.retain;
    config.admins = args.admins.iter().chain(setup.admins()).cloned().collect();
    config.groups = setup.groups();
    config.calls = toolgate_server::CallsConfig {
        default: setup.calls().default,
        retry_window: args.retry_window,
        public_url: args.public_url.clone(),
    };
    config.notifications = notifications(setup.notify(), config.ledger.is_some(), args.public_url.as_deref())?;
    let principals = match (&args.principal_header, &args.tokens_file) {
        _ if let Some(verifier) = jwt => PrincipalSource::Jwt(verifier),
        (Some(header), _) => PrincipalSource::Header(
            HeaderName::try_from(header.as_str()).with_context(|| format!("--principal-header `{header}`"))?,
            args.trusted_proxies.clone(),
        ),
        (None, Some(path)) => PrincipalSource::tokens_file(path)?,
        (None, None) => PrincipalSource::None,
    };
    // With OIDC the page signs people in; bearer tokens (JWTs or the tokens file) keep working beside it.
    config.principals = match oidc {
        Some(sessions) => PrincipalSource::Oidc { sessions, bearer: Box::new(principals) },
        None => principals,
    };
    anonymous_addr_refused(args.addr, config.principals.is_configured(), args.insecure_anonymous)?;
    config.allowed_hosts = allowed_hosts(&args.allowed_hosts, args.public_url.as_deref());
    config.metrics_addr = args.metrics_addr;
    toolgate_server::host::HostGuard::new(args.addr, &config.allowed_hosts)
        .map_err(|detail| anyhow::anyhow!("--allowed-host: {detail}"))?;
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

/// The notification channels, when the config file has any: they need a
/// store (deliveries wait in its outbox), and carry links with a public URL.
fn notifications(
    channels: toolgate_notify::Channels,
    stored: bool,
    public_url: Option<&str>,
) -> anyhow::Result<Option<Arc<Notifications>>> {
    if channels.is_empty() {
        return Ok(None);
    }
    anyhow::ensure!(stored, "[[notify]] needs a store: notifications wait in its outbox (--store none keeps nothing)");
    if public_url.is_none() {
        tracing::warn!(
            "[[notify]] without --public-url: messages carry no approve/deny links (the server cannot know the address people reach it at)"
        );
    }
    Ok(Some(Arc::new(Notifications::new(channels, public_url).context("cannot set up the [[notify]] channels")?)))
}

/// An http(s) URL without query or fragment.
pub(crate) fn parse_public_url(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text).map_err(|error| format!("`{text}` is not a URL: {error}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.query().is_some() || url.fragment().is_some() {
        return Err(format!("`{text}` must be an http(s) URL without a query or fragment"));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// The `Host` names a server answers besides loopback: `--allowed-host`
/// values, and the host of `--public-url` (with its port, when it names one).
pub(crate) fn allowed_hosts(allowed: &[String], public_url: Option<&str>) -> Vec<String> {
    let mut hosts = allowed.to_vec();
    if let Some(url) = public_url.and_then(|url| url::Url::parse(url).ok())
        && let Some(host) = url.host_str()
    {
        hosts.push(match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        });
    }
    hosts
}

/// Without sign-in, anyone who reaches the server reads every conversation
/// and approves any call: a non-loopback `--addr` needs a principal source,
/// or `--insecure-anonymous` to say the network is closed.
fn anonymous_addr_refused(addr: SocketAddr, identified: bool, insecure: bool) -> anyhow::Result<()> {
    anyhow::ensure!(
        identified || insecure || addr.ip().is_loopback(),
        "--addr {addr} is not a loopback address and nobody signs in: pass --tokens-file, --jwt-jwks, \
         --principal-header or --oidc-issuer, or --insecure-anonymous if no one else can reach that network"
    );
    Ok(())
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

/// The JWT verifier of the `--jwt-*` flags (the JWKS is read now, so a wrong one fails at start).
async fn jwt_verifier(args: &ServeArgs) -> anyhow::Result<Arc<JwtVerifier>> {
    let jwks = args.jwt_jwks.as_deref().unwrap_or_default();
    let claims = (args.jwt_principal_claim.clone(), args.jwt_groups_claim.clone());
    verifier(jwks, args.jwt_issuer.clone(), args.jwt_audience.clone(), claims).await
}

/// A JWT verifier over a JWKS (a file or an https URL), with the `iss` and
/// `aud` it requires and its (principal, groups) claims; `mcp-gateway` shares it.
pub async fn verifier(
    jwks: &str,
    issuer: Option<String>,
    audience: Option<String>,
    (principal_claim, groups_claim): (String, String),
) -> anyhow::Result<Arc<JwtVerifier>> {
    let (Some(issuer), Some(audience)) = (issuer, audience) else {
        anyhow::bail!(
            "--jwt-jwks needs --jwt-issuer and --jwt-audience: without them any token the JWKS signed, for any \
             application of that identity provider, would be accepted (access tokens carry both, RFC 9068)"
        );
    };
    let mut config = JwtConfig::new(JwksSource::parse(jwks).context("--jwt-jwks")?, issuer, audience);
    config.principal_claim = principal_claim;
    config.groups_claim = groups_claim;
    JwtVerifier::new(config).await.with_context(|| format!("--jwt-jwks {jwks}"))
}

/// The OIDC sign-in of the `--oidc-*` flags (the provider is discovered now, so a wrong issuer fails at start).
async fn oidc_sign_in(args: &ServeArgs, secret: &ApprovalSecret) -> anyhow::Result<Arc<OidcSignIn>> {
    let issuer = args.oidc_issuer.clone().unwrap_or_default();
    let client_id = args.oidc_client_id.clone().context("--oidc-issuer needs --oidc-client-id")?;
    let public_url = args.public_url.clone().context("--oidc-issuer needs --public-url")?;
    let mut config = OidcConfig::new(issuer.clone(), client_id, public_url);
    if let Some(var) = &args.oidc_client_secret_env {
        let secret = std::env::var(var)
            .ok()
            .filter(|secret| !secret.is_empty())
            .with_context(|| format!("the environment variable {var} (--oidc-client-secret-env) is not set"))?;
        config.client_secret = Some(secret);
    }
    config.scopes = args.oidc_scopes.split_whitespace().map(str::to_owned).collect();
    config.principal_claim = args.jwt_principal_claim.clone();
    config.groups_claim = args.jwt_groups_claim.clone();
    let sign_in = OidcSignIn::discover(config, secret).await.with_context(|| format!("--oidc-issuer {issuer}"))?;
    tracing::info!(callback = sign_in.callback_url(), "the page signs people in with OpenID Connect");
    Ok(sign_in)
}

/// A retention period of at least one hour.
fn parse_retain(text: &str) -> Result<Duration, String> {
    let retain = crate::duration::parse_duration(text)?;
    if retain < Duration::from_secs(60 * 60) {
        return Err(format!("`{text}` is shorter than an hour"));
    }
    Ok(retain)
}

/// A network in CIDR form (`10.0.0.0/8`, `fd00::/8`), or one address (`/32` or `/128`).
fn parse_network(text: &str) -> Result<IpNet, String> {
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from))
        .map_err(|_| format!("`{text}` is neither a CIDR network (10.0.0.0/8) nor an IP address"))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    fn parse(flags: &[&str]) -> Result<ServeArgs, clap::Error> {
        Serve::try_parse_from(std::iter::once("serve").chain(flags.iter().copied())).map(|serve| serve.args)
    }

    #[test]
    fn a_non_loopback_addr_needs_sign_in_or_insecure_anonymous() {
        let open: SocketAddr = "0.0.0.0:3913".parse().unwrap();
        let refused = anonymous_addr_refused(open, false, false).unwrap_err().to_string();
        assert!(refused.contains("--tokens-file") && refused.contains("--insecure-anonymous"), "{refused}");
        assert!(anonymous_addr_refused(open, true, false).is_ok());
        assert!(anonymous_addr_refused(open, false, true).is_ok());
        assert!(anonymous_addr_refused("127.0.0.1:3913".parse().unwrap(), false, false).is_ok());
        assert!(parse(&["--addr", "0.0.0.0:3913", "--insecure-anonymous"]).unwrap().insecure_anonymous);
    }

    #[test]
    fn the_public_urls_host_is_answered() {
        let hosts = allowed_hosts(&["lan.example".to_owned()], Some("https://toolgate.example.com:8443/base"));
        assert_eq!(hosts, ["lan.example", "toolgate.example.com:8443"]);
        assert_eq!(allowed_hosts(&[], Some("https://toolgate.example.com")), ["toolgate.example.com"]);
    }

    #[tokio::test]
    async fn a_jwks_without_issuer_and_audience_is_refused_at_start() {
        let claims = || ("sub".to_owned(), "groups".to_owned());
        for (issuer, audience) in [(None, None), (Some("https://idp"), None), (None, Some("toolgate"))] {
            let refused = verifier("jwks.json", issuer.map(str::to_owned), audience.map(str::to_owned), claims())
                .await
                .unwrap_err()
                .to_string();
            assert!(refused.contains("--jwt-issuer and --jwt-audience"), "{refused}");
        }
    }

    #[test]
    fn oidc_flags_need_a_client_id_and_a_public_url() {
        let oidc = ["--oidc-issuer", "https://idp.example.com", "--oidc-client-id", "toolgate"];
        let args = parse(&[&oidc[..], &["--public-url", "https://toolgate.example.com"]].concat()).unwrap();
        assert_eq!(args.oidc_scopes, "openid profile email groups");
        assert_eq!((args.jwt_principal_claim.as_str(), args.jwt_groups_claim.as_str()), ("sub", "groups"));
        let error = parse(&oidc).unwrap_err().to_string();
        assert!(error.contains("--public-url"), "{error}");
        // Alone it serves the notifications' one-time links.
        assert_eq!(
            parse(&["--public-url", "https://toolgate.example.com/"]).unwrap().public_url.as_deref(),
            Some("https://toolgate.example.com")
        );
        assert!(parse(&["--public-url", "ftp://toolgate.example.com"]).is_err(), "not http(s)");
        assert!(parse(&["--public-url", "https://toolgate.example.com/?a=1"]).is_err(), "a query");
        let header = ["--public-url", "https://t.example.com", "--principal-header", "X-User"];
        assert!(parse(&[&oidc[..], &header].concat()).is_err(), "OIDC and a principal header");
    }

    #[test]
    fn claim_flags_apply_to_jwts_and_oidc_id_tokens() {
        let oidc = [
            "--oidc-issuer",
            "https://idp.example.com",
            "--oidc-client-id",
            "t",
            "--public-url",
            "https://t.example.com",
        ];
        let args =
            parse(&[&oidc[..], &["--jwt-principal-claim", "email", "--jwt-groups-claim", "roles"]].concat()).unwrap();
        assert_eq!((args.jwt_principal_claim.as_str(), args.jwt_groups_claim.as_str()), ("email", "roles"));
        assert!(parse(&["--jwt-jwks", "jwks.json", "--jwt-principal-claim", "email"]).is_ok());
        let error = parse(&["--jwt-principal-claim", "email"]).unwrap_err().to_string();
        assert!(error.contains("--jwt-jwks") || error.contains("--oidc-issuer"), "{error}");
        let with_tokens = [&oidc[..], &["--tokens-file", "tokens.json"]].concat();
        assert!(parse(&with_tokens).is_ok(), "bearer tokens beside OIDC");
    }

    #[test]
    fn the_retry_window_is_any_duration() {
        assert_eq!(parse(&[]).unwrap().retry_window, Duration::from_secs(600));
        assert_eq!(parse(&["--retry-window", "30s"]).unwrap().retry_window, Duration::from_secs(30));
        assert!(parse(&["--retry-window", "soon"]).is_err());
    }

    #[test]
    fn retention_and_sync_flags() {
        let args = parse(&["--retain", "90d", "--store-sync", "full"]).unwrap();
        assert_eq!(args.retain, Some(Duration::from_secs(90 * 24 * 60 * 60)));
        assert_eq!(args.store.store_sync, toolgate_store::StoreSync::Full);
        assert_eq!(parse(&[]).unwrap().store.store_sync, toolgate_store::StoreSync::Normal);
        assert!(parse(&["--retain", "10m"]).unwrap_err().to_string().contains("shorter than an hour"));
        assert!(parse(&["--retain", "soon"]).is_err());
        assert!(parse(&["--store-sync", "always"]).unwrap_err().to_string().contains("normal or full"));
    }

    #[test]
    fn trusted_proxies_are_networks_or_addresses() {
        assert_eq!(parse_network("10.0.0.0/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(parse_network("10.1.2.3").unwrap().to_string(), "10.1.2.3/32");
        assert_eq!(parse_network("fd00::1").unwrap().to_string(), "fd00::1/128");
        assert!(parse_network("10.0.0.0/33").unwrap_err().contains("10.0.0.0/33"));
        assert!(parse_network("proxy.internal").is_err());
    }
}
