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
mod children;
mod copy;
mod db;
mod error;
mod events;
mod executors;
mod mcp_tokens;
mod messages;
mod notifications;
mod permissions;
mod profiles;
mod query;
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
mod sql;
mod tasks;
mod turns;
mod version;
mod workflows;
mod workspaces;
mod worktrees;
mod write;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use kandev_domain::{Clock, IdGenerator, Timestamp};
use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::db::Pool;
use tokio::sync::{Mutex, broadcast, watch};

pub use children::ChildProcess;
pub use copy::{CopiedTable, copy_database};
pub use error::StoreError;
pub use events::{Event, PRUNE_BATCH, Payload, Pruned, Retention, Topic};
pub use messages::{Appended, NewChunk, NewMessage, StreamGroup};
pub use notifications::{DueDelivery, NewChannel, NewNotification};
pub use profiles::{NewProfile, ProfilePatch};
pub use repositories::{NewRepository, RepositoryPatch};
pub use runtime::{RunnerPosition, RuntimeRecord};
pub use search::{RANK_WINDOW, SearchHit, SearchKinds, SearchPage, SnippetPart};
pub use session_resets::ResetIntent;
pub use sessions::SessionUpdate;
pub use ship::NewReviewComment;
pub use sql::Dialect;
pub use tasks::{NewTask, StepChange, TaskFilter, TaskPatch};
pub use turns::{OpenTurn, TurnUsagePart};
pub use version::KANDEV_VERSION;
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
/// WAL pages after which the write connection checkpoints by itself (SQLite's
/// `wal_autocheckpoint`; its default is 1,000). The server checkpoints from a connection of
/// its own ([`Store::checkpoint`]): a checkpoint run by the writer stalls every write behind
/// it, and under a streaming load that was the tail of the write -> receive latency (issue
/// 15). While writes go on, that checkpoint copies the log but never finishes it (each
/// commit adds frames after the ones it copied), so the log is not rewound and keeps
/// growing until a quiet moment; a P1 flood writes ~90 MB of it. At 8,192 pages (32 MiB)
/// the writer took over mid-flood and one commit took 50–70 ms. This
/// is the bound for a store nobody checkpoints (tests, tools, a checkpointer that fell
/// behind): 256 MiB of WAL at 4 KiB pages. Its price: after a crash, opening the database
/// reads a log of up to that size.
const WRITER_CHECKPOINT_PAGES: u32 = 65_536;

/// Bytes the WAL file is cut back to when the log is rewound after a burst grew it
/// (SQLite's `journal_size_limit`): the disk space of a burst is given back, not kept.
const WAL_SIZE_LIMIT: u64 = 64 * 1024 * 1024;

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

/// Where the database lives.
#[derive(Debug, Clone)]
pub enum Location {
    /// A SQLite file, created if missing.
    File(PathBuf),
    /// A private in-memory database (unit tests only).
    Memory,
    /// A PostgreSQL database (`postgres://user:password@host:port/name`), which must exist.
    Postgres(String),
}

impl Location {
    /// Parses `--database-url`: `postgres://...` (or `postgresql://...`), `sqlite://path`,
    /// `sqlite:path` or a plain path.
    pub fn parse(url: &str) -> Result<Location> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            PgConnectOptions::from_str(url).map_err(|err| {
                StoreError::Unsupported(format!(
                    "the postgres url is not valid ({err}); write it as postgres://user:password@host:port/database"
                ))
            })?;
            return Ok(Location::Postgres(url.to_owned()));
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
        Store::open_as(location, clock, ids, Role::Server).await
    }

    /// Opens for a command beside a server (`kandev user`): on PostgreSQL it does not take
    /// the server's lock, so it works while the server runs. Its writes still get event
    /// seqs in commit order (the `event_seq` row lock orders them), but only a server
    /// publishes events live; use it for writes no client waits to see.
    pub async fn open_beside_server(location: Location) -> Result<Store> {
        Store::open_as(location, Arc::new(SystemClock), Arc::new(UuidGenerator), Role::Tool).await
    }

    async fn open_as(
        location: Location,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
        role: Role,
    ) -> Result<Store> {
        let (read, write, label, replaceable, checkpointer) = match &location {
            Location::Postgres(url) => {
                let (read, write) = open_postgres(url, role).await?;
                (read, write, redact_url(url), false, None)
            }
            Location::File(path) => {
                create_parent_dir(path)?;
                secure::secure_db_files(path)?;
                let options = SqliteConnectOptions::new().filename(path).create_if_missing(true);
                let (read, write, checkpointer) = open_sqlite(options, 4).await?;
                (read, write, path.display().to_string(), true, checkpointer)
            }
            // One shared connection: each in-memory connection would be a separate database.
            Location::Memory => {
                let options = SqliteConnectOptions::from_str("sqlite::memory:")?;
                let (read, write, _) = open_sqlite(options, 0).await?;
                (read, write, ":memory:".into(), false, None)
            }
        };
        let (events, _) = broadcast::channel(EVENT_CHANNEL_CAPACITY);
        let store = Store {
            read,
            write,
            write_gate: Arc::new(Mutex::new(())),
            write_lane: Arc::new(Mutex::new(())),
            writers_waiting: Arc::new(watch::Sender::new(0)),
            events,
            clock,
            ids,
            location: label,
            replaceable,
            write_health: Arc::new(WriteHealth::default()),
            cards_version: Arc::new(AtomicU64::new(0)),
            commits: Arc::new(AtomicU64::new(0)),
            checkpointer,
        };
        // Streams a crash interrupted end here: their chunks become their messages' text.
        let mut tx = store.begin_write().await?;
        tx.fold_all_messages().await?;
        tx.commit().await?;
        Ok(store)
    }

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

    /// An in-memory store for unit tests.
    pub async fn in_memory() -> Result<Store> {
        Store::open(Location::Memory).await
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

    /// The database's current size in pages.
    pub async fn page_count(&self) -> Result<u32> {
        let Pool::Sqlite(read) = &self.read else { return Err(sqlite_only("page_count")) };
        let count: i64 = sqlx::query_scalar("PRAGMA page_count").fetch_one(read).await?;
        Ok(u32::try_from(count).unwrap_or(u32::MAX))
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

    /// Closes every connection; pending writes are finished first.
    pub async fn close(&self) {
        self.write.close().await;
        self.read.close().await;
        if let Some(pool) = &self.checkpointer {
            pool.close().await;
        }
    }
}

/// The advisory lock a PostgreSQL server holds for as long as it runs (on its write
/// connection), so that a second server on the same database is refused: two single writers
/// would break the event `seq` order. (The number spells "kandev" in ASCII.)
const PG_SERVER_LOCK: i64 = 0x6b61_6e64_6576;

const SERVER_LOCK_HELD: &str = "the server lock is held by another connection";

/// Takes [`PG_SERVER_LOCK`] on `conn`. A server that just stopped (or was killed) may hold it
/// a moment longer, until PostgreSQL notices its connection is gone: up to 3 s of retries.
async fn take_server_lock(conn: &mut PgConnection) -> std::result::Result<(), sqlx::Error> {
    for _ in 0..30 {
        let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(PG_SERVER_LOCK)
            .fetch_one(&mut *conn)
            .await?;
        if locked {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(sqlx::Error::Configuration(SERVER_LOCK_HELD.into()))
}

/// Who opens a store: the server (one per database) or a command beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Server,
    Tool,
}

/// Opens the read pool (`readers` connections; 0 shares the write connection), the one write
/// connection and, with readers, the checkpoint connection ([`Store::checkpoint`]), with the
/// pragmas every connection uses, and migrates (recording this Kandev's version, `version.rs`).
async fn open_sqlite(
    options: SqliteConnectOptions,
    readers: u32,
) -> Result<(Pool, Pool, Option<sqlx::SqlitePool>)> {
    let options = options
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(5))
        .foreign_keys(true);
    let writer = options
        .clone()
        .pragma("wal_autocheckpoint", WRITER_CHECKPOINT_PAGES.to_string())
        .pragma("journal_size_limit", WAL_SIZE_LIMIT.to_string());
    let write = SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_with(writer)
        .await?;
    version::migrate(&Pool::Sqlite(write.clone())).await?;
    if readers == 0 {
        return Ok((Pool::Sqlite(write.clone()), Pool::Sqlite(write), None));
    }
    let read = SqlitePoolOptions::new()
        .max_connections(readers)
        .connect_with(options.clone().read_only(true).row_buffer_size(READ_ROW_BUFFER))
        .await?;
    // Opened when first used; it writes only database pages the log already holds.
    let checkpointer = SqlitePoolOptions::new().max_connections(1).connect_lazy_with(options);
    Ok((Pool::Sqlite(read), Pool::Sqlite(write), Some(checkpointer)))
}

/// Connects to PostgreSQL: one write connection that holds [`PG_SERVER_LOCK`] and runs the
/// migrations (recording this Kandev's version, `version.rs`), and a read pool.
async fn open_postgres(url: &str, role: Role) -> Result<(Pool, Pool)> {
    let options = PgConnectOptions::from_str(url)?;
    let connect_error = |err: sqlx::Error| {
        StoreError::Unsupported(format!(
            "cannot connect to postgres at {} ({err}); check that the server runs and the url is right",
            redact_url(url)
        ))
    };
    if role == Role::Server {
        // The pool retries a connection that fails to take the lock until it times out, with
        // a message that does not say why; one plain connection says it first.
        let mut probe = PgConnection::connect_with(&options).await.map_err(connect_error)?;
        let held = take_server_lock(&mut probe).await;
        probe.close().await.ok();
        match held {
            Err(sqlx::Error::Configuration(why)) if why.to_string() == SERVER_LOCK_HELD => {
                return Err(StoreError::Conflict(format!(
                    "another kandev server is using the database {}; stop it first (one server per database)",
                    redact_url(url)
                )));
            }
            other => other?,
        }
    }
    // Every write connection takes the lock as it connects, not only the first: the pool
    // replaces a connection that broke (a PostgreSQL restart, a network blip), and a
    // replacement without the lock would let a second server in.
    let write = PgPoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(Duration::from_secs(10))
        .after_connect(move |conn, _| {
            Box::pin(async move {
                if role == Role::Server {
                    take_server_lock(conn).await?;
                }
                Ok(())
            })
        })
        .connect_with(options.clone())
        .await
        .map_err(connect_error)?;
    version::migrate(&Pool::Postgres(write.clone())).await?;
    let read = PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .map_err(connect_error)?;
    Ok((Pool::Postgres(read), Pool::Postgres(write)))
}

/// `url` without its password, for messages and the health check.
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    match rest.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split_once(':').map_or(user, |(name, _)| name);
            format!("{scheme}://{user}@{host}")
        }
        None => url.to_owned(),
    }
}

/// Creates the empty database `name` on the PostgreSQL server of `admin_url` (whose user
/// may create databases) and returns the url of the new database. For tests and
/// `kandev db copy` targets made on the fly.
pub async fn create_postgres_database(admin_url: &str, name: &str) -> Result<String> {
    use sqlx::Connection;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(StoreError::Invalid(format!(
            "the database name {name:?} is not valid; use letters, digits and _"
        )));
    }
    let mut conn = sqlx::PgConnection::connect(admin_url).await?;
    sqlx::query(&format!("CREATE DATABASE \"{name}\"")).execute(&mut conn).await?;
    conn.close().await?;
    Ok(with_database(admin_url, name))
}

/// `url` naming the database `name` instead of its own.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let (scheme, rest) = base.split_once("://").unwrap_or(("postgres", base));
    let server = rest.split_once('/').map_or(rest, |(server, _)| server);
    match query {
        Some(query) => format!("{scheme}://{server}/{name}?{query}"),
        None => format!("{scheme}://{server}/{name}"),
    }
}

fn sqlite_only(what: &str) -> StoreError {
    StoreError::Unsupported(format!("{what} exists only on sqlite"))
}

fn create_parent_dir(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|source| StoreError::Io { path: parent.display().to_string(), source })?;
    }
    Ok(())
}
