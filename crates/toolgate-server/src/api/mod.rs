//! The HTTP handlers, one file per resource, and beside them the route table
//! and the API reference.
//!
//! - The handlers are thin: they read the request (the [`crate::Caller`],
//!   the body, the path), ask the state for the conversation's ledger, call
//!   the stored runs (`run/`) or the store, and shape the response. What a
//!   stored run or a worker also needs lives in `run/` or `workers/`, never
//!   here; nothing outside this module (but the launcher and the `oidc`
//!   re-exports) imports it.
//! - The route table: every HTTP route of the server, in one list
//!   ([`ROUTES`]) that [`router`] builds the router from and [`route_table`]
//!   lists, so the API reference (`GET /openapi.json`, [`openapi`]) can be
//!   checked against it: a route without an operation in the document fails
//!   the server's tests.
//!
//! | file | routes |
//! |---|---|
//! | `web_page.rs` | `GET /`, `/app.js`, `/app.css`: the web page |
//! | `health.rs` | `GET /healthz`, `GET /readyz` |
//! | `metrics.rs` | `GET /metrics` |
//! | `chat.rs` | `POST /api/chat` |
//! | `stream_resume.rs` | `GET /api/chat/{id}/stream`: a client resumes a running response |
//! | `chats.rs` | `GET /api/chats/{id}`: a stored chat |
//! | `agui.rs` | `POST /ag-ui` |
//! | `audit.rs` | `GET /api/audit` |
//! | `receipts.rs` | `GET /.well-known/toolgate/receipt-keys`, `GET /api/approvals/{id}/receipt`, `GET /api/audit/{seq}/receipt`, `GET /api/calls/{id}/receipt` |
//! | `me.rs` | `GET /api/me` |
//! | `decisions.rs` | `GET|POST /api/decisions`, `DELETE /api/decisions/{id}` |
//! | `grants.rs` | `GET /api/grants`, `DELETE /api/grants/{id}` |
//! | `calls.rs` | `POST /api/calls`, `GET /api/calls/{id}`, `POST /api/calls/{id}/start|finish`, `GET /api/calls/stream`: the call-gating API |
//! | `policy.rs` | `POST /api/policy/explain` |
//! | `approvals/` | `/api/approvals[/{id}]`, `/api/approvals/stream`: the inbox |
//! | `links/` | `/a/{token}`, `/approvals/{id}`: one-time links and their pages (`links/form.rs`) |
//! | `openapi/` | `/openapi.json`, `/api-docs` (the Swagger UI page, `openapi/swagger_ui.rs`) |
//! | `sign_in.rs` | `/auth/callback`, `/auth/logout`, and the sign-in guards |

pub(crate) mod agui;
pub(crate) mod approvals;
pub(crate) mod audit;
pub(crate) mod calls;
pub(crate) mod chat;
pub(crate) mod chats;
pub(crate) mod decisions;
pub(crate) mod grants;
pub(crate) mod health;
pub(crate) mod links;
pub(crate) mod me;
pub(crate) mod metrics;
pub mod openapi;
pub(crate) mod policy;
pub(crate) mod receipts;
pub(crate) mod sign_in;
pub(crate) mod stream_resume;
pub(crate) mod web_page;

use axum::http::Method;
use axum::routing::{MethodFilter, MethodRouter, on};
use axum::{Router, middleware};
use tower_http::trace::TraceLayer;

use crate::app::AppState;

/// Which servers serve a route, and behind what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The web page: behind the OpenID Connect sign-in when configured.
    Page,
    /// Every server; handlers that need credentials ask for them.
    Open,
    /// Only servers that sign people in with OpenID Connect.
    SignIn,
}

/// One route: a method on a path, and its handler.
pub(crate) struct Route {
    /// The method.
    pub method: Method,
    /// The path, in axum's syntax (`/api/chats/{id}`, as OpenAPI writes it too).
    pub path: &'static str,
    /// Which servers serve it.
    pub access: Access,
    /// Its handler, for this method.
    pub handler: fn() -> MethodRouter<AppState>,
}

/// A [`Route`]: `route!(GET "/path", handler, Access)`.
macro_rules! route {
    ($method:ident $path:literal, $handler:path, $access:ident) => {
        Route {
            method: Method::$method,
            path: $path,
            access: Access::$access,
            handler: || on(MethodFilter::$method, $handler),
        }
    };
}

/// Every route of the server.
pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/", web_page::index, Page),
    route!(GET "/app.js", web_page::script, Open),
    route!(GET "/app.css", web_page::styles, Open),
    route!(GET "/healthz", health::healthz, Open),
    route!(GET "/readyz", health::readyz, Open),
    route!(GET "/metrics", metrics::metrics, Open),
    route!(POST "/api/chat", chat::chat, Open),
    route!(GET "/api/chat/{id}/stream", stream_resume::resume, Open),
    route!(POST "/ag-ui", agui::run, Open),
    route!(GET "/api/audit", audit::audit, Open),
    route!(GET "/api/me", me::me, Open),
    route!(GET "/api/decisions", decisions::list, Open),
    route!(POST "/api/decisions", decisions::add, Open),
    route!(POST "/api/policy/explain", policy::explain, Open),
    route!(DELETE "/api/decisions/{id}", decisions::revoke, Open),
    route!(GET "/api/grants", grants::list, Open),
    route!(DELETE "/api/grants/{id}", grants::revoke, Open),
    route!(GET "/api/chats/{id}", chats::stored_messages, Open),
    route!(GET "/api/approvals", approvals::list, Open),
    route!(GET "/api/approvals/stream", approvals::stream, Open),
    route!(GET "/api/approvals/{id}", approvals::show, Open),
    route!(GET "/api/approvals/{id}/receipt", receipts::receipt, Open),
    route!(GET "/api/audit/{seq}/receipt", receipts::event_receipt, Open),
    route!(GET "/api/calls/{id}/receipt", receipts::call_receipt, Open),
    route!(GET "/.well-known/toolgate/receipt-keys", receipts::keys, Open),
    route!(POST "/api/approvals/{id}", approvals::decide, Open),
    route!(DELETE "/api/approvals/{id}", approvals::withdraw, Open),
    route!(POST "/api/calls", calls::create, Open),
    route!(GET "/api/calls/stream", calls::stream, Open),
    route!(GET "/api/calls/{id}", calls::show, Open),
    route!(POST "/api/calls/{id}/start", calls::start, Open),
    route!(POST "/api/calls/{id}/finish", calls::finish, Open),
    route!(GET "/approvals/{id}", links::view, Open),
    route!(GET "/a/{token}", links::show, Open),
    route!(POST "/a/{token}", links::decide, Open),
    route!(GET "/openapi.json", openapi::document, Open),
    route!(GET "/api-docs", openapi::swagger_ui::page, Open),
    route!(GET "/api-docs/api-docs.js", openapi::swagger_ui::script, Open),
    route!(GET "/api-docs/swagger-ui-bundle.js", openapi::swagger_ui::bundle, Open),
    route!(GET "/api-docs/swagger-ui.css", openapi::swagger_ui::styles, Open),
    route!(GET "/auth/callback", sign_in::callback, SignIn),
    route!(POST "/auth/logout", sign_in::logout, SignIn),
];

/// Every route the server can serve, as (method, path): those of the web
/// page, the API, the API reference, and the sign-in routes a server with
/// OpenID Connect adds. [`router`] is built from the same list.
pub fn route_table() -> Vec<(Method, &'static str)> {
    ROUTES.iter().map(|route| (route.method.clone(), route.path)).collect()
}

/// The HTTP routes.
pub fn router(state: AppState) -> Router {
    let limit = state.config().max_body_bytes;
    let oidc = state.config().principals.oidc().is_some();
    let add = |router: Router<AppState>, route: &Route| router.route(route.path, (route.handler)());
    let mut pages = ROUTES.iter().filter(|route| route.access == Access::Page).fold(Router::new(), add);
    if oidc {
        pages = pages.route_layer(middleware::from_fn_with_state(state.clone(), sign_in::require_session));
    }
    let served = |route: &&Route| route.access == Access::Open || (oidc && route.access == Access::SignIn);
    let mut routes = ROUTES.iter().filter(served).fold(pages, add);
    if oidc {
        routes = routes.layer(middleware::from_fn_with_state(state.clone(), sign_in::guard));
    }
    let metrics = state.metrics().clone();
    routes
        .layer(axum::extract::DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(metrics, crate::metrics::http::track))
        .layer(middleware::from_fn(crate::telemetry::http::trace))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
