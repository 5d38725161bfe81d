//! The git worktrees made for tasks: which repository, where, on which branch, from which
//! base commit, whether its setup script has run, and when it was removed.

use kandev_domain::{RepositoryId, SessionId, TaskId, Timestamp};
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx};

/// A task's worktree as recorded. Live while `removed_at` is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeRecord {
    pub id: String,
    pub task_id: TaskId,
    /// `None` once the repository was unregistered.
    pub repository_id: Option<RepositoryId>,
    /// The repository's main checkout when the worktree was made.
    pub repository_path: String,
    pub path: String,
    pub branch: String,
    /// Full sha the task branch started from.
    pub base_commit: String,
    /// The repository's setup script ran successfully in it (or there was none).
    pub setup_done: bool,
    pub created_at: Timestamp,
    pub removed_at: Option<Timestamp>,
    /// The executor whose host it was made on (`None`: this server's host).
    pub executor_id: Option<String>,
    /// The task branch's head that `task.merge` last landed on the base branch.
    pub merged_head: Option<String>,
    /// The attempt it belongs to (issue 48); `None`: the task's own worktree.
    pub session_id: Option<SessionId>,
}

impl WorktreeRecord {
    /// Whether it is the task's own (not an attempt's).
    pub fn is_task_worktree(&self) -> bool {
        self.session_id.is_none()
    }
}

/// A worktree to record.
#[derive(Debug, Clone)]
pub struct NewWorktree {
    pub task_id: TaskId,
    pub repository_id: RepositoryId,
    pub repository_path: String,
    pub path: String,
    pub branch: String,
    pub base_commit: String,
    /// The executor whose host it is made on (`None`: this server's host).
    pub executor_id: Option<String>,
    /// The attempt it is made for; `None`: the task's own.
    pub session_id: Option<SessionId>,
}

#[derive(FromRow)]
struct WorktreeRow {
    id: String,
    task_id: String,
    repository_id: Option<String>,
    repository_path: String,
    path: String,
    branch: String,
    base_commit: String,
    setup_done_at: Option<i64>,
    created_at: i64,
    removed_at: Option<i64>,
    executor_id: Option<String>,
    merged_head: Option<String>,
    session_id: Option<String>,
}

impl From<WorktreeRow> for WorktreeRecord {
    fn from(r: WorktreeRow) -> Self {
        WorktreeRecord {
            id: r.id,
            task_id: TaskId::new(r.task_id),
            repository_id: r.repository_id.map(RepositoryId::new),
            repository_path: r.repository_path,
            path: r.path,
            branch: r.branch,
            base_commit: r.base_commit,
            setup_done: r.setup_done_at.is_some(),
            created_at: Timestamp(r.created_at),
            removed_at: r.removed_at.map(Timestamp),
            executor_id: r.executor_id,
            merged_head: r.merged_head,
            session_id: r.session_id.map(SessionId::new),
        }
    }
}

/// A task's live worktrees, oldest first.
/// The titles of the tasks with live worktrees on `executor` (at most a few, for a message).
pub(crate) async fn titles_of_tasks_on_executor(
    mut db: Db<'_>,
    executor: &str,
) -> Result<Vec<String>> {
    Ok(crate::sql::query_scalar::<String>(
        "SELECT DISTINCT t.title FROM worktrees w JOIN tasks t ON t.id = w.task_id \
         WHERE w.executor_id = ? AND w.removed_at IS NULL ORDER BY t.title LIMIT 5",
    )
    .bind(executor)
    .fetch_all(&mut db)
    .await?)
}

async fn live(mut db: Db<'_>, task_id: &str) -> Result<Vec<WorktreeRecord>> {
    let rows = crate::sql::query_as::<WorktreeRow>(
        "SELECT * FROM worktrees WHERE task_id = ? AND removed_at IS NULL ORDER BY created_at, id",
    )
    .bind(task_id)
    .fetch_all(&mut db)
    .await?;
    Ok(rows.into_iter().map(WorktreeRecord::from).collect())
}

/// The worktree record `id`, or `NotFound`.
async fn get(mut db: Db<'_>, id: &str) -> Result<WorktreeRecord> {
    crate::sql::query_as::<WorktreeRow>("SELECT * FROM worktrees WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut db)
        .await?
        .map(WorktreeRecord::from)
        .ok_or_else(|| StoreError::not_found("worktree", id))
}

impl Store {
    /// The live (not removed) worktrees of a task, its attempts' included, oldest first.
    pub async fn live_worktrees(&self, task_id: &TaskId) -> Result<Vec<WorktreeRecord>> {
        live(self.db(), task_id.as_str()).await
    }

    /// The branch of the task's newest worktree of `repository_id`, live or removed (not an
    /// attempt's): the branch that is the task's own when its worktree is made again.
    pub async fn last_worktree_branch(
        &self,
        task_id: &TaskId,
        repository_id: &RepositoryId,
    ) -> Result<Option<String>> {
        let branch = crate::sql::query_scalar::<String>(
            "SELECT branch FROM worktrees WHERE task_id = ? AND repository_id = ? \
             AND session_id IS NULL ORDER BY created_at DESC, id DESC LIMIT 1",
        )
        .bind(task_id.as_str())
        .bind(repository_id.as_str())
        .fetch_optional(&self.read)
        .await?;
        Ok(branch)
    }
}

impl Store {
    /// The live worktrees made of a repository, oldest first.
    pub async fn live_worktrees_of_repository(
        &self,
        repository_id: &RepositoryId,
    ) -> Result<Vec<WorktreeRecord>> {
        let rows = crate::sql::query_as::<WorktreeRow>(
            "SELECT * FROM worktrees WHERE repository_id = ? AND removed_at IS NULL ORDER BY created_at, id",
        )
        .bind(repository_id.as_str())
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(WorktreeRecord::from).collect())
    }
}

impl WriteTx {
    pub async fn live_worktrees(&mut self, task_id: &TaskId) -> Result<Vec<WorktreeRecord>> {
        live(self.db(), task_id.as_str()).await
    }

    /// Records a new live worktree (setup not yet done). A second live worktree of the same
    /// task and repository, or at the same path, is a `Conflict`.
    pub async fn insert_worktree(&mut self, new: &NewWorktree) -> Result<WorktreeRecord> {
        let (id, now) = (self.new_id(), self.now().millis());
        let inserted = crate::sql::query(
            "INSERT INTO worktrees (id, task_id, repository_id, repository_path, path, branch, \
             base_commit, created_at, executor_id, session_id) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(new.task_id.as_str())
        .bind(new.repository_id.as_str())
        .bind(&new.repository_path)
        .bind(&new.path)
        .bind(&new.branch)
        .bind(&new.base_commit)
        .bind(now)
        .bind(&new.executor_id)
        .bind(new.session_id.as_ref().map(SessionId::as_str))
        .execute(self.conn())
        .await;
        match inserted {
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                let whose = if new.session_id.is_some() { "the attempt" } else { "the task" };
                return Err(StoreError::Conflict(format!(
                    "{whose} already has a worktree for repository {}",
                    new.repository_id
                )));
            }
            other => other?,
        };
        get(self.db(), &id).await
    }

    /// Makes an attempt's worktree the task's own (a picked attempt, issue 48).
    pub async fn adopt_attempt_worktree(&mut self, id: &str) -> Result<WorktreeRecord> {
        crate::sql::query("UPDATE worktrees SET session_id = NULL WHERE id = ?")
            .bind(id)
            .execute(self.conn())
            .await?;
        get(self.db(), id).await
    }

    /// Records that the setup script of a worktree has run successfully.
    pub async fn mark_worktree_setup_done(&mut self, id: &str) -> Result<WorktreeRecord> {
        crate::sql::query("UPDATE worktrees SET setup_done_at = ? WHERE id = ?")
            .bind(self.now().millis())
            .bind(id)
            .execute(self.conn())
            .await?;
        get(self.db(), id).await
    }

    /// Records the task branch's head a merge landed on the base branch.
    pub async fn set_worktree_merged_head(&mut self, id: &str, head: &str) -> Result<()> {
        crate::sql::query("UPDATE worktrees SET merged_head = ? WHERE id = ?")
            .bind(head)
            .bind(id)
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Records that a worktree was removed from disk; its row stays for the record.
    pub async fn mark_worktree_removed(&mut self, id: &str) -> Result<WorktreeRecord> {
        crate::sql::query(
            "UPDATE worktrees SET removed_at = ? WHERE id = ? AND removed_at IS NULL",
        )
        .bind(self.now().millis())
        .bind(id)
        .execute(self.conn())
        .await?;
        get(self.db(), id).await
    }
}
