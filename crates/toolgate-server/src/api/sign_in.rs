//! The HTTP side of OpenID Connect sign-in: the callback, sign-out, the page
//! guard and the cross-origin check (the contract: [`toolgate_auth::oidc`]).

use axum::extract::{Query, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use toolgate_auth::oidc::{Callback, Redirect};

use crate::app::AppState;
use crate::error::{ApiError, ErrorBody};

/// The header every 401 carries when the server signs people in with OIDC: the
/// page reloads (and so signs in again) instead of asking for a token.
pub const SIGN_IN_HEADER: HeaderName = HeaderName::from_static("x-toolgate-sign-in");

/// The query of `GET /auth/callback` (the sign-in's [`Callback`], described for the API reference).
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct CallbackParams {
    /// The authorization code.
    pub code: Option<String>,
    /// The state the server sent to the provider.
    pub state: Option<String>,
    /// The provider's error code, when it refused.
    pub error: Option<String>,
    /// The provider's words about its error.
    pub error_description: Option<String>,
}

impl From<CallbackParams> for Callback {
    fn from(params: CallbackParams) -> Self {
        let CallbackParams { code, state, error, error_description } = params;
        Callback { code, state, error, error_description }
    }
}

/// A sign-in step's answer: its status and headers, no body.
fn answer(redirect: Redirect) -> Response {
    (redirect.status, redirect.headers).into_response()
}

fn not_configured() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "this server does not sign people in with OpenID Connect")
}

/// Finishes an OpenID Connect sign-in.
///
/// The provider sends the browser here (only on servers that sign people in with OIDC).
#[utoipa::path(
    get,
    path = "/auth/callback",
    operation_id = "signInCallback",
    tag = "auth",
    params(CallbackParams),
    responses(
        (status = 303, description = "Signed in: the session cookie, and back to the page first asked for.",
            headers(("location" = String), ("set-cookie" = String))),
        (status = 400, description = "The callback does not complete a sign-in this browser started.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["invalid_state", "missing_code", "session_too_large"])))),
        (status = 401, description = "The provider refused, or its ID token does not verify.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["sign_in_refused", "invalid_id_token"])))),
        (status = 404, description = "The server does not sign people in with OIDC.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["not_found"])))),
        (status = 500, description = "The sign-in could not be completed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["sign_in_failed"])))),
        (status = 502, description = "The provider failed.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["provider_error"])))),
    )
)]
pub(crate) async fn callback(
    State(state): State<AppState>,
    Query(params): Query<CallbackParams>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let oidc = state.config().principals.oidc().ok_or_else(not_configured)?;
    let redirect = oidc.finish(params.into(), &headers, state.now()).await.map_err(|error| {
        tracing::warn!(%error, "an OpenID Connect sign-in failed");
        ApiError::from(error)
    })?;
    Ok(answer(redirect))
}

/// Signs out: clears the session cookie, then back to the page.
///
/// `POST` only, so that no link or image on another site can sign anyone
/// out; with the session cookie it must come from the server's own origin
/// (the cookie guard's check). The session is revoked on the server too (a
/// copy of the cookie no longer works, on any replica sharing the store).
/// Only on servers that sign people in with OIDC.
#[utoipa::path(
    post,
    path = "/auth/logout",
    operation_id = "signOut",
    tag = "auth",
    responses(
        (status = 303, description = "Signed out: the cleared cookie, and to the page.",
            headers(("location" = String), ("set-cookie" = String))),
        (status = 404, description = "The server does not sign people in with OIDC.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["not_found"])))),
        (status = 503, description = "The sign-out could not be recorded.", body = ErrorBody,
            extensions(("x-error-codes" = json!(["store_unavailable"])))),
    )
)]
pub(crate) async fn logout(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let oidc = state.config().principals.oidc().ok_or_else(not_configured)?;
    Ok(answer(oidc.logout(&headers, state.now()).await?))
}

/// Around the pages (`GET /`): without a valid session, 302 to the provider
/// to sign in, coming back to the page asked for.
pub(crate) async fn require_session(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(oidc) = state.config().principals.oidc() else { return next.run(request).await };
    let now = state.now();
    if oidc.session(request.headers(), now).await.is_ok() {
        return next.run(request).await;
    }
    let asked = request.uri().path_and_query().map_or("/", |path| path.as_str());
    match oidc.begin(asked, request.headers(), now) {
        Ok(redirect) => answer(redirect),
        Err(error) => ApiError::from(error).into_response(),
    }
}

/// Around every route: refuses a cookie-authenticated request that changes
/// something from another origin (403 `cross_origin_request`, before
/// anything runs), and marks every 401 with [`SIGN_IN_HEADER`].
pub(crate) async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(oidc) = state.config().principals.oidc() else { return next.run(request).await };
    let safe = matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE);
    let headers = request.headers();
    if !safe
        && !headers.contains_key(AUTHORIZATION)
        && oidc.has_session_cookie(headers)
        && let Err(refusal) = oidc.check_origin(headers)
    {
        tracing::warn!(method = %request.method(), path = %request.uri().path(), "{refusal}");
        return ApiError::from(refusal).into_response();
    }
    let mut response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(SIGN_IN_HEADER, HeaderValue::from_static("oidc"));
    }
    response
}
