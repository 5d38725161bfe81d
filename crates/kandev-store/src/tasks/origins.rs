//! What a task was made from (issue 47): its `task_origins` row, keyed by workspace and
//! external id so one issue, delivery or occurrence never makes two tasks. The row outlives
//! its task: a deleted task's issue is not taken in again.

use kandev_domain::intake::TaskOrigin;
use kandev_domain::{TaskId, WorkspaceId};
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx};

#[derive(FromRow)]
struct OriginRow {
    external_id: String,
    task_id: String,
    url: String,
    source_id: Option<String>,
    number: Option<i64>,
    closed: i64,
}

impl From<OriginRow> for (TaskId, TaskOrigin) {
    fn from(r: OriginRow) -> Self {
        let origin = TaskOrigin {
            external_id: r.external_id,
            url: r.url,
            source_id: r.source_id,
            number: r.number.and_then(|n| u64::try_from(n).ok()),
            closed: r.closed != 0,
        };
        (TaskId::new(r.task_id), origin)
    }
}

const ORIGIN_SELECT: &str =
    "SELECT external_id, task_id, url, source_id, number, closed FROM task_origins";

/// The task made from `external_id` in `workspace`, if one was (even if deleted since).
async fn by_external_id(
    mut db: Db<'_>,
    workspace: &str,
    external_id: &str,
) -> Result<Option<TaskId>> {
    let query = format!("{ORIGIN_SELECT} WHERE workspace_id = ? AND external_id = ?");
    Ok(crate::sql::query_as::<OriginRow>(&query)
        .bind(workspace)
        .bind(external_id)
        .fetch_optional(&mut db)
        .await?
        .map(|r| TaskId::new(r.task_id)))
}

impl Store {
    /// What `task` was made from, if intake made it.
    pub async fn task_origin(&self, task: &TaskId) -> Result<Option<TaskOrigin>> {
        let query = format!("{ORIGIN_SELECT} WHERE task_id = ?");
        Ok(crate::sql::query_as::<OriginRow>(&query)
            .bind(task.as_str())
            .fetch_optional(&self.read)
            .await?
            .map(|r| <(TaskId, TaskOrigin)>::from(r).1))
    }

    /// The task made from `external_id` in `workspace`, if one was (even if deleted since).
    pub async fn task_from(
        &self,
        workspace: &WorkspaceId,
        external_id: &str,
    ) -> Result<Option<TaskId>> {
        by_external_id(self.db(), workspace.as_str(), external_id).await
    }
}

impl WriteTx {
    /// The task made from `external_id` in `workspace`, if one was.
    pub async fn task_from(
        &mut self,
        workspace: &WorkspaceId,
        external_id: &str,
    ) -> Result<Option<TaskId>> {
        by_external_id(self.db(), workspace.as_str(), external_id).await
    }

    /// Records that `task` was made from `origin`; `Conflict` when its external id already
    /// made a task in `workspace`.
    pub async fn insert_task_origin(
        &mut self,
        workspace: &WorkspaceId,
        task: &TaskId,
        origin: &TaskOrigin,
    ) -> Result<()> {
        if by_external_id(self.db(), workspace.as_str(), &origin.external_id).await?.is_some() {
            return Err(StoreError::Conflict(format!(
                "{} already made a task in this workspace",
                origin.external_id
            )));
        }
        crate::sql::query(
            "INSERT INTO task_origins (workspace_id, external_id, task_id, url, source_id, \
             number, closed, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(workspace.as_str())
        .bind(&origin.external_id)
        .bind(task.as_str())
        .bind(&origin.url)
        .bind(origin.source_id.as_deref())
        .bind(origin.number.and_then(|n| i64::try_from(n).ok()))
        .bind(i64::from(origin.closed))
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Marks `task`'s issue closed; false when it was already (so it is closed once).
    pub async fn mark_origin_closed(&mut self, task: &TaskId) -> Result<bool> {
        let done = crate::sql::query(
            "UPDATE task_origins SET closed = 1 WHERE task_id = ? AND closed = 0",
        )
        .bind(task.as_str())
        .execute(self.conn())
        .await?;
        Ok(done.rows_affected() > 0)
    }
}
