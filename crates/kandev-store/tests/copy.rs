//! Issue 21, acceptance 4 (store level): `copy_database` moves tasks, sessions, messages,
//! the queue, an SSH executor a repository chose and the event log from SQLite into an empty database (PostgreSQL when
//! `KANDEV_TEST_PG_URL` is set, and another SQLite file always), verifies the row counts,
//! and the copy reads the same and keeps writing.

use kandev_domain::container::{ContainerEngine, ContainerNetwork};
use kandev_domain::executor::{ContainerSettings, ExecutorKind, SshSettings};
use kandev_domain::transcript::MessageKind;
use kandev_domain::workflow::{StepSpec, WorkflowSpec};
use kandev_domain::{SessionId, TaskId, TurnId};
use kandev_store::{NewMessage, NewTask, Store, StoreError, TaskFilter, copy_database};

mod common;
use common::TestDb;

/// A board with a parent task created after its subtask, a session with a transcript, a
/// queued prompt, a repository on an SSH executor (its `user` column is a word PostgreSQL
/// reserves) and events.
async fn fill(store: &Store) -> (TaskId, SessionId) {
    let mut tx = store.begin_write().await.unwrap();
    let ws = tx.insert_workspace("Home").await.unwrap();
    let spec = WorkflowSpec {
        name: "Board".into(),
        description: String::new(),
        steps: ["Todo", "Done"].iter().map(|s| StepSpec::named(*s)).collect(),
    };
    let wf = tx.insert_workflow(&ws.id, &spec, None).await.unwrap();
    let new = |title: &str| NewTask {
        workflow_id: wf.id.clone(),
        step_id: wf.steps[0].id.clone(),
        title: title.into(),
        description: "copied zanzibar".into(),
        repository_ids: vec![],
        agent_profile_id: None,
    };
    let child = tx.insert_task(&new("child"), "user").await.unwrap();
    let parent = tx.insert_task(&new("parent"), "user").await.unwrap();
    tx.set_task_links(&child.id, Some(Some(&parent.id)), Some(std::slice::from_ref(&parent.id)))
        .await
        .unwrap();
    tx.move_task(&parent.id, &wf.steps[1].id, None, "manual", "alice").await.unwrap();
    let session = tx.insert_session(&child.id, None, "/tmp", None, None).await.unwrap();
    for (i, text) in ["hello", "world"].iter().enumerate() {
        tx.insert_message(&NewMessage {
            session_id: session.id.clone(),
            turn_id: None::<TurnId>,
            content: (*text).into(),
            meta: kandev_domain::message_meta::MessageMeta::empty(if i == 0 {
                MessageKind::User
            } else {
                MessageKind::Agent
            }),
            client_message_id: None,
        })
        .await
        .unwrap();
        tx.emit(format!("session:{}", session.id), "session.message.added", serde_json::json!({}))
            .await
            .unwrap();
    }
    tx.enqueue(&session.id, "next please", &[], None, "user").await.unwrap();
    let repository =
        tx.insert_repository(&common::repository(ws.id.clone(), "repo")).await.unwrap();
    let ssh = ExecutorKind::Ssh(SshSettings {
        host: "build1.example".into(),
        port: 2222,
        user: "build".into(),
        identity_file: "/keys/id".into(),
        known_hosts: "/keys/known_hosts".into(),
        remote_home: "/home/build/.kandev".into(),
    });
    let executor = tx.insert_executor("build1", &ssh).await.unwrap();
    tx.set_repository_executor(repository.id.as_str(), Some(&executor.id)).await.unwrap();
    tx.insert_executor("sandbox", &container()).await.unwrap();
    tx.commit().await.unwrap();
    (child.id, session.id)
}

async fn same_reads(a: &Store, b: &Store, task: &TaskId, session: &SessionId) {
    let all = TaskFilter { limit: 100, include_archived: true, ..TaskFilter::default() };
    assert_eq!(a.list_tasks(&all).await.unwrap(), b.list_tasks(&all).await.unwrap());
    assert!(b.get_task(task).await.unwrap().parent_id.is_some());
    assert_eq!(
        a.list_messages(session, None, None, 100).await.unwrap(),
        b.list_messages(session, None, None, 100).await.unwrap()
    );
    assert_eq!(a.list_queue(session).await.unwrap(), b.list_queue(session).await.unwrap());
    assert_eq!(a.list_sessions(task).await.unwrap(), b.list_sessions(task).await.unwrap());
    assert_eq!(a.last_seq().await.unwrap(), b.last_seq().await.unwrap());
    let executors = b.list_executors().await.unwrap();
    assert_eq!(a.list_executors().await.unwrap(), executors);
    assert!(matches!(&executors[0].kind, ExecutorKind::Ssh(s) if s.user == "build"));
    assert_eq!(executors[1].kind, container(), "a container executor's settings come back whole");
}

fn container() -> ExecutorKind {
    ExecutorKind::Container(ContainerSettings {
        engine: Some(ContainerEngine::Podman),
        image: "localhost/agents:1".into(),
        network: ContainerNetwork::Full,
        cpu_millis: Some(1500),
        memory_mib: Some(2048),
        mounts: vec!["/home/me/.claude.json".into()],
    })
}

on_both_engines! {
async fn i21_a4_db_copy_moves_every_row_and_verifies_the_counts(db: TestDb) {
    let source = TestDb::sqlite();
    let store = source.open().await;
    let (task, session) = fill(&store).await;
    store.close().await;

    let copied = copy_database(source.location.clone(), db.location.clone()).await.unwrap();
    let rows = |t: &str| copied.iter().find(|c| c.table == t).map(|c| c.rows);
    assert_eq!(rows("tasks"), Some(2));
    assert_eq!(rows("messages"), Some(2));
    assert_eq!(rows("queued_prompts"), Some(1));
    assert_eq!(rows("task_step_history"), Some(3));
    assert_eq!(rows("executors"), Some(2));
    assert_eq!(rows("repository_executors"), Some(1));

    let (from, to) = (source.open().await, db.open().await);
    same_reads(&from, &to, &task, &session).await;
    // The copy keeps writing: numbered rows continue after the copied ones.
    let mut tx = to.begin_write().await.unwrap();
    let steps = tx.get_task(&task).await.unwrap();
    let wf = to.get_workflow(&steps.workflow_id).await.unwrap();
    tx.move_task(&task, &wf.steps[1].id, None, "manual", "bob").await.unwrap();
    let seq = tx.emit("board", "task.moved", serde_json::json!({})).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(seq, from.last_seq().await.unwrap() + 1, "seq continues after the copied log");
    let kinds = kandev_store::SearchKinds { tasks: true, messages: true };
    let ws = to.get_task(&task).await.unwrap().workspace_id;
    assert_eq!(to.search(&ws, "world", kinds, 10, 0).await.unwrap().hits.len(), 1);
    to.close().await;

    // A second copy into the same database is refused.
    let err = copy_database(source.location.clone(), db.location.clone()).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
}
}
