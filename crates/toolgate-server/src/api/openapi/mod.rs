//! The API reference: an OpenAPI 3.1 document generated from the handlers'
//! `#[utoipa::path]` annotations and their types (`GET /openapi.json`), and
//! a page that renders it with Swagger UI, served from the binary
//! (`GET /api-docs`, `swagger_ui.rs`).
//!
//! Every route of the router ([`crate::route_table`]) has an operation here;
//! the server's tests fail when one has not. Error responses list the codes
//! they can carry, with their meanings ([`errors`]).

pub mod errors;
pub(crate) mod schemas;
pub(crate) mod swagger_ui;

use std::sync::OnceLock;

use axum::http::header;
use axum::response::IntoResponse;
use serde_json::Value;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::error::ErrorBody;

/// The document's description (Markdown).
const DESCRIPTION: &str = "Human-in-the-loop approval of LLM tool calls: the AI SDK UI message stream \
(`POST /api/chat`), AG-UI runs (`POST /ag-ui`), the call-gating API for any agent (`/api/calls`), the approvals inbox, sticky decisions, the audit log, one-time \
approval links and sign-in.\n\n\
Errors are JSON, `{\"error\": {\"code\", \"message\"}}`, with a stable `code`: each response lists the codes it can \
carry (`x-error-codes`, code → meaning). An AG-UI run reports problems after the stream started as `RUN_ERROR` events \
(`x-run-error-codes`).\n\n\
Credentials, as the server is configured: none (single user), a principal header set by a trusted proxy, a bearer \
token (a tokens file or JWTs), or the page's session cookie (OpenID Connect). The stream parts, `CUSTOM` events and \
webhook bodies the server sends are described by JSON Schemas in the documentation (`docs/src/schemas/`).";

#[derive(OpenApi)]
#[openapi(
    info(title = "toolgate", description = DESCRIPTION, license(name = "MIT OR Apache-2.0")),
    paths(
        crate::api::web_page::index,
        crate::api::web_page::script,
        crate::api::web_page::styles,
        crate::api::health::healthz,
        crate::api::health::readyz,
        crate::api::metrics::metrics,
        crate::api::chat::chat,
        crate::api::stream_resume::resume,
        crate::api::chats::stored_messages,
        crate::api::agui::run,
        crate::api::audit::audit,
        crate::api::me::me,
        crate::api::decisions::list,
        crate::api::decisions::add,
        crate::api::decisions::revoke,
        crate::api::grants::list,
        crate::api::grants::revoke,
        crate::api::policy::explain,
        crate::api::approvals::list,
        crate::api::approvals::stream,
        crate::api::approvals::show,
        crate::api::approvals::decide,
        crate::api::approvals::withdraw,
        crate::api::receipts::receipt,
        crate::api::receipts::event_receipt,
        crate::api::receipts::call_receipt,
        crate::api::receipts::keys,
        crate::api::calls::create,
        crate::api::calls::stream,
        crate::api::calls::show,
        crate::api::calls::start,
        crate::api::calls::finish,
        crate::api::links::view,
        crate::api::links::show,
        crate::api::links::decide,
        crate::api::sign_in::callback,
        crate::api::sign_in::logout,
        document,
        swagger_ui::page,
        swagger_ui::bundle,
        swagger_ui::styles,
        swagger_ui::script,
    ),
    components(schemas(ErrorBody, crate::approval_item::ApprovalPart)),
    modifiers(&SecuritySchemes),
    tags(
        (name = "chat", description = "The AI SDK v6 UI message stream, and stored chats."),
        (name = "ag-ui", description = "AG-UI 1.0 runs with interrupt and resume approvals."),
        (name = "approvals", description = "The inbox: approvals listed, shown and decided out of band."),
        (name = "calls", description = "The call-gating API: any agent's tool calls gated, decided, started once and finished."),
        (name = "decisions", description = "Sticky decisions: always or never allow a tool."),
        (name = "grants", description = "Grants: bounded approvals (the next N calls like this), listed and revoked."),
        (name = "audit", description = "The approval audit log."),
        (name = "links", description = "One-time approval links from notifications (HTML pages)."),
        (name = "auth", description = "Who the requester is, and OpenID Connect sign-in."),
        (name = "page", description = "The web page."),
        (name = "docs", description = "This reference."),
        (name = "health", description = "Liveness, readiness and metrics."),
    )
)]
struct ApiDoc;

/// The security schemes the operations name: `bearer` and `session` (and,
/// implicitly, none, or the principal header a trusted proxy sets).
struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let bearer = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some("A token from the server's tokens file, or a JWT the server verifies."))
            .build();
        components.add_security_scheme("bearer", SecurityScheme::Http(bearer));
        let session = ApiKeyValue::with_description(
            crate::oidc::SESSION_COOKIE,
            "The page's session after an OpenID Connect sign-in.",
        );
        components.add_security_scheme("session", SecurityScheme::ApiKey(ApiKey::Cookie(session)));
    }
}

/// The OpenAPI 3.1 document of the server's HTTP API, with each error
/// response's codes and their meanings ([`errors`]).
pub fn openapi() -> Value {
    let mut document = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    errors::expand(&mut document);
    distinct_operation_ids(&mut document);
    document
}

/// One handler may serve several methods (`GET` and `POST /auth/logout`):
/// its operation's id gets the method after the first, as ids must be unique.
fn distinct_operation_ids(document: &mut Value) {
    let mut seen = std::collections::HashSet::new();
    let items =
        document.get_mut("paths").and_then(Value::as_object_mut).into_iter().flat_map(|paths| paths.values_mut());
    for (method, operation) in items.filter_map(Value::as_object_mut).flat_map(|item| item.iter_mut()) {
        let Some(id) = operation.get("operationId").and_then(Value::as_str).map(str::to_owned) else { continue };
        if !seen.insert(id.clone()) {
            let mut suffix = method.clone();
            suffix[..1].make_ascii_uppercase();
            operation["operationId"] = Value::String(format!("{id}{suffix}"));
        }
    }
}

/// [`openapi`] as JSON text, built once.
fn document_json() -> &'static str {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    DOCUMENT.get_or_init(|| openapi().to_string())
}

/// This document: the OpenAPI 3.1 description of every endpoint.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "getOpenApi",
    tag = "docs",
    responses((status = 200, description = "The OpenAPI 3.1 document.", content_type = "application/json", body = Object))
)]
pub(crate) async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], document_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of the query parameters an operation documents, sorted.
    fn query_parameters(document: &Value, path: &str, method: &str) -> Vec<String> {
        let parameters = document["paths"][path][method]["parameters"].as_array().cloned().unwrap_or_default();
        let mut names: Vec<String> = parameters
            .iter()
            .filter(|parameter| parameter["in"] == "query")
            .filter_map(|parameter| parameter["name"].as_str().map(str::to_owned))
            .collect();
        names.sort_unstable();
        names
    }

    #[test]
    fn the_documented_query_parameters_are_the_ones_the_handlers_take() {
        let document = openapi();
        let taken: [(&str, &str, &[&str]); 6] = [
            ("/api/audit", "get", &crate::api::audit::QUERY_PARAMS),
            ("/api/approvals", "get", &crate::api::approvals::LIST_PARAMS),
            ("/api/decisions", "get", &crate::api::decisions::QUERY_PARAMS),
            ("/api/decisions/{id}", "delete", &crate::api::decisions::QUERY_PARAMS),
            ("/api/grants", "get", &crate::api::decisions::QUERY_PARAMS),
            ("/api/grants/{id}", "delete", &crate::api::decisions::QUERY_PARAMS),
        ];
        for (path, method, names) in taken {
            let mut names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
            names.sort_unstable();
            assert_eq!(query_parameters(&document, path, method), names, "{method} {path}");
        }
    }

    #[test]
    fn each_code_has_one_meaning() {
        let mut codes: Vec<&str> = errors::CODES.iter().map(|(code, _)| *code).collect();
        codes.sort_unstable();
        let count = codes.len();
        codes.dedup();
        assert_eq!(codes.len(), count, "a code is listed twice");
        assert!(errors::CODES.iter().all(|(_, meaning)| meaning.ends_with('.')));
    }
}
