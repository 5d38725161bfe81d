//! The engine's error type: what a caller may be told, by kind.

use kandev_store::StoreError;
use thiserror::Error;

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Validation(String),
    /// A path leaves the task's working directory (`..`, absolute, a symlink pointing out)
    /// or names git metadata.
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    Conflict(String),
    /// The session is running a turn and the caller asked not to queue.
    /// A conflict whose blockers are listed in `details` (dirty files, conflicting paths).
    #[error("{message}")]
    Refused { message: String, details: serde_json::Value },
    #[error("{0}")]
    Busy(String),
    #[error("{0}")]
    QueueFull(String),
    #[error("{0}")]
    ResetInProgress(String),
    #[error("{0}")]
    AlreadyResolved(String),
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl EngineError {
    pub(crate) fn gone() -> Self {
        EngineError::Unavailable("the session is shutting down; try again".into())
    }
}

/// A store error, with `NotFound` as the engine's (the caller named something that is not there).
pub(crate) fn not_found(err: StoreError) -> EngineError {
    match err {
        StoreError::NotFound { .. } => EngineError::NotFound(err.to_string()),
        other => EngineError::Store(other),
    }
}

impl From<kandev_forge::ForgeError> for EngineError {
    fn from(err: kandev_forge::ForgeError) -> Self {
        match err {
            kandev_forge::ForgeError::Settings(message) => EngineError::Validation(message),
            kandev_forge::ForgeError::Unavailable(message) => EngineError::Unavailable(message),
            kandev_forge::ForgeError::Refused(message) => EngineError::Conflict(message),
        }
    }
}
