//! Workflow use cases: boards and their steps, each change announced as the whole workflow
//! on its workspace's topic. Specs and step changes arrive checked.

use kandev_api_types::{Notification, WorkflowDto, WorkspaceEvent};
use kandev_domain::workflow::{Workflow, WorkflowSpec};
use kandev_domain::{StepId, WorkflowId, WorkspaceId, validate};
use kandev_store::{StepPatch, TaskFilter, WriteTx};

use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::publish::notify;

impl Engine {
    /// `workflow.create` and `workflow.import`: the workflows of `specs`, all or none.
    pub async fn create_workflows(
        &self,
        workspace_id: &WorkspaceId,
        specs: &[WorkflowSpec],
        template_id: Option<&str>,
    ) -> Result<Vec<Workflow>> {
        let mut tx = self.inner.store.begin_write().await?;
        let mut created = Vec::with_capacity(specs.len());
        for spec in specs {
            let workflow = tx.insert_workflow(workspace_id, spec, template_id).await?;
            let event = WorkspaceEvent::WorkflowCreated { workflow: WorkflowDto::from(&workflow) };
            notify(&mut tx, Notification::workspace(workspace_id, event)).await?;
            created.push(workflow);
        }
        tx.commit().await?;
        Ok(created)
    }

    /// `workflow.update`: its name and description.
    pub async fn update_workflow(
        &self,
        id: &WorkflowId,
        name: Option<&str>,
        description: Option<&str>,
    ) -> Result<Workflow> {
        let mut tx = self.inner.store.begin_write().await?;
        let workflow = tx.update_workflow(id, name, description).await?;
        publish_workflow(tx, workflow).await
    }

    /// `workflow.delete`, refused while the workflow has tasks (archived ones too).
    pub async fn delete_workflow(&self, id: &WorkflowId) -> Result<()> {
        let filter = TaskFilter {
            workflow_id: Some(id.clone()),
            include_archived: true,
            limit: 1,
            ..Default::default()
        };
        if !self.inner.store.list_tasks(&filter).await?.is_empty() {
            return Err(EngineError::Conflict(
                "the workflow still has tasks; delete them first".into(),
            ));
        }
        let mut tx = self.inner.store.begin_write().await?;
        let removed = tx.delete_workflow(id).await?;
        let event = WorkspaceEvent::WorkflowDeleted { id: id.to_string() };
        notify(&mut tx, Notification::workspace(&removed.workspace_id, event)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// `workflow.step.create`: a step named `name` at `position` (the end without one), with
    /// `patch` (checked against the workflow as it was) applied; refused past
    /// [`validate::MAX_STEPS`].
    pub async fn create_step(
        &self,
        workflow_id: &WorkflowId,
        name: &str,
        position: Option<usize>,
        patch: &StepPatch,
    ) -> Result<Workflow> {
        let mut tx = self.inner.store.begin_write().await?;
        let (workflow, step_id) = tx.insert_step(workflow_id, name, position).await?;
        if workflow.steps.len() > validate::MAX_STEPS {
            // Dropping `tx` rolls the insert back.
            return Err(EngineError::Validation(format!(
                "the workflow already has {} steps, the limit; delete one first",
                validate::MAX_STEPS
            )));
        }
        let workflow = tx.update_step(&step_id, patch).await?;
        publish_workflow(tx, workflow).await
    }

    /// `workflow.step.update`.
    pub async fn update_step(&self, id: &StepId, patch: &StepPatch) -> Result<Workflow> {
        let mut tx = self.inner.store.begin_write().await?;
        let workflow = tx.update_step(id, patch).await?;
        publish_workflow(tx, workflow).await
    }

    /// `workflow.step.delete`.
    pub async fn delete_step(&self, id: &StepId) -> Result<Workflow> {
        let mut tx = self.inner.store.begin_write().await?;
        let workflow = tx.delete_step(id).await?;
        publish_workflow(tx, workflow).await
    }

    /// `workflow.step.reorder`: `order` names every step once.
    pub async fn reorder_steps(&self, id: &WorkflowId, order: &[StepId]) -> Result<Workflow> {
        let mut tx = self.inner.store.begin_write().await?;
        let workflow = tx.reorder_steps(id, order).await?;
        publish_workflow(tx, workflow).await
    }
}

/// Announces `workflow.updated` and commits.
async fn publish_workflow(mut tx: WriteTx, workflow: Workflow) -> Result<Workflow> {
    let event = WorkspaceEvent::WorkflowUpdated { workflow: WorkflowDto::from(&workflow) };
    notify(&mut tx, Notification::workspace(&workflow.workspace_id, event)).await?;
    tx.commit().await?;
    Ok(workflow)
}
