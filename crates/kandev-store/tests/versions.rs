//! Issue 38, finding 9a: the database records the version of the Kandev that last opened and
//! migrated it, and a database with migrations this Kandev does not know (made by a newer one)
//! is refused with that version named, not with sqlx's "migration N was previously applied
//! but is missing".

use kandev_store::{Location, Store};
use sqlx::Connection;

mod common;
use common::TestDb;

const THIS: &str = env!("CARGO_PKG_VERSION");

/// Runs `sql` (one statement per item) on the test database, outside any store.
async fn execute(db: &TestDb, statements: &[&str]) {
    match &db.location {
        Location::File(path) => {
            let url = format!("sqlite://{}", path.display());
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            for sql in statements {
                sqlx::query(sql).execute(&mut conn).await.unwrap();
            }
            conn.close().await.unwrap();
        }
        Location::Postgres(url) => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            for sql in statements {
                sqlx::query(sql).execute(&mut conn).await.unwrap();
            }
            conn.close().await.unwrap();
        }
        Location::Memory => unreachable!(),
    }
}

/// The version the database records.
async fn recorded(db: &TestDb) -> Option<String> {
    let sql = "SELECT version FROM kandev_version";
    match &db.location {
        Location::File(path) => {
            let url = format!("sqlite://{}", path.display());
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::query_scalar(sql).fetch_optional(&mut conn).await.unwrap()
        }
        Location::Postgres(url) => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::query_scalar(sql).fetch_optional(&mut conn).await.unwrap()
        }
        Location::Memory => unreachable!(),
    }
}

/// A migration this Kandev does not have, as a newer Kandev would have applied it.
fn future_migration(db: &TestDb) -> &'static str {
    if db.is_postgres() {
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99999999999999, 'from a newer kandev', TRUE, '\\x00'::bytea, 0)"
    } else {
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99999999999999, 'from a newer kandev', TRUE, X'00', 0)"
    }
}

async fn open_error(db: &TestDb) -> String {
    match Store::open(db.location.clone()).await {
        Ok(_) => panic!("a database of a newer kandev was opened"),
        Err(err) => err.to_string(),
    }
}

on_both_engines! {
async fn i38_9_a_database_of_a_newer_kandev_is_refused_naming_its_version(db: TestDb) {
    db.open().await.close().await;
    assert_eq!(recorded(&db).await.as_deref(), Some(THIS), "the version that migrated it");

    execute(&db, &[future_migration(&db), "UPDATE kandev_version SET version = '99.1.0'"]).await;
    let err = open_error(&db).await;
    assert_eq!(
        err,
        format!(
            "this database was last used by kandev 99.1.0, newer than this kandev {THIS} \
             (it has migrations this one does not know); run kandev 99.1.0 or newer"
        )
    );
    assert_eq!(recorded(&db).await.as_deref(), Some("99.1.0"), "a refusal writes nothing");

    // No version recorded (a newer kandev that did not say which it was).
    execute(&db, &["DELETE FROM kandev_version"]).await;
    let err = open_error(&db).await;
    assert_eq!(
        err,
        format!(
            "this database was made by a newer kandev than this one ({THIS}): it has \
             migrations this one does not know; run a newer kandev"
        )
    );
}
}

on_both_engines! {
async fn i38_9_every_open_records_the_version_of_this_kandev(db: TestDb) {
    db.open().await.close().await;
    execute(&db, &["UPDATE kandev_version SET version = '0.0.1'"]).await;
    db.open().await.close().await;
    assert_eq!(recorded(&db).await.as_deref(), Some(THIS), "the last kandev that used it");
}
}
