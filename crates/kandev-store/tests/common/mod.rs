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

    /// A new database on the server `KANDEV_TEST_PG_URL` names; `None` only when the run
    /// opted out of PostgreSQL with `KANDEV_TEST_NO_PG=1`. Neither set is a failure, so a run
    /// that lost its PostgreSQL can never pass as if it had tested both engines.
    pub async fn postgres() -> Option<TestDb> {
        let admin = postgres_admin_url()?;
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

/// The PostgreSQL server the tests use: `KANDEV_TEST_PG_URL`; `None` with
/// `KANDEV_TEST_NO_PG=1`; a failure saying what to do when neither is set.
pub fn postgres_admin_url() -> Option<String> {
    if let Ok(url) = std::env::var("KANDEV_TEST_PG_URL") {
        return Some(url);
    }
    if std::env::var_os("KANDEV_TEST_NO_PG").is_some() {
        eprintln!("KANDEV_TEST_NO_PG is set: this test ran on sqlite only");
        return None;
    }
    panic!(
        "this test needs PostgreSQL: run ./scripts/test (it starts one), or \
         eval \"$(./scripts/pg start)\" first, or set KANDEV_TEST_NO_PG=1 to test SQLite only"
    );
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

/// A repository to insert in `workspace_id`, named `name`, with no scripts.
pub fn repository(
    workspace_id: kandev_domain::WorkspaceId,
    name: &str,
) -> kandev_store::NewRepository {
    kandev_store::NewRepository {
        workspace_id,
        name: name.into(),
        local_path: format!("/tmp/{name}"),
        default_branch: "main".into(),
        branch_template: "kandev/{short-id}".into(),
        setup_script: String::new(),
        copy_files: vec![],
        cleanup_script: String::new(),
        forge_api_base_url: String::new(),
        forge_token_env: String::new(),
        dev_script: String::new(),
        script_timeout_s: 0,
        script_secrets: vec![],
    }
}

/// A workspace "Home" with one workflow "Board" of `steps`, in `tx`.
pub async fn insert_board(
    tx: &mut kandev_store::WriteTx,
    steps: &[&str],
) -> (kandev_domain::WorkspaceId, kandev_domain::workflow::Workflow) {
    let ws = tx.insert_workspace("Home").await.unwrap();
    let spec = kandev_domain::workflow::WorkflowSpec {
        name: "Board".into(),
        description: String::new(),
        steps: steps.iter().map(|s| kandev_domain::workflow::StepSpec::named(*s)).collect(),
    };
    let wf = tx.insert_workflow(&ws.id, &spec, None).await.unwrap();
    (ws.id, wf)
}
