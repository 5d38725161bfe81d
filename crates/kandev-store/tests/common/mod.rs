//! The store suite on both engines: a test written once with [`on_both_engines!`] runs on a
//! fresh SQLite file and, when `KANDEV_TEST_PG_URL` names a PostgreSQL server (scripts/pg
//! starts one; scripts/test always does), on a fresh PostgreSQL database of that server.

#![allow(dead_code)]

use std::sync::Arc;

use kandev_domain::{Clock, IdGenerator};
use kandev_store::{Location, Store};

/// One engine's fresh, empty database for one test.
pub struct TestDb {
    /// Holds the SQLite file (and is scratch space on PostgreSQL).
    pub dir: tempfile::TempDir,
    pub location: Location,
}

impl TestDb {
    pub fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let location = Location::File(dir.path().join("kandev.db"));
        TestDb { dir, location }
    }

    /// A new database on the server `KANDEV_TEST_PG_URL` names; `None` when it is unset (a
    /// developer without PostgreSQL; CI always sets it).
    pub async fn postgres() -> Option<TestDb> {
        let Ok(admin) = std::env::var("KANDEV_TEST_PG_URL") else {
            eprintln!("KANDEV_TEST_PG_URL is not set: this test ran on sqlite only");
            return None;
        };
        let name = format!("kandev_test_{}", uuid::Uuid::new_v4().simple());
        let url = kandev_store::create_postgres_database(&admin, &name).await.unwrap();
        Some(TestDb { dir: tempfile::tempdir().unwrap(), location: Location::Postgres(url) })
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self.location, Location::Postgres(_))
    }

    pub async fn open(&self) -> Store {
        Store::open(self.location.clone()).await.unwrap()
    }

    pub async fn open_with(&self, clock: Arc<dyn Clock>, ids: Arc<dyn IdGenerator>) -> Store {
        Store::open_with(self.location.clone(), clock, ids).await.unwrap()
    }
}

/// Writes `async fn name(db: TestDb) { ... }` as the tests `name::sqlite` and
/// `name::postgres`.
#[macro_export]
macro_rules! on_both_engines {
    ($($(#[$meta:meta])* async fn $name:ident($db:ident: TestDb) $body:block)*) => {$(
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run($db: $crate::common::TestDb) $body

            #[tokio::test]
            async fn sqlite() {
                run($crate::common::TestDb::sqlite()).await
            }

            #[tokio::test]
            async fn postgres() {
                if let Some(db) = $crate::common::TestDb::postgres().await {
                    run(db).await
                }
            }
        }
    )*};
}
