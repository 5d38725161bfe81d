//! Kandev's persistence: one `Store` over SQLite or PostgreSQL, with versioned migrations
//! and an event log.
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
mod audit;
mod checkpoints;
mod children;
mod copy;
mod db;
mod error;
mod events;
mod executors;
mod feedback;
mod file_views;
#[doc(hidden)]
pub mod fixture;
mod intake;
mod mcp_tokens;
mod members;
mod messages;
mod notifications;
mod open;
mod permissions;
mod profiles;
mod query;
mod questions;
mod queue;
mod repositories;
mod runtime;
mod saved_prompts;
mod schedules;
mod search;
mod secrets;
mod secure;
mod session_resets;
mod sessions;
mod ship;
mod sql;
mod statistics;
mod tasks;
mod turns;
mod version;
mod workflows;
mod workspaces;
mod worktrees;
mod write;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};

use kandev_domain::{Clock, IdGenerator, Timestamp};

use crate::db::Pool;
use tokio::sync::{Mutex, broadcast, watch};

pub use audit::AuditFilter;
pub use checkpoints::TurnCheckpoint;
pub use children::{ChildProcess, RunnerTerminal};
pub use copy::{CopiedTable, copy_database};
pub use error::StoreError;
pub use events::{Event, PRUNE_BATCH, Payload, Pruned, Retention, Topic};
pub use file_views::FileView;
pub use intake::NewIntakeSource;
pub use messages::{Appended, NewChunk, NewMessage, StreamGroup};
pub use notifications::{DueDelivery, NewChannel, NewNotification};
pub use open::{Location, SystemClock, UuidGenerator, create_postgres_database};
pub use profiles::{NewProfile, ProfilePatch};
pub use repositories::{NewRepository, RepositoryPatch};
pub use runtime::{RunnerPosition, RuntimeRecord};
pub use schedules::ScheduleSpec;
pub use search::{RANK_WINDOW, SearchHit, SearchKinds, SearchPage, SnippetPart};
pub use session_resets::ResetIntent;
pub use sessions::SessionUpdate;
pub use ship::NewReviewComment;
pub use sql::Dialect;
pub use tasks::{NewTask, StepChange, TaskFilter, TaskPatch};
pub use turns::{OpenTurn, TurnPrompt, TurnUsagePart};
pub use version::{KANDEV_VERSION, SchemaState, schema_state, vacuum_into};
pub use workflows::StepPatch;
pub use worktrees::{NewWorktree, WorktreeRecord};
pub use write::{Savepoint, WriteTx};

/// Result type of every store operation.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Handle to the database. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    read: Pool,
    write: Pool,
    /// Held from `BEGIN` to after publication, so events are published in commit order.
    write_gate: Arc<Mutex<()>>,
    /// Where every writer but the group writer of streamed text waits its turn at the gate
    /// ([`Store::begin_stream_write`]).
    write_lane: Arc<Mutex<()>>,
    /// How many writers wait in the lane ([`Store::writers_waiting`]).
    writers_waiting: Arc<watch::Sender<usize>>,
    events: broadcast::Sender<Arc<Event>>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    location: String,
    /// Whether the write connection may be replaced (a file; an in-memory database would be
    /// lost with its connection).
    replaceable: bool,
    write_health: Arc<WriteHealth>,
    /// Bumped after every commit that may have changed what a board card shows (see
    /// [`Store::cards_version`]).
    cards_version: Arc<AtomicU64>,
    /// Bumped after every commit ([`Store::commits`]).
    commits: Arc<AtomicU64>,
    /// The connection that checkpoints the WAL beside the writer (a database file only).
    checkpointer: Option<sqlx::SqlitePool>,
}

/// A writer counted in [`Store::writers_waiting`] until it gets its turn or gives up.
struct InLane<'a>(&'a watch::Sender<usize>);

impl<'a> InLane<'a> {
    fn enter(count: &'a watch::Sender<usize>) -> Self {
        count.send_modify(|n| *n += 1);
        InLane(count)
    }
}

impl Drop for InLane<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// What one [`Store::checkpoint`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpointed {
    /// Frames in the write-ahead log.
    pub wal_frames: i64,
    /// Frames of it now copied into the database file.
    pub backfilled: i64,
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

impl Store {
    /// A number that changes after every commit that may have changed a board card (a task,
    /// its step or position, a blocker, a repository link, a git summary, a step's order, ...):
    /// an answer computed from the cards after reading version `v` stays true while the
    /// version is still `v`. It is bumped after the commit and before the commit's events are
    /// published, so a client told of a change never reads an answer kept from before it.
    ///
    /// Conservative by construction: every committed write transaction bumps it, except one
    /// whose every statement is on a short list known to leave the card tables alone (the
    /// streamed-message group on SQLite, savepoints, single `SELECT`s; `write.rs`,
    /// `leaves_cards_alone`). A new statement therefore invalidates until it is listed.
    /// What it cannot see: another process writing the same database. Only `kandev user`
    /// does (accounts, not cards); a second server is refused.
    pub fn cards_version(&self) -> u64 {
        self.cards_version.load(Ordering::Acquire)
    }

    /// Which engine this store runs on.
    pub fn dialect(&self) -> Dialect {
        self.write.dialect()
    }

    /// A human-readable description of where the data lives.
    pub fn location(&self) -> &str {
        &self.location
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Starts a write transaction. Only one is open at a time; writers get their turn in
    /// the order they asked, except for [`Store::begin_stream_write`].
    pub async fn begin_write(&self) -> Result<WriteTx> {
        let waiting = InLane::enter(&self.writers_waiting);
        let lane = self.write_lane.clone().lock_owned().await;
        drop(waiting);
        WriteTx::begin(self, Some(lane)).await
    }

    /// How many writers wait for their turn in [`Store::begin_write`], as it changes. Tests
    /// order a race by it: a write known to be waiting behind a held transaction has done
    /// every read before it.
    pub fn writers_waiting(&self) -> watch::Receiver<usize> {
        self.writers_waiting.subscribe()
    }

    /// Starts a write transaction for the group writer of streamed text, which must not wait
    /// behind every other writer: they queue for the gate one at a time (a lane), so at most
    /// one of them goes before each of its groups, and each of them waits for at most one
    /// group. Without it, 50 sessions starting their turns at once (a transaction each,
    /// ~10 ms under load) held the text streamed meanwhile for half a second (issue 15).
    pub async fn begin_stream_write(&self) -> Result<WriteTx> {
        WriteTx::begin(self, None).await
    }

    /// Live events committed from now on, in `seq` order.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    /// Checks the database answers (for the health endpoint).
    pub async fn ping(&self) -> Result<()> {
        crate::sql::query("SELECT 1").execute(&self.read).await?;
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
        let Pool::Sqlite(write) = &self.write else { return Err(sqlite_only("max_page_count")) };
        // Applies to a replacement write connection too.
        let options = (*write.connect_options()).clone();
        write.set_connect_options(options.pragma("max_page_count", pages.to_string()));
        let cap: i64 = sqlx::query_scalar(&format!("PRAGMA max_page_count = {pages}"))
            .fetch_one(write)
            .await?;
        Ok(u32::try_from(cap).unwrap_or(u32::MAX))
    }

    /// The pages in use: the file's pages less the free ones (a migration that made a table
    /// again leaves its old pages free, and writes take those first).
    pub async fn page_count(&self) -> Result<u32> {
        let Pool::Sqlite(read) = &self.read else { return Err(sqlite_only("page_count")) };
        let count: i64 = sqlx::query_scalar("PRAGMA page_count").fetch_one(read).await?;
        let free: i64 = sqlx::query_scalar("PRAGMA freelist_count").fetch_one(read).await?;
        Ok(u32::try_from(count - free).unwrap_or(u32::MAX))
    }

    /// Closes the write connection so that the pool opens a fresh one: a connection left
    /// inside a transaction by an error is rolled back by closing it. Needs the write gate.
    pub(crate) async fn replace_write_connection(&self) {
        let Pool::Sqlite(write) = &self.write else { return };
        if !self.replaceable {
            return;
        }
        match write.acquire().await {
            Ok(conn) => {
                if let Err(err) = conn.close().await {
                    tracing::warn!(error = %err, "closing the write connection failed");
                }
            }
            Err(err) => tracing::warn!(error = %err, "cannot take the write connection"),
        }
    }

    /// How many write transactions have committed since the store opened.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Acquire)
    }

    /// Copies what the write-ahead log holds into the database file, from a connection of its
    /// own, without waiting for readers or the writer (SQLite's `PASSIVE` checkpoint): frames
    /// a reader still needs stay for the next one. The server runs it every 250 ms that saw
    /// a commit (`ServerConfig::checkpoint_interval`), so the writer, which would otherwise
    /// stop to checkpoint every 1,000 pages, only writes. `None` on PostgreSQL and in memory.
    pub async fn checkpoint(&self) -> Result<Option<Checkpointed>> {
        let Some(pool) = &self.checkpointer else { return Ok(None) };
        let (_busy, wal_frames, backfilled): (i64, i64, i64) =
            sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)").fetch_one(pool).await?;
        Ok(Some(Checkpointed { wal_frames, backfilled }))
    }

    /// After values were overwritten that must not linger (a key rotation, secrets moved in):
    /// folds SQLite's write-ahead log, which still holds the pages as they were, into the
    /// database file and empties it (`TRUNCATE`; with `secure_delete` the pages hold zeros
    /// where the old values were). A reader that keeps old frames makes it a partial one.
    /// Nothing on PostgreSQL, whose old row versions stay until vacuumed.
    pub async fn fold_write_ahead_log(&self) -> Result<()> {
        if let Pool::Sqlite(pool) = &self.write {
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(pool).await?;
        }
        Ok(())
    }

    /// SQLite's `PRAGMA quick_check` (`ok`, or what is damaged); on PostgreSQL, `ok` once
    /// the server answers (it checks its own pages).
    pub async fn quick_check(&self) -> Result<String> {
        match &self.read {
            Pool::Sqlite(pool) => {
                let said: Vec<String> =
                    sqlx::query_scalar("PRAGMA quick_check").fetch_all(pool).await?;
                Ok(said.join("; "))
            }
            Pool::Postgres(_) => {
                self.ping().await?;
                Ok("ok".into())
            }
        }
    }

    /// Closes every connection, leaving a SQLite database as one self-contained file (its
    /// write-ahead log folded in and removed, the journal mode back to `DELETE`): what a copy
    /// that is moved or archived on its own needs. On PostgreSQL, [`Store::close`].
    pub async fn close_as_one_file(&self) -> Result<()> {
        self.read.close().await;
        if let Some(pool) = &self.checkpointer {
            pool.close().await;
        }
        if let Pool::Sqlite(pool) = &self.write {
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(pool).await?;
            sqlx::query("PRAGMA journal_mode = DELETE").execute(pool).await?;
        }
        self.write.close().await;
        Ok(())
    }

    /// Closes every connection; pending writes are finished first.
    pub async fn close(&self) {
        self.write.close().await;
        self.read.close().await;
        if let Some(pool) = &self.checkpointer {
            pool.close().await;
        }
    }
}

fn sqlite_only(what: &str) -> StoreError {
    StoreError::Unsupported(format!("{what} exists only on sqlite"))
}
