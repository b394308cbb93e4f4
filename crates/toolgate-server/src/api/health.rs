//! `GET /healthz`: liveness. It answers `ok` whenever the server answers at
//! all; it reads nothing (not the store, not the model).

/// Liveness: the server answers.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "health",
    tag = "health",
    responses((status = 200, description = "`ok`.", content_type = "text/plain", body = String, example = "ok"))
)]
pub(crate) async fn healthz() -> &'static str {
    "ok"
}
