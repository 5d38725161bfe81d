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
    crate::sql::query_scalar::<String>("SELECT version FROM kandev_version WHERE id = 1")
        .fetch_optional(pool)
        .await
        .ok()
        .flatten()
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
