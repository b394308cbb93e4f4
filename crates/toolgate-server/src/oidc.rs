//! OpenID Connect sign-in for the web page (`toolgate serve --oidc-issuer URL
//! --oidc-client-id ID --public-url URL`).
//!
//! The sign-in itself (the provider, the signed session and login cookies,
//! the signed-out sessions, the origin check) is `toolgate-auth`'s
//! [`toolgate_auth::oidc`], whose docs state the contract; every item of it
//! is re-exported here. The server adds the HTTP side, in `api/sign_in.rs`:
//! `GET /auth/callback` and `POST /auth/logout`, the guard of the page (302
//! to the provider without a valid session), and the guard of every route
//! (403 `cross_origin_request` for a cookie-authenticated request that
//! changes something from another origin, and [`SIGN_IN_HEADER`] on every
//! 401). The sign-in's errors become [`crate::ApiError`]s with the statuses
//! and codes the contract names.

pub use toolgate_auth::oidc::*;

pub use crate::api::sign_in::SIGN_IN_HEADER;
