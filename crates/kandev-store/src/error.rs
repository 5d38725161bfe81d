//! The store's error type.

use thiserror::Error;

/// What can go wrong in the store. `NotFound` and `Conflict` are meant for users; the rest
/// are internal and should be logged, not shown.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("{what} {id} was not found")]
    NotFound { what: &'static str, id: String },
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Unsupported(String),
    /// A search query SQLite's full-text syntax refuses (meant for the user).
    #[error("{0}")]
    InvalidQuery(String),
    /// The change breaks a rule of the data (a dependency cycle); meant for users.
    #[error("{0}")]
    Invalid(String),
    /// A runtime-state write from an epoch that is no longer current (fenced).
    #[error("session {session} moved on to epoch {actual} (write was for epoch {expected})")]
    StaleEpoch { session: String, expected: i64, actual: i64 },
    #[error("stored data is invalid: {0}")]
    Corrupt(String),
    #[error("cannot create {path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// The disk holding the database is full (SQLite's `SQLITE_FULL`); the write was rolled
    /// back. Lasts until space is freed; the store recovers by itself.
    #[error("the disk holding {path} is full: free some space; nothing was saved")]
    DiskFull { path: String },
    #[error("database error: {0}")]
    Database(sqlx::Error),
    /// The database has migrations this Kandev does not know: a newer Kandev made it
    /// (`recorded`: the version that last used it, when the database says).
    #[error("{}", crate::version::newer_database(.recorded.as_deref()))]
    NewerDatabase { recorded: Option<String> },
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &err {
            if let Some(full) = db.try_downcast_ref::<crate::write::DiskFull>() {
                return StoreError::DiskFull { path: full.path.clone() };
            }
            // Outside a write transaction (a read spilling to a temporary file, a migration).
            if crate::write::is_disk_full(&err) {
                return StoreError::DiskFull { path: "the database".into() };
            }
            // Callers check references before they write, outside the transaction: a delete
            // that commits in between is a race the user lost, not an internal error.
            if db.is_foreign_key_violation() {
                return StoreError::Conflict(
                    "something this change refers to was deleted meanwhile; reload and try again"
                        .into(),
                );
            }
        }
        StoreError::Database(err)
    }
}

impl StoreError {
    pub fn not_found(what: &'static str, id: impl Into<String>) -> Self {
        StoreError::NotFound { what, id: id.into() }
    }
}

/// A JSON column read as its type: text that does not parse is `Corrupt`, naming the row
/// (`what` and `id`), never silently an empty value.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
    what: &str,
    id: &str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what} {id}: {e}")))
}
