//! Error codes of api.md and the error payload every failed request gets.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// The error codes of api.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    BadRequest,
    ValidationError,
    NotFound,
    Conflict,
    Busy,
    QueueFull,
    ResetInProgress,
    AlreadyResolved,
    Unauthorized,
    Forbidden,
    Unavailable,
    InternalError,
    UnknownAction,
    /// Too many failed token checks; the response carries `Retry-After`.
    RateLimited,
}

impl ErrorCode {
    /// The HTTP status the code maps to.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::BadRequest => 400,
            ErrorCode::ValidationError => 422,
            ErrorCode::NotFound | ErrorCode::UnknownAction => 404,
            ErrorCode::Conflict
            | ErrorCode::Busy
            | ErrorCode::ResetInProgress
            | ErrorCode::AlreadyResolved => 409,
            ErrorCode::QueueFull | ErrorCode::RateLimited => 429,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::Unavailable => 503,
            ErrorCode::InternalError => 500,
        }
    }
}

/// The payload of an error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}
