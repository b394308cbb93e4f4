//! `GET /`, `/app.js`, `/app.css`: the web page (chat, approvals, the
//! inbox), served from the binary as `assets/` holds it (no build step).

use axum::http::header;
use axum::response::{Html, IntoResponse};

const INDEX: &str = include_str!("../../assets/index.html");
const SCRIPT: &str = include_str!("../../assets/app.js");
const STYLES: &str = include_str!("../../assets/app.css");

/// The web page: chat, approve, deny with a reason, edit an input; the inbox.
///
/// On servers that sign people in with OIDC, a browser without a session is
/// sent to the provider first (302).
#[utoipa::path(
    get,
    path = "/",
    operation_id = "getPage",
    tag = "page",
    responses(
        (status = 200, description = "The page.", content_type = "text/html", body = String),
        (status = 302, description = "Sign in first (OIDC): to the provider.", headers(("location" = String))),
    )
)]
pub(crate) async fn index() -> Html<&'static str> {
    Html(INDEX)
}

/// The page's script.
#[utoipa::path(
    get,
    path = "/app.js",
    operation_id = "getPageScript",
    tag = "page",
    responses((status = 200, description = "The script.", content_type = "text/javascript", body = String))
)]
pub(crate) async fn script() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], SCRIPT)
}

/// The page's styles.
#[utoipa::path(
    get,
    path = "/app.css",
    operation_id = "getPageStyles",
    tag = "page",
    responses((status = 200, description = "The styles.", content_type = "text/css", body = String))
)]
pub(crate) async fn styles() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLES)
}
