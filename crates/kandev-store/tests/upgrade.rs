//! Issue 43, acceptance 5: a database left by every earlier schema (SQLite: each migration
//! step; PostgreSQL: its first schema and the latest) migrates forward when this Kandev opens
//! it, and the rows written then read back. The fixtures are made by the project's own
//! migrations at that version (`kandev_store::fixture`).

use kandev_domain::{SessionId, TaskId};
use kandev_store::{Dialect, Location, Store, fixture, schema_state};

mod common;
use common::TestDb;

/// Makes the fixture of `version` at `location`, opens it with this Kandev and reads it back.
async fn upgrade_and_read(location: Location, version: i64, latest: i64) {
    fixture::create(&location, version).await.unwrap();
    let before = schema_state(&location).await.unwrap().expect("the fixture exists");
    assert_eq!(before.applied, Some(version));
    assert_eq!(before.upgrade_pending(), version < latest, "{before:?}");
    assert!(!before.newer);

    let store = Store::open(location.clone())
        .await
        .unwrap_or_else(|e| panic!("a database of schema {version} does not open: {e}"));
    let task = store.get_task(&TaskId::new(fixture::TASK_ID)).await.unwrap();
    assert_eq!(task.title, fixture::TASK_TITLE, "schema {version}");
    let has_sessions = store.get_session(&SessionId::new(fixture::SESSION_ID)).await.is_ok();
    if has_sessions {
        let session = SessionId::new(fixture::SESSION_ID);
        let messages = store.list_messages(&session, None, None, 100).await.unwrap();
        let texts: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(texts, fixture::MESSAGES, "schema {version}");
        let queue = store.list_queue(&session).await.unwrap();
        let queued: Vec<&str> = queue.iter().map(|q| q.content.as_str()).collect();
        assert_eq!(queued, [fixture::QUEUED], "schema {version}");
    } else {
        assert_eq!(version, 1, "only the first schema has no sessions");
    }
    store.close().await;
    let after = schema_state(&location).await.unwrap().unwrap();
    assert_eq!(after.applied, Some(latest), "migrated to the newest schema");
    assert!(!after.upgrade_pending());
    assert_eq!(after.recorded.as_deref(), Some(kandev_store::KANDEV_VERSION));
}

#[tokio::test]
async fn i43_a5_every_sqlite_schema_migrates_forward_and_its_data_reads_back() {
    let versions = fixture::versions(Dialect::Sqlite).await.unwrap();
    assert!(versions.len() > 20, "the released migration steps: {versions:?}");
    let latest = *versions.last().unwrap();
    for version in versions {
        let db = TestDb::sqlite();
        upgrade_and_read(db.location.clone(), version, latest).await;
    }
}

#[tokio::test]
async fn i43_a5_the_first_and_the_latest_postgresql_schema_migrate_forward() {
    let versions = fixture::versions(Dialect::Postgres).await.unwrap();
    let (first, latest) = (versions[0], *versions.last().unwrap());
    for version in [first, latest] {
        let Some(db) = TestDb::postgres().await else { return };
        upgrade_and_read(db.location.clone(), version, latest).await;
    }
}

/// Issue 49: users of a database from before roles keep what they could do: each becomes an
/// admin of every workspace, and the oldest the owner.
#[tokio::test]
async fn i49_users_from_before_roles_become_admins_and_the_oldest_the_owner() {
    use sqlx::Connection;
    let db = TestDb::sqlite();
    fixture::create(&db.location, 41).await.unwrap();
    let Location::File(path) = &db.location else { unreachable!("a SQLite fixture") };
    let url = format!("sqlite://{}", path.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    for (id, name, at) in [("u2", "bob", 2000), ("u1", "alice", 1000)] {
        sqlx::query(
            "INSERT INTO users (id, name, password_hash, created_at, updated_at) \
             VALUES (?, ?, 'x', ?, ?)",
        )
        .bind(id)
        .bind(name)
        .bind(at)
        .bind(at)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    conn.close().await.unwrap();

    let store = Store::open(db.location.clone()).await.unwrap();
    let users = store.list_users().await.unwrap();
    let owners: Vec<&str> = users.iter().filter(|u| u.owner).map(|u| u.name.as_str()).collect();
    assert_eq!(owners, ["alice"], "the oldest user owns the server");
    let workspaces = store.list_workspaces().await.unwrap();
    assert!(!workspaces.is_empty());
    for user in ["u1", "u2"] {
        let roles = store.user_roles(user).await.unwrap();
        assert_eq!(roles.len(), workspaces.len(), "{user} is in every workspace");
        assert!(roles.iter().all(|(_, r)| *r == kandev_domain::account::Role::Admin), "{roles:?}");
    }
    store.close().await;
}
