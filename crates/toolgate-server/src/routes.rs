//! The route table: every HTTP route of the server, in one list ([`ROUTES`])
//! that [`router`] builds the router from and [`route_table`] lists, so the
//! API reference (`GET /openapi.json`) can be checked against it: a route
//! without an operation in the document fails the server's tests.

use axum::http::Method;
use axum::routing::{MethodFilter, MethodRouter, on};
use axum::{Router, middleware};
use tower_http::trace::TraceLayer;

use crate::api::agui;
use crate::app::AppState;
use crate::{approvals, audit, chat, decisions, links, me, oidc, openapi, page, resume};

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
    route!(GET "/", page::index, Page),
    route!(GET "/app.js", page::script, Open),
    route!(GET "/app.css", page::styles, Open),
    route!(GET "/healthz", page::healthz, Open),
    route!(POST "/api/chat", chat::chat, Open),
    route!(GET "/api/chat/{id}/stream", resume::resume, Open),
    route!(POST "/ag-ui", agui::run, Open),
    route!(GET "/api/audit", audit::audit, Open),
    route!(GET "/api/me", me::me, Open),
    route!(GET "/api/decisions", decisions::list, Open),
    route!(POST "/api/decisions", decisions::add, Open),
    route!(DELETE "/api/decisions/{id}", decisions::revoke, Open),
    route!(GET "/api/chats/{id}", chat::stored_messages, Open),
    route!(GET "/api/approvals", approvals::list, Open),
    route!(GET "/api/approvals/stream", approvals::stream, Open),
    route!(GET "/api/approvals/{id}", approvals::show, Open),
    route!(POST "/api/approvals/{id}", approvals::decide, Open),
    route!(DELETE "/api/approvals/{id}", approvals::withdraw, Open),
    route!(GET "/approvals/{id}", links::view, Open),
    route!(GET "/a/{token}", links::show, Open),
    route!(POST "/a/{token}", links::decide, Open),
    route!(GET "/openapi.json", openapi::document, Open),
    route!(GET "/api-docs", openapi::page::page, Open),
    route!(GET "/api-docs/api-docs.js", openapi::page::script, Open),
    route!(GET "/api-docs/swagger-ui-bundle.js", openapi::page::bundle, Open),
    route!(GET "/api-docs/swagger-ui.css", openapi::page::styles, Open),
    route!(GET "/auth/callback", oidc::routes::callback, SignIn),
    route!(POST "/auth/logout", oidc::routes::logout, SignIn),
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
        pages = pages.route_layer(middleware::from_fn_with_state(state.clone(), oidc::routes::require_session));
    }
    let served = |route: &&Route| route.access == Access::Open || (oidc && route.access == Access::SignIn);
    let mut routes = ROUTES.iter().filter(served).fold(pages, add);
    if oidc {
        routes = routes.layer(middleware::from_fn_with_state(state.clone(), oidc::routes::guard));
    }
    routes.layer(axum::extract::DefaultBodyLimit::max(limit)).layer(TraceLayer::new_for_http()).with_state(state)
}
