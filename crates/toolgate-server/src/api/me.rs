//! `GET /api/me`: who the server takes the requester for, and how a page signs in.
//!
//! Answers `{"principal": NAME | null, "groups": [...], "signIn": "none" |
//! "header" | "token" | "oidc"}`: `token` when requests need a bearer token (a
//! tokens file or JWTs; the page then asks for one), `oidc` when people sign
//! in on the page with OpenID Connect (the page offers to sign out), `header`
//! behind a proxy that sets the principal, `none` in single-user mode. Without a valid credential it is
//! the 401 every other route gives, which is how the page learns to ask.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::app::AppState;
use crate::caller::Caller;
use toolgate_auth::PrincipalSource;

/// Who the server takes the requester for.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Me {
    /// The requester's principal (`null` in single-user mode, or behind a proxy that named nobody).
    principal: Option<String>,
    /// Their groups (from a JWT and the server's `[groups]`).
    groups: Vec<String>,
    /// How a page signs in.
    sign_in: SignIn,
}

/// How a page signs in.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SignIn {
    /// Single-user mode: no sign-in.
    None,
    /// A proxy in front sets the principal header.
    Header,
    /// Requests need a bearer token (a tokens file, or JWTs).
    Token,
    /// People sign in on the page with OpenID Connect.
    Oidc,
}

/// Describes the requester.
#[utoipa::path(
    get,
    path = "/api/me",
    operation_id = "getMe",
    tag = "auth",
    security(("bearer" = []), ("session" = []), ()),
    responses((status = 200, description = "The requester.", body = Me))
)]
pub(crate) async fn me(State(state): State<AppState>, Caller { principal, groups }: Caller) -> Json<Me> {
    let sign_in = match &state.config().principals {
        PrincipalSource::None => SignIn::None,
        PrincipalSource::Header(..) => SignIn::Header,
        PrincipalSource::Tokens(_) | PrincipalSource::Jwt(_) => SignIn::Token,
        PrincipalSource::Oidc { .. } => SignIn::Oidc,
        // A source `toolgate-auth` adds later: a credential the page cannot
        // give, as with tokens, until the page learns it.
        _ => SignIn::Token,
    };
    Json(Me { principal, groups, sign_in })
}
