//! What the engine's unit tests share: a task on a one-step board, written in the caller's
//! transaction.

use kandev_domain::task::Task;
use kandev_domain::workflow::{StepSpec, WorkflowSpec};
use kandev_store::{NewTask, WriteTx};

/// Inserts a workspace, a one-step workflow and a task in it; returns the task.
pub(crate) async fn insert_task(tx: &mut WriteTx) -> Task {
    let workspace = tx.insert_workspace("w").await.unwrap();
    let spec = WorkflowSpec {
        name: "b".into(),
        description: String::new(),
        steps: vec![StepSpec::named("s")],
    };
    let workflow = tx.insert_workflow(&workspace.id, &spec, None).await.unwrap();
    let new = NewTask {
        workflow_id: workflow.id.clone(),
        step_id: workflow.steps[0].id.clone(),
        title: "t".into(),
        description: String::new(),
        repository_ids: vec![],
        agent_profile_id: None,
    };
    tx.insert_task(&new, "test").await.unwrap()
}
