//! Tasks with their repository list and step history: the rows and reads here, the board
//! list's statement in `board.rs`, the writes in `write.rs`. A task's `position` is its
//! index among the non-archived tasks of its step.

mod board;
mod origins;
mod write;

use kandev_domain::intake::OriginLink;
use kandev_domain::needs_you::NeedsYou;
use kandev_domain::ship::{GitSummary, PrState};
use kandev_domain::task::{Task, TaskCard, TaskState};
use kandev_domain::{
    AgentProfileId, RepositoryId, SessionId, StepId, TaskId, Timestamp, WorkflowId, WorkspaceId,
};
use sqlx::FromRow;

use crate::db::Db;
use crate::sql::QueryBuilder;
use crate::{Result, Store, StoreError};

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
    pub needs_you: Option<Option<NeedsYou>>,
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

/// One entry of a task's step history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepChange {
    pub from_step_id: Option<StepId>,
    pub to_step_id: StepId,
    pub trigger: String,
    pub actor: String,
    pub at: kandev_domain::Timestamp,
}

// ---------------------------------------------------------------- rows

const TASK_SELECT: &str = "SELECT t.id, t.workspace_id, t.workflow_id, t.step_id, t.title, \
    t.description, t.state, t.needs_you, t.position, t.agent_profile_id, t.primary_session_id, \
    t.archived_at, t.created_at, t.updated_at, t.parent_id, \
    (SELECT string_agg(blocker_id, ',') FROM \
        (SELECT blocker_id FROM task_blockers WHERE task_id = t.id ORDER BY blocker_id) AS b) \
        AS blocked_by, \
    (SELECT string_agg(repository_id, ',') FROM \
        (SELECT repository_id FROM task_repositories WHERE task_id = t.id ORDER BY position) AS r) \
        AS repository_ids, \
    (SELECT ahead || ',' || behind || ',' || dirty || ',' || conflicts || ',' || \
        coalesce(pr_state, '') || ',' || merged FROM task_git_summaries WHERE task_id = t.id) \
        AS git, \
    (SELECT external_id FROM task_origins WHERE task_id = t.id LIMIT 1) AS origin_id, \
    (SELECT url FROM task_origins WHERE task_id = t.id LIMIT 1) AS origin_url \
    FROM tasks t";

/// The columns a board card shows ([`TaskCard`]), with the same related ids as
/// [`TASK_SELECT`]: no description, profile or timestamps to read and decode.
const CARD_SELECT: &str = "SELECT t.id, t.workflow_id, t.step_id, t.title, t.state, \
    t.needs_you, t.position, t.primary_session_id, t.archived_at, t.parent_id, \
    (SELECT string_agg(blocker_id, ',') FROM \
        (SELECT blocker_id FROM task_blockers WHERE task_id = t.id ORDER BY blocker_id) AS b) \
        AS blocked_by, \
    (SELECT string_agg(repository_id, ',') FROM \
        (SELECT repository_id FROM task_repositories WHERE task_id = t.id ORDER BY position) AS r) \
        AS repository_ids, \
    (SELECT ahead || ',' || behind || ',' || dirty || ',' || conflicts || ',' || \
        coalesce(pr_state, '') || ',' || merged FROM task_git_summaries WHERE task_id = t.id) \
        AS git \
    FROM tasks t";

/// Also read from a JSON array of its fields in this order ([`Store::list_cards`] on SQLite).
#[derive(FromRow, serde::Deserialize)]
struct CardRow {
    id: String,
    workflow_id: String,
    step_id: String,
    title: String,
    state: String,
    needs_you: Option<String>,
    position: i64,
    primary_session_id: Option<String>,
    archived_at: Option<i64>,
    parent_id: Option<String>,
    blocked_by: Option<String>,
    repository_ids: Option<String>,
    git: Option<String>,
}

impl TryFrom<CardRow> for TaskCard {
    type Error = StoreError;

    fn try_from(r: CardRow) -> Result<TaskCard> {
        let state = TaskState::parse(&r.state)
            .ok_or_else(|| StoreError::Corrupt(format!("task {} state {:?}", r.id, r.state)))?;
        let needs_you = needs_you(&r.id, r.needs_you.as_deref())?;
        let git = r.git.as_deref().map(|g| git_summary(&r.id, g)).transpose()?;
        Ok(TaskCard {
            git,
            id: TaskId::new(r.id),
            workflow_id: WorkflowId::new(r.workflow_id),
            step_id: StepId::new(r.step_id),
            title: r.title,
            state,
            needs_you,
            position: r.position.try_into().unwrap_or(0),
            repository_ids: ids(r.repository_ids.as_deref()).map(RepositoryId::new).collect(),
            primary_session_id: r.primary_session_id.map(SessionId::new),
            parent_id: r.parent_id.map(TaskId::new),
            blocked_by: ids(r.blocked_by.as_deref()).map(TaskId::new).collect(),
            archived_at: r.archived_at.map(Timestamp),
        })
    }
}

/// The ids of a `group_concat` (none for `NULL` or empty).
fn ids(text: Option<&str>) -> impl Iterator<Item = &str> {
    text.filter(|s| !s.is_empty()).into_iter().flat_map(|s| s.split(','))
}

/// A stored `needs_you`, parsed.
fn needs_you(task: &str, text: Option<&str>) -> Result<Option<NeedsYou>> {
    text.map(|n| {
        NeedsYou::parse(n)
            .ok_or_else(|| StoreError::Corrupt(format!("task {task} needs_you {n:?}")))
    })
    .transpose()
}

#[derive(FromRow)]
struct TaskRow {
    id: String,
    workspace_id: String,
    workflow_id: String,
    step_id: String,
    title: String,
    description: String,
    state: String,
    needs_you: Option<String>,
    position: i64,
    agent_profile_id: Option<String>,
    primary_session_id: Option<String>,
    archived_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
    /// Comma-separated repository ids in order (from `group_concat`).
    repository_ids: Option<String>,
    parent_id: Option<String>,
    /// Comma-separated blocker ids (from `group_concat`).
    blocked_by: Option<String>,
    /// `ahead,behind,dirty,conflicts,pr_state,merged` from `task_git_summaries`.
    git: Option<String>,
    /// `task_origins`: what intake made it from.
    origin_id: Option<String>,
    origin_url: Option<String>,
}

/// A task's stored git summary, `ahead,behind,dirty,conflicts,pr_state,merged`.
fn git_summary(task: &str, text: &str) -> Result<GitSummary> {
    let corrupt = || StoreError::Corrupt(format!("task {task} git summary {text:?}"));
    let parts: Vec<&str> = text.split(',').collect();
    let [ahead, behind, dirty, conflicts, pr_state, merged] = parts[..] else {
        return Err(corrupt());
    };
    let number = |p: &str| p.parse::<u32>().map_err(|_| corrupt());
    Ok(GitSummary {
        ahead: number(ahead)?,
        behind: number(behind)?,
        dirty: number(dirty)?,
        conflicts: number(conflicts)?,
        pr_state: match pr_state {
            "" => None,
            state => Some(PrState::parse(state).ok_or_else(corrupt)?),
        },
        merged: number(merged)? == 1,
    })
}

impl TryFrom<TaskRow> for Task {
    type Error = StoreError;

    fn try_from(r: TaskRow) -> Result<Task> {
        let state = TaskState::parse(&r.state)
            .ok_or_else(|| StoreError::Corrupt(format!("task {} state {:?}", r.id, r.state)))?;
        let needs_you = needs_you(&r.id, r.needs_you.as_deref())?;
        let repository_ids = ids(r.repository_ids.as_deref()).map(RepositoryId::new).collect();
        let git = r.git.as_deref().map(|g| git_summary(&r.id, g)).transpose()?;
        Ok(Task {
            git,
            id: TaskId::new(r.id),
            workspace_id: WorkspaceId::new(r.workspace_id),
            workflow_id: WorkflowId::new(r.workflow_id),
            step_id: StepId::new(r.step_id),
            title: r.title,
            description: r.description,
            state,
            needs_you,
            position: r.position.try_into().unwrap_or(0),
            repository_ids,
            agent_profile_id: r.agent_profile_id.map(AgentProfileId::new),
            primary_session_id: r.primary_session_id.map(SessionId::new),
            parent_id: r.parent_id.map(TaskId::new),
            blocked_by: ids(r.blocked_by.as_deref()).map(TaskId::new).collect(),
            origin: r.origin_id.map(|external_id| OriginLink {
                external_id,
                url: r.origin_url.unwrap_or_default(),
            }),
            archived_at: r.archived_at.map(Timestamp),
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        })
    }
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

// ---------------------------------------------------------------- reads

/// The task `id`, or `NotFound`.
async fn get(mut db: Db<'_>, id: &str) -> Result<Task> {
    let mut q = QueryBuilder::new(db.dialect(), TASK_SELECT);
    q.push(" WHERE t.id = ").push_bind(id);
    q.build_query_as::<TaskRow>()
        .fetch_optional(&mut db)
        .await?
        .ok_or_else(|| StoreError::not_found("task", id))
        .and_then(Task::try_from)
}

/// How many tasks a step holds, archived ones included.
pub(crate) async fn count_in_step(mut db: Db<'_>, step_id: &StepId) -> Result<i64> {
    let count = crate::sql::query_scalar("SELECT COUNT(*) FROM tasks WHERE step_id = ?")
        .bind(step_id.as_str())
        .fetch_one(&mut db)
        .await?;
    Ok(count)
}

impl Store {
    /// How many agents in a row led to task `id` (`tasks.agent_depth`): 0 for a task a
    /// person created, the creating agent's task's depth + 1 for one an agent created.
    pub async fn task_agent_depth(&self, id: &TaskId) -> Result<u32> {
        let depth: Option<i64> =
            crate::sql::query_scalar("SELECT agent_depth FROM tasks WHERE id = ?")
                .bind(id.as_str())
                .fetch_optional(&self.read)
                .await?;
        let depth = depth.ok_or_else(|| StoreError::not_found("task", id.as_str()))?;
        Ok(u32::try_from(depth).unwrap_or(u32::MAX))
    }

    /// The blockers of `id` that are not done: not archived and not in their workflow's last
    /// step (by position).
    pub async fn open_blockers(&self, id: &TaskId) -> Result<Vec<TaskId>> {
        let rows: Vec<String> = crate::sql::query_scalar(
            "SELECT b.id FROM task_blockers tb JOIN tasks b ON b.id = tb.blocker_id \
             WHERE tb.task_id = ? AND b.archived_at IS NULL AND b.step_id <> \
             (SELECT s.id FROM workflow_steps s WHERE s.workflow_id = b.workflow_id \
              ORDER BY s.position DESC LIMIT 1)",
        )
        .bind(id.as_str())
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(TaskId::new).collect())
    }

    /// Tasks whose auto-start waits and that `blocker` blocks.
    pub async fn waiting_on(&self, blocker: &TaskId) -> Result<Vec<TaskId>> {
        let rows: Vec<String> = crate::sql::query_scalar(
            "SELECT t.id FROM tasks t JOIN task_blockers tb ON tb.task_id = t.id \
             WHERE tb.blocker_id = ? AND t.start_waiting = 1",
        )
        .bind(blocker.as_str())
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(TaskId::new).collect())
    }

    /// The subtasks of a task, in board order.
    pub async fn subtasks(&self, parent: &TaskId) -> Result<Vec<Task>> {
        let mut q = QueryBuilder::new(self.dialect(), TASK_SELECT);
        q.push(" WHERE t.parent_id = ").push_bind(parent.as_str());
        q.push(" ORDER BY t.created_at, t.id");
        let rows: Vec<TaskRow> = q.build_query_as().fetch_all(&self.read).await?;
        rows.into_iter().map(Task::try_from).collect()
    }

    /// The tasks of a workspace that need their developer (not archived), the longest
    /// waiting first; at most `limit`.
    pub async fn tasks_needing_you(
        &self,
        workspace: &WorkspaceId,
        limit: i64,
    ) -> Result<Vec<Task>> {
        let mut q = QueryBuilder::new(self.dialect(), TASK_SELECT);
        q.push(" WHERE t.workspace_id = ").push_bind(workspace.as_str());
        q.push(" AND t.needs_you IS NOT NULL AND t.archived_at IS NULL");
        q.push(" ORDER BY t.updated_at, t.id LIMIT ").push_bind(limit);
        let rows: Vec<TaskRow> = q.build_query_as().fetch_all(&self.read).await?;
        rows.into_iter().map(Task::try_from).collect()
    }

    pub async fn get_task(&self, id: &TaskId) -> Result<Task> {
        get(self.db(), id.as_str()).await
    }

    /// A task's step history, oldest first.
    pub async fn step_history(&self, task_id: &TaskId) -> Result<Vec<StepChange>> {
        let rows: Vec<(Option<String>, String, String, String, i64)> = crate::sql::query_as(
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
