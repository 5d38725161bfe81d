//! Schedules (issue 47, docs/intake.md "Schedules"): a task made from a title and
//! description at each occurrence of a cron expression in a named time zone. More `Engine`
//! methods; the firing rules across daylight-saving changes are `kandev_domain::schedule`'s.
//!
//! Invariants:
//! - Each occurrence is handled once: the task it makes carries the occurrence as its external
//!   id (`schedule:<id>@<ms>`, recorded with the task in one transaction), then the run is
//!   recorded (`schedule_runs`) and the schedule's newest handled occurrence advances. A crash
//!   between the two finds the task at the next pass and records the run with it.
//! - "Now" is the store's clock, so tests drive schedules on an injected clock.
//! - Occurrences missed while the server was down (seen more than [`LATE_AFTER`] after their
//!   time): the newest fires once (`run_once`), or it is recorded as skipped (`skip`); older
//!   ones are passed over either way. An on-time occurrence always fires.

use std::time::Duration;

use kandev_domain::intake::{MissedRuns, Schedule, TaskOrigin, schedule_external_id};
use kandev_domain::schedule::{Cron, Zone, between, next_after};
use kandev_domain::{RepositoryId, StepId, TaskId, Timestamp, WorkflowId, WorkspaceId};
use kandev_store::{ScheduleSpec, StoreError};
use tokio_util::sync::CancellationToken;

use crate::engine::Engine;
use crate::error::{EngineError, Result, not_found};
use crate::usecases::NewTaskRequest;

/// An occurrence seen this much after its time counts as missed.
pub const LATE_AFTER: Duration = Duration::from_secs(60);
/// The longest the schedule loop sleeps between two looks (a new or changed schedule, a
/// clock that jumped).
const LOOK_AT_LEAST_EVERY: Duration = Duration::from_secs(15);
/// Occurrences read per step when catching up on a long downtime.
const CATCH_UP_BATCH: usize = 10_000;

/// A schedule's settings as the caller gives them: texts checked, the rest not yet.
pub struct ScheduleInput {
    pub name: String,
    pub cron: String,
    pub time_zone: String,
    pub title: String,
    pub description: String,
    pub workflow_id: Option<WorkflowId>,
    pub step_id: Option<StepId>,
    pub repository_ids: Vec<RepositoryId>,
    pub missed: MissedRuns,
    pub enabled: bool,
}

/// What one pass did with one schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    pub schedule_id: String,
    pub occurrence: Timestamp,
    /// The task it made; `None` when the occurrence was skipped or failed.
    pub task_id: Option<TaskId>,
    /// Why it made no task when it failed (empty otherwise).
    pub error: String,
}

/// The expression and zone of a schedule, parsed.
fn parsed(cron: &str, zone: &str) -> Result<(Cron, Zone)> {
    let cron = Cron::parse(cron).map_err(|e| EngineError::Validation(e.to_string()))?;
    let zone = Zone::parse(zone).map_err(|e| EngineError::Validation(e.to_string()))?;
    Ok((cron, zone))
}

/// The newest occurrence in (`after`, `now`], if any.
fn newest_due(cron: &Cron, zone: &Zone, after: Timestamp, now: Timestamp) -> Option<Timestamp> {
    let mut from = after;
    let mut newest = None;
    loop {
        let batch = between(cron, zone, from, now, CATCH_UP_BATCH);
        let Some(last) = batch.last().copied() else { return newest };
        newest = Some(last);
        if batch.len() < CATCH_UP_BATCH {
            return newest;
        }
        from = last;
    }
}

impl Engine {
    /// When `schedule` fires next (after its newest handled occurrence and after now); `None`
    /// while it is off.
    pub fn next_occurrence(&self, schedule: &Schedule) -> Option<Timestamp> {
        if !schedule.enabled {
            return None;
        }
        let (cron, zone) = parsed(&schedule.cron, &schedule.time_zone).ok()?;
        let handled = schedule.last_occurrence.unwrap_or(schedule.created_at);
        let now = self.inner.store.now();
        // A missed occurrence that is still to be handled comes first.
        if let Some(due) = newest_due(&cron, &zone, handled, now) {
            return Some(due);
        }
        next_after(&cron, &zone, handled.max(now))
    }

    async fn schedule_spec(
        &self,
        workspace: &WorkspaceId,
        input: ScheduleInput,
    ) -> Result<ScheduleSpec> {
        let (cron, zone) = parsed(&input.cron, &input.time_zone)?;
        let (workflow_id, step_id) =
            self.target_step(workspace, input.workflow_id.as_ref(), input.step_id.as_ref()).await?;
        for id in &input.repository_ids {
            let repository = self.inner.store.get_repository(id).await.map_err(not_found)?;
            if &repository.workspace_id != workspace {
                return Err(EngineError::Validation(format!(
                    "repository {} is not in this workspace",
                    repository.name
                )));
            }
        }
        Ok(ScheduleSpec {
            name: input.name,
            cron: cron.as_str().to_owned(),
            time_zone: zone.name().to_owned(),
            title: input.title,
            description: input.description,
            workflow_id,
            step_id,
            repository_ids: input.repository_ids,
            missed: input.missed,
            enabled: input.enabled,
        })
    }

    /// `schedule.create`. Occurrences count from its creation.
    pub async fn create_schedule(
        &self,
        workspace: &WorkspaceId,
        input: ScheduleInput,
    ) -> Result<Schedule> {
        self.inner.store.get_workspace(workspace).await.map_err(not_found)?;
        let spec = self.schedule_spec(workspace, input).await?;
        let mut tx = self.inner.store.begin_write().await?;
        let schedule = tx.insert_schedule(workspace, &spec).await?;
        tx.commit().await?;
        Ok(schedule)
    }

    /// `schedule.update`: new settings. Turning a schedule back on, or changing its expression
    /// or zone, does not fire what came due before: occurrences count from then.
    pub async fn update_schedule(&self, id: &str, input: ScheduleInput) -> Result<Schedule> {
        let current = self.inner.store.get_schedule(id).await.map_err(not_found)?;
        let spec = self.schedule_spec(&current.workspace_id, input).await?;
        let mut tx = self.inner.store.begin_write().await?;
        // Turned back on, or a new expression or zone: occurrences count from now, so nothing
        // of the old timing fires late.
        let retimed = spec.cron != current.cron || spec.time_zone != current.time_zone;
        if spec.enabled && (!current.enabled || retimed) {
            tx.advance_schedule(id, self.inner.store.now()).await?;
        }
        let schedule = tx.update_schedule(id, &spec).await?;
        tx.commit().await?;
        Ok(schedule)
    }

    /// `schedule.delete`, with its runs (the tasks it made stay).
    pub async fn delete_schedule(&self, id: &str) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        tx.delete_schedule(id).await.map_err(not_found)?;
        tx.commit().await?;
        Ok(())
    }

    /// One pass over the enabled schedules at the store's "now": fires (or skips) what is
    /// due, by the rules of the module's invariants. The schedule loop calls it; tests call
    /// it on an injected clock.
    pub async fn fire_due_schedules(&self) -> Result<Vec<Fired>> {
        let now = self.inner.store.now();
        let mut fired = vec![];
        for schedule in self.inner.store.enabled_schedules().await? {
            match self.fire_one(&schedule, now).await {
                Ok(Some(done)) => fired.push(done),
                Ok(None) => {}
                Err(err) => {
                    tracing::warn!(schedule = %schedule.id, error = %err, "a schedule could not fire");
                }
            }
        }
        Ok(fired)
    }

    async fn fire_one(&self, schedule: &Schedule, now: Timestamp) -> Result<Option<Fired>> {
        let (cron, zone) = parsed(&schedule.cron, &schedule.time_zone)?;
        let handled = schedule.last_occurrence.unwrap_or(schedule.created_at);
        let Some(occurrence) = newest_due(&cron, &zone, handled, now) else { return Ok(None) };
        let late = now.millis() - occurrence.millis() >= LATE_AFTER.as_millis() as i64;
        let (task_id, error) = match (late, schedule.missed) {
            (true, MissedRuns::Skip) => (None, String::new()),
            // A task that cannot be made (its step or repository was removed) is a failed
            // run with the reason, shown in the list; the schedule goes on to its next one.
            _ => match self.make_scheduled_task(schedule, occurrence).await {
                Ok(task) => (Some(task), String::new()),
                Err(err) => {
                    tracing::warn!(schedule = %schedule.id, error = %err, "a schedule's task could not be made");
                    (None, err.to_string())
                }
            },
        };
        let mut tx = self.inner.store.begin_write().await?;
        let first =
            tx.record_schedule_run(&schedule.id, occurrence, task_id.as_ref(), &error).await?;
        tx.commit().await?;
        Ok(first.then(|| Fired { schedule_id: schedule.id.clone(), occurrence, task_id, error }))
    }

    /// The task of `occurrence`, made now or found from an earlier pass.
    async fn make_scheduled_task(
        &self,
        schedule: &Schedule,
        occurrence: Timestamp,
    ) -> Result<TaskId> {
        let external_id = schedule_external_id(&schedule.id, occurrence);
        let store = &self.inner.store;
        if let Some(task) = store.task_from(&schedule.workspace_id, &external_id).await? {
            return Ok(task);
        }
        let origin = TaskOrigin {
            external_id: external_id.clone(),
            url: String::new(),
            source_id: None,
            number: None,
            closed: false,
        };
        let request = NewTaskRequest::arrival(
            (schedule.workflow_id.clone(), schedule.step_id.clone()),
            schedule.title.clone(),
            schedule.description.clone(),
            schedule.repository_ids.clone(),
            origin,
        );
        match self.create_task(request).await {
            Ok(created) => Ok(created.task.id),
            Err(EngineError::Store(StoreError::Conflict(_))) => store
                .task_from(&schedule.workspace_id, &external_id)
                .await?
                .ok_or_else(|| EngineError::Conflict(format!("{external_id} has no task"))),
            Err(err) => Err(err),
        }
    }

    /// Fires schedules as they come due until `shutdown`: a pass at start (what was missed
    /// while the server was down), then one at each next occurrence, looking again at least
    /// every 15 seconds.
    pub async fn run_schedules(self, shutdown: CancellationToken) {
        loop {
            if let Err(err) = self.fire_due_schedules().await {
                tracing::warn!(error = %err, "cannot read the schedules");
            }
            let now = self.inner.store.now();
            let next = match self.inner.store.enabled_schedules().await {
                Ok(list) => list.iter().filter_map(|s| self.next_occurrence(s)).min(),
                Err(_) => None,
            };
            let wait = next
                .map(|at| Duration::from_millis((at.millis() - now.millis()).max(0) as u64))
                .unwrap_or(LOOK_AT_LEAST_EVERY)
                // Never a busy loop: an occurrence that failed to fire is tried again soon.
                .clamp(Duration::from_millis(500), LOOK_AT_LEAST_EVERY);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i47_the_newest_due_occurrence_is_found_across_a_long_downtime() {
        let cron = Cron::parse("* * * * *").unwrap();
        let zone = Zone::parse("UTC").unwrap();
        let minute = 60_000;
        // 30 days of minutes: more than one batch.
        let after = Timestamp(0);
        let now = Timestamp(30 * 24 * 60 * minute + 30_000);
        assert_eq!(newest_due(&cron, &zone, after, now), Some(Timestamp(30 * 24 * 60 * minute)));
        assert_eq!(newest_due(&cron, &zone, Timestamp(minute), Timestamp(minute + 1)), None);
    }
}
