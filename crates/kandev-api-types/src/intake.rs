//! Intake on the wire (issue 47): intake sources with their webhook, a task's origin, and
//! schedules with their next occurrence and recent runs.

use kandev_domain::intake::{IntakeSource, OriginLink, Schedule, ScheduleRun};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::rfc3339;

/// What a task was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct TaskOriginDto {
    /// Its key in the workspace (`github:owner/repo#12`, `schedule:<id>@<ms>`).
    pub external_id: String,
    /// Its web page (empty when it has none).
    pub url: String,
}

impl From<&OriginLink> for TaskOriginDto {
    fn from(o: &OriginLink) -> Self {
        TaskOriginDto { external_id: o.external_id.clone(), url: o.url.clone() }
    }
}

/// Where work comes from (`intake.source.*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct IntakeSourceDto {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    /// `issues` (a repository's forge issues, polled) or `webhook` (only what its webhook
    /// delivers).
    pub kind: String,
    pub repository_id: Option<String>,
    /// Only issues with this label (empty: every open issue).
    pub label: String,
    pub workflow_id: String,
    pub step_id: String,
    /// Its webhook's scheme (`github`, `gitlab`, `hmac`), when it has one; its URL is
    /// `/hooks/<id>`. The secret is shown once, when the source is created.
    pub hook_scheme: Option<String>,
    pub enabled: bool,
    pub last_polled_at: Option<String>,
    /// Why the last poll failed (empty after a good one).
    pub last_error: String,
    pub created_at: String,
}

impl From<&IntakeSource> for IntakeSourceDto {
    fn from(s: &IntakeSource) -> Self {
        IntakeSourceDto {
            id: s.id.clone(),
            workspace_id: s.workspace_id.to_string(),
            name: s.name.clone(),
            kind: s.kind.as_str().to_owned(),
            repository_id: s.repository_id.as_ref().map(|r| r.to_string()),
            label: s.label.clone(),
            workflow_id: s.workflow_id.to_string(),
            step_id: s.step_id.to_string(),
            hook_scheme: s.hook.as_ref().map(|h| h.scheme.as_str().to_owned()),
            enabled: s.enabled,
            last_polled_at: s.last_polled_at.map(rfc3339),
            last_error: s.last_error.clone(),
            created_at: rfc3339(s.created_at),
        }
    }
}

/// A recurring task (`schedule.*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct ScheduleDto {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    /// Five fields: minute hour day-of-month month day-of-week (or `@daily` and the like).
    pub cron: String,
    /// An IANA time zone the expression is read in (`Europe/Berlin`).
    pub time_zone: String,
    pub title: String,
    pub description: String,
    pub workflow_id: String,
    pub step_id: String,
    pub repository_ids: Vec<String>,
    /// `run_once` (occurrences missed while the server was down fire once at startup) or
    /// `skip`.
    pub missed: String,
    pub enabled: bool,
    /// When it fires next (none while disabled).
    pub next_at: Option<String>,
    /// Its newest runs, newest first.
    pub runs: Vec<ScheduleRunDto>,
    pub created_at: String,
}

impl ScheduleDto {
    pub fn new(
        s: &Schedule,
        next: Option<kandev_domain::Timestamp>,
        runs: &[ScheduleRun],
    ) -> ScheduleDto {
        ScheduleDto {
            id: s.id.clone(),
            workspace_id: s.workspace_id.to_string(),
            name: s.name.clone(),
            cron: s.cron.clone(),
            time_zone: s.time_zone.clone(),
            title: s.title.clone(),
            description: s.description.clone(),
            workflow_id: s.workflow_id.to_string(),
            step_id: s.step_id.to_string(),
            repository_ids: s.repository_ids.iter().map(|r| r.to_string()).collect(),
            missed: s.missed.as_str().to_owned(),
            enabled: s.enabled,
            next_at: next.map(rfc3339),
            runs: runs.iter().map(ScheduleRunDto::from).collect(),
            created_at: rfc3339(s.created_at),
        }
    }
}

/// One occurrence of a schedule, handled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct ScheduleRunDto {
    pub occurrence: String,
    /// The task it made; none when it was skipped or failed.
    pub task_id: Option<String>,
    /// Why it made no task when it failed (empty otherwise).
    pub error: String,
    pub at: String,
}

impl From<&ScheduleRun> for ScheduleRunDto {
    fn from(r: &ScheduleRun) -> Self {
        ScheduleRunDto {
            occurrence: rfc3339(r.occurrence),
            task_id: r.task_id.as_ref().map(|t| t.to_string()),
            error: r.error.clone(),
            at: rfc3339(r.at),
        }
    }
}
