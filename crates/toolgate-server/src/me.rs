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
use serde_json::{Value, json};

use crate::app::AppState;
use crate::principal::{Caller, PrincipalSource};

/// Describes the requester.
pub(crate) async fn me(State(state): State<AppState>, Caller { principal, groups }: Caller) -> Json<Value> {
    let sign_in = match &state.config().principals {
        PrincipalSource::None => "none",
        PrincipalSource::Header(..) => "header",
        PrincipalSource::Tokens(_) | PrincipalSource::Jwt(_) => "token",
        PrincipalSource::Oidc { .. } => "oidc",
    };
    Json(json!({"principal": principal, "groups": groups, "signIn": sign_in}))
}
