//! The caller of a request, as the handlers take it: [`Caller`], an axum
//! extractor over the server's [`toolgate_auth::PrincipalSource`] (which `toolgate-auth`
//! holds, with every way of telling who sent a request).
//!
//! The contract: extracting a [`Caller`] identifies the request with the
//! configured source at the server's clock (the ledger's when it has one) and
//! adds the config's `[groups]` that list its principal; a refusal is the
//! source's [`toolgate_auth::IdentifyError`] as an [`ApiError`] (400
//! `invalid_principal` for a malformed principal header, 401 `unauthorized`
//! for a missing or refused credential, with `WWW-Authenticate` for a
//! refused JWT), before the handler runs.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use toolgate::approval::lifecycle::Voter;

use crate::app::AppState;
use crate::error::ApiError;

/// Who sent a request: its principal from the server's source (see the
/// module docs), `None` without one, and its groups (those its credential
/// names and the config's `[groups]` that list it). Extracting it refuses the
/// request with 401 when a required credential is missing or not believed.
/// The peer's address comes from the connection
/// ([`axum::extract::ConnectInfo`], which [`crate::serve_listener`] provides;
/// under a router served without it the peer is unknown, and a principal
/// header is then never believed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The principal.
    pub principal: Option<String>,
    /// Its groups, sorted, each once.
    pub groups: Vec<String>,
}

impl Caller {
    /// Who a request with these headers from `peer` is, now: its credential
    /// checked by the server's source
    /// ([`toolgate_auth::PrincipalSource::identify_at`]), its
    /// groups those the credential names and the config's `[groups]` that
    /// list it. Long-lived responses (the inbox stream) call it again to
    /// re-check a caller.
    pub async fn identify(state: &AppState, headers: &HeaderMap, peer: Option<IpAddr>) -> Result<Self, ApiError> {
        let config = state.config();
        let (principal, mut groups) = config.principals.identify_at(headers, peer, state.now()).await?;
        if let Some(principal) = &principal {
            groups.extend(toolgate::ledger::groups_listing(&config.groups, principal));
        }
        groups.sort_unstable();
        groups.dedup();
        Ok(Caller { principal, groups })
    }
}

/// The peer address of a request, when the server provides it.
/// Checks a long-lived stream's caller again, as a new request would (at
/// every keep-alive): `Ok` with who they are now (their groups may have
/// changed), or `Err` with the `event: ended` frame that ends the stream,
/// when the credential expired, was withdrawn or now names someone else.
pub(crate) async fn recheck(
    state: &AppState,
    headers: &HeaderMap,
    peer: Option<IpAddr>,
    was: &Caller,
) -> Result<Caller, axum::body::Bytes> {
    match Caller::identify(state, headers, peer).await {
        Ok(now) if now.principal != was.principal => {
            Err(ended("principal_changed", "the credential now names another principal"))
        }
        Ok(now) => Ok(now),
        Err(refusal) => Err(ended(refusal.code, &refusal.message)),
    }
}

/// The `ended` event: why a stream stops, as JSON `code` and `message`.
fn ended(code: &str, message: &str) -> axum::body::Bytes {
    let data = serde_json::json!({"code": code, "message": message});
    axum::body::Bytes::from(format!("event: ended\ndata: {data}\n\n"))
}

pub(crate) fn peer_of(parts: &Parts) -> Option<IpAddr> {
    parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip())
}

impl Caller {
    /// Who is acting, as the approval lifecycle sees them on this server: the
    /// principal, their groups, whether they are an admin, and whether they
    /// are nobody (no principal on a server that has a principal source).
    pub fn voter(&self, state: &AppState) -> Voter {
        let config = state.config();
        let admin = self.principal.as_ref().is_some_and(|principal| config.admins.iter().any(|a| a == principal));
        let anonymous = self.principal.is_none() && config.principals.is_configured();
        Voter { principal: self.principal.clone(), groups: self.groups.clone(), admin, bearer_link: false, anonymous }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        // Boxed: a long-polling handler's future keeps the size of its largest
        // step while it waits, and a credential check's is over a kilobyte.
        Box::pin(Caller::identify(state, &parts.headers, peer_of(parts))).await
    }
}
