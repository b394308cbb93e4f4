//! JSON errors with the status code that fits them.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use toolgate::EngineError;
use toolgate::approval::lifecycle::{VoteError, VoteRefusal};
use toolgate::ledger::StoreError;
use toolgate_agui::InputError;
use toolgate_auth::IdentifyError;
use toolgate_auth::jwt::invalid_token_challenge;
use toolgate_auth::oidc::{CrossOriginRequest, OidcError};
use toolgate_ui::ConvertError;

/// An error answered as `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable machine-readable code.
    pub code: &'static str,
    /// What is wrong, for people.
    pub message: String,
    /// A `WWW-Authenticate` challenge to send with it (bearer-token refusals).
    pub challenge: Option<String>,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), challenge: None }
    }

    /// 401 `unauthorized` for a bearer token refused because of `why`, with the
    /// challenge RFC 6750 defines (`error="invalid_token"` and a description).
    pub fn invalid_token(why: impl std::fmt::Display) -> Self {
        let why = why.to_string();
        Self {
            challenge: Some(invalid_token_challenge(&why)),
            ..Self::new(StatusCode::UNAUTHORIZED, "unauthorized", why)
        }
    }
}

/// The body of every JSON error response (see the API reference, `GET /openapi.json`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The error of an [`ErrorBody`].
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorDetail {
    /// A stable machine-readable code (each endpoint's responses list the codes it returns).
    pub code: &'static str,
    /// What is wrong, for people.
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(ErrorBody { error: ErrorDetail { code: self.code, message: self.message } });
        let mut response = (self.status, body).into_response();
        if let Some(value) = self.challenge.and_then(|challenge| HeaderValue::from_str(&challenge).ok()) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

impl From<ConvertError> for ApiError {
    fn from(error: ConvertError) -> Self {
        let code = match error {
            ConvertError::InvalidJson(_) => "invalid_json",
            ConvertError::InvalidBody(_) => "invalid_body",
            ConvertError::InvalidMessage { .. } => "invalid_message",
        };
        Self::new(StatusCode::BAD_REQUEST, code, error.to_string())
    }
}

impl From<InputError> for ApiError {
    fn from(error: InputError) -> Self {
        Self::new(StatusCode::BAD_REQUEST, error.code(), error.to_string())
    }
}

impl From<EngineError> for ApiError {
    fn from(error: EngineError) -> Self {
        let status = match &error {
            EngineError::Vote(refusal) => refusal_status(refusal),
            EngineError::ApprovalAlreadyDecided { .. }
            | EngineError::ApprovalInProgress { .. }
            | EngineError::ApprovalsPending { .. } => StatusCode::CONFLICT,
            EngineError::EditNeedsApprovers { .. } => StatusCode::FORBIDDEN,
            EngineError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            EngineError::Model { .. } => StatusCode::BAD_GATEWAY,
            EngineError::Incomplete { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        Self::new(status, error.code(), error.to_string())
    }
}

/// The status of a refused vote: who may not (403), what is no longer
/// possible (409, 410), what was never visible (404), a malformed vote (400).
fn refusal_status(refusal: &VoteRefusal) -> StatusCode {
    match refusal {
        VoteRefusal::Unknown(_) => StatusCode::NOT_FOUND,
        VoteRefusal::NotAnApprover { .. } | VoteRefusal::SelfApprovalForbidden(_) | VoteRefusal::NotTheRequester(_) => {
            StatusCode::FORBIDDEN
        }
        VoteRefusal::AlreadyVoted(_) | VoteRefusal::AlreadyDecided { .. } => StatusCode::CONFLICT,
        VoteRefusal::Expired(_) => StatusCode::GONE,
        VoteRefusal::EditNeedsSingleApprover(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::BAD_REQUEST,
    }
}

impl From<VoteRefusal> for ApiError {
    fn from(refusal: VoteRefusal) -> Self {
        Self::new(refusal_status(&refusal), refusal.code(), refusal.to_string())
    }
}

impl From<VoteError> for ApiError {
    fn from(error: VoteError) -> Self {
        match error {
            VoteError::Refused(refusal) => refusal.into(),
            VoteError::Store(error) => error.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", error.to_string())
    }
}

/// A request refused by the principal source: the status and code the
/// refusal names (400 `invalid_principal`, 401 `unauthorized`), with the
/// bearer challenge of a refused JWT.
impl From<IdentifyError> for ApiError {
    fn from(error: IdentifyError) -> Self {
        Self { challenge: error.challenge(), ..Self::new(error.status(), error.code(), error.to_string()) }
    }
}

/// A failed OpenID Connect sign-in or sign-out.
impl From<OidcError> for ApiError {
    fn from(error: OidcError) -> Self {
        let (status, code) = match &error {
            OidcError::Refused(_) => (StatusCode::UNAUTHORIZED, "sign_in_refused"),
            OidcError::InvalidState(_) => (StatusCode::BAD_REQUEST, "invalid_state"),
            OidcError::MissingCode => (StatusCode::BAD_REQUEST, "missing_code"),
            OidcError::CodeExchange(_) | OidcError::NoIdToken | OidcError::Discovery { .. } => {
                (StatusCode::BAD_GATEWAY, "provider_error")
            }
            OidcError::IdToken(_) | OidcError::Claims(_) => (StatusCode::UNAUTHORIZED, "invalid_id_token"),
            OidcError::SessionTooLarge(_) => (StatusCode::BAD_REQUEST, "session_too_large"),
            OidcError::SignOut(_) => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "sign_in_failed"),
        };
        Self::new(status, code, error.to_string())
    }
}

/// A cookie-authenticated request from another origin: 403 `cross_origin_request`.
impl From<CrossOriginRequest> for ApiError {
    fn from(refusal: CrossOriginRequest) -> Self {
        Self::new(StatusCode::FORBIDDEN, "cross_origin_request", refusal.to_string())
    }
}
