//! Issue 12 finding 9: board writes that lose a race with a delete are refused with a user
//! error (not found, conflict), never a database error; search text is matched literally.

use kandev_domain::{StepId, WorkflowId};
use kandev_store::{NewTask, Store, StoreError, TaskFilter};

mod common;
use common::{TestDb, repository};

struct Board {
    store: Store,
    workflow: WorkflowId,
    steps: Vec<StepId>,
    _db: TestDb,
}

async fn board(db: TestDb) -> Board {
    let store = db.open().await;
    let mut tx = store.begin_write().await.unwrap();
    let (_, wf) = common::insert_board(&mut tx, &["A", "B"]).await;
    tx.commit().await.unwrap();
    let steps = wf.steps.iter().map(|s| s.id.clone()).collect();
    Board { store, workflow: wf.id, steps, _db: db }
}

fn new_task(board: &Board, step: &StepId, title: &str) -> NewTask {
    NewTask {
        workflow_id: board.workflow.clone(),
        step_id: step.clone(),
        title: title.into(),
        description: String::new(),
        repository_ids: vec![],
        agent_profile_id: None,
    }
}

async fn delete_step(store: &Store, step: &StepId) {
    let mut tx = store.begin_write().await.unwrap();
    tx.delete_step(step).await.unwrap();
    tx.commit().await.unwrap();
}

on_both_engines! {
/// The interleaving of the probe: `task.move` checked the step against the workflow it read,
/// then `workflow.step.delete` committed, then the move wrote. It was a foreign-key error.
async fn i12_f9_a_move_to_a_step_deleted_meanwhile_is_not_found(db: TestDb) {
    let board = board(db).await;
    let (a, b) = (&board.steps[0], &board.steps[1]);
    let mut tx = board.store.begin_write().await.unwrap();
    let task = tx.insert_task(&new_task(&board, a, "t"), "user").await.unwrap();
    tx.commit().await.unwrap();
    delete_step(&board.store, b).await;

    let mut tx = board.store.begin_write().await.unwrap();
    let err = tx.move_task(&task.id, b, None, "manual", "user").await.unwrap_err();
    assert!(
        matches!(&err, StoreError::NotFound { what: "step", id } if id == b.as_str()),
        "{err:?}"
    );
    drop(tx);
    assert_eq!(board.store.get_task(&task.id).await.unwrap().step_id, *a, "the task stayed");
}
}

on_both_engines! {
async fn i12_f9_a_task_created_in_a_step_deleted_meanwhile_is_not_found(db: TestDb) {
    let board = board(db).await;
    let b = board.steps[1].clone();
    delete_step(&board.store, &b).await;
    let mut tx = board.store.begin_write().await.unwrap();
    let err = tx.insert_task(&new_task(&board, &b, "t"), "user").await.unwrap_err();
    assert!(matches!(&err, StoreError::NotFound { what: "step", .. }), "{err:?}");
}
}

on_both_engines! {
/// Any other reference deleted between the caller's check and the write (a repository,
/// an agent profile) is a conflict the user can retry, not an internal error.
async fn i12_f9_a_reference_deleted_meanwhile_is_a_conflict(db: TestDb) {
    let board = board(db).await;
    let workspace = board.store.get_workflow(&board.workflow).await.unwrap().workspace_id;
    let mut tx = board.store.begin_write().await.unwrap();
    let repository = tx.insert_repository(&repository(workspace, "repo")).await.unwrap();
    tx.delete_repository(&repository.id).await.unwrap();
    tx.commit().await.unwrap();

    let mut task = new_task(&board, &board.steps[0], "t");
    task.repository_ids = vec![repository.id.clone()];
    let mut tx = board.store.begin_write().await.unwrap();
    let err = tx.insert_task(&task, "user").await.unwrap_err();
    assert!(matches!(&err, StoreError::Conflict(m) if m.contains("deleted meanwhile")), "{err:?}");
}
}

on_both_engines! {
async fn i12_f9_search_matches_percent_and_underscore_literally_up_to_the_limit(db: TestDb) {
    let board = board(db).await;
    let a = board.steps[0].clone();
    let mut tx = board.store.begin_write().await.unwrap();
    for title in ["100% done", "1000 done", "snake_case", "snakeXcase"] {
        tx.insert_task(&new_task(&board, &a, title), "user").await.unwrap();
    }
    tx.commit().await.unwrap();
    let search = |query: &str| {
        let filter = TaskFilter {
            workflow_id: Some(board.workflow.clone()),
            query: Some(query.to_owned()),
            limit: 100,
            ..TaskFilter::default()
        };
        let store = board.store.clone();
        async move {
            store
                .list_tasks(&filter)
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.title)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(search("0%").await, vec!["100% done"]);
    assert_eq!(search("e_c").await, vec!["snake_case"]);
    let longest = "é".repeat(TaskFilter::MAX_QUERY_CHARS);
    assert!(search(&longest).await.is_empty(), "the longest accepted query is a valid pattern");
}
}

on_both_engines! {
async fn i15_a4_the_board_read_as_one_value_equals_the_board_read_row_by_row(db: TestDb) {
    // `list_cards` reads a SQLite board as one JSON value (issue 15); every
    // field a card can carry must come out as the row-by-row read gives it, in board order,
    // for a step filter and a page too.
    use kandev_domain::needs_you::NeedsYou;
    use kandev_domain::ship::{GitSummary, PrState};
    use kandev_domain::task::TaskState;
    use kandev_store::TaskPatch;

    let board = board(db).await;
    let workspace = board.store.get_workflow(&board.workflow).await.unwrap().workspace_id;
    let mut tx = board.store.begin_write().await.unwrap();
    let mut repositories = vec![];
    for name in ["one", "two"] {
        let repository =
            tx.insert_repository(&repository(workspace.clone(), name)).await.unwrap();
        repositories.push(repository.id);
    }
    let mut tasks = vec![];
    for (i, title) in ["plain", "quote \" and \\ and\nnewline", "émoji ✓", "last"].iter().enumerate() {
        let mut task = new_task(&board, &board.steps[i % 2], title);
        if i == 1 {
            task.repository_ids = repositories.iter().rev().cloned().collect();
        }
        tasks.push(tx.insert_task(&task, "user").await.unwrap().id);
    }
    tx.set_task_links(&tasks[2], Some(Some(&tasks[0])), Some(&[tasks[1].clone(), tasks[0].clone()]))
        .await
        .unwrap();
    let summary = GitSummary { ahead: 3, behind: 1, dirty: 2, conflicts: 0, pr_state: Some(PrState::Open), merged: false };
    tx.set_git_summary(&tasks[1], &summary).await.unwrap();
    let patch = TaskPatch {
        state: Some(TaskState::WaitingForInput),
        needs_you: Some(Some(NeedsYou::Permission)),
        ..TaskPatch::default()
    };
    tx.update_task(&tasks[3], &patch).await.unwrap();
    tx.archive_task(&tasks[0]).await.unwrap();
    tx.commit().await.unwrap();

    let filters = [
        TaskFilter { workflow_id: Some(board.workflow.clone()), limit: 100, ..TaskFilter::default() },
        TaskFilter {
            workflow_id: Some(board.workflow.clone()),
            include_archived: true,
            limit: 100,
            ..TaskFilter::default()
        },
        TaskFilter {
            workflow_id: Some(board.workflow.clone()),
            step_id: Some(board.steps[1].clone()),
            include_archived: true,
            limit: 100,
            ..TaskFilter::default()
        },
        TaskFilter {
            workflow_id: Some(board.workflow.clone()),
            include_archived: true,
            limit: 2,
            offset: 1,
            ..TaskFilter::default()
        },
        // SQLite's read pages in memory: the tail, and past the end.
        TaskFilter {
            workflow_id: Some(board.workflow.clone()),
            include_archived: true,
            limit: 5,
            offset: 3,
            ..TaskFilter::default()
        },
        TaskFilter {
            workflow_id: Some(board.workflow.clone()),
            limit: 5,
            offset: 10,
            ..TaskFilter::default()
        },
    ];
    for filter in &filters {
        let cards = board.store.list_cards(filter).await.unwrap();
        let rows = board.store.list_cards_by_rows(filter).await.unwrap();
        assert_eq!(cards, rows, "{filter:?}");
    }
    let all = board.store.list_cards(&filters[1]).await.unwrap();
    assert_eq!(all.len(), 4);
    // The archived card keeps position 0 and the open one after it was renumbered to 0: the
    // filters with archived cards compare the tie-breaks (creation, then id) too.
    let tied = all.windows(2).any(|w| w[0].step_id == w[1].step_id && w[0].position == w[1].position);
    assert!(tied, "two cards share a step and a position: {all:?}");
    let linked = all.iter().find(|c| c.id == tasks[2]).unwrap();
    assert_eq!(linked.parent_id.as_ref(), Some(&tasks[0]));
    assert_eq!(linked.blocked_by.len(), 2);
    let repos = all.iter().find(|c| c.id == tasks[1]).unwrap();
    assert_eq!(repos.repository_ids, repositories.iter().rev().cloned().collect::<Vec<_>>());
    assert_eq!(repos.git.as_ref(), Some(&summary));
    assert_eq!(repos.title, "quote \" and \\ and\nnewline");
    assert!(all.iter().any(|c| c.needs_you == Some(NeedsYou::Permission)));
    assert!(all.iter().any(|c| c.archived_at.is_some()));
    let empty = TaskFilter { workflow_id: Some(board.workflow.clone()), offset: 50, limit: 10, ..TaskFilter::default() };
    assert!(board.store.list_cards(&empty).await.unwrap().is_empty(), "no card: an empty array");
}
}
