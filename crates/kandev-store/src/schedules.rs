//! Schedules (issue 47): the row, reads and writes, and the runs: each occurrence handled
//! once (`schedule_runs`' key), with the task it made or none when it was skipped.

use kandev_domain::intake::{MissedRuns, Schedule, ScheduleRun};
use kandev_domain::{RepositoryId, StepId, TaskId, Timestamp, WorkflowId, WorkspaceId};
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx};

#[derive(FromRow)]
struct ScheduleRow {
    id: String,
    workspace_id: String,
    name: String,
    cron: String,
    time_zone: String,
    title: String,
    description: String,
    workflow_id: String,
    step_id: String,
    /// Comma-separated, in order.
    repository_ids: String,
    missed: String,
    enabled: i64,
    last_occurrence: Option<i64>,
    created_at: i64,
}

impl TryFrom<ScheduleRow> for Schedule {
    type Error = StoreError;

    fn try_from(r: ScheduleRow) -> Result<Schedule> {
        let missed = MissedRuns::parse(&r.missed).ok_or_else(|| {
            StoreError::Corrupt(format!("schedule {} missed {:?}", r.id, r.missed))
        })?;
        Ok(Schedule {
            id: r.id,
            workspace_id: WorkspaceId::new(r.workspace_id),
            name: r.name,
            cron: r.cron,
            time_zone: r.time_zone,
            title: r.title,
            description: r.description,
            workflow_id: WorkflowId::new(r.workflow_id),
            step_id: StepId::new(r.step_id),
            repository_ids: r
                .repository_ids
                .split(',')
                .filter(|id| !id.is_empty())
                .map(RepositoryId::new)
                .collect(),
            missed,
            enabled: r.enabled != 0,
            last_occurrence: r.last_occurrence.map(Timestamp),
            created_at: Timestamp(r.created_at),
        })
    }
}

#[derive(FromRow)]
struct RunRow {
    occurrence: i64,
    task_id: Option<String>,
    error: String,
    at: i64,
}

/// A new schedule or a schedule's new settings, as checked by the engine.
#[derive(Debug, Clone)]
pub struct ScheduleSpec {
    pub name: String,
    pub cron: String,
    pub time_zone: String,
    pub title: String,
    pub description: String,
    pub workflow_id: WorkflowId,
    pub step_id: StepId,
    pub repository_ids: Vec<RepositoryId>,
    pub missed: MissedRuns,
    pub enabled: bool,
}

fn joined(ids: &[RepositoryId]) -> String {
    ids.iter().map(RepositoryId::as_str).collect::<Vec<_>>().join(",")
}

async fn get(mut db: Db<'_>, id: &str) -> Result<Schedule> {
    crate::sql::query_as::<ScheduleRow>("SELECT * FROM schedules WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut db)
        .await?
        .ok_or_else(|| StoreError::not_found("schedule", id))?
        .try_into()
}

impl Store {
    /// The workspace's schedules by name.
    pub async fn list_schedules(&self, workspace: &WorkspaceId) -> Result<Vec<Schedule>> {
        crate::sql::query_as::<ScheduleRow>(
            "SELECT * FROM schedules WHERE workspace_id = ? ORDER BY name, id",
        )
        .bind(workspace.as_str())
        .fetch_all(&self.read)
        .await?
        .into_iter()
        .map(Schedule::try_from)
        .collect()
    }

    /// Every enabled schedule.
    pub async fn enabled_schedules(&self) -> Result<Vec<Schedule>> {
        crate::sql::query_as::<ScheduleRow>(
            "SELECT * FROM schedules WHERE enabled = 1 ORDER BY created_at, id",
        )
        .fetch_all(&self.read)
        .await?
        .into_iter()
        .map(Schedule::try_from)
        .collect()
    }

    pub async fn get_schedule(&self, id: &str) -> Result<Schedule> {
        get(self.db(), id).await
    }

    /// The newest `limit` runs of a schedule, newest first.
    pub async fn schedule_runs(&self, id: &str, limit: u32) -> Result<Vec<ScheduleRun>> {
        let rows = crate::sql::query_as::<RunRow>(
            "SELECT occurrence, task_id, error, at FROM schedule_runs WHERE schedule_id = ? \
             ORDER BY occurrence DESC LIMIT ?",
        )
        .bind(id)
        .bind(i64::from(limit))
        .fetch_all(&self.read)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| ScheduleRun {
                occurrence: Timestamp(r.occurrence),
                task_id: r.task_id.map(TaskId::new),
                error: r.error,
                at: Timestamp(r.at),
            })
            .collect())
    }
}

impl WriteTx {
    pub async fn insert_schedule(
        &mut self,
        workspace: &WorkspaceId,
        spec: &ScheduleSpec,
    ) -> Result<Schedule> {
        let (id, now) = (self.new_id(), self.now().millis());
        crate::sql::query(
            "INSERT INTO schedules (id, workspace_id, name, cron, time_zone, title, description, \
             workflow_id, step_id, repository_ids, missed, enabled, last_occurrence, created_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)",
        )
        .bind(&id)
        .bind(workspace.as_str())
        .bind(&spec.name)
        .bind(&spec.cron)
        .bind(&spec.time_zone)
        .bind(&spec.title)
        .bind(&spec.description)
        .bind(spec.workflow_id.as_str())
        .bind(spec.step_id.as_str())
        .bind(joined(&spec.repository_ids))
        .bind(spec.missed.as_str())
        .bind(i64::from(spec.enabled))
        .bind(now)
        .execute(self.conn())
        .await?;
        get(self.db(), &id).await
    }

    pub async fn get_schedule(&mut self, id: &str) -> Result<Schedule> {
        get(self.db(), id).await
    }

    /// Replaces a schedule's settings; what it already handled stays handled.
    pub async fn update_schedule(&mut self, id: &str, spec: &ScheduleSpec) -> Result<Schedule> {
        get(self.db(), id).await?;
        crate::sql::query(
            "UPDATE schedules SET name = ?, cron = ?, time_zone = ?, title = ?, description = ?, \
             workflow_id = ?, step_id = ?, repository_ids = ?, missed = ?, enabled = ? \
             WHERE id = ?",
        )
        .bind(&spec.name)
        .bind(&spec.cron)
        .bind(&spec.time_zone)
        .bind(&spec.title)
        .bind(&spec.description)
        .bind(spec.workflow_id.as_str())
        .bind(spec.step_id.as_str())
        .bind(joined(&spec.repository_ids))
        .bind(spec.missed.as_str())
        .bind(i64::from(spec.enabled))
        .bind(id)
        .execute(self.conn())
        .await?;
        get(self.db(), id).await
    }

    /// Removes a schedule and its runs; returns it.
    pub async fn delete_schedule(&mut self, id: &str) -> Result<Schedule> {
        let schedule = get(self.db(), id).await?;
        crate::sql::query("DELETE FROM schedule_runs WHERE schedule_id = ?")
            .bind(id)
            .execute(self.conn())
            .await?;
        crate::sql::query("DELETE FROM schedules WHERE id = ?")
            .bind(id)
            .execute(self.conn())
            .await?;
        Ok(schedule)
    }

    /// Records that `occurrence` of a schedule was handled (with the task it made, or none
    /// when skipped, or why it failed) and that it is the newest handled; false when it was
    /// handled before, in which case nothing is written.
    pub async fn record_schedule_run(
        &mut self,
        id: &str,
        occurrence: Timestamp,
        task: Option<&TaskId>,
        error: &str,
    ) -> Result<bool> {
        let done = crate::sql::query(
            "INSERT INTO schedule_runs (schedule_id, occurrence, task_id, error, at) \
             VALUES (?, ?, ?, ?, ?) ON CONFLICT (schedule_id, occurrence) DO NOTHING",
        )
        .bind(id)
        .bind(occurrence.millis())
        .bind(task.map(TaskId::as_str))
        .bind(error)
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        self.advance_schedule(id, occurrence).await?;
        Ok(true)
    }

    /// Marks every occurrence up to `occurrence` handled (missed runs that are skipped
    /// without a row each).
    pub async fn advance_schedule(&mut self, id: &str, occurrence: Timestamp) -> Result<()> {
        crate::sql::query(
            "UPDATE schedules SET last_occurrence = ? WHERE id = ? \
             AND (last_occurrence IS NULL OR last_occurrence < ?)",
        )
        .bind(occurrence.millis())
        .bind(id)
        .bind(occurrence.millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }
}
