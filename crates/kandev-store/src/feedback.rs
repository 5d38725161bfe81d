//! What a forge says about a task's pull request after it opened (issue 46): its CI jobs per
//! head commit, and the events the steps' triggers ran for, each recorded once.

use kandev_domain::ship::{PrCheck, PrEvent};
use kandev_domain::{RepositoryId, TaskId, Timestamp};
use sqlx::FromRow;

use crate::{Result, Store, WriteTx};

#[derive(FromRow)]
struct CheckRow {
    task_id: String,
    repository_id: String,
    name: String,
    head_sha: String,
    state: String,
    url: String,
    log_tail: String,
    inherited: i64,
}

impl From<CheckRow> for PrCheck {
    fn from(r: CheckRow) -> Self {
        PrCheck {
            task_id: TaskId::new(r.task_id),
            repository_id: RepositoryId::new(r.repository_id),
            name: r.name,
            head_sha: r.head_sha,
            state: r.state,
            url: r.url,
            log_tail: r.log_tail,
            inherited: r.inherited != 0,
        }
    }
}

#[derive(FromRow)]
struct EventRow {
    task_id: String,
    repository_id: String,
    kind: String,
    key: String,
    outcome: String,
    detail: String,
    at: i64,
}

impl From<EventRow> for PrEvent {
    fn from(r: EventRow) -> Self {
        PrEvent {
            task_id: TaskId::new(r.task_id),
            repository_id: RepositoryId::new(r.repository_id),
            kind: r.kind,
            key: r.key,
            outcome: r.outcome,
            detail: r.detail,
            at: Timestamp(r.at),
        }
    }
}

/// The events of a task, oldest first.
const EVENTS_OF_TASK: &str = "SELECT task_id, repository_id, kind, key, outcome, detail, at \
     FROM pr_events WHERE task_id = ? ORDER BY at, kind, key";

impl Store {
    /// The CI jobs of the task's pull requests, by repository and name.
    pub async fn pr_checks(&self, task_id: &TaskId) -> Result<Vec<PrCheck>> {
        let rows = crate::sql::query_as::<CheckRow>(
            "SELECT task_id, repository_id, name, head_sha, state, url, log_tail, inherited \
             FROM pr_checks WHERE task_id = ? ORDER BY repository_id, name",
        )
        .bind(task_id.as_str())
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(PrCheck::from).collect())
    }

    /// The forge events the task's triggers ran for, oldest first.
    pub async fn pr_events(&self, task_id: &TaskId) -> Result<Vec<PrEvent>> {
        let rows = crate::sql::query_as::<EventRow>(EVENTS_OF_TASK)
            .bind(task_id.as_str())
            .fetch_all(&self.read)
            .await?;
        Ok(rows.into_iter().map(PrEvent::from).collect())
    }
}

impl WriteTx {
    /// Replaces the jobs of one pull request with what the forge reported now.
    pub async fn replace_pr_checks(
        &mut self,
        task_id: &TaskId,
        repository_id: &RepositoryId,
        checks: &[PrCheck],
    ) -> Result<()> {
        crate::sql::query("DELETE FROM pr_checks WHERE task_id = ? AND repository_id = ?")
            .bind(task_id.as_str())
            .bind(repository_id.as_str())
            .execute(self.conn())
            .await?;
        for check in checks {
            crate::sql::query(
                "INSERT INTO pr_checks (task_id, repository_id, name, head_sha, state, url, \
                 log_tail, inherited) VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (task_id, repository_id, name) DO NOTHING",
            )
            .bind(task_id.as_str())
            .bind(repository_id.as_str())
            .bind(&check.name)
            .bind(&check.head_sha)
            .bind(&check.state)
            .bind(&check.url)
            .bind(&check.log_tail)
            .bind(i64::from(check.inherited))
            .execute(self.conn())
            .await?;
        }
        Ok(())
    }

    /// Records a forge event; false when it was recorded already (it ran before: nothing
    /// runs again).
    pub async fn record_pr_event(&mut self, event: &PrEvent) -> Result<bool> {
        let done = crate::sql::query(
            "INSERT INTO pr_events (task_id, repository_id, kind, key, outcome, detail, at) \
             VALUES (?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (task_id, repository_id, kind, key) DO NOTHING",
        )
        .bind(event.task_id.as_str())
        .bind(event.repository_id.as_str())
        .bind(&event.kind)
        .bind(&event.key)
        .bind(&event.outcome)
        .bind(&event.detail)
        .bind(event.at.0)
        .execute(self.conn())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Sets what came of a recorded event (decided after it was recorded).
    pub async fn set_pr_event_outcome(&mut self, event: &PrEvent) -> Result<()> {
        crate::sql::query(
            "UPDATE pr_events SET outcome = ?, detail = ? \
             WHERE task_id = ? AND repository_id = ? AND kind = ? AND key = ?",
        )
        .bind(&event.outcome)
        .bind(&event.detail)
        .bind(event.task_id.as_str())
        .bind(event.repository_id.as_str())
        .bind(&event.kind)
        .bind(&event.key)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// The forge events of a task, oldest first (rounds used, why auto-fix stopped).
    pub async fn pr_events(&mut self, task_id: &TaskId) -> Result<Vec<PrEvent>> {
        let rows = crate::sql::query_as::<EventRow>(EVENTS_OF_TASK)
            .bind(task_id.as_str())
            .fetch_all(self.conn())
            .await?;
        Ok(rows.into_iter().map(PrEvent::from).collect())
    }
}
