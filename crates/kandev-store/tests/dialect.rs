//! The dialect contract (`src/sql.rs`): each rule the store's statements rely on to mean the
//! same on SQLite and PostgreSQL, checked on both engines through a statement that relies
//! on it. The rules about the text itself (placeholders, what the rewriter leaves alone,
//! `LIKE`) are unit tests in `src/sql.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use kandev_domain::message_meta::MessageMeta;
use kandev_domain::ship::{GitSummary, PrState};
use kandev_domain::transcript::MessageKind;
use kandev_domain::workflow::Workflow;
use kandev_domain::{Clock, IdGenerator, MessageId, RepositoryId, TaskId, Timestamp};
use kandev_store::{NewMessage, NewTask, Store, StoreError, TaskFilter};

mod common;
use common::TestDb;

/// The test clock: always this instant.
const NOW: i64 = 1_700_000_000_123;

struct FixedClock;

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        Timestamp(NOW)
    }
}

/// Ids `Id-1`, `Id-2`, …: with an upper-case letter, so case matters to them.
#[derive(Default)]
struct Counter(AtomicI64);

impl IdGenerator for Counter {
    fn next_id(&self) -> String {
        format!("Id-{}", self.0.fetch_add(1, Ordering::SeqCst) + 1)
    }
}

async fn open(db: &TestDb) -> Store {
    db.open_with(Arc::new(FixedClock), Arc::new(Counter::default())).await
}

fn new_task(workflow: &Workflow, title: &str, repository_ids: Vec<RepositoryId>) -> NewTask {
    NewTask {
        workflow_id: workflow.id.clone(),
        step_id: workflow.steps[0].id.clone(),
        title: title.into(),
        description: String::new(),
        repository_ids,
        agent_profile_id: None,
    }
}

/// A board with tasks of `titles`, in that order, committed.
async fn board(store: &Store, titles: &[&str]) -> (Workflow, Vec<TaskId>) {
    let mut tx = store.begin_write().await.unwrap();
    let (_, workflow) = common::insert_board(&mut tx, &["Todo"]).await;
    let mut ids = vec![];
    for title in titles {
        ids.push(tx.insert_task(&new_task(&workflow, title, vec![]), "user").await.unwrap().id);
    }
    tx.commit().await.unwrap();
    (workflow, ids)
}

fn titles_of(tasks: &[kandev_domain::task::Task]) -> Vec<&str> {
    tasks.iter().map(|t| t.title.as_str()).collect()
}

on_both_engines! {
/// Rule 1: `?N` keeps its number and may repeat (`insert_messages`: `?2, ?2 FROM json_each(?1)`).
async fn numbered_placeholders_bind_the_same_value_on_both_engines(db: TestDb) {
    let store = open(&db).await;
    let (_, tasks) = board(&store, &["t"]).await;
    let mut tx = store.begin_write().await.unwrap();
    let session = tx.insert_session(&tasks[0], None, "/tmp", None, None).await.unwrap();
    let id = MessageId::new("m");
    let new = NewMessage {
        session_id: session.id.clone(),
        turn_id: None,
        content: "hello".into(),
        meta: MessageMeta::empty(MessageKind::Agent),
        client_message_id: None,
    };
    tx.insert_messages(&[(id.clone(), 7, new)]).await.unwrap();
    tx.commit().await.unwrap();
    let stored = store.get_message(&id).await.unwrap();
    assert_eq!((stored.content.as_str(), stored.seq), ("hello", 7));
    assert_eq!((stored.created_at, stored.updated_at), (Timestamp(NOW), Timestamp(NOW)));
}
}

on_both_engines! {
/// Query arguments carry their type when NULL: PostgreSQL refuses `$1 IS NULL` of an
/// untyped one (`list_deliveries`: `?1 IS NULL OR channel_id = ?1`).
async fn null_arguments_are_typed_on_both_engines(db: TestDb) {
    let store = open(&db).await;
    assert!(store.list_deliveries(None, 10).await.unwrap().is_empty());
    assert!(store.list_deliveries(Some("no such channel"), 10).await.unwrap().is_empty());
}
}

on_both_engines! {
/// Rule 3 on the engines: the board filter's `LIKE … ESCAPE '\'`.
async fn like_ignores_ascii_case_and_escapes_its_wildcards_on_both_engines(db: TestDb) {
    let store = open(&db).await;
    let (workflow, _) = board(&store, &["Fix the LOGIN page", "50% done", "50 percent", "a_b", "axb"]).await;
    let find = |text: &str| TaskFilter {
        workflow_id: Some(workflow.id.clone()),
        query: Some(text.into()),
        limit: 100,
        ..TaskFilter::default()
    };
    let found = store.list_tasks(&find("login")).await.unwrap();
    assert_eq!(titles_of(&found), ["Fix the LOGIN page"]);
    let found = store.list_tasks(&find("50%")).await.unwrap();
    assert_eq!(titles_of(&found), ["50% done"]);
    let found = store.list_tasks(&find("A_B")).await.unwrap();
    assert_eq!(titles_of(&found), ["a_b"]);
}
}

on_both_engines! {
/// Rule 4: `WHERE t.id = ?` does not match an id of another case.
async fn text_equality_is_case_sensitive_on_both_engines(db: TestDb) {
    let store = open(&db).await;
    let (_, tasks) = board(&store, &["t"]).await;
    assert!(tasks[0].as_str().chars().any(|c| c.is_ascii_uppercase()));
    assert!(store.get_task(&tasks[0]).await.is_ok());
    let other_case = TaskId::new(tasks[0].as_str().to_lowercase());
    let err = store.get_task(&other_case).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
}
}

on_both_engines! {
/// Rule 5: a `bool` binds as 0/1 and statements test flags with `= 1` / `= 0`.
async fn flags_are_integers_on_both_engines(db: TestDb) {
    let store = open(&db).await;
    let (_, tasks) = board(&store, &["blocker", "waiting"]).await;
    let mut tx = store.begin_write().await.unwrap();
    tx.set_task_links(&tasks[1], None, Some(&tasks[..1])).await.unwrap();
    tx.set_start_waiting(&tasks[1], true).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.waiting_on(&tasks[0]).await.unwrap(), [tasks[1].clone()]);
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.take_start_waiting(&tasks[1]).await.unwrap());
    assert!(!tx.take_start_waiting(&tasks[1]).await.unwrap(), "cleared to 0");
    tx.commit().await.unwrap();
    assert!(store.waiting_on(&tasks[0]).await.unwrap().is_empty());
}
}

on_both_engines! {
/// Rule 6: a timestamp is the store clock's milliseconds, stored and read back exactly.
async fn timestamps_are_the_clocks_milliseconds_on_both_engines(db: TestDb) {
    let store = open(&db).await;
    let (_, tasks) = board(&store, &["t"]).await;
    let task = store.get_task(&tasks[0]).await.unwrap();
    assert_eq!((task.created_at, task.updated_at), (Timestamp(NOW), Timestamp(NOW)));
}
}

on_both_engines! {
/// Rule 7: `INSERT … RETURNING seq` answers the row it wrote (`WriteTx::emit`).
async fn returning_answers_the_written_row_on_both_engines(db: TestDb) {
    let store = open(&db).await;
    let mut tx = store.begin_write().await.unwrap();
    let first = tx.emit("t", "a", serde_json::json!({"n": 1})).await.unwrap();
    let second = tx.emit("t", "a", serde_json::json!({"n": 2})).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(second, first + 1);
    let since = std::collections::HashMap::new();
    let events = store.events_since(&["t".to_owned()], &since, 10).await.unwrap();
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [first, second]);
    assert_eq!(events[1].payload.value(), serde_json::json!({"n": 2}));
}
}

on_both_engines! {
/// Rule 8: `ON CONFLICT (…) DO UPDATE SET c = excluded.c` replaces the row's values.
async fn an_upsert_updates_the_existing_row_on_both_engines(db: TestDb) {
    let store = open(&db).await;
    let (_, tasks) = board(&store, &["t"]).await;
    let first = GitSummary { ahead: 1, behind: 2, dirty: 3, conflicts: 0, pr_state: None, merged: false };
    let second =
        GitSummary { ahead: 4, behind: 0, dirty: 0, conflicts: 1, pr_state: Some(PrState::Open), merged: true };
    let mut tx = store.begin_write().await.unwrap();
    tx.set_git_summary(&tasks[0], &first).await.unwrap();
    tx.set_git_summary(&tasks[0], &second).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.get_task(&tasks[0]).await.unwrap().git, Some(second));
}
}

on_both_engines! {
/// Rule 9: `LIMIT ? OFFSET ?` pages the board alike.
async fn limit_and_offset_page_alike_on_both_engines(db: TestDb) {
    let store = open(&db).await;
    let (workflow, _) = board(&store, &["1", "2", "3", "4", "5"]).await;
    let page = TaskFilter {
        workflow_id: Some(workflow.id.clone()),
        limit: 2,
        offset: 1,
        ..TaskFilter::default()
    };
    assert_eq!(titles_of(&store.list_tasks(&page).await.unwrap()), ["2", "3"]);
    let cards = store.list_cards(&page).await.unwrap();
    assert_eq!(cards.iter().map(|c| c.title.as_str()).collect::<Vec<_>>(), ["2", "3"]);
}
}

on_both_engines! {
/// Rule 10: `string_agg` over an ordered subquery keeps its order (a task's repositories
/// in their positions).
async fn string_agg_keeps_the_order_of_its_subquery_on_both_engines(db: TestDb) {
    let store = open(&db).await;
    let mut tx = store.begin_write().await.unwrap();
    let (workspace, workflow) = common::insert_board(&mut tx, &["Todo"]).await;
    let mut repositories = vec![];
    for name in ["c", "a", "b"] {
        let new = common::repository(workspace.clone(), name);
        repositories.push(tx.insert_repository(&new).await.unwrap().id);
    }
    let order = vec![repositories[2].clone(), repositories[0].clone(), repositories[1].clone()];
    let task = tx.insert_task(&new_task(&workflow, "t", order.clone()), "user").await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.get_task(&task.id).await.unwrap().repository_ids, order);
}
}
