//! Kandev's persistence: one `Store` over SQLite, with versioned migrations and an event log.
//!
//! Reads go through a pool of connections; writes go through [`WriteTx`], which serializes
//! writers (SQLite has one writer anyway) so that events are committed and then published
//! strictly in `seq` order. Row types stay private to this crate; callers get domain types.

mod board;
mod error;
mod events;
mod profiles;
mod rows;
mod sessions;
mod worktrees;
mod write;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use kandev_domain::{Clock, IdGenerator, Timestamp};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use tokio::sync::{Mutex, broadcast};

pub use board::{
    NewRepository, NewTask, RepositoryPatch, StepChange, StepPatch, TaskFilter, TaskPatch,
};
pub use error::StoreError;
pub use events::{Event, PRUNE_BATCH, Pruned, Retention, Topic};
pub use profiles::{NewProfile, ProfilePatch};
pub use sessions::{NewMessage, RuntimeRecord, SessionUpdate};
pub use worktrees::{NewWorktree, WorktreeRecord};
pub use write::WriteTx;

/// Result type of every store operation.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// How many events a slow live subscriber may fall behind before it must re-read the store.
const EVENT_CHANNEL_CAPACITY: usize = 4096;

/// The system clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        Timestamp(millis)
    }
}

/// Random, time-ordered UUIDs (v7).
pub struct UuidGenerator;

impl IdGenerator for UuidGenerator {
    fn next_id(&self) -> String {
        uuid::Uuid::now_v7().to_string()
    }
}

/// Handle to the database. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    read: SqlitePool,
    write: SqlitePool,
    /// Held from `BEGIN` to after publication, so events are published in commit order.
    write_gate: Arc<Mutex<()>>,
    events: broadcast::Sender<Event>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    location: String,
}

/// Where the database lives.
#[derive(Debug, Clone)]
pub enum Location {
    /// A SQLite file, created if missing.
    File(PathBuf),
    /// A private in-memory database (unit tests only).
    Memory,
}

impl Location {
    /// Parses `--database-url`: `sqlite://path`, `sqlite:path` or a plain path.
    pub fn parse(url: &str) -> Result<Location> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Err(StoreError::Unsupported(
                "postgres is not supported yet; use a sqlite file path".into(),
            ));
        }
        let path =
            url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")).unwrap_or(url);
        if path.is_empty() || path == ":memory:" {
            return Err(StoreError::Unsupported(
                "the server needs a database file; give a path such as ~/.kandev/kandev.db".into(),
            ));
        }
        Ok(Location::File(PathBuf::from(path)))
    }
}

impl Store {
    /// Opens (creating if needed) the database and runs pending migrations.
    pub async fn open(location: Location) -> Result<Store> {
        Store::open_with(location, Arc::new(SystemClock), Arc::new(UuidGenerator)).await
    }

    /// Opens with an injected clock and id generator (deterministic tests).
    pub async fn open_with(
        location: Location,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
    ) -> Result<Store> {
        let (options, readers, label) = match &location {
            Location::File(path) => {
                create_parent_dir(path)?;
                let options = SqliteConnectOptions::new().filename(path).create_if_missing(true);
                (options, 4, path.display().to_string())
            }
            // One shared connection: each in-memory connection would be a separate database.
            Location::Memory => {
                (SqliteConnectOptions::from_str("sqlite::memory:")?, 0, ":memory:".into())
            }
        };
        let options = options
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.clone())
            .await?;
        sqlx::migrate!("./migrations").run(&write).await?;
        let read = if readers == 0 {
            write.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(readers)
                .connect_with(options.read_only(true))
                .await?
        };
        let (events, _) = broadcast::channel(EVENT_CHANNEL_CAPACITY);
        Ok(Store {
            read,
            write,
            write_gate: Arc::new(Mutex::new(())),
            events,
            clock,
            ids,
            location: label,
        })
    }

    /// An in-memory store for unit tests.
    pub async fn in_memory() -> Result<Store> {
        Store::open(Location::Memory).await
    }

    /// A human-readable description of where the data lives.
    pub fn location(&self) -> &str {
        &self.location
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Starts a write transaction. Only one is open at a time.
    pub async fn begin_write(&self) -> Result<WriteTx> {
        WriteTx::begin(self).await
    }

    /// Live events committed from now on, in `seq` order.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Checks the database answers (for the health endpoint).
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.read).await?;
        Ok(())
    }

    /// Closes every connection; pending writes are finished first.
    pub async fn close(&self) {
        self.write.close().await;
        self.read.close().await;
    }
}

fn create_parent_dir(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|source| StoreError::Io { path: parent.display().to_string(), source })?;
    }
    Ok(())
}
