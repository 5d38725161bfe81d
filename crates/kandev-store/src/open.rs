//! Opening a store: where the database lives ([`Location`]), the connections and pragmas of
//! each engine, the PostgreSQL server lock, and migrating at open.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use kandev_domain::{Clock, IdGenerator, Timestamp};
use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use tokio::sync::{Mutex, broadcast, watch};

use crate::db::Pool;
use crate::{Result, Store, StoreError, WriteHealth, secure, version};

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
        // Any other scheme (a typo of postgres, mysql) would otherwise be a file of that odd
        // name in the current folder. Only the scheme is named: the rest may hold a password.
        if let Some((scheme, _)) = path.split_once("://") {
            return Err(StoreError::Unsupported(format!(
                "a database URL of the scheme {scheme}:// is not supported; use \
                 postgres://user:password@host:port/database, or a SQLite file's path"
            )));
        }
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

    /// An in-memory store for unit tests.
    pub async fn in_memory() -> Result<Store> {
        Store::open(Location::Memory).await
    }
}

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
        .foreign_keys(true)
        // Deleted and overwritten content is zeroed on its page: an old secret's sealed
        // value (or a plain value moved into the store) does not linger in free space.
        .pragma("secure_delete", "ON");
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

fn create_parent_dir(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|source| StoreError::Io { path: parent.display().to_string(), source })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i43_a_database_url_of_an_unknown_scheme_is_refused_without_its_password() {
        for url in ["mysql://u:secret@h/db", "postgress://u:secret@h/db"] {
            let err = Location::parse(url).unwrap_err().to_string();
            assert!(err.contains("is not supported") && !err.contains("secret"), "{err}");
        }
        assert!(matches!(Location::parse("sqlite:///tmp/k.db"), Ok(Location::File(_))));
        assert!(matches!(Location::parse("/tmp/k.db"), Ok(Location::File(_))));
    }
}
