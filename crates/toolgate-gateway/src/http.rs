//! The gateway over streamable HTTP: `POST/GET/DELETE /mcp` (rmcp's
//! streamable HTTP service, a session per client) and `GET /healthz`.
//!
//! With a principal source (`--tokens-file`, the JWT flags), every request
//! to `/mcp` is identified before the MCP service sees it, exactly as
//! `toolgate serve` identifies its API requests: a missing or refused
//! credential is a 401 and nothing runs; the verified principal (and its
//! groups, those of the credential and of the config's `[groups]`) is what
//! the call's approval is filed under. Without one, every request acts for
//! the gateway's default principal.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use toolgate_auth::{IdentifyError, PrincipalSource};

use crate::gateway::{Gateway, Identity};
use crate::handler::GatewayHandler;

/// Who may call, and how they are told apart.
#[derive(Clone)]
pub struct Principals {
    /// Where requests' principals come from (`PrincipalSource::None`: every
    /// request acts for the default identity).
    pub source: Arc<PrincipalSource>,
    /// The configured groups: name -> members.
    pub groups: Arc<BTreeMap<String, Vec<String>>>,
}

/// The HTTP app: `/mcp` and `/healthz`. `allowed_hosts` are the `Host`
/// values accepted besides loopback (rmcp refuses others, against DNS
/// rebinding); `shutdown` ends every session.
pub fn router(
    gateway: Arc<Gateway>,
    default: Identity,
    principals: Principals,
    allowed_hosts: Vec<String>,
    shutdown: CancellationToken,
) -> Router {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(allowed_hosts);
    let config = StreamableHttpServerConfig::default().with_allowed_hosts(hosts).with_cancellation_token(shutdown);
    let service = StreamableHttpService::new(
        move || Ok(GatewayHandler::new(Arc::clone(&gateway), default.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let mcp = Router::new().nest_service("/mcp", service).layer(middleware::from_fn_with_state(principals, identify));
    Router::new().route("/healthz", get(|| async { "ok" })).merge(mcp)
}

/// Identifies a request to `/mcp` (see the module docs).
async fn identify(State(principals): State<Principals>, mut request: Request, next: Next) -> Response {
    if !principals.source.is_configured() {
        return next.run(request).await;
    }
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip());
    match principals.source.identify(request.headers(), peer).await {
        Ok((Some(principal), mut groups)) => {
            groups.extend(toolgate::ledger::groups_listing(&principals.groups, &principal));
            groups.sort_unstable();
            groups.dedup();
            request.extensions_mut().insert(Identity { principal, groups });
            next.run(request).await
        }
        Ok((None, _)) => (http::StatusCode::UNAUTHORIZED, "a principal is required").into_response(),
        Err(error) => refusal(&error),
    }
}

/// The answer to a refused request, as `toolgate serve` gives it: the
/// refusal's status, `{"error": {"code", "message"}}`, and the bearer
/// challenge (`WWW-Authenticate`) of a refused JWT.
fn refusal(error: &IdentifyError) -> Response {
    let body = serde_json::json!({"error": {"code": error.code(), "message": error.to_string()}});
    let mut response = (error.status(), axum::Json(body)).into_response();
    if let Some(challenge) = error.challenge().and_then(|challenge| http::HeaderValue::from_str(&challenge).ok()) {
        response.headers_mut().insert(http::header::WWW_AUTHENTICATE, challenge);
    }
    response
}
