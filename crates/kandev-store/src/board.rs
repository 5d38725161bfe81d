//! Workspaces, repositories, workflows with their steps, and tasks: reads and writes.

use kandev_domain::task::{Task, TaskState, place_at};
use kandev_domain::workflow::{Step, StepEvents, Workflow, WorkflowSpec};
use kandev_domain::workspace::{Repository, Workspace};
use kandev_domain::{AgentProfileId, RepositoryId, StepId, TaskId, WorkflowId, WorkspaceId};
use sqlx::{Executor, Sqlite};

use crate::rows::{RepositoryRow, StepRow, TaskRow, WorkflowRow, WorkspaceRow, events_to_json};
use crate::{Result, Store, StoreError, WriteTx};

const TASK_SELECT: &str = "SELECT t.id, t.workspace_id, t.workflow_id, t.step_id, t.title, \
    t.description, t.state, t.position, t.agent_profile_id, t.primary_session_id, \
    t.archived_at, t.created_at, t.updated_at, \
    (SELECT group_concat(repository_id, ',') FROM \
        (SELECT repository_id FROM task_repositories WHERE task_id = t.id ORDER BY position)) \
        AS repository_ids \
    FROM tasks t";

/// A repository to register.
#[derive(Debug, Clone)]
pub struct NewRepository {
    pub workspace_id: WorkspaceId,
    pub name: String,
    pub local_path: String,
    pub default_branch: String,
    pub branch_template: String,
    pub setup_script: String,
}

/// Fields of a repository to change; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct RepositoryPatch {
    pub name: Option<String>,
    pub default_branch: Option<String>,
    pub branch_template: Option<String>,
    pub setup_script: Option<String>,
}

/// Fields of a step to change; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct StepPatch {
    pub name: Option<String>,
    pub color: Option<String>,
    pub prompt: Option<String>,
    pub is_start_step: Option<bool>,
    pub allow_manual_move: Option<bool>,
    pub agent_profile_id: Option<Option<AgentProfileId>>,
    pub cancel_triggers_turn_complete: Option<bool>,
    pub events: Option<StepEvents<StepId>>,
}

/// A task to create, appended at the end of its step.
#[derive(Debug, Clone)]
pub struct NewTask {
    pub workflow_id: WorkflowId,
    pub step_id: StepId,
    pub title: String,
    pub description: String,
    pub repository_ids: Vec<RepositoryId>,
    pub agent_profile_id: Option<AgentProfileId>,
}

/// Fields of a task to change; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct TaskPatch {
    pub title: Option<String>,
    pub description: Option<String>,
    pub state: Option<TaskState>,
    pub repository_ids: Option<Vec<RepositoryId>>,
    pub agent_profile_id: Option<Option<AgentProfileId>>,
}

/// Which tasks to list, in board order (step position, then task position).
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    pub workflow_id: Option<WorkflowId>,
    pub step_id: Option<StepId>,
    /// Case-insensitive text matched against title and description; `%` and `_` match
    /// themselves. At most [`TaskFilter::MAX_QUERY_CHARS`] characters (callers check).
    pub query: Option<String>,
    pub include_archived: bool,
    pub limit: i64,
    pub offset: i64,
}

impl TaskFilter {
    /// Longest search text: far below SQLite's limit on a `LIKE` pattern (50,000 bytes, which
    /// a longer query could pass once escaped and UTF-8 encoded).
    pub const MAX_QUERY_CHARS: usize = 1000;
}

// ---------------------------------------------------------------- reads

async fn fetch_workspace<'e>(
    e: impl Executor<'e, Database = Sqlite>,
    id: &str,
) -> Result<Workspace> {
    sqlx::query_as::<_, WorkspaceRow>("SELECT * FROM workspaces WHERE id = ?")
        .bind(id)
        .fetch_optional(e)
        .await?
        .map(Workspace::from)
        .ok_or_else(|| StoreError::not_found("workspace", id))
}

async fn fetch_repository<'e>(
    e: impl Executor<'e, Database = Sqlite>,
    id: &str,
) -> Result<Repository> {
    sqlx::query_as::<_, RepositoryRow>("SELECT * FROM repositories WHERE id = ?")
        .bind(id)
        .fetch_optional(e)
        .await?
        .map(Repository::from)
        .ok_or_else(|| StoreError::not_found("repository", id))
}

async fn fetch_steps<'e>(
    e: impl Executor<'e, Database = Sqlite>,
    workflow_id: &str,
) -> Result<Vec<Step>> {
    sqlx::query_as::<_, StepRow>(
        "SELECT * FROM workflow_steps WHERE workflow_id = ? ORDER BY position",
    )
    .bind(workflow_id)
    .fetch_all(e)
    .await?
    .into_iter()
    .map(Step::try_from)
    .collect()
}

async fn fetch_task<'e>(e: impl Executor<'e, Database = Sqlite>, id: &str) -> Result<Task> {
    let sql = format!("{TASK_SELECT} WHERE t.id = ?");
    sqlx::query_as::<_, TaskRow>(&sql)
        .bind(id)
        .fetch_optional(e)
        .await?
        .ok_or_else(|| StoreError::not_found("task", id))
        .and_then(Task::try_from)
}

/// Escapes `%`, `_` and `\` for a `LIKE ... ESCAPE '\'` pattern.
fn like_pattern(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

impl Store {
    pub async fn list_workspaces(&self) -> Result<Vec<Workspace>> {
        let rows =
            sqlx::query_as::<_, WorkspaceRow>("SELECT * FROM workspaces ORDER BY created_at, id")
                .fetch_all(&self.read)
                .await?;
        Ok(rows.into_iter().map(Workspace::from).collect())
    }

    pub async fn get_workspace(&self, id: &WorkspaceId) -> Result<Workspace> {
        fetch_workspace(&self.read, id.as_str()).await
    }

    pub async fn list_repositories(&self, workspace_id: &WorkspaceId) -> Result<Vec<Repository>> {
        let rows = sqlx::query_as::<_, RepositoryRow>(
            "SELECT * FROM repositories WHERE workspace_id = ? ORDER BY name, id",
        )
        .bind(workspace_id.as_str())
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(Repository::from).collect())
    }

    pub async fn get_repository(&self, id: &RepositoryId) -> Result<Repository> {
        fetch_repository(&self.read, id.as_str()).await
    }

    pub async fn list_workflows(&self, workspace_id: &WorkspaceId) -> Result<Vec<Workflow>> {
        let rows = sqlx::query_as::<_, WorkflowRow>(
            "SELECT * FROM workflows WHERE workspace_id = ? ORDER BY created_at, id",
        )
        .bind(workspace_id.as_str())
        .fetch_all(&self.read)
        .await?;
        let mut workflows = Vec::with_capacity(rows.len());
        for row in rows {
            let steps = fetch_steps(&self.read, &row.id).await?;
            workflows.push(row.into_workflow(steps));
        }
        Ok(workflows)
    }

    pub async fn get_workflow(&self, id: &WorkflowId) -> Result<Workflow> {
        let row = sqlx::query_as::<_, WorkflowRow>("SELECT * FROM workflows WHERE id = ?")
            .bind(id.as_str())
            .fetch_optional(&self.read)
            .await?
            .ok_or_else(|| StoreError::not_found("workflow", id.as_str()))?;
        let steps = fetch_steps(&self.read, id.as_str()).await?;
        Ok(row.into_workflow(steps))
    }

    /// The workflow a step belongs to.
    pub async fn workflow_of_step(&self, step_id: &StepId) -> Result<Workflow> {
        let workflow_id: Option<String> =
            sqlx::query_scalar("SELECT workflow_id FROM workflow_steps WHERE id = ?")
                .bind(step_id.as_str())
                .fetch_optional(&self.read)
                .await?;
        let workflow_id =
            workflow_id.ok_or_else(|| StoreError::not_found("step", step_id.as_str()))?;
        self.get_workflow(&WorkflowId::new(workflow_id)).await
    }

    pub async fn get_task(&self, id: &TaskId) -> Result<Task> {
        fetch_task(&self.read, id.as_str()).await
    }

    /// Tasks in board order; see [`TaskFilter`].
    pub async fn list_tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>> {
        let mut sql =
            format!("{TASK_SELECT} JOIN workflow_steps s ON s.id = t.step_id WHERE 1 = 1");
        if filter.workflow_id.is_some() {
            sql.push_str(" AND t.workflow_id = ?");
        }
        if filter.step_id.is_some() {
            sql.push_str(" AND t.step_id = ?");
        }
        if filter.query.is_some() {
            sql.push_str(" AND (t.title LIKE ? ESCAPE '\\' OR t.description LIKE ? ESCAPE '\\')");
        }
        if !filter.include_archived {
            sql.push_str(" AND t.archived_at IS NULL");
        }
        sql.push_str(" ORDER BY s.position, t.position, t.created_at, t.id LIMIT ? OFFSET ?");
        let mut query = sqlx::query_as::<_, TaskRow>(&sql);
        if let Some(id) = &filter.workflow_id {
            query = query.bind(id.as_str());
        }
        if let Some(id) = &filter.step_id {
            query = query.bind(id.as_str());
        }
        if let Some(text) = &filter.query {
            let pattern = like_pattern(text);
            query = query.bind(pattern.clone()).bind(pattern);
        }
        let rows = query.bind(filter.limit).bind(filter.offset).fetch_all(&self.read).await?;
        rows.into_iter().map(Task::try_from).collect()
    }
}

// ---------------------------------------------------------------- writes

impl WriteTx {
    pub async fn insert_workspace(&mut self, name: &str) -> Result<Workspace> {
        let (id, now) = (self.new_id(), self.now().millis());
        sqlx::query(
            "INSERT INTO workspaces (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(name)
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        fetch_workspace(self.conn(), &id).await
    }

    pub async fn update_workspace(&mut self, id: &WorkspaceId, name: &str) -> Result<Workspace> {
        let now = self.now().millis();
        let done = sqlx::query("UPDATE workspaces SET name = ?, updated_at = ? WHERE id = ?")
            .bind(name)
            .bind(now)
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::not_found("workspace", id.as_str()));
        }
        fetch_workspace(self.conn(), id.as_str()).await
    }

    /// Deletes a workspace and, by cascade, everything in it.
    pub async fn delete_workspace(&mut self, id: &WorkspaceId) -> Result<()> {
        let done = sqlx::query("DELETE FROM workspaces WHERE id = ?")
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::not_found("workspace", id.as_str()));
        }
        Ok(())
    }

    pub async fn insert_repository(&mut self, new: &NewRepository) -> Result<Repository> {
        fetch_workspace(self.conn(), new.workspace_id.as_str()).await?;
        let taken: Option<String> = sqlx::query_scalar(
            "SELECT id FROM repositories WHERE workspace_id = ? AND local_path = ?",
        )
        .bind(new.workspace_id.as_str())
        .bind(&new.local_path)
        .fetch_optional(self.conn())
        .await?;
        if taken.is_some() {
            return Err(StoreError::Conflict(format!(
                "{} is already registered in this workspace",
                new.local_path
            )));
        }
        let (id, now) = (self.new_id(), self.now().millis());
        sqlx::query(
            "INSERT INTO repositories (id, workspace_id, name, local_path, default_branch, \
             branch_template, setup_script, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(new.workspace_id.as_str())
        .bind(&new.name)
        .bind(&new.local_path)
        .bind(&new.default_branch)
        .bind(&new.branch_template)
        .bind(&new.setup_script)
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        fetch_repository(self.conn(), &id).await
    }

    pub async fn update_repository(
        &mut self,
        id: &RepositoryId,
        patch: &RepositoryPatch,
    ) -> Result<Repository> {
        let current = fetch_repository(self.conn(), id.as_str()).await?;
        let now = self.now().millis();
        sqlx::query(
            "UPDATE repositories SET name = ?, default_branch = ?, branch_template = ?, \
             setup_script = ?, updated_at = ? WHERE id = ?",
        )
        .bind(patch.name.as_ref().unwrap_or(&current.name))
        .bind(patch.default_branch.as_ref().unwrap_or(&current.default_branch))
        .bind(patch.branch_template.as_ref().unwrap_or(&current.branch_template))
        .bind(patch.setup_script.as_ref().unwrap_or(&current.setup_script))
        .bind(now)
        .bind(id.as_str())
        .execute(self.conn())
        .await?;
        fetch_repository(self.conn(), id.as_str()).await
    }

    /// Deletes a repository; returns it so the caller can publish which workspace changed.
    pub async fn delete_repository(&mut self, id: &RepositoryId) -> Result<Repository> {
        let current = fetch_repository(self.conn(), id.as_str()).await?;
        sqlx::query("DELETE FROM repositories WHERE id = ?")
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        Ok(current)
    }

    /// Creates a workflow and its steps from a spec, resolving step-index targets to ids.
    pub async fn insert_workflow(
        &mut self,
        workspace_id: &WorkspaceId,
        spec: &WorkflowSpec,
        template_id: Option<&str>,
    ) -> Result<Workflow> {
        fetch_workspace(self.conn(), workspace_id.as_str()).await?;
        let (id, now) = (self.new_id(), self.now().millis());
        sqlx::query(
            "INSERT INTO workflows (id, workspace_id, name, description, template_id, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(workspace_id.as_str())
        .bind(&spec.name)
        .bind(&spec.description)
        .bind(template_id)
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        let step_ids: Vec<StepId> = spec.steps.iter().map(|_| StepId::new(self.new_id())).collect();
        for (position, (step, step_id)) in spec.steps.iter().zip(&step_ids).enumerate() {
            let events = step.events.clone().map_targets(|index| {
                step_ids.get(index).cloned().ok_or_else(|| {
                    StoreError::Conflict(format!(
                        "step {:?} moves to a step that does not exist",
                        step.name
                    ))
                })
            })?;
            sqlx::query(
                "INSERT INTO workflow_steps (id, workflow_id, name, position, color, prompt, is_start_step, \
                 allow_manual_move, cancel_triggers_turn_complete, events) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(step_id.as_str())
            .bind(&id)
            .bind(&step.name)
            .bind(position as i64)
            .bind(&step.color)
            .bind(&step.prompt)
            .bind(step.is_start_step)
            .bind(step.allow_manual_move)
            .bind(step.cancel_triggers_turn_complete)
            .bind(events_to_json(&events))
            .execute(self.conn())
            .await?;
        }
        self.get_workflow(&WorkflowId::new(id)).await
    }

    pub async fn get_workflow(&mut self, id: &WorkflowId) -> Result<Workflow> {
        let row = sqlx::query_as::<_, WorkflowRow>("SELECT * FROM workflows WHERE id = ?")
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await?
            .ok_or_else(|| StoreError::not_found("workflow", id.as_str()))?;
        let steps = fetch_steps(self.conn(), id.as_str()).await?;
        Ok(row.into_workflow(steps))
    }

    pub async fn update_workflow(
        &mut self,
        id: &WorkflowId,
        name: Option<&str>,
        description: Option<&str>,
    ) -> Result<Workflow> {
        let current = self.get_workflow(id).await?;
        let now = self.now().millis();
        sqlx::query("UPDATE workflows SET name = ?, description = ?, updated_at = ? WHERE id = ?")
            .bind(name.unwrap_or(&current.name))
            .bind(description.unwrap_or(&current.description))
            .bind(now)
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        self.get_workflow(id).await
    }

    /// Deletes a workflow with its steps and tasks; returns it for publication.
    pub async fn delete_workflow(&mut self, id: &WorkflowId) -> Result<Workflow> {
        let current = self.get_workflow(id).await?;
        sqlx::query("DELETE FROM workflows WHERE id = ?")
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        Ok(current)
    }

    /// Adds a step at `position` (end when `None`); returns the updated workflow.
    pub async fn insert_step(
        &mut self,
        workflow_id: &WorkflowId,
        name: &str,
        position: Option<usize>,
    ) -> Result<(Workflow, StepId)> {
        let workflow = self.get_workflow(workflow_id).await?;
        let step_id = StepId::new(self.new_id());
        sqlx::query(
            "INSERT INTO workflow_steps (id, workflow_id, name, position) VALUES (?, ?, ?, ?)",
        )
        .bind(step_id.as_str())
        .bind(workflow_id.as_str())
        .bind(name)
        .bind(workflow.steps.len() as i64)
        .execute(self.conn())
        .await?;
        let others: Vec<StepId> = workflow.steps.iter().map(|s| s.id.clone()).collect();
        let order = place_at(others, step_id.clone(), position);
        self.write_step_order(&order).await?;
        self.touch_workflow(workflow_id).await?;
        Ok((self.get_workflow(workflow_id).await?, step_id))
    }

    pub async fn update_step(&mut self, step_id: &StepId, patch: &StepPatch) -> Result<Workflow> {
        let workflow_id: String =
            sqlx::query_scalar("SELECT workflow_id FROM workflow_steps WHERE id = ?")
                .bind(step_id.as_str())
                .fetch_optional(self.conn())
                .await?
                .ok_or_else(|| StoreError::not_found("step", step_id.as_str()))?;
        let workflow_id = WorkflowId::new(workflow_id);
        let workflow = self.get_workflow(&workflow_id).await?;
        let current = workflow
            .step(step_id)
            .cloned()
            .ok_or_else(|| StoreError::not_found("step", step_id.as_str()))?;
        if patch.is_start_step == Some(true) {
            sqlx::query("UPDATE workflow_steps SET is_start_step = 0 WHERE workflow_id = ?")
                .bind(workflow_id.as_str())
                .execute(self.conn())
                .await?;
        }
        let profile = match &patch.agent_profile_id {
            Some(p) => p.clone(),
            None => current.agent_profile_id.clone(),
        };
        sqlx::query(
            "UPDATE workflow_steps SET name = ?, color = ?, prompt = ?, is_start_step = ?, \
             allow_manual_move = ?, agent_profile_id = ?, cancel_triggers_turn_complete = ?, events = ? \
             WHERE id = ?",
        )
        .bind(patch.name.as_ref().unwrap_or(&current.name))
        .bind(patch.color.as_ref().unwrap_or(&current.color))
        .bind(patch.prompt.as_ref().unwrap_or(&current.prompt))
        .bind(patch.is_start_step.unwrap_or(current.is_start_step))
        .bind(patch.allow_manual_move.unwrap_or(current.allow_manual_move))
        .bind(profile.as_ref().map(|p| p.as_str()))
        .bind(patch.cancel_triggers_turn_complete.unwrap_or(current.cancel_triggers_turn_complete))
        .bind(events_to_json(patch.events.as_ref().unwrap_or(&current.events)))
        .bind(step_id.as_str())
        .execute(self.conn())
        .await?;
        self.touch_workflow(&workflow_id).await?;
        self.get_workflow(&workflow_id).await
    }

    /// Deletes an empty step. Refused while tasks are in it.
    pub async fn delete_step(&mut self, step_id: &StepId) -> Result<Workflow> {
        let workflow_id: String =
            sqlx::query_scalar("SELECT workflow_id FROM workflow_steps WHERE id = ?")
                .bind(step_id.as_str())
                .fetch_optional(self.conn())
                .await?
                .ok_or_else(|| StoreError::not_found("step", step_id.as_str()))?;
        let tasks: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tasks WHERE step_id = ?")
            .bind(step_id.as_str())
            .fetch_one(self.conn())
            .await?;
        if tasks > 0 {
            return Err(StoreError::Conflict(format!(
                "the step still holds {tasks} task(s); move or delete them first"
            )));
        }
        sqlx::query("DELETE FROM workflow_steps WHERE id = ?")
            .bind(step_id.as_str())
            .execute(self.conn())
            .await?;
        let workflow_id = WorkflowId::new(workflow_id);
        let remaining: Vec<StepId> =
            self.get_workflow(&workflow_id).await?.steps.into_iter().map(|s| s.id).collect();
        self.write_step_order(&remaining).await?;
        self.touch_workflow(&workflow_id).await?;
        self.get_workflow(&workflow_id).await
    }

    /// Sets the step order; `order` must hold exactly the workflow's step ids.
    pub async fn reorder_steps(
        &mut self,
        workflow_id: &WorkflowId,
        order: &[StepId],
    ) -> Result<Workflow> {
        let workflow = self.get_workflow(workflow_id).await?;
        let mut current: Vec<&StepId> = workflow.steps.iter().map(|s| &s.id).collect();
        let mut wanted: Vec<&StepId> = order.iter().collect();
        current.sort();
        wanted.sort();
        if current != wanted {
            return Err(StoreError::Conflict(
                "step_ids must list every step of the workflow exactly once".into(),
            ));
        }
        self.write_step_order(order).await?;
        self.touch_workflow(workflow_id).await?;
        self.get_workflow(workflow_id).await
    }

    async fn write_step_order(&mut self, order: &[StepId]) -> Result<()> {
        for (position, id) in order.iter().enumerate() {
            sqlx::query("UPDATE workflow_steps SET position = ? WHERE id = ?")
                .bind(position as i64)
                .bind(id.as_str())
                .execute(self.conn())
                .await?;
        }
        Ok(())
    }

    async fn touch_workflow(&mut self, id: &WorkflowId) -> Result<()> {
        let now = self.now().millis();
        sqlx::query("UPDATE workflows SET updated_at = ? WHERE id = ?")
            .bind(now)
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    pub async fn get_task(&mut self, id: &TaskId) -> Result<Task> {
        fetch_task(self.conn(), id.as_str()).await
    }

    /// Creates a task at the end of its step and records its entry in the step history.
    pub async fn insert_task(&mut self, new: &NewTask, actor: &str) -> Result<Task> {
        let workspace_id: String =
            sqlx::query_scalar("SELECT workspace_id FROM workflows WHERE id = ?")
                .bind(new.workflow_id.as_str())
                .fetch_optional(self.conn())
                .await?
                .ok_or_else(|| StoreError::not_found("workflow", new.workflow_id.as_str()))?;
        self.check_step_of(&new.step_id, &new.workflow_id).await?;
        let position: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM tasks WHERE step_id = ? AND archived_at IS NULL",
        )
        .bind(new.step_id.as_str())
        .fetch_one(self.conn())
        .await?;
        let (id, now) = (self.new_id(), self.now().millis());
        sqlx::query(
            "INSERT INTO tasks (id, workspace_id, workflow_id, step_id, title, description, state, position, \
             agent_profile_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(&workspace_id)
        .bind(new.workflow_id.as_str())
        .bind(new.step_id.as_str())
        .bind(&new.title)
        .bind(&new.description)
        .bind(TaskState::Todo.as_str())
        .bind(position)
        .bind(new.agent_profile_id.as_ref().map(|p| p.as_str()))
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        let task_id = TaskId::new(id);
        self.write_task_repositories(&task_id, &new.repository_ids).await?;
        self.record_step_change(&task_id, None, &new.step_id, "created", actor).await?;
        self.get_task(&task_id).await
    }

    pub async fn update_task(&mut self, id: &TaskId, patch: &TaskPatch) -> Result<Task> {
        let current = self.get_task(id).await?;
        let now = self.now().millis();
        let profile = match &patch.agent_profile_id {
            Some(p) => p.clone(),
            None => current.agent_profile_id.clone(),
        };
        sqlx::query(
            "UPDATE tasks SET title = ?, description = ?, state = ?, agent_profile_id = ?, updated_at = ? \
             WHERE id = ?",
        )
        .bind(patch.title.as_ref().unwrap_or(&current.title))
        .bind(patch.description.as_ref().unwrap_or(&current.description))
        .bind(patch.state.unwrap_or(current.state).as_str())
        .bind(profile.as_ref().map(|p| p.as_str()))
        .bind(now)
        .bind(id.as_str())
        .execute(self.conn())
        .await?;
        if let Some(repository_ids) = &patch.repository_ids {
            sqlx::query("DELETE FROM task_repositories WHERE task_id = ?")
                .bind(id.as_str())
                .execute(self.conn())
                .await?;
            self.write_task_repositories(id, repository_ids).await?;
        }
        self.get_task(id).await
    }

    async fn write_task_repositories(
        &mut self,
        task_id: &TaskId,
        repository_ids: &[RepositoryId],
    ) -> Result<()> {
        for (position, repository_id) in repository_ids.iter().enumerate() {
            sqlx::query(
                "INSERT INTO task_repositories (task_id, repository_id, position) VALUES (?, ?, ?)",
            )
            .bind(task_id.as_str())
            .bind(repository_id.as_str())
            .bind(position as i64)
            .execute(self.conn())
            .await?;
        }
        Ok(())
    }

    /// Moves a task to `position` (end when `None`) in `to_step` of its own workflow,
    /// renumbering the affected steps. Records the move in the step history when the step
    /// changes. A step deleted since the caller looked is `NotFound` (issue 12, finding 9).
    pub async fn move_task(
        &mut self,
        id: &TaskId,
        to_step: &StepId,
        position: Option<usize>,
        trigger: &str,
        actor: &str,
    ) -> Result<Task> {
        let task = self.get_task(id).await?;
        self.check_step_of(to_step, &task.workflow_id).await?;
        let others: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM tasks WHERE step_id = ? AND id != ? AND archived_at IS NULL \
             ORDER BY position, created_at, id",
        )
        .bind(to_step.as_str())
        .bind(id.as_str())
        .fetch_all(self.conn())
        .await?;
        let order = place_at(others, id.as_str().to_owned(), position);
        let now = self.now().millis();
        sqlx::query("UPDATE tasks SET step_id = ?, updated_at = ? WHERE id = ?")
            .bind(to_step.as_str())
            .bind(now)
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        self.write_task_order(&order).await?;
        if &task.step_id != to_step {
            self.renumber_step(&task.step_id).await?;
            self.record_step_change(id, Some(&task.step_id), to_step, trigger, actor).await?;
        }
        self.get_task(id).await
    }

    /// Checks, inside this transaction, that a step exists and belongs to `workflow_id`:
    /// callers validate against a workflow they read earlier, and a concurrent
    /// `workflow.step.delete` may have committed since.
    async fn check_step_of(&mut self, step_id: &StepId, workflow_id: &WorkflowId) -> Result<()> {
        let owner: Option<String> =
            sqlx::query_scalar("SELECT workflow_id FROM workflow_steps WHERE id = ?")
                .bind(step_id.as_str())
                .fetch_optional(self.conn())
                .await?;
        match owner {
            None => Err(StoreError::not_found("step", step_id.as_str())),
            Some(owner) if owner != workflow_id.as_str() => Err(StoreError::Conflict(format!(
                "step {step_id} is not a step of workflow {workflow_id}"
            ))),
            Some(_) => Ok(()),
        }
    }

    async fn write_task_order(&mut self, order: &[String]) -> Result<()> {
        for (position, task_id) in order.iter().enumerate() {
            sqlx::query("UPDATE tasks SET position = ? WHERE id = ? AND position != ?")
                .bind(position as i64)
                .bind(task_id)
                .bind(position as i64)
                .execute(self.conn())
                .await?;
        }
        Ok(())
    }

    async fn renumber_step(&mut self, step_id: &StepId) -> Result<()> {
        let order: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM tasks WHERE step_id = ? AND archived_at IS NULL ORDER BY position, created_at, id",
        )
        .bind(step_id.as_str())
        .fetch_all(self.conn())
        .await?;
        self.write_task_order(&order).await
    }

    async fn record_step_change(
        &mut self,
        task_id: &TaskId,
        from: Option<&StepId>,
        to: &StepId,
        trigger: &str,
        actor: &str,
    ) -> Result<()> {
        let now = self.now().millis();
        sqlx::query(
            "INSERT INTO task_step_history (task_id, from_step_id, to_step_id, trigger, actor, at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(task_id.as_str())
        .bind(from.map(|s| s.as_str()))
        .bind(to.as_str())
        .bind(trigger)
        .bind(actor)
        .bind(now)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Archives a task (hidden from the board, kept in the database).
    pub async fn archive_task(&mut self, id: &TaskId) -> Result<Task> {
        let task = self.get_task(id).await?;
        if task.archived_at.is_some() {
            return Ok(task);
        }
        let now = self.now().millis();
        sqlx::query("UPDATE tasks SET archived_at = ?, updated_at = ? WHERE id = ?")
            .bind(now)
            .bind(now)
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        self.renumber_step(&task.step_id).await?;
        self.get_task(id).await
    }

    /// Deletes a task; returns it for publication.
    pub async fn delete_task(&mut self, id: &TaskId) -> Result<Task> {
        let task = self.get_task(id).await?;
        sqlx::query("DELETE FROM tasks WHERE id = ?")
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        self.renumber_step(&task.step_id).await?;
        Ok(task)
    }
}

/// One entry of a task's step history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepChange {
    pub from_step_id: Option<StepId>,
    pub to_step_id: StepId,
    pub trigger: String,
    pub actor: String,
    pub at: kandev_domain::Timestamp,
}

impl Store {
    /// A task's step history, oldest first.
    pub async fn step_history(&self, task_id: &TaskId) -> Result<Vec<StepChange>> {
        let rows: Vec<(Option<String>, String, String, String, i64)> = sqlx::query_as(
            "SELECT from_step_id, to_step_id, trigger, actor, at FROM task_step_history \
             WHERE task_id = ? ORDER BY id",
        )
        .bind(task_id.as_str())
        .fetch_all(&self.read)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(from, to, trigger, actor, at)| StepChange {
                from_step_id: from.map(StepId::new),
                to_step_id: StepId::new(to),
                trigger,
                actor,
                at: kandev_domain::Timestamp(at),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::like_pattern;

    #[test]
    fn like_pattern_escapes_wildcards() {
        assert_eq!(like_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
    }
}
