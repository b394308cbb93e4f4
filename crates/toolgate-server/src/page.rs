//! The web page, served from the binary (no build step).

use axum::http::header;
use axum::response::{Html, IntoResponse};

const INDEX: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLES: &str = include_str!("../assets/app.css");

/// `GET /`.
pub(crate) async fn index() -> Html<&'static str> {
    Html(INDEX)
}

/// `GET /app.js`.
pub(crate) async fn script() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], SCRIPT)
}

/// `GET /app.css`.
pub(crate) async fn styles() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLES)
}
