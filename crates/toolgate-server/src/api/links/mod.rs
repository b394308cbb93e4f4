//! `PUBLIC_URL/a/{token}`: the one-time approval links that notifications
//! carry (see [`crate::notify::token`] for what a token binds).
//!
//! - `GET` shows what the link would do (the tool, the input, the reason,
//!   the requester, who decides) and a form; it decides nothing, because
//!   mail scanners and chat previews fetch links.
//! - A form `POST` to the same URL (`application/x-www-form-urlencoded`,
//!   optional `reason`, and `token`, a bearer token, where the server takes
//!   them and the request carries no `Authorization`) decides, as a vote
//!   through the same checks as `POST /api/approvals/{id}`
//!   ([`lifecycle::check_vote`], [`lifecycle::cast`]); the server then
//!   continues the conversation as after any out-of-band decision.
//! - Who votes: with `links = "bearer"` on the channel, the channel itself
//!   (principal `link:<channel>`, counted once toward a quorum). Otherwise,
//!   on a server with sign-in, the signed-in principal (a session or a bearer
//!   token), which must be the one an e-mail was sent to (a forwarded mail
//!   is not a delegation: 403), or any approver for a webhook's link.
//!   Without sign-in, the principal the e-mail was sent to, or the server's
//!   one user.
//! - A channel with `grant` offers it with its approve links: approving
//!   through one also keeps that grant, as the voter's, once the vote counted
//!   ([`toolgate::approval::lifecycle::grant`]); the page says so.
//! - A link is used once: its use is recorded before the vote is checked,
//!   and forgotten again if the vote is refused (so a refused attempt, say by
//!   the wrong person, leaves it usable). A used, expired or altered link,
//!   or one of an approval already decided, gets a 410 page that says which;
//!   nothing changes.

mod form;

use std::net::SocketAddr;

use axum::Form;
use axum::extract::{ConnectInfo, FromRequest, Path, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use toolgate::Decision;
use toolgate::approval::lifecycle::grant::GrantSpec;
use toolgate::approval::lifecycle::{self, VoteOptions, VoteRefusal, Voter};
use toolgate::ledger::{ApprovalRecord, ApprovalState, LedgerConfig};
use toolgate_notify::LinkMode;

use crate::app::AppState;
use crate::caller::Caller;
use crate::notify::token::{LinkChoice, LinkClaims};
use form::{Notice, confirmation, notice};
use toolgate_auth::PrincipalSource;

/// The form a link's page posts.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub(crate) struct LinkForm {
    /// A denial's reason.
    #[serde(default)]
    reason: Option<String>,
    /// A bearer token, for servers that take them (when the request carries no `Authorization`).
    #[serde(default)]
    token: Option<String>,
}

/// The web page's inbox on one approval (the `view` link of notifications).
///
/// A redirect to the page, opened on the approval.
#[utoipa::path(
    get,
    path = "/approvals/{id}",
    operation_id = "viewApproval",
    tag = "links",
    params(("id" = String, Path, description = "The approval's id.")),
    responses((status = 303, description = "To the web page, opened on the approval (`../?approval=ID`).",
        headers(("location" = String, description = "The page."))))
)]
pub(crate) async fn view(Path(id): Path<String>) -> Redirect {
    let id: String = url::form_urlencoded::byte_serialize(id.as_bytes()).collect();
    Redirect::to(&format!("../?approval={id}"))
}

/// A one-time link's confirmation page.
///
/// It shows what the link would do, and the form that does it. Opening it
/// decides nothing (mail scanners and chat previews fetch links).
#[utoipa::path(
    get,
    path = "/a/{token}",
    operation_id = "showLink",
    tag = "links",
    params(("token" = String, Path, description = "The signed link token.")),
    responses(
        (status = 200, description = "The confirmation page.", content_type = "text/html", body = String),
        (status = 404, description = "A page: the server has no store.", content_type = "text/html", body = String),
        (status = 410, description = "A page: the link was altered, expired, or its approval was decided or is gone.",
            content_type = "text/html", body = String),
        (status = 503, description = "A page: the store failed.", content_type = "text/html", body = String),
    )
)]
pub(crate) async fn show(State(state): State<AppState>, Path(token): Path<String>) -> Response {
    let (claims, record) = match open(&state, &token).await {
        Ok(opened) => opened,
        Err(refused) => return refused,
    };
    let grant = offered_grant(&state, &claims);
    confirmation(&record, &claims, asks_for_token(&state.config().principals), grant.as_ref()).into_response()
}

/// Decides through a one-time link.
///
/// A vote, with the same checks as `POST /api/approvals/{id}`; the link is used once.
#[utoipa::path(
    post,
    path = "/a/{token}",
    operation_id = "decideByLink",
    tag = "links",
    params(("token" = String, Path, description = "The signed link token.")),
    request_body(content = LinkForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "A page: the vote was recorded.", content_type = "text/html", body = String),
        (status = 400, description = "A page: the form could not be read.", content_type = "text/html", body = String),
        (status = 401, description = "A page: credentials are needed (sign in, or the access token).",
            content_type = "text/html", body = String),
        (status = 403, description = "A page: the vote is refused (not an approver, not the e-mail's recipient, ...).",
            content_type = "text/html", body = String),
        (status = 404, description = "A page: the server has no store.", content_type = "text/html", body = String),
        (status = 409, description = "A page: the voter already voted.", content_type = "text/html", body = String),
        (status = 410, description = "A page: the link was used, altered or expired, or its approval was decided.",
            content_type = "text/html", body = String),
        (status = 503, description = "A page: the store failed.", content_type = "text/html", body = String),
    )
)]
pub(crate) async fn decide(State(state): State<AppState>, Path(token): Path<String>, request: Request) -> Response {
    if let Err(origin) = same_origin(request.headers(), &state.config().allowed_hosts) {
        tracing::warn!(%origin, "a link's form was posted from another origin");
        return notice(StatusCode::FORBIDDEN, Notice::CrossOrigin(origin));
    }
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip());
    let mut headers = request.headers().clone();
    let form = match Form::<LinkForm>::from_request(request, &()).await {
        Ok(Form(form)) => form,
        Err(rejection) => return notice(StatusCode::BAD_REQUEST, Notice::BadForm(rejection.body_text())),
    };
    let (claims, record) = match open(&state, &token).await {
        Ok(opened) => opened,
        Err(refused) => return refused,
    };
    let Ok(ledger) = state.ledger_config() else { return notice(StatusCode::NOT_FOUND, Notice::NoStore) };
    if let Some(token) = form.token.as_deref().map(str::trim).filter(|token| !token.is_empty())
        && !headers.contains_key(AUTHORIZATION)
        && let Ok(value) = HeaderValue::from_str(&format!("Bearer {token}"))
    {
        headers.insert(AUTHORIZATION, value);
    }
    let voter = match link_voter(&state, &claims, &record, &headers, peer).await {
        Ok(voter) => voter,
        Err(refused) => return refused,
    };
    let decision = match claims.choice {
        LinkChoice::Approve => Decision::APPROVE,
        LinkChoice::Deny => Decision::Deny { reason: form.reason.filter(|reason| !reason.trim().is_empty()) },
    };
    vote(&state, ledger, &claims, &record, &voter, decision).await
}

/// A browser posts the link page's form with the page's own origin (the
/// page sends `Referrer-Policy: same-origin`): a form posted from any other
/// page (`Sec-Fetch-Site: cross-site` or `same-site`, an `Origin` that names
/// another host, or `null`) is refused whatever signs the request in. The
/// origin must name the request's `Host` or one of the server's own names
/// (`allowed`: `--public-url`'s host and `--allowed-host`, for a proxy that
/// rewrites `Host`). A client that names no origin at all (not a browser) is
/// let through: the link itself and the voter's credentials still decide.
fn same_origin(headers: &HeaderMap, allowed: &[String]) -> Result<(), String> {
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(site) = text("sec-fetch-site").filter(|site| !matches!(*site, "same-origin" | "none")) {
        return Err(format!("Sec-Fetch-Site: {site}"));
    }
    let Some(origin) = text("origin") else { return Ok(()) };
    let host = text("host").unwrap_or_default();
    let named = url::Url::parse(origin).ok().and_then(|url| {
        let host = url.host_str()?.to_owned();
        Some(match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host,
        })
    });
    match named {
        Some(named)
            if named.eq_ignore_ascii_case(host) || allowed.iter().any(|name| named.eq_ignore_ascii_case(name)) =>
        {
            Ok(())
        }
        _ => Err(origin.chars().take(200).collect()),
    }
}

/// The grant the link's channel offers with its approve links (`grant` on
/// the `[[notify]]` table), if it reads as one; else none (a grant never
/// comes from a link whose channel's grant does not check).
fn offered_grant(state: &AppState, claims: &LinkClaims) -> Option<GrantSpec> {
    if claims.choice != LinkChoice::Approve {
        return None;
    }
    let notifications = state.config().notifications.as_ref()?;
    let channel = notifications.channels().channels.iter().find(|channel| channel.name == claims.channel)?;
    let spec: GrantSpec = match serde_json::from_value(channel.grant.clone()?) {
        Ok(spec) => spec,
        Err(error) => {
            tracing::warn!(channel = %claims.channel, %error, "the channel's grant does not read; its links grant nothing");
            return None;
        }
    };
    match toolgate_policy::grants::check_spec(&spec) {
        Ok(()) => Some(spec),
        Err(refusal) => {
            tracing::warn!(channel = %claims.channel, %refusal, "the channel's grant is refused; its links grant nothing");
            None
        }
    }
}

/// Keeps the grant a link's approval carries, once its vote counted: made
/// by the voter on the approval as it was voted on
/// ([`toolgate_policy::grants::issue`]); one that cannot be made or kept is logged
/// (the vote stands, nothing more is allowed).
async fn grant_with_link(ledger: &LedgerConfig, record: &ApprovalRecord, voter: &Voter, spec: &GrantSpec) {
    let now = ledger.clock.now();
    let kept = match toolgate_policy::grants::issue(record, voter, spec, now) {
        Ok(grant) => {
            lifecycle::grant::save(ledger.store.as_ref(), &grant).await.map(|()| grant.id).map_err(|e| e.to_string())
        }
        Err(refusal) => Err(refusal.to_string()),
    };
    match kept {
        Ok(id) => tracing::info!(grant = %id, approval = %record.approval_id, "grant made with a link"),
        Err(error) => tracing::warn!(approval = %record.approval_id, %error, "a link's grant was not kept"),
    }
}

/// The checks, the link's single use, and the vote, on the record [`open`]
/// read (the vote reads it again under its own conditional update).
async fn vote(
    state: &AppState,
    ledger: &LedgerConfig,
    claims: &LinkClaims,
    record: &ApprovalRecord,
    voter: &Voter,
    decision: Decision,
) -> Response {
    let now = ledger.clock.now();
    let link_id = claims.link_id();
    match ledger.store.consume_link(&link_id, now, claims.expires_at).await {
        Ok(true) => {}
        Ok(false) => return notice(StatusCode::GONE, Notice::Used),
        Err(error) => return notice(StatusCode::SERVICE_UNAVAILABLE, Notice::Store(error.to_string())),
    }
    let options = VoteOptions { continuation: true, note: None };
    let voted = match lifecycle::check_vote(record, voter, &decision, now) {
        Err(refusal) => Err(lifecycle::VoteError::Refused(refusal)),
        Ok(()) => {
            let (store, clock) = (ledger.store.as_ref(), ledger.clock.as_ref());
            lifecycle::cast(store, clock, &claims.approval_id, voter, decision, options).await
        }
    };
    match voted {
        Ok(decided) => {
            if let Some(spec) = offered_grant(state, claims) {
                grant_with_link(ledger, record, voter, &spec).await;
            }
            let record = decided;
            crate::api::approvals::decided(state, &record);
            notice(StatusCode::OK, Notice::Recorded { record: Box::new(record), choice: claims.choice })
        }
        Err(error) => {
            if let Err(release) = ledger.store.release_link(&link_id).await {
                tracing::warn!(error = %release, "cannot release a link whose vote was refused");
            }
            match error {
                lifecycle::VoteError::Refused(refusal) => refused(&refusal),
                lifecycle::VoteError::Store(error) => {
                    notice(StatusCode::SERVICE_UNAVAILABLE, Notice::Store(error.to_string()))
                }
            }
        }
    }
}

/// The token's claims and its approval, still open to a decision; else the 410 page.
async fn open(state: &AppState, token: &str) -> Result<(LinkClaims, ApprovalRecord), Response> {
    let claims = state.link_signer().verify(token).map_err(|_| notice(StatusCode::GONE, Notice::Tampered))?;
    let Ok(ledger) = state.ledger_config() else { return Err(notice(StatusCode::NOT_FOUND, Notice::NoStore)) };
    if claims.expires_at <= ledger.clock.now() {
        return Err(notice(StatusCode::GONE, Notice::Expired));
    }
    let record = match ledger.store.approvals(std::slice::from_ref(&claims.approval_id)).await {
        Ok(mut records) => records.pop(),
        Err(error) => return Err(notice(StatusCode::SERVICE_UNAVAILABLE, Notice::Store(error.to_string()))),
    };
    let Some(record) = record else { return Err(notice(StatusCode::GONE, Notice::Gone)) };
    if record.input_digest != claims.input_digest {
        return Err(notice(StatusCode::GONE, Notice::Tampered));
    }
    match record.state {
        ApprovalState::Pending if record.expires_at > ledger.clock.now() => Ok((claims, record)),
        ApprovalState::Pending | ApprovalState::Expired => Err(notice(StatusCode::GONE, Notice::Expired)),
        _ => Err(notice(StatusCode::GONE, Notice::AlreadyDecided(record.state))),
    }
}

/// Who the link's vote counts as (see the module docs).
async fn link_voter(
    state: &AppState,
    claims: &LinkClaims,
    record: &ApprovalRecord,
    headers: &HeaderMap,
    peer: Option<std::net::IpAddr>,
) -> Result<Voter, Response> {
    let bearer_channel = state.config().notifications.as_ref().and_then(|notifications| {
        notifications.channels().get(&claims.channel).filter(|channel| channel.links == LinkMode::Bearer)
    });
    if claims.bearer && bearer_channel.is_some() && claims.principal.is_none() {
        let mut voter = Voter::new(Some(format!("link:{}", claims.channel)));
        voter.bearer_link = true;
        return Ok(voter);
    }
    let config = state.config();
    if !config.principals.is_configured() {
        let principal = if record.routing.is_some() { claims.principal.clone() } else { None };
        return Ok(Voter::new(principal));
    }
    let caller = Caller::identify(state, headers, peer)
        .await
        .map_err(|error| notice(StatusCode::UNAUTHORIZED, Notice::SignIn(error.message.clone())))?;
    if let Some(sent_to) = &claims.principal
        && caller.principal.as_deref() != Some(sent_to.as_str())
    {
        return Err(notice(StatusCode::FORBIDDEN, Notice::NotTheRecipient(sent_to.clone())));
    }
    Ok(caller.voter(state))
}

/// The page of a refused vote.
fn refused(refusal: &VoteRefusal) -> Response {
    let status = match refusal {
        VoteRefusal::AlreadyDecided { .. } | VoteRefusal::Expired(_) => StatusCode::GONE,
        VoteRefusal::AlreadyVoted(_) => StatusCode::CONFLICT,
        _ => StatusCode::FORBIDDEN,
    };
    match refusal {
        VoteRefusal::AlreadyDecided { state, .. } => notice(status, Notice::AlreadyDecided(*state)),
        VoteRefusal::Expired(_) => notice(status, Notice::Expired),
        other => notice(status, Notice::Refused(other.to_string())),
    }
}

/// Whether the page asks for a bearer token (servers that take them, without a page sign-in).
fn asks_for_token(principals: &PrincipalSource) -> bool {
    matches!(principals, PrincipalSource::Tokens(_) | PrincipalSource::Jwt(_))
}
