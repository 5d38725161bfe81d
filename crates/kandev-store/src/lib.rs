//! Kandev's persistence: one `Store` over SQLite, with versioned migrations and an event log.
//!
//! Reads go through a pool of connections; writes go through [`WriteTx`], which serializes
//! writers (SQLite has one writer anyway) so that events are committed and then published
//! strictly in `seq` order. Row types stay private to this crate; callers get domain types.
//! A write that fails (a full disk) is rolled back and costs nothing else; see `write.rs`.
//!
//! One file per aggregate holds its row type(s), its reads (`impl Store`) and its writes
//! (`impl WriteTx`) side by side, and is the only file whose SQL names its tables. A query
//! both a `Store` and a `WriteTx` answer is written once, as a function of a `db::Db`.

mod accounts;
mod children;
mod db;
mod error;
mod events;
mod executors;
mod messages;
mod notifications;
mod permissions;
mod profiles;
mod questions;
mod queue;
mod repositories;
mod runtime;
mod saved_prompts;
mod search;
mod secure;
mod session_resets;
mod sessions;
mod ship;
mod tasks;
mod turns;
mod workflows;
mod workspaces;
mod worktrees;
mod write;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use kandev_domain::{Clock, IdGenerator, Timestamp};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use tokio::sync::{Mutex, broadcast};

pub use children::ChildProcess;
pub use error::StoreError;
pub use events::{Event, PRUNE_BATCH, Pruned, Retention, Topic};
pub use messages::{Appended, NewChunk, NewMessage};
pub use notifications::{DueDelivery, NewChannel, NewNotification};
pub use profiles::{NewProfile, ProfilePatch};
pub use repositories::{NewRepository, RepositoryPatch};
pub use runtime::{RunnerPosition, RuntimeRecord};
pub use search::{RANK_WINDOW, SearchHit, SearchKinds, SearchPage, SnippetPart};
pub use session_resets::ResetIntent;
pub use sessions::SessionUpdate;
pub use ship::NewReviewComment;
pub use tasks::{NewTask, StepChange, TaskFilter, TaskPatch};
pub use turns::TurnUsagePart;
pub use workflows::StepPatch;
pub use worktrees::{NewWorktree, WorktreeRecord};
pub use write::{Savepoint, WriteTx};

/// Result type of every store operation.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// How many events a slow live subscriber may fall behind before it must re-read the store.
const EVENT_CHANNEL_CAPACITY: usize = 4096;

/// Rows a read connection hands over before it waits for the reader to take them (sqlx's
/// default is 50): a 2,000-task board is read in one go instead of waking the connection's
/// thread again 40 times, each a wait for a CPU on a loaded machine (issue 15, P3).
const READ_ROW_BUFFER: usize = 4096;

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
    /// Whether the write connection may be replaced (a file; an in-memory database would be
    /// lost with its connection).
    replaceable: bool,
    write_health: Arc<WriteHealth>,
}

/// Whether writes currently succeed, as the health check reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteState {
    Ok,
    /// The last write failed for a reason that lasts (a full disk); `reason` says what to do.
    /// Clears when a write commits again.
    Failing {
        reason: String,
    },
}

/// The outcome of the latest write, shared by every clone of a [`Store`].
#[derive(Debug, Default)]
pub(crate) struct WriteHealth {
    failing: StdMutex<Option<String>>,
}

impl WriteHealth {
    pub(crate) fn failed(&self, reason: String) {
        if let Ok(mut failing) = self.failing.lock() {
            *failing = Some(reason);
        }
    }

    pub(crate) fn succeeded(&self) {
        if let Ok(mut failing) = self.failing.lock() {
            *failing = None;
        }
    }

    fn state(&self) -> WriteState {
        match self.failing.lock().ok().and_then(|f| f.clone()) {
            Some(reason) => WriteState::Failing { reason },
            None => WriteState::Ok,
        }
    }
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
        let (options, readers, label, replaceable) = match &location {
            Location::File(path) => {
                create_parent_dir(path)?;
                secure::secure_db_files(path)?;
                let options = SqliteConnectOptions::new().filename(path).create_if_missing(true);
                (options, 4, path.display().to_string(), true)
            }
            // One shared connection: each in-memory connection would be a separate database.
            Location::Memory => {
                (SqliteConnectOptions::from_str("sqlite::memory:")?, 0, ":memory:".into(), false)
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
                .connect_with(options.read_only(true).row_buffer_size(READ_ROW_BUFFER))
                .await?
        };
        let (events, _) = broadcast::channel(EVENT_CHANNEL_CAPACITY);
        let store = Store {
            read,
            write,
            write_gate: Arc::new(Mutex::new(())),
            events,
            clock,
            ids,
            location: label,
            replaceable,
            write_health: Arc::new(WriteHealth::default()),
        };
        // Streams a crash interrupted end here: their chunks become their messages' text.
        let mut tx = store.begin_write().await?;
        tx.fold_all_messages().await?;
        tx.commit().await?;
        Ok(store)
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

    /// Whether the latest write succeeded or failed for a reason that lasts (a full disk).
    pub fn write_state(&self) -> WriteState {
        self.write_health.state()
    }

    /// Caps the database at `pages` pages (SQLite's `max_page_count`; `None` lifts the cap),
    /// so that tests and fault drills can fill "the disk" without a small filesystem. A cap
    /// below the current size holds the database at its current size. Returns the cap now
    /// in force.
    pub async fn set_max_page_count(&self, pages: Option<u32>) -> Result<u32> {
        // SQLite's largest page count (SQLITE_MAX_PAGE_COUNT).
        let pages = pages.unwrap_or(0xffff_fffe);
        let _gate = self.write_gate.lock().await;
        // Applies to a replacement write connection too.
        let options = (*self.write.connect_options()).clone();
        self.write.set_connect_options(options.pragma("max_page_count", pages.to_string()));
        let cap: i64 = sqlx::query_scalar(&format!("PRAGMA max_page_count = {pages}"))
            .fetch_one(&self.write)
            .await?;
        Ok(u32::try_from(cap).unwrap_or(u32::MAX))
    }

    /// The database's current size in pages.
    pub async fn page_count(&self) -> Result<u32> {
        let count: i64 = sqlx::query_scalar("PRAGMA page_count").fetch_one(&self.read).await?;
        Ok(u32::try_from(count).unwrap_or(u32::MAX))
    }

    /// Closes the write connection so that the pool opens a fresh one: a connection left
    /// inside a transaction by an error is rolled back by closing it. Needs the write gate.
    pub(crate) async fn replace_write_connection(&self) {
        if !self.replaceable {
            return;
        }
        match self.write.acquire().await {
            Ok(conn) => {
                if let Err(err) = conn.close().await {
                    tracing::warn!(error = %err, "closing the write connection failed");
                }
            }
            Err(err) => tracing::warn!(error = %err, "cannot take the write connection"),
        }
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
