//! `ApiError`: the one error type handlers return, mapped to api.md's codes and HTTP statuses.

use kandev_api_types::{ErrorBody, ErrorCode};
use kandev_store::StoreError;

/// An error as the client sees it. Internal causes are logged where they happen, never sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub details: Option<serde_json::Value>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError { code, message: message.into(), details: None }
    }

    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ValidationError, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    pub fn unauthorized() -> Self {
        Self::new(
            ErrorCode::Unauthorized,
            "a login or a valid access token is required: log in at /login, or pass a token as \
             `Authorization: Bearer <token>`",
        )
    }

    pub fn internal() -> Self {
        Self::new(ErrorCode::InternalError, "internal error; see the server log")
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody { code: self.code, message: self.message.clone(), details: self.details.clone() }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound { .. } => ApiError::not_found(err.to_string()),
            StoreError::Conflict(message) => ApiError::conflict(message),
            StoreError::InvalidQuery(message) => ApiError::validation(message),
            StoreError::Invalid(message) => ApiError::validation(message),
            // Rolled back and lasting until space is freed: the client may retry later.
            StoreError::DiskFull { .. } => {
                tracing::warn!(error = %err, "a write failed: the disk is full");
                ApiError::new(ErrorCode::Unavailable, err.to_string())
            }
            other => {
                tracing::error!(error = %other, "store error");
                ApiError::internal()
            }
        }
    }
}

impl From<kandev_engine::EngineError> for ApiError {
    fn from(err: kandev_engine::EngineError) -> Self {
        use kandev_engine::EngineError as E;
        match err {
            E::NotFound(m) => ApiError::new(ErrorCode::NotFound, m),
            E::Validation(m) => ApiError::new(ErrorCode::ValidationError, m),
            E::Forbidden(m) => ApiError::new(ErrorCode::Forbidden, m),
            E::Conflict(m) => ApiError::new(ErrorCode::Conflict, m),
            E::Refused { message, details } => {
                ApiError::new(ErrorCode::Conflict, message).with_details(details)
            }
            E::Busy(m) => ApiError::new(ErrorCode::Busy, m),
            E::QueueFull(m) => ApiError::new(ErrorCode::QueueFull, m),
            E::ResetInProgress(m) => ApiError::new(ErrorCode::ResetInProgress, m),
            E::AlreadyResolved(m) => ApiError::new(ErrorCode::AlreadyResolved, m),
            E::Unavailable(m) => ApiError::new(ErrorCode::Unavailable, m),
            E::Store(e) => e.into(),
        }
    }
}

impl From<kandev_domain::validate::FieldError> for ApiError {
    fn from(err: kandev_domain::validate::FieldError) -> Self {
        // The message names the field in words; programs and the web's forms (which have
        // their own label for it) read `field` and `problem`.
        let details = serde_json::json!({ "field": err.field, "problem": err.problem });
        ApiError::validation(err.to_string()).with_details(details)
    }
}

impl axum::response::IntoResponse for ApiError {
    fn into_response(self) -> axum::response::Response {
        let status = axum::http::StatusCode::from_u16(self.code.http_status())
            .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self.body())).into_response()
    }
}
