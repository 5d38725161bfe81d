//! Tasks with their repository list and step history: the row, reads and writes. A task's
//! `position` is its index among the non-archived tasks of its step.

use kandev_domain::needs_you::NeedsYou;
use kandev_domain::ship::{GitSummary, PrState};
use kandev_domain::task::{Task, TaskCard, TaskState, blocker_cycle, parent_cycle, place_at};
use kandev_domain::{
    AgentProfileId, RepositoryId, SessionId, StepId, TaskId, Timestamp, WorkflowId, WorkspaceId,
};
use sqlx::FromRow;

use crate::db::Db;
use crate::sql::{Dialect, QueryBuilder};
use crate::{Result, Store, StoreError, WriteTx, workflows};

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
        coalesce(pr_state, '') FROM task_git_summaries WHERE task_id = t.id) AS git \
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
        coalesce(pr_state, '') FROM task_git_summaries WHERE task_id = t.id) AS git \
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
    /// `ahead,behind,dirty,conflicts,pr_state` from `task_git_summaries`.
    git: Option<String>,
}

/// A task's stored git summary, `ahead,behind,dirty,conflicts,pr_state`.
fn git_summary(task: &str, text: &str) -> Result<GitSummary> {
    let corrupt = || StoreError::Corrupt(format!("task {task} git summary {text:?}"));
    let parts: Vec<&str> = text.split(',').collect();
    let [ahead, behind, dirty, conflicts, pr_state] = parts[..] else { return Err(corrupt()) };
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

/// The statement of [`Store::list_tasks`] for `filter`, appended to `q`.
fn push_list(q: &mut QueryBuilder, filter: &TaskFilter) {
    push_board(q, TASK_SELECT, filter);
}

/// The statement of [`Store::list_cards`] for `filter` (as rows), appended to `q`.
fn push_cards(q: &mut QueryBuilder, filter: &TaskFilter) {
    push_board(q, CARD_SELECT, filter);
}

/// `select` over the tasks `filter` matches, in board order, with its page.
fn push_board(q: &mut QueryBuilder, select: &str, filter: &TaskFilter) {
    push_board_filter(q, select, filter);
    q.push(" ORDER BY ").push(BOARD_ORDER);
    q.push(" LIMIT ").push_bind(filter.limit).push(" OFFSET ").push_bind(filter.offset);
}

/// [`push_board`] without its order and page: every card the filter matches, in no order.
fn push_board_filter(q: &mut QueryBuilder, select: &str, filter: &TaskFilter) {
    q.push(select).push(" JOIN workflow_steps s ON s.id = t.step_id WHERE 1 = 1");
    if let Some(id) = &filter.workflow_id {
        q.push(" AND t.workflow_id = ").push_bind(id.as_str());
    }
    if let Some(id) = &filter.step_id {
        q.push(" AND t.step_id = ").push_bind(id.as_str());
    }
    if let Some(text) = &filter.query {
        let pattern = like_pattern(text);
        q.push(" AND (t.title LIKE ").push_bind(pattern.as_str()).push(" ESCAPE '\\'");
        q.push(" OR t.description LIKE ").push_bind(pattern).push(" ESCAPE '\\')");
    }
    if !filter.include_archived {
        q.push(" AND t.archived_at IS NULL");
    }
}

/// The order of a board: by step, then position in the step.
const BOARD_ORDER: &str = "s.position, t.position, t.created_at, t.id";

/// [`push_cards`] as one row of one value on SQLite: a JSON array with one `[step position,
/// created_at, card]` triple per card, `card` an array of [`CardRow`]'s fields in its order.
/// sqlx copies every value of every row it hands over, one allocation each on the
/// connection's thread, freed on the async workers: for a 2,000-card board those 26,000
/// copies, and the allocator's locks they contended on, were two thirds of `task.list`'s
/// CPU (docs/performance.md). The statement neither orders nor pages: the
/// reader puts the cards in board order from the triples and takes the page
/// ([`cards_from_json`]). An aggregate's input order is not SQLite's promise anyway, and
/// SQLite's sort of the wide card rows was a third of the statement.
/// With `LIMIT` SQLite still built every matching card before sorting (its sorter holds
/// whole rows); without it every matching card is also written as JSON and parsed, so a
/// small page of a large filter costs a little more than it did, and a whole board less.
fn push_cards_json(q: &mut QueryBuilder, filter: &TaskFilter) {
    q.push(
        "SELECT json_group_array(json_array(step_position, created_at, json_array(id, \
         workflow_id, step_id, title, state, needs_you, position, primary_session_id, \
         archived_at, parent_id, blocked_by, repository_ids, git))) FROM (",
    );
    // The card's columns with the two the reader sorts by in front.
    q.push("SELECT s.position AS step_position, t.created_at AS created_at, ");
    push_board_filter(q, CARD_SELECT.trim_start_matches("SELECT "), filter);
    q.push(")");
}

/// The page `filter` asks for of a [`push_cards_json`] answer, in board order
/// ([`BOARD_ORDER`]: step, position, creation, id; ids compare bytewise in both, as SQLite's
/// `BINARY` collation does).
fn cards_from_json(text: &str, filter: &TaskFilter) -> Result<Vec<CardRow>> {
    let mut keyed: Vec<(i64, i64, CardRow)> =
        serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("board cards: {e}")))?;
    keyed.sort_unstable_by(|(step_a, created_a, a), (step_b, created_b, b)| {
        (step_a, a.position, created_a, &a.id).cmp(&(step_b, b.position, created_b, &b.id))
    });
    // Negative bounds are refused by the API; here they read as SQLite reads them (a
    // negative limit is no limit, a negative offset none).
    let offset = usize::try_from(filter.offset).unwrap_or(0);
    let limit = usize::try_from(filter.limit).unwrap_or(usize::MAX);
    Ok(keyed.into_iter().skip(offset).take(limit).map(|(_, _, row)| row).collect())
}

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

    pub async fn get_task(&self, id: &TaskId) -> Result<Task> {
        get(self.db(), id.as_str()).await
    }

    /// Tasks in board order; see [`TaskFilter`].
    pub async fn list_tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>> {
        let mut q = QueryBuilder::new(self.dialect(), "");
        push_list(&mut q, filter);
        let rows: Vec<TaskRow> = q.build_query_as().fetch_all(&self.read).await?;
        rows.into_iter().map(Task::try_from).collect()
    }

    /// [`Store::list_tasks`] as board cards (`task.list`): only what a card shows is read.
    /// On SQLite the cards come as one JSON value ([`push_cards_json`]); PostgreSQL's rows
    /// are decoded from its wire format without that per-value copy, and stay rows.
    pub async fn list_cards(&self, filter: &TaskFilter) -> Result<Vec<TaskCard>> {
        let rows = match self.dialect() {
            Dialect::Sqlite => {
                let mut q = QueryBuilder::new(Dialect::Sqlite, "");
                push_cards_json(&mut q, filter);
                let json: Option<String> =
                    q.build_query_scalar().fetch_optional(&self.read).await?;
                cards_from_json(json.as_deref().unwrap_or("[]"), filter)?
            }
            Dialect::Postgres => return self.list_cards_by_rows(filter).await,
        };
        rows.into_iter().map(TaskCard::try_from).collect()
    }

    /// [`Store::list_cards`] read as one row per card on every engine: PostgreSQL's read, and
    /// what the SQLite read must equal
    /// (`i15_a4_the_board_read_as_one_value_equals_the_board_read_row_by_row`).
    #[doc(hidden)]
    pub async fn list_cards_by_rows(&self, filter: &TaskFilter) -> Result<Vec<TaskCard>> {
        let mut q = QueryBuilder::new(self.dialect(), "");
        push_cards(&mut q, filter);
        let rows: Vec<CardRow> = q.build_query_as().fetch_all(&self.read).await?;
        rows.into_iter().map(TaskCard::try_from).collect()
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

// ---------------------------------------------------------------- writes

impl WriteTx {
    /// Records a task's git summary (what its card shows), replacing the last one.
    pub async fn set_git_summary(&mut self, task_id: &TaskId, summary: &GitSummary) -> Result<()> {
        crate::sql::query(
            "INSERT INTO task_git_summaries (task_id, ahead, behind, dirty, conflicts, pr_state, \
             updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (task_id) DO UPDATE SET \
             ahead = excluded.ahead, behind = excluded.behind, dirty = excluded.dirty, \
             conflicts = excluded.conflicts, pr_state = excluded.pr_state, \
             updated_at = excluded.updated_at",
        )
        .bind(task_id.as_str())
        .bind(i64::from(summary.ahead))
        .bind(i64::from(summary.behind))
        .bind(i64::from(summary.dirty))
        .bind(i64::from(summary.conflicts))
        .bind(summary.pr_state.map(PrState::as_str))
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    pub async fn get_task(&mut self, id: &TaskId) -> Result<Task> {
        get(self.db(), id.as_str()).await
    }

    /// How many unarchived tasks `step_id` holds (the position at its end).
    async fn open_tasks_in(&mut self, step_id: &StepId) -> Result<i64> {
        let n = crate::sql::query_scalar(
            "SELECT COUNT(*) FROM tasks WHERE step_id = ? AND archived_at IS NULL",
        )
        .bind(step_id.as_str())
        .fetch_one(self.conn())
        .await?;
        Ok(n)
    }

    /// Creates a task at the end of its step and records its entry in the step history.
    pub async fn insert_task(&mut self, new: &NewTask, actor: &str) -> Result<Task> {
        let workspace_id = workflows::workspace_of(self.db(), &new.workflow_id).await?;
        workflows::check_step_of(self.db(), &new.step_id, &new.workflow_id).await?;
        let position = self.open_tasks_in(&new.step_id).await?;
        let (id, now) = (self.new_id(), self.now().millis());
        crate::sql::query(
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
        crate::sql::query(
            "UPDATE tasks SET title = ?, description = ?, state = ?, needs_you = ?, \
             agent_profile_id = ?, updated_at = ? WHERE id = ?",
        )
        .bind(patch.title.as_ref().unwrap_or(&current.title))
        .bind(patch.description.as_ref().unwrap_or(&current.description))
        .bind(patch.state.unwrap_or(current.state).as_str())
        .bind(patch.needs_you.unwrap_or(current.needs_you).map(NeedsYou::as_str))
        .bind(profile.as_ref().map(|p| p.as_str()))
        .bind(now)
        .bind(id.as_str())
        .execute(self.conn())
        .await?;
        if let Some(repository_ids) = &patch.repository_ids {
            crate::sql::query("DELETE FROM task_repositories WHERE task_id = ?")
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
            crate::sql::query(
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
        workflows::check_step_of(self.db(), to_step, &task.workflow_id).await?;
        let others: Vec<String> = crate::sql::query_scalar(
            "SELECT id FROM tasks WHERE step_id = ? AND id != ? AND archived_at IS NULL \
             ORDER BY position, created_at, id",
        )
        .bind(to_step.as_str())
        .bind(id.as_str())
        .fetch_all(self.conn())
        .await?;
        let order = place_at(others, id.as_str().to_owned(), position);
        let now = self.now().millis();
        crate::sql::query("UPDATE tasks SET step_id = ?, updated_at = ? WHERE id = ?")
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

    async fn write_task_order(&mut self, order: &[String]) -> Result<()> {
        for (position, task_id) in order.iter().enumerate() {
            crate::sql::query("UPDATE tasks SET position = ? WHERE id = ? AND position != ?")
                .bind(position as i64)
                .bind(task_id)
                .bind(position as i64)
                .execute(self.conn())
                .await?;
        }
        Ok(())
    }

    async fn renumber_step(&mut self, step_id: &StepId) -> Result<()> {
        let order: Vec<String> = crate::sql::query_scalar(
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
        crate::sql::query(
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
        crate::sql::query("UPDATE tasks SET archived_at = ?, updated_at = ? WHERE id = ?")
            .bind(now)
            .bind(now)
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        self.renumber_step(&task.step_id).await?;
        self.get_task(id).await
    }

    /// Takes a task out of the archive (issue 14: archive's Undo), at the end of its step.
    pub async fn unarchive_task(&mut self, id: &TaskId) -> Result<Task> {
        let task = self.get_task(id).await?;
        if task.archived_at.is_none() {
            return Ok(task);
        }
        let position = self.open_tasks_in(&task.step_id).await?;
        crate::sql::query(
            "UPDATE tasks SET archived_at = NULL, position = ?, updated_at = ? WHERE id = ?",
        )
        .bind(position)
        .bind(self.now().millis())
        .bind(id.as_str())
        .execute(self.conn())
        .await?;
        self.get_task(id).await
    }

    /// Deletes a task; returns it for publication.
    pub async fn delete_task(&mut self, id: &TaskId) -> Result<Task> {
        let task = self.get_task(id).await?;
        crate::sql::query("DELETE FROM tasks WHERE id = ?")
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        self.renumber_step(&task.step_id).await?;
        Ok(task)
    }

    /// Sets a task's parent (`Some(None)` clears it) and its blockers (`Some` replaces them),
    /// refusing tasks of another workspace, the task itself and cycles, which the error names.
    pub async fn set_task_links(
        &mut self,
        id: &TaskId,
        parent: Option<Option<&TaskId>>,
        blockers: Option<&[TaskId]>,
    ) -> Result<()> {
        let task = self.get_task(id).await?;
        if let Some(parent) = parent {
            if let Some(parent) = parent {
                let found = self.linked_task("parent_id", &task, parent).await?;
                let rows: Vec<(String, String)> = crate::sql::query_as(
                    "SELECT id, parent_id FROM tasks WHERE workspace_id = ? AND parent_id IS NOT NULL",
                )
                .bind(task.workspace_id.as_str())
                .fetch_all(self.conn())
                .await?;
                let parents = rows.into_iter().map(|(t, p)| (TaskId::new(t), TaskId::new(p)));
                let parents = parents.filter(|(t, _)| t != id).collect();
                if let Some(cycle) = parent_cycle(&parents, id, &found.id) {
                    let shown = self.cycle_text(&cycle).await?;
                    return Err(StoreError::Invalid(format!(
                        "parent_id would make a cycle of subtasks: {shown}"
                    )));
                }
            }
            crate::sql::query("UPDATE tasks SET parent_id = ? WHERE id = ?")
                .bind(parent.map(|p| p.as_str()))
                .bind(id.as_str())
                .execute(self.conn())
                .await?;
        }
        if let Some(blockers) = blockers {
            let mut unique: Vec<TaskId> = vec![];
            for blocker in blockers {
                let found = self.linked_task("blocked_by", &task, blocker).await?;
                if !unique.contains(&found.id) {
                    unique.push(found.id);
                }
            }
            let rows: Vec<(String, String)> = crate::sql::query_as(
                "SELECT b.task_id, b.blocker_id FROM task_blockers b \
                 JOIN tasks t ON t.id = b.task_id WHERE t.workspace_id = ?",
            )
            .bind(task.workspace_id.as_str())
            .fetch_all(self.conn())
            .await?;
            let edges: Vec<(TaskId, TaskId)> =
                rows.into_iter().map(|(t, b)| (TaskId::new(t), TaskId::new(b))).collect();
            if let Some(cycle) = blocker_cycle(&edges, id, &unique) {
                let shown = self.cycle_text(&cycle).await?;
                return Err(StoreError::Invalid(format!(
                    "blocked_by would make a dependency cycle: {shown}; remove one of these \
                     dependencies"
                )));
            }
            crate::sql::query("DELETE FROM task_blockers WHERE task_id = ?")
                .bind(id.as_str())
                .execute(self.conn())
                .await?;
            for blocker in &unique {
                crate::sql::query("INSERT INTO task_blockers (task_id, blocker_id) VALUES (?, ?)")
                    .bind(id.as_str())
                    .bind(blocker.as_str())
                    .execute(self.conn())
                    .await?;
            }
        }
        Ok(())
    }

    /// A task named in `field` of `task`: another task of the same workspace.
    async fn linked_task(&mut self, field: &str, task: &Task, other: &TaskId) -> Result<Task> {
        if other == &task.id {
            return Err(StoreError::Invalid(format!("{field}: a task cannot name itself")));
        }
        let found = match self.get_task(other).await {
            Ok(found) => found,
            Err(StoreError::NotFound { .. }) => {
                return Err(StoreError::Invalid(format!("{field}: there is no task {other}")));
            }
            Err(err) => return Err(err),
        };
        if found.workspace_id != task.workspace_id {
            return Err(StoreError::Invalid(format!(
                "{field}: task {other} belongs to another workspace"
            )));
        }
        Ok(found)
    }

    /// `"a" → "b" → "a"`: a cycle by the tasks' titles.
    async fn cycle_text(&mut self, cycle: &[TaskId]) -> Result<String> {
        let mut names = vec![];
        for id in cycle {
            let title = match self.get_task(id).await {
                Ok(task) => format!("{:?} ({id})", task.title),
                Err(_) => id.to_string(),
            };
            names.push(title);
        }
        Ok(names.join(" → "))
    }

    /// The tasks that name `id` as parent or blocker (they change when it is deleted).
    pub async fn dependents(&mut self, id: &TaskId) -> Result<Vec<TaskId>> {
        let rows: Vec<String> = crate::sql::query_scalar(
            "SELECT task_id FROM task_blockers WHERE blocker_id = ? \
             UNION SELECT id FROM tasks WHERE parent_id = ?",
        )
        .bind(id.as_str())
        .bind(id.as_str())
        .fetch_all(self.conn())
        .await?;
        Ok(rows.into_iter().map(TaskId::new).collect())
    }

    /// Records how many agents in a row led to a task ([`Store::task_agent_depth`]).
    pub async fn set_task_agent_depth(&mut self, id: &TaskId, depth: u32) -> Result<()> {
        crate::sql::query("UPDATE tasks SET agent_depth = ? WHERE id = ?")
            .bind(i64::from(depth))
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Marks (or clears) a task's auto-start as waiting for its blockers.
    pub async fn set_start_waiting(&mut self, id: &TaskId, waiting: bool) -> Result<()> {
        crate::sql::query("UPDATE tasks SET start_waiting = ? WHERE id = ?")
            .bind(i64::from(waiting))
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Clears the waiting auto-start of a task; `true` when it was waiting (so exactly one
    /// caller runs it).
    pub async fn take_start_waiting(&mut self, id: &TaskId) -> Result<bool> {
        let done = crate::sql::query(
            "UPDATE tasks SET start_waiting = 0 WHERE id = ? AND start_waiting = 1",
        )
        .bind(id.as_str())
        .execute(self.conn())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Makes `session_id` the task's primary session (a step with its own agent profile).
    pub async fn set_primary_session(
        &mut self,
        task_id: &TaskId,
        session_id: &SessionId,
    ) -> Result<()> {
        crate::sql::query("UPDATE tasks SET primary_session_id = ?, updated_at = ? WHERE id = ?")
            .bind(session_id.as_str())
            .bind(self.now().millis())
            .bind(task_id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Makes a new session the task's primary session if the task has none yet.
    pub(crate) async fn adopt_primary_session(
        &mut self,
        task_id: &TaskId,
        session_id: &str,
    ) -> Result<()> {
        crate::sql::query("UPDATE tasks SET primary_session_id = ?, updated_at = ? WHERE id = ? AND primary_session_id IS NULL")
            .bind(session_id)
            .bind(self.now().millis())
            .bind(task_id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// After `deleted` was deleted: if it was the task's primary session, the task's oldest
    /// remaining session becomes primary (none when there is none).
    pub(crate) async fn replace_primary_session(
        &mut self,
        task_id: &TaskId,
        deleted: &SessionId,
    ) -> Result<()> {
        let now = self.now().millis();
        crate::sql::query(
            "UPDATE tasks SET primary_session_id = (SELECT id FROM sessions WHERE task_id = tasks.id \
             ORDER BY created_at LIMIT 1), updated_at = ? WHERE id = ? AND primary_session_id = ?",
        )
        .bind(now)
        .bind(task_id.as_str())
        .bind(deleted.as_str())
        .execute(self.conn())
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use kandev_domain::WorkflowId;

    use super::{BOARD_ORDER, TaskFilter, like_pattern, push_cards, push_cards_json, push_list};
    use crate::Store;
    use crate::sql::{Dialect, QueryBuilder};

    #[test]
    fn like_pattern_escapes_wildcards() {
        assert_eq!(like_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
    }

    /// A board of workflow `w`, as the board reads ask for it.
    fn board_w() -> TaskFilter {
        TaskFilter { workflow_id: Some(WorkflowId::new("w")), limit: 2000, ..TaskFilter::default() }
    }

    /// A board statement for [`board_w`] on SQLite, as the store builds and binds it.
    fn board_statement(push: fn(&mut QueryBuilder, &TaskFilter)) -> QueryBuilder {
        let mut q = QueryBuilder::new(Dialect::Sqlite, "");
        push(&mut q, &board_w());
        q
    }

    /// SQLite's plan of a board statement for [`board_w`], bound as the store binds it.
    async fn plan_of(store: &Store, push: fn(&mut QueryBuilder, &TaskFilter)) -> String {
        let mut q = QueryBuilder::new(Dialect::Sqlite, "EXPLAIN QUERY PLAN ");
        push(&mut q, &board_w());
        let rows: Vec<(i64, i64, i64, String)> =
            q.build_query_as().fetch_all(&store.read).await.unwrap();
        rows.into_iter().map(|r| r.3).collect::<Vec<_>>().join("\n")
    }

    #[tokio::test]
    async fn i15_a4_the_board_list_reads_repositories_in_order_from_their_covering_index() {
        let store = Store::in_memory().await.unwrap();
        let plan = plan_of(&store, push_list).await;
        assert!(plan.contains("COVERING INDEX task_repositories_in_order"), "{plan}");
        assert!(plan.contains("tasks_by_board"), "{plan}");
        // One sort for the whole board (by step position), none per task.
        assert_eq!(plan.matches("TEMP B-TREE").count(), 1, "{plan}");
    }

    /// Issue 15 (P3): `task.list` reads the cards with the board list's plan (one index
    /// search of the board, the covering index per card, one sort) and none of the columns a
    /// card does not show.
    #[tokio::test]
    async fn i15_a4_the_card_list_has_the_board_lists_plan_and_reads_no_description() {
        let store = Store::in_memory().await.unwrap();
        let cards = plan_of(&store, push_cards).await;
        assert_eq!(cards, plan_of(&store, push_list).await, "the same plan");
        let statement = board_statement(push_cards);
        let select = statement.sql();
        let columns = &select[..select.find(" FROM tasks t").unwrap()];
        for unread in
            ["description", "agent_profile_id", "workspace_id", "created_at", "updated_at"]
        {
            assert!(!columns.contains(unread), "{unread} is not read: {columns}");
        }
    }

    /// Issue 15 (P3): on SQLite `task.list` reads the cards as one JSON
    /// value with the same searches and no sort at all: the store orders and pages them.
    #[tokio::test]
    async fn i15_a4_the_sqlite_card_read_leaves_the_sort_to_the_store() {
        let store = Store::in_memory().await.unwrap();
        let statement = board_statement(push_cards_json);
        let sql = statement.sql();
        assert!(!sql.contains("LIMIT") && !sql.contains(BOARD_ORDER), "{sql}");
        let plan = plan_of(&store, push_cards_json).await;
        assert!(plan.contains("tasks_by_board"), "{plan}");
        assert!(plan.contains("COVERING INDEX task_repositories_in_order"), "{plan}");
        assert_eq!(plan.matches("TEMP B-TREE").count(), 0, "{plan}");
    }
}
