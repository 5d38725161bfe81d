//! `task.*` actions: create, list and search, update, move and reorder, archive, delete
//! (which also remove the task's worktrees).

use kandev_api_types::requests::{
    ById, ByWorkspace, TaskCreate, TaskList, TaskMove, TaskRemove, TaskUpdate,
};
use kandev_api_types::responses::{
    TaskArchived, TaskCreated, TaskDeleted, TaskMoved, TaskOne, Tasks, TasksNeedingYou,
};
use kandev_api_types::{SessionDto, TaskCardDto, TaskDto};
use kandev_domain::workflow::Workflow;
use kandev_domain::{
    AgentProfileId, RepositoryId, StepId, TaskId, WorkflowId, WorkspaceId, validate,
};
use kandev_engine::{NewTaskRequest, TaskDeletion, TaskEdit};
use kandev_store::TaskFilter;
use serde_json::json;

use super::{files, next_cursor, page_bounds};
use crate::accounts::Identity;
use crate::{ApiError, AppState};

/// Default page size of `task.list`: a whole ordinary board in one call.
const DEFAULT_TASK_PAGE: u32 = 1000;

/// `task.create`: a session it starts acts with the creating user's rights at most.
pub async fn create(s: &AppState, who: &Identity, p: TaskCreate) -> Result<TaskCreated, ApiError> {
    create_at_depth(s, p, 0, crate::roles::starter(who)).await
}

/// [`create`] of a task `agent_depth` agents deep (`tasks.agent_depth`: 0 for a person's
/// task; MCP's `create_task` gives the creating agent's task's depth + 1).
pub(crate) async fn create_at_depth(
    s: &AppState,
    p: TaskCreate,
    agent_depth: u32,
    started_by: Option<String>,
) -> Result<TaskCreated, ApiError> {
    // Rule 33: a client that goes away mid-request never leaves a task without the start its
    // step asked for; the work runs on its own and the request waits for its answer.
    let state = s.clone();
    let work = async move { create_now(&state, p, agent_depth, started_by).await };
    s.engine().run_detached(work).await?
}

async fn create_now(
    s: &AppState,
    p: TaskCreate,
    agent_depth: u32,
    started_by: Option<String>,
) -> Result<TaskCreated, ApiError> {
    let title = validate::title("title", &p.title)?;
    let description = validate::description("description", p.description.as_deref().unwrap_or(""))?;
    let mut repository_ids: Vec<RepositoryId> =
        p.repository_ids.into_iter().map(RepositoryId::new).collect();
    let mut base_branches = vec![];
    for reference in p.repositories {
        if let Some(branch) = reference.base_branch {
            let branch = validate::branch_name("base_branch", &branch)?;
            base_branches.push((RepositoryId::new(&reference.id), branch));
        }
        repository_ids.push(RepositoryId::new(reference.id));
    }
    let request = NewTaskRequest {
        workflow_id: WorkflowId::new(&p.workflow_id),
        step_id: p.step_id.map(StepId::new),
        title,
        description,
        repository_ids,
        base_branches,
        agent_profile_id: p.agent_profile_id.map(AgentProfileId::new),
        parent_id: p.parent_id.map(TaskId::new),
        blocked_by: p.blocked_by.into_iter().map(TaskId::new).collect(),
        agent_depth,
        start_agent: p.start_agent,
        origin: None,
        started_by,
    };
    let created = s.engine().create_task(request).await?;
    Ok(TaskCreated {
        task: TaskDto::from(&created.task),
        session: created.session.as_ref().map(SessionDto::from),
    })
}

/// Most tasks `task.needs_you` answers: a list to act on, not a board.
const NEEDS_YOU_LIMIT: i64 = 100;

/// `task.needs_you`: what waits for the developer in a workspace (issue 45 item 22: the
/// header shows other workspaces' too).
pub async fn needs_you(s: &AppState, p: ByWorkspace) -> Result<TasksNeedingYou, ApiError> {
    let workspace = WorkspaceId::new(p.workspace_id);
    s.store().get_workspace(&workspace).await?;
    let tasks = s.store().tasks_needing_you(&workspace, NEEDS_YOU_LIMIT).await?;
    Ok(TasksNeedingYou { tasks: tasks.iter().map(TaskDto::from).collect() })
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
    let edit = TaskEdit {
        title: p.title.as_deref().map(|t| validate::title("title", t)).transpose()?,
        description: p
            .description
            .as_deref()
            .map(|d| validate::description("description", d))
            .transpose()?,
        repository_ids: p
            .repository_ids
            .map(|ids| ids.into_iter().map(RepositoryId::new).collect()),
        agent_profile_id: p.agent_profile_id.map(|profile| profile.map(AgentProfileId::new)),
        parent_id: p.parent_id.map(|parent| parent.map(TaskId::new)),
        blocked_by: p.blocked_by.map(|ids| ids.into_iter().map(TaskId::new).collect()),
    };
    let task = s.engine().update_task(&TaskId::new(p.id), edit).await?;
    Ok(TaskOne { task: TaskDto::from(&task) })
}

/// Moves a task to another step of its workflow, or to another position in its own step
/// (reorder).
pub async fn move_task(s: &AppState, who: &Identity, p: TaskMove) -> Result<TaskMoved, ApiError> {
    let (id, to_step) = (TaskId::new(p.id), StepId::new(p.step_id));
    let position = p.position.map(|x| x as usize);
    let (moved, from) = s.engine().move_task(&id, &to_step, position, &who.by()).await?;
    Ok(TaskMoved { task: TaskDto::from(&moved), from_step_id: from.to_string() })
}

/// Archives a task after stopping its agents and removing its worktrees. A worktree with
/// uncommitted or untracked files is kept unless `force`; the response says which and why.
/// Branches are always kept.
pub async fn archive(s: &AppState, p: TaskRemove) -> Result<TaskArchived, ApiError> {
    let archival = s.engine().archive_task(&TaskId::new(p.id), p.force).await?;
    Ok(TaskArchived {
        task: TaskDto::from(&archival.task),
        worktrees_removed: archival.removal.removed,
        worktrees_kept: files::kept_dtos(&archival.removal.kept),
    })
}

/// Takes a task out of the archive, at the end of its step (archive's Undo). Its worktrees
/// are made again when an agent next starts; an unarchived task is announced as updated.
pub async fn unarchive(s: &AppState, p: ById) -> Result<TaskOne, ApiError> {
    let task = s.engine().unarchive_task(&TaskId::new(p.id)).await?;
    Ok(TaskOne { task: TaskDto::from(&task) })
}

/// Deletes a task after stopping its agents and removing its worktrees (branches are kept).
/// Refused with `CONFLICT` while a worktree has uncommitted or untracked files or cannot be
/// removed, unless `force`.
pub async fn delete(s: &AppState, p: TaskRemove) -> Result<TaskDeleted, ApiError> {
    match s.engine().delete_task(&TaskId::new(&p.id), p.force).await? {
        TaskDeletion::Kept(kept) => {
            let reason = kept.first().map(|k| k.reason.as_str()).unwrap_or_default();
            Err(kept_conflict(reason, &kept))
        }
        TaskDeletion::Deleted(removal) => Ok(TaskDeleted {
            deleted: true,
            id: p.id,
            worktrees_removed: removal.removed,
            worktrees_kept: files::kept_dtos(&removal.kept),
        }),
    }
}

fn kept_conflict(reason: &str, kept: &[kandev_engine::workdir::KeptWorktree]) -> ApiError {
    ApiError::conflict(format!(
        "the task was not deleted: {reason}; commit that work first, or delete the task anyway to \
         discard it"
    ))
    .with_details(json!({ "worktrees": files::kept_dtos(kept) }))
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
