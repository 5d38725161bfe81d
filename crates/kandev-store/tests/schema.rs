//! Issue 21, acceptance 1: the SQLite and PostgreSQL migrations describe the same tables and
//! columns (names and a coarse type class), and are versioned together.

use std::collections::BTreeMap;

use kandev_store::{Location, Store};
use sqlx::Connection;

mod common;
use common::TestDb;

/// Engine-specific parts each schema has on purpose (see `migrations-pg/0024_schema.sql`):
/// SQLite's FTS5 tables, PostgreSQL's event counter, explicit `rowid` columns and stored
/// searchable words (`search_words`, migration 0047: FTS5's tables hold them on SQLite).
fn engine_specific(table: &str, column: Option<&str>) -> bool {
    table.starts_with("tasks_fts")
        || table.starts_with("messages_fts")
        || table.starts_with("_sqlx")
        || table == "event_seq"
        || column == Some("rowid")
        || column == Some("search_words")
}

/// A column type's class: what a value of it decodes as.
fn class(declared: &str) -> &'static str {
    let t = declared.to_ascii_lowercase();
    if t.contains("int") {
        "integer"
    } else if t.contains("char") || t == "text" {
        "text"
    } else if t.contains("bool") {
        "boolean"
    } else {
        "other"
    }
}

type Schema = BTreeMap<String, BTreeMap<String, &'static str>>;

async fn sqlite_schema(path: &std::path::Path) -> Schema {
    let url = format!("sqlite://{}", path.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT m.name, c.name, c.type FROM sqlite_master m, pragma_table_info(m.name) c \
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    collect(rows)
}

async fn postgres_schema(url: &str) -> Schema {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text, data_type::text FROM information_schema.columns \
         WHERE table_schema = 'public'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    collect(rows)
}

fn collect(rows: Vec<(String, String, String)>) -> Schema {
    let mut schema = Schema::new();
    for (table, column, declared) in rows {
        if engine_specific(&table, Some(&column)) {
            continue;
        }
        schema.entry(table).or_default().insert(column, class(&declared));
    }
    schema
}

#[tokio::test]
async fn i21_a1_both_engines_migrate_to_the_same_tables_and_columns() {
    let sqlite = TestDb::sqlite();
    sqlite.open().await.close().await;
    let Location::File(path) = &sqlite.location else { unreachable!() };
    let sqlite_schema = sqlite_schema(path).await;
    assert!(sqlite_schema.len() > 30, "the scan finds the tables: {:?}", sqlite_schema.keys());
    assert_eq!(sqlite_schema["events"]["seq"], "integer");
    let Some(pg) = TestDb::postgres().await else { return };
    let store: Store = pg.open().await;
    store.close().await;
    let Location::Postgres(url) = &pg.location else { unreachable!() };
    let pg_schema = postgres_schema(url).await;
    for (table, columns) in &sqlite_schema {
        let Some(other) = pg_schema.get(table) else {
            panic!("table {table} is missing on postgres");
        };
        assert_eq!(columns, other, "the columns of {table} differ");
    }
    let extra: Vec<&String> =
        pg_schema.keys().filter(|t| !sqlite_schema.contains_key(*t)).collect();
    assert!(extra.is_empty(), "tables only on postgres: {extra:?}");
}

/// The newest migration of each engine, by number.
fn newest(dir: &str) -> u32 {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    std::fs::read_dir(path)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.split('_').next()?.parse().ok())
        .max()
        .unwrap()
}

#[test]
fn i21_a1_both_engines_have_migrations_up_to_the_same_number() {
    assert_eq!(newest("migrations"), newest("migrations-pg"));
}

/// The bundled SQLite is built without its allocation statistics (`.cargo/config.toml`,
/// `LIBSQLITE3_FLAGS`; docs/architecture.md, "A board read as one value"): with them, every
/// SQLite allocation takes one process-wide mutex. A build that lost the flag (cargo run
/// from outside the repository, a changed config) fails here instead of silently slowing.
#[tokio::test]
async fn i15_the_bundled_sqlite_keeps_no_allocation_statistics() {
    let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:").await.unwrap();
    let options: Vec<(String,)> =
        sqlx::query_as("PRAGMA compile_options").fetch_all(&mut conn).await.unwrap();
    let options: Vec<String> = options.into_iter().map(|(o,)| o).collect();
    assert!(
        options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"),
        "SQLite was built with its allocation statistics on: {options:?}"
    );
}
