//! What the engine's unit tests share: a task on a board of named steps, written in the caller's
//! transaction.

use kandev_domain::StepId;
use kandev_domain::task::Task;
use kandev_domain::workflow::{StepSpec, WorkflowSpec};
use kandev_store::{NewTask, WriteTx};

/// Inserts a workspace, a one-step workflow and a task in it; returns the task.
pub(crate) async fn insert_task(tx: &mut WriteTx) -> Task {
    insert_task_on(tx, &["s"]).await.0
}

/// Inserts a workspace, a workflow of `steps` (by name, in order) and a task in its first
/// step; returns the task and the steps' ids.
pub(crate) async fn insert_task_on(tx: &mut WriteTx, steps: &[&str]) -> (Task, Vec<StepId>) {
    let workspace = tx.insert_workspace("w").await.unwrap();
    let steps = steps.iter().map(|name| StepSpec::named(*name)).collect();
    let spec = WorkflowSpec { name: "b".into(), description: String::new(), steps };
    let workflow = tx.insert_workflow(&workspace.id, &spec, None).await.unwrap();
    let new = NewTask {
        workflow_id: workflow.id.clone(),
        step_id: workflow.steps[0].id.clone(),
        title: "t".into(),
        description: String::new(),
        repository_ids: vec![],
        agent_profile_id: None,
    };
    let task = tx.insert_task(&new, "test").await.unwrap();
    (task, workflow.steps.iter().map(|s| s.id.clone()).collect())
}
