//! Databases as an earlier Kandev left them (issue 43): the project's own migrations applied
//! up to a version, with a few rows written at the oldest schema that has their tables (a
//! board, a task, a session with a finished turn, two messages, a queued prompt). Upgrade tests
//! open them with this Kandev, which migrates them forward, and read the rows back.
//!
//! SQLite's migrations are each a released step; PostgreSQL's start at 24 (its first schema).

use sqlx::migrate::Migrator;
use sqlx::{Connection, Executor};

use crate::sql::Dialect;
use crate::{Location, Result, StoreError};

/// The seeded task's id and title.
pub const TASK_ID: &str = "fixture-task";
pub const TASK_TITLE: &str = "Written by an earlier kandev";
/// The seeded session's id.
pub const SESSION_ID: &str = "fixture-session";
/// The seeded messages' texts, in order.
pub const MESSAGES: [&str; 2] = ["hello from an earlier schema", "answered then"];
/// The seeded queued prompt.
pub const QUEUED: &str = "still queued";

/// The board, at the first schema of either engine (the rows are data of that schema, kept
/// beside the migrations rather than among the store's queries).
const BOARD: &str = include_str!("../fixtures/board.sql");

/// A session, its finished turn, its transcript and queue, from the sessions' first schema.
const SESSION: &str = include_str!("../fixtures/session.sql");

/// The folder of `dialect`'s migrations in this source tree.
fn folder(dialect: Dialect) -> std::path::PathBuf {
    let name = match dialect {
        Dialect::Sqlite => "migrations",
        Dialect::Postgres => "migrations-pg",
    };
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

/// Every migration version of `dialect`'s engine, oldest first.
pub async fn versions(dialect: Dialect) -> Result<Vec<i64>> {
    let all = Migrator::new(folder(dialect).as_path()).await?;
    Ok(all.iter().map(|m| m.version).collect())
}

/// Makes the empty database at `location` what a Kandev whose newest migration was `version`
/// would have left, with the seeded rows.
pub async fn create(location: &Location, version: i64) -> Result<()> {
    create_seeded(location, version, "").await
}

/// [`create`], then `seed` (SQL of that schema) run at `version`: rows a newer migration
/// must carry forward.
pub async fn create_seeded(location: &Location, version: i64, seed: &str) -> Result<()> {
    let (dialect, url) = match location {
        Location::File(path) => (Dialect::Sqlite, format!("sqlite://{}?mode=rwc", path.display())),
        Location::Postgres(url) => (Dialect::Postgres, url.clone()),
        Location::Memory => return Err(StoreError::Unsupported("a fixture in memory".into())),
    };
    let all = versions(dialect).await?;
    let first = all.first().copied().unwrap_or_default();
    let sessions = if dialect == Dialect::Sqlite { 2 } else { first };
    // The board goes in after the first migration, the session after the sessions' one.
    let mut steps: Vec<(i64, &str)> = vec![(first, BOARD)];
    if version >= sessions {
        steps.push((sessions, SESSION));
    }
    steps.push((version, seed));
    match dialect {
        Dialect::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&url).await?;
            for (upto, seed) in steps {
                up_to(dialect, upto).await?.run(&mut conn).await?;
                conn.execute(seed).await?;
            }
            conn.close().await?;
        }
        Dialect::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&url).await?;
            for (upto, seed) in steps {
                up_to(dialect, upto).await?.run(&mut conn).await?;
                conn.execute(seed).await?;
            }
            conn.close().await?;
        }
    }
    Ok(())
}

/// The migrations of `dialect` up to `version`, included: a copy of those files read by
/// sqlx's own loader (the checksums are the files', as the embedded migrations' are).
async fn up_to(dialect: Dialect, version: i64) -> Result<Migrator> {
    let io =
        |source: std::io::Error| StoreError::Io { path: "a fixture's migrations".into(), source };
    let copy = tempfile::tempdir().map_err(io)?;
    for entry in std::fs::read_dir(folder(dialect)).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let number: Option<i64> = name.split('_').next().and_then(|n| n.parse().ok());
        if number.is_some_and(|n| n <= version) {
            std::fs::copy(&path, copy.path().join(&name)).map_err(io)?;
        }
    }
    Ok(Migrator::new(copy.path()).await?)
}

/// Makes the database at `location` look as a newer Kandev (`version`) left it: a migration
/// this Kandev does not know, and that version recorded.
pub async fn as_if_newer(location: &Location, version: &str) -> Result<()> {
    crate::version::record_newer(location, version).await
}
