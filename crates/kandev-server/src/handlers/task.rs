//! `task.*` actions: create, list and search, update, move and reorder, archive, delete
//! (which also remove the task's worktrees).

use kandev_api_types::requests::{ById, TaskCreate, TaskList, TaskMove, TaskRemove, TaskUpdate};
use kandev_api_types::responses::{
    TaskArchived, TaskCreated, TaskDeleted, TaskMoved, TaskOne, Tasks,
};
use kandev_api_types::{Notification, SessionDto, TaskCardDto, TaskDto, WorkspaceEvent};
use kandev_domain::task::Task;
use kandev_domain::workflow::Workflow;
use kandev_domain::{AgentProfileId, RepositoryId, StepId, TaskId, WorkflowId, validate};
use kandev_store::{NewTask, TaskFilter, TaskPatch, WriteTx};
use serde_json::json;

use super::{files, next_cursor, notify, page_bounds};
use crate::accounts::Identity;
use crate::{ApiError, AppState};

/// Default page size of `task.list`: a whole ordinary board in one call.
const DEFAULT_TASK_PAGE: u32 = 1000;

pub async fn create(s: &AppState, p: TaskCreate) -> Result<TaskCreated, ApiError> {
    create_at_depth(s, p, 0).await
}

/// [`create`] of a task `agent_depth` agents deep (`tasks.agent_depth`: 0 for a person's
/// task; MCP's `create_task` gives the creating agent's task's depth + 1).
pub(crate) async fn create_at_depth(
    s: &AppState,
    p: TaskCreate,
    agent_depth: u32,
) -> Result<TaskCreated, ApiError> {
    // Rule 33: a client that goes away mid-request never leaves a task without the start its
    // step asked for; the work runs on its own and the request waits for its answer.
    let state = s.clone();
    s.engine().run_detached(async move { create_now(&state, p, agent_depth).await }).await?
}

async fn create_now(
    s: &AppState,
    p: TaskCreate,
    agent_depth: u32,
) -> Result<TaskCreated, ApiError> {
    let title = validate::title("title", &p.title)?;
    let description = validate::description("description", p.description.as_deref().unwrap_or(""))?;
    let workflow = s.store().get_workflow(&WorkflowId::new(&p.workflow_id)).await?;
    let step_id = match p.step_id {
        Some(id) => step_in(&workflow, StepId::new(id))?,
        None => workflow
            .start_step()
            .map(|s| s.id.clone())
            .ok_or_else(|| ApiError::conflict("the workflow has no steps; add one first"))?,
    };
    let mut ids = p.repository_ids;
    let mut base_branches = vec![];
    for reference in p.repositories {
        if let Some(branch) = reference.base_branch {
            let branch = validate::branch_name("base_branch", &branch)?;
            base_branches.push((RepositoryId::new(&reference.id), branch));
        }
        ids.push(reference.id);
    }
    let repository_ids = checked_repositories(s, &workflow, ids).await?;
    let agent_profile_id = checked_profile(s, p.agent_profile_id).await?;
    let new = NewTask {
        workflow_id: workflow.id.clone(),
        step_id,
        title,
        description,
        repository_ids,
        agent_profile_id,
    };
    let parent_id = p.parent_id.map(TaskId::new);
    let blocked_by: Vec<TaskId> = p.blocked_by.into_iter().map(TaskId::new).collect();
    let mut tx = s.store().begin_write().await?;
    let task = tx.insert_task(&new, "user").await?;
    if agent_depth > 0 {
        tx.set_task_agent_depth(&task.id, agent_depth).await?;
    }
    for (repository_id, branch) in &base_branches {
        tx.set_task_base_branch(&task.id, repository_id, branch).await?;
    }
    let task = if parent_id.is_some() || !blocked_by.is_empty() {
        tx.set_task_links(&task.id, Some(parent_id.as_ref()), Some(&blocked_by)).await?;
        tx.get_task(&task.id).await?
    } else {
        task
    };
    let created = publish_task(tx, &task, TaskChange::Created).await?;
    // The start step's on_enter runs now; `start_agent` (or an `auto_start_agent` action)
    // starts the first session, exactly once. The answer comes once the start is accepted
    // (`STARTING`); the working directory is prepared in the session's own work.
    let Some(session) = s.engine().task_created(&task.id, p.start_agent).await? else {
        return Ok(TaskCreated { task: created, session: None });
    };
    let task = s.store().get_task(&task.id).await?;
    Ok(TaskCreated { task: TaskDto::from(&task), session: Some(SessionDto::from(&session)) })
}

pub async fn list(s: &AppState, p: TaskList) -> Result<Tasks, ApiError> {
    let (limit, offset) = page_bounds(p.limit, p.cursor.as_deref(), DEFAULT_TASK_PAGE)?;
    let workflow = s.store().get_workflow(&WorkflowId::new(p.workflow_id)).await?;
    let step_id = p.step_id.map(|id| step_in(&workflow, StepId::new(id))).transpose()?;
    let query = p.query.map(|q| q.trim().to_owned()).filter(|q| !q.is_empty());
    if query.as_ref().is_some_and(|q| q.chars().count() > TaskFilter::MAX_QUERY_CHARS) {
        let limit = TaskFilter::MAX_QUERY_CHARS;
        return Err(validate::FieldError::new(
            "query",
            format!("is longer than {limit} characters"),
        )
        .into());
    }
    let filter = TaskFilter {
        workflow_id: Some(workflow.id.clone()),
        step_id,
        query,
        include_archived: p.include_archived,
        limit,
        offset,
    };
    let tasks = s.store().list_cards(&filter).await?;
    let next_cursor = next_cursor(offset, limit, tasks.len());
    Ok(Tasks { tasks: tasks.into_iter().map(TaskCardDto::from).collect(), next_cursor })
}

pub async fn get(s: &AppState, p: ById) -> Result<TaskOne, ApiError> {
    let task = s.store().get_task(&TaskId::new(p.id)).await?;
    Ok(TaskOne { task: TaskDto::from(&task) })
}

pub async fn update(s: &AppState, p: TaskUpdate) -> Result<TaskOne, ApiError> {
    let id = TaskId::new(p.id);
    let current = s.store().get_task(&id).await?;
    let workflow = s.store().get_workflow(&current.workflow_id).await?;
    let repository_ids = match p.repository_ids {
        Some(ids) => Some(checked_repositories(s, &workflow, ids).await?),
        None => None,
    };
    let agent_profile_id = match p.agent_profile_id {
        Some(profile) => Some(checked_profile(s, profile).await?),
        None => None,
    };
    let patch = TaskPatch {
        title: p.title.as_deref().map(|t| validate::title("title", t)).transpose()?,
        description: p
            .description
            .as_deref()
            .map(|d| validate::description("description", d))
            .transpose()?,
        state: None,
        needs_you: None,
        repository_ids,
        agent_profile_id,
    };
    let parent_id = p.parent_id.map(|parent| parent.map(TaskId::new));
    let blocked_by: Option<Vec<TaskId>> =
        p.blocked_by.map(|ids| ids.into_iter().map(TaskId::new).collect());
    let mut tx = s.store().begin_write().await?;
    let mut task = tx.update_task(&id, &patch).await?;
    if parent_id.is_some() || blocked_by.is_some() {
        tx.set_task_links(&id, parent_id.as_ref().map(Option::as_ref), blocked_by.as_deref())
            .await?;
        task = tx.get_task(&id).await?;
    }
    let updated = publish_task(tx, &task, TaskChange::Updated).await?;
    // Fewer blockers may leave a waiting auto-start free to run.
    if blocked_by.is_some() && s.store().open_blockers(&id).await?.is_empty() {
        s.engine().release_task(&id).await?;
    }
    Ok(TaskOne { task: updated })
}

/// Moves a task to another step of its workflow, or to another position in its own step
/// (reorder).
pub async fn move_task(s: &AppState, who: &Identity, p: TaskMove) -> Result<TaskMoved, ApiError> {
    let id = TaskId::new(p.id);
    let task = s.store().get_task(&id).await?;
    let workflow = s.store().get_workflow(&task.workflow_id).await?;
    let to_step = StepId::new(p.step_id);
    let Some(step) = workflow.step(&to_step) else {
        return Err(ApiError::validation(format!(
            "step {to_step} is not a step of the task's workflow; pick one from workflow.get"
        )));
    };
    if step.id != task.step_id && !step.allow_manual_move {
        return Err(ApiError::conflict(format!(
            "step {:?} does not accept manual moves",
            step.name
        )));
    }
    let position = p.position.map(|x| x as usize);
    let (moved, from) = s.engine().move_task(&id, &to_step, position, &who.by()).await?;
    Ok(TaskMoved { task: TaskDto::from(&moved), from_step_id: from.to_string() })
}

/// Archives a task after stopping its agents and removing its worktrees. A worktree with
/// uncommitted or untracked files is kept unless `force`; the response says which and why.
/// Branches are always kept.
pub async fn archive(s: &AppState, p: TaskRemove) -> Result<TaskArchived, ApiError> {
    let id = TaskId::new(p.id);
    s.store().get_task(&id).await?;
    let removal = s.engine().remove_task_worktrees(&id, p.force).await?;
    let mut tx = s.store().begin_write().await?;
    let task = tx.archive_task(&id).await?;
    let archived = publish_task(tx, &task, TaskChange::Archived).await?;
    // An archived task is done: tasks whose auto-start waited for it may start.
    s.engine().task_done(&id).await?;
    Ok(TaskArchived {
        task: archived,
        worktrees_removed: removal.removed,
        worktrees_kept: files::kept_dtos(&removal.kept),
    })
}

/// Takes a task out of the archive, at the end of its step (archive's Undo). Its worktrees
/// are made again when an agent next starts; an unarchived task is announced as updated.
pub async fn unarchive(s: &AppState, p: ById) -> Result<TaskOne, ApiError> {
    let id = TaskId::new(p.id);
    let mut tx = s.store().begin_write().await?;
    let task = tx.unarchive_task(&id).await?;
    Ok(TaskOne { task: publish_task(tx, &task, TaskChange::Updated).await? })
}

/// Deletes a task after stopping its agents and removing its worktrees (branches are kept).
/// Refused with `CONFLICT` while a worktree has uncommitted or untracked files or cannot be
/// removed, unless `force`.
pub async fn delete(s: &AppState, p: TaskRemove) -> Result<TaskDeleted, ApiError> {
    let id = TaskId::new(&p.id);
    s.store().get_task(&id).await?;
    if !p.force {
        let dirty = s.engine().dirty_task_worktrees(&id).await?;
        if let Some(first) = dirty.first() {
            return Err(kept_conflict(&first.reason, &dirty));
        }
    }
    let removal = s.engine().remove_task_worktrees(&id, p.force).await?;
    if !p.force
        && let Some(first) = removal.kept.first()
    {
        return Err(kept_conflict(&first.reason, &removal.kept));
    }
    let mut tx = s.store().begin_write().await?;
    let dependents = tx.dependents(&id).await?;
    let task = tx.delete_task(&id).await?;
    let event = WorkspaceEvent::TaskDeleted {
        id: p.id.clone(),
        workflow_id: task.workflow_id.to_string(),
        step_id: task.step_id.to_string(),
    };
    notify(&mut tx, Notification::workspace(&task.workspace_id, event)).await?;
    // Its subtasks are top-level now and no task is blocked by it any more: say so.
    for dependent in &dependents {
        if let Ok(changed) = tx.get_task(dependent).await {
            let event = WorkspaceEvent::TaskUpdated { task: TaskDto::from(&changed) };
            notify(&mut tx, Notification::workspace(&changed.workspace_id, event)).await?;
        }
    }
    tx.commit().await?;
    for dependent in &dependents {
        if s.store().open_blockers(dependent).await?.is_empty() {
            s.engine().release_task(dependent).await?;
        }
    }
    Ok(TaskDeleted {
        deleted: true,
        id: p.id,
        worktrees_removed: removal.removed,
        worktrees_kept: files::kept_dtos(&removal.kept),
    })
}

fn kept_conflict(reason: &str, kept: &[kandev_engine::workdir::KeptWorktree]) -> ApiError {
    ApiError::conflict(format!(
        "the task was not deleted: {reason}; pass force to delete it anyway"
    ))
    .with_details(json!({ "worktrees": files::kept_dtos(kept) }))
}

/// What [`publish_task`] announces.
enum TaskChange {
    Created,
    Updated,
    Archived,
}

/// Announces a task's change, commits, and returns the task as the API shows it.
async fn publish_task(
    mut tx: WriteTx,
    task: &Task,
    change: TaskChange,
) -> Result<TaskDto, ApiError> {
    let dto = TaskDto::from(task);
    let task_dto = dto.clone();
    let event = match change {
        TaskChange::Created => WorkspaceEvent::TaskCreated { task: task_dto },
        TaskChange::Updated => WorkspaceEvent::TaskUpdated { task: task_dto },
        TaskChange::Archived => WorkspaceEvent::TaskArchived { task: task_dto },
    };
    notify(&mut tx, Notification::workspace(&task.workspace_id, event)).await?;
    tx.commit().await?;
    Ok(dto)
}

fn step_in(workflow: &Workflow, step_id: StepId) -> Result<StepId, ApiError> {
    match workflow.step(&step_id) {
        Some(step) => Ok(step.id.clone()),
        None => Err(ApiError::validation(format!(
            "step {step_id} is not a step of workflow {}",
            workflow.id
        ))),
    }
}

async fn checked_repositories(
    s: &AppState,
    workflow: &Workflow,
    ids: Vec<String>,
) -> Result<Vec<RepositoryId>, ApiError> {
    let mut checked: Vec<RepositoryId> = Vec::with_capacity(ids.len());
    for id in ids {
        let repository = s.store().get_repository(&RepositoryId::new(id)).await?;
        if repository.workspace_id != workflow.workspace_id {
            return Err(ApiError::validation(format!(
                "repository {} belongs to another workspace",
                repository.id
            )));
        }
        if !checked.contains(&repository.id) {
            checked.push(repository.id);
        }
    }
    Ok(checked)
}

async fn checked_profile(
    s: &AppState,
    id: Option<String>,
) -> Result<Option<AgentProfileId>, ApiError> {
    match id {
        Some(id) => {
            let id = AgentProfileId::new(id);
            s.store().get_profile(&id).await?;
            Ok(Some(id))
        }
        None => Ok(None),
    }
}
