//! The version of the Kandev that last opened the database (`kandev_version`), and the
//! refusal of a database made by a newer Kandev.
//!
//! Every open runs the migrations and then records this Kandev's version
//! ([`KANDEV_VERSION`], the workspace's `CARGO_PKG_VERSION`): any Kandev that opened the
//! database knew all its migrations, so the recorded one always does. A database with a
//! migration this Kandev does not know (sqlx's `VersionMissing`, found before any migration
//! runs) is refused with the recorded version named, and left as it was.

use sqlx::migrate::MigrateError;

use crate::db::Pool;
use crate::{Result, StoreError};

/// This Kandev's version.
pub const KANDEV_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Runs the pending migrations, then records [`KANDEV_VERSION`].
pub(crate) async fn migrate(pool: &Pool) -> Result<()> {
    let ran = match pool {
        Pool::Sqlite(pool) => sqlx::migrate!("./migrations").run(pool).await,
        Pool::Postgres(pool) => sqlx::migrate!("./migrations-pg").run(pool).await,
    };
    match ran {
        Ok(()) => {}
        Err(MigrateError::VersionMissing(_)) => {
            return Err(StoreError::NewerDatabase { recorded: recorded(pool).await });
        }
        Err(err) => return Err(err.into()),
    }
    crate::sql::query(
        "INSERT INTO kandev_version (id, version) VALUES (1, ?) \
         ON CONFLICT (id) DO UPDATE SET version = excluded.version",
    )
    .bind(KANDEV_VERSION)
    .execute(pool)
    .await?;
    Ok(())
}

/// The version recorded, if the database has one (a database of a newer Kandev may not: the
/// record is read only to name it).
async fn recorded(pool: &Pool) -> Option<String> {
    crate::sql::query_scalar::<String>(RECORDED).fetch_optional(pool).await.ok().flatten()
}

/// What [`StoreError::NewerDatabase`] says.
pub(crate) fn newer_database(recorded: Option<&str>) -> String {
    match recorded {
        Some(other) if other != KANDEV_VERSION => format!(
            "this database was last used by kandev {other}, newer than this kandev \
             {KANDEV_VERSION} (it has migrations this one does not know); run kandev {other} or newer"
        ),
        Some(_) => format!(
            "this database has migrations this kandev does not know, though it was last used \
             by a kandev {KANDEV_VERSION} too (another build of this version); run that build"
        ),
        None => format!(
            "this database was made by a newer kandev than this one ({KANDEV_VERSION}): it has \
             migrations this one does not know; run a newer kandev"
        ),
    }
}

/// The version the last Kandev that opened a database recorded.
const RECORDED: &str = "SELECT version FROM kandev_version WHERE id = 1";
/// The migrations applied to a database.
const APPLIED: &str = "SELECT version FROM _sqlx_migrations WHERE success";

/// Where a database's schema stands against this Kandev's migrations, read without changing
/// anything (`kandev doctor`, the backup before an upgrade).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaState {
    /// The newest migration applied; `None` for a database no Kandev has migrated yet.
    pub applied: Option<i64>,
    /// This Kandev's newest migration.
    pub latest: i64,
    /// The Kandev version recorded by the last one that opened it.
    pub recorded: Option<String>,
    /// It has a migration this Kandev does not know (a newer Kandev made it).
    pub newer: bool,
}

impl SchemaState {
    /// Opening it with this Kandev would change its schema.
    pub fn upgrade_pending(&self) -> bool {
        !self.newer && self.applied.is_some_and(|applied| applied < self.latest)
    }
}

/// The applied migrations a query answered: none when the database has no migrations table
/// yet (no Kandev migrated it).
fn applied_or_none(answer: std::result::Result<Vec<i64>, sqlx::Error>) -> Result<Vec<i64>> {
    match answer {
        Ok(applied) => Ok(applied),
        Err(sqlx::Error::Database(err))
            if err.message().contains("no such table")
                || err.message().contains("does not exist") =>
        {
            Ok(vec![])
        }
        Err(err) => Err(err.into()),
    }
}

/// The [`SchemaState`] of the database at `location`; `None` when there is no database yet
/// (a SQLite file that does not exist).
pub async fn schema_state(location: &crate::Location) -> Result<Option<SchemaState>> {
    use sqlx::Connection;
    let (known, applied, recorded): (Vec<i64>, Vec<i64>, Option<String>) = match location {
        crate::Location::File(path) => {
            if !path.exists() {
                return Ok(None);
            }
            let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path).read_only(true);
            let mut conn = sqlx::SqliteConnection::connect_with(&options).await?;
            let known = sqlx::migrate!("./migrations").iter().map(|m| m.version).collect();
            let applied = applied_or_none(sqlx::query_scalar(APPLIED).fetch_all(&mut conn).await)?;
            let recorded =
                sqlx::query_scalar(RECORDED).fetch_optional(&mut conn).await.ok().flatten();
            let _ = conn.close().await;
            (known, applied, recorded)
        }
        crate::Location::Postgres(url) => {
            let mut conn = sqlx::PgConnection::connect(url).await?;
            let known = sqlx::migrate!("./migrations-pg").iter().map(|m| m.version).collect();
            let applied = applied_or_none(sqlx::query_scalar(APPLIED).fetch_all(&mut conn).await)?;
            let recorded =
                sqlx::query_scalar(RECORDED).fetch_optional(&mut conn).await.ok().flatten();
            let _ = conn.close().await;
            (known, applied, recorded)
        }
        crate::Location::Memory => return Ok(None),
    };
    Ok(Some(SchemaState {
        applied: applied.iter().copied().max(),
        latest: known.iter().copied().max().unwrap_or_default(),
        recorded,
        newer: applied.iter().any(|v| !known.contains(v)),
    }))
}

/// Copies the SQLite database `from` (as it is, without migrating it) into the new file
/// `to`: SQLite's `VACUUM INTO`, consistent and whole in one file.
pub async fn vacuum_into(from: &std::path::Path, to: &std::path::Path) -> Result<()> {
    use sqlx::Connection;
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(from).read_only(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options).await?;
    sqlx::query("VACUUM INTO ?").bind(to.display().to_string()).execute(&mut conn).await?;
    let _ = conn.close().await;
    Ok(())
}

/// What a newer Kandev leaves in a database: a migration this one does not know, and its
/// version recorded ([`crate::fixture::as_if_newer`], for tests).
pub(crate) async fn record_newer(location: &crate::Location, version: &str) -> Result<()> {
    use sqlx::Connection;
    const FUTURE: i64 = 99_999_999_999_999;
    const RECORD: &str = "UPDATE kandev_version SET version = $1";
    match location {
        crate::Location::File(path) => {
            let url = format!("sqlite://{}", path.display());
            let mut conn = sqlx::SqliteConnection::connect(&url).await?;
            sqlx::query(
                "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
                 execution_time) VALUES ($1, 'from a newer kandev', TRUE, X'00', 0)",
            )
            .bind(FUTURE)
            .execute(&mut conn)
            .await?;
            sqlx::query(RECORD).bind(version).execute(&mut conn).await?;
            conn.close().await?;
        }
        crate::Location::Postgres(url) => {
            let mut conn = sqlx::PgConnection::connect(url).await?;
            sqlx::query(
                "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
                 execution_time) VALUES ($1, 'from a newer kandev', TRUE, '\\x00'::bytea, 0)",
            )
            .bind(FUTURE)
            .execute(&mut conn)
            .await?;
            sqlx::query(RECORD).bind(version).execute(&mut conn).await?;
            conn.close().await?;
        }
        crate::Location::Memory => {
            return Err(StoreError::Unsupported("a fixture in memory".into()));
        }
    }
    Ok(())
}
