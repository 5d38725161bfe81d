//! The crate's error types.

use std::path::PathBuf;

/// A state dir file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Filesystem error on `path`.
    #[error("state file {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A line or file of the state dir is not what the mock agent writes.
    #[error("state file {path} line {line}: {source}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number (1 for whole-file formats).
        line: usize,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

impl StateError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StateError::Io { path: path.into(), source }
    }
}

/// Why a mock agent run ended abnormally.
#[derive(Debug, thiserror::Error)]
pub enum MockError {
    /// Reading the client's messages failed.
    #[error("reading input failed: {0}")]
    Read(#[source] std::io::Error),
    /// Writing to the client failed (e.g. it went away).
    #[error("writing output failed: {0}")]
    Write(#[source] std::io::Error),
    /// The state dir could not be opened.
    #[error("state dir unusable: {0}")]
    State(#[from] StateError),
}
