//! `GET /api-docs`: the API reference page, Swagger UI on `GET /openapi.json`.
//!
//! Swagger UI (`swagger-ui-dist`, vendored in `assets/swagger-ui/`) is
//! embedded in the binary and served beside the page; nothing comes from
//! elsewhere. The page's Content-Security-Policy lets scripts, styles and
//! requests come from this server only (and images from `data:` URLs, as
//! Swagger UI draws its icons), nothing inline, and no page may frame it.

use axum::http::HeaderName;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::response::IntoResponse;

const PAGE: &str = include_str!("../../../assets/api-docs.html");
const SCRIPT: &str = include_str!("../../../assets/api-docs.js");
const BUNDLE: &[u8] = include_bytes!("../../../assets/swagger-ui/swagger-ui-bundle.js");
const STYLES: &[u8] = include_bytes!("../../../assets/swagger-ui/swagger-ui.css");

/// The page's Content-Security-Policy.
pub(crate) const CONTENT_SECURITY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// How long browsers may keep the vendored files (they change with the server's version).
const ASSET_CACHE: &str = "public, max-age=3600";

/// The headers of every response here, and its content type.
fn headers(content_type: &'static str, cache: &'static str) -> [(HeaderName, &'static str); 6] {
    [
        (CONTENT_TYPE, content_type),
        (CACHE_CONTROL, cache),
        (CONTENT_SECURITY_POLICY, CONTENT_SECURITY),
        (REFERRER_POLICY, "no-referrer"),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (X_FRAME_OPTIONS, "DENY"),
    ]
}

/// The API reference page.
#[utoipa::path(
    get,
    path = "/api-docs",
    operation_id = "getApiDocs",
    tag = "docs",
    responses((status = 200, description = "The page (Swagger UI on `/openapi.json`).", content_type = "text/html",
        body = String))
)]
pub(crate) async fn page() -> impl IntoResponse {
    (headers("text/html; charset=utf-8", "no-cache"), PAGE)
}

/// The page's own script: starts Swagger UI on the document.
#[utoipa::path(
    get,
    path = "/api-docs/api-docs.js",
    operation_id = "getApiDocsScript",
    tag = "docs",
    responses((status = 200, description = "The script.", content_type = "text/javascript", body = String))
)]
pub(crate) async fn script() -> impl IntoResponse {
    (headers("text/javascript; charset=utf-8", "no-cache"), SCRIPT)
}

/// Swagger UI's script (`swagger-ui-dist`).
#[utoipa::path(
    get,
    path = "/api-docs/swagger-ui-bundle.js",
    operation_id = "getSwaggerUiBundle",
    tag = "docs",
    responses((status = 200, description = "Swagger UI.", content_type = "text/javascript", body = String))
)]
pub(crate) async fn bundle() -> impl IntoResponse {
    (headers("text/javascript; charset=utf-8", ASSET_CACHE), BUNDLE)
}

/// Swagger UI's styles (`swagger-ui-dist`).
#[utoipa::path(
    get,
    path = "/api-docs/swagger-ui.css",
    operation_id = "getSwaggerUiStyles",
    tag = "docs",
    responses((status = 200, description = "Swagger UI's styles.", content_type = "text/css", body = String))
)]
pub(crate) async fn styles() -> impl IntoResponse {
    (headers("text/css; charset=utf-8", ASSET_CACHE), STYLES)
}
