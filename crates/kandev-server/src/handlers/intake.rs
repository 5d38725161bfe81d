//! `intake.source.*` and `schedule.*` (issue 47, docs/intake.md): where work comes from by
//! itself, and recurring tasks.

use kandev_api_types::requests::{
    ById, ByWorkspace, IntakeSourceCreate, IntakeSourceUpdate, ScheduleCreate, ScheduleUpdate,
};
use kandev_api_types::responses::{
    Deleted, IntakePolled, IntakeSourceCreated, IntakeSourceOne, IntakeSources, ScheduleOne,
    Schedules,
};
use kandev_api_types::{IntakeSourceDto, ScheduleDto, TaskDto};
use kandev_domain::intake::{HookScheme, MissedRuns, Schedule, SourceKind, label};
use kandev_domain::validate::{self, FieldError};
use kandev_domain::{RepositoryId, StepId, WorkflowId, WorkspaceId};
use kandev_engine::{IntakeSourceRequest, ScheduleInput};

use crate::{ApiError, AppState};

/// The newest runs a schedule shows.
const RUNS_SHOWN: u32 = 10;

pub async fn list_sources(s: &AppState, p: ByWorkspace) -> Result<IntakeSources, ApiError> {
    let workspace = WorkspaceId::new(p.workspace_id);
    s.store().get_workspace(&workspace).await?;
    let sources = s.store().list_intake_sources(&workspace).await?;
    Ok(IntakeSources { sources: sources.iter().map(IntakeSourceDto::from).collect() })
}

pub async fn create_source(
    s: &AppState,
    p: IntakeSourceCreate,
) -> Result<IntakeSourceCreated, ApiError> {
    let name = validate::name("name", &p.name)?;
    let kind = SourceKind::parse(&p.kind)
        .ok_or_else(|| FieldError::new("kind", "must be issues or webhook"))?;
    let hook_scheme = match p.hook_scheme.as_deref() {
        None | Some("") => None,
        Some(scheme) => Some(
            HookScheme::parse(scheme)
                .ok_or_else(|| FieldError::new("hook_scheme", "must be github, gitlab or hmac"))?,
        ),
    };
    let request = IntakeSourceRequest {
        workspace_id: WorkspaceId::new(p.workspace_id),
        name,
        kind,
        repository_id: p.repository_id.filter(|r| !r.is_empty()).map(RepositoryId::new),
        label: label("label", p.label.as_deref().unwrap_or_default())?,
        workflow_id: p.workflow_id.filter(|w| !w.is_empty()).map(WorkflowId::new),
        step_id: p.step_id.filter(|w| !w.is_empty()).map(StepId::new),
        hook_scheme,
    };
    let (source, hook_secret) = s.engine().create_intake_source(request).await?;
    Ok(IntakeSourceCreated { source: IntakeSourceDto::from(&source), hook_secret })
}

pub async fn update_source(
    s: &AppState,
    p: IntakeSourceUpdate,
) -> Result<IntakeSourceOne, ApiError> {
    let source = s.engine().set_intake_source_enabled(&p.id, p.enabled).await?;
    Ok(IntakeSourceOne { source: IntakeSourceDto::from(&source) })
}

pub async fn delete_source(s: &AppState, p: ById) -> Result<Deleted, ApiError> {
    s.engine().delete_intake_source(&p.id).await?;
    Ok(Deleted { deleted: true, id: p.id })
}

pub async fn poll_source(s: &AppState, p: ById) -> Result<IntakePolled, ApiError> {
    let (source, created) = s.engine().poll_intake_source(&p.id).await?;
    Ok(IntakePolled {
        source: IntakeSourceDto::from(&source),
        created: created.iter().map(TaskDto::from).collect(),
    })
}

async fn schedule_dto(s: &AppState, schedule: &Schedule) -> Result<ScheduleDto, ApiError> {
    let runs = s.store().schedule_runs(&schedule.id, RUNS_SHOWN).await?;
    Ok(ScheduleDto::new(schedule, s.engine().next_occurrence(schedule), &runs))
}

pub async fn list_schedules(s: &AppState, p: ByWorkspace) -> Result<Schedules, ApiError> {
    let workspace = WorkspaceId::new(p.workspace_id);
    s.store().get_workspace(&workspace).await?;
    let mut schedules = vec![];
    for schedule in s.store().list_schedules(&workspace).await? {
        schedules.push(schedule_dto(s, &schedule).await?);
    }
    Ok(Schedules { schedules })
}

fn missed(value: &str) -> Result<MissedRuns, FieldError> {
    MissedRuns::parse(value).ok_or_else(|| FieldError::new("missed", "must be run_once or skip"))
}

fn repositories(ids: Vec<String>) -> Vec<RepositoryId> {
    ids.into_iter().map(RepositoryId::new).collect()
}

pub async fn create_schedule(s: &AppState, p: ScheduleCreate) -> Result<ScheduleOne, ApiError> {
    let input = ScheduleInput {
        name: validate::name("name", &p.name)?,
        cron: p.cron,
        time_zone: p.time_zone,
        title: validate::title("title", &p.title)?,
        description: validate::description("description", p.description.as_deref().unwrap_or(""))?,
        workflow_id: p.workflow_id.filter(|w| !w.is_empty()).map(WorkflowId::new),
        step_id: p.step_id.filter(|w| !w.is_empty()).map(StepId::new),
        repository_ids: repositories(p.repository_ids.unwrap_or_default()),
        missed: missed(p.missed.as_deref().unwrap_or("run_once"))?,
        enabled: true,
    };
    let workspace = WorkspaceId::new(p.workspace_id);
    let schedule = s.engine().create_schedule(&workspace, input).await?;
    Ok(ScheduleOne { schedule: schedule_dto(s, &schedule).await? })
}

pub async fn update_schedule(s: &AppState, p: ScheduleUpdate) -> Result<ScheduleOne, ApiError> {
    let current = s.store().get_schedule(&p.id).await?;
    let input = ScheduleInput {
        name: match p.name {
            Some(name) => validate::name("name", &name)?,
            None => current.name,
        },
        cron: p.cron.unwrap_or(current.cron),
        time_zone: p.time_zone.unwrap_or(current.time_zone),
        title: match p.title {
            Some(title) => validate::title("title", &title)?,
            None => current.title,
        },
        description: match p.description {
            Some(text) => validate::description("description", &text)?,
            None => current.description,
        },
        workflow_id: Some(current.workflow_id),
        step_id: Some(p.step_id.map(StepId::new).unwrap_or(current.step_id)),
        repository_ids: p.repository_ids.map(repositories).unwrap_or(current.repository_ids),
        missed: match p.missed {
            Some(value) => missed(&value)?,
            None => current.missed,
        },
        enabled: p.enabled.unwrap_or(current.enabled),
    };
    let schedule = s.engine().update_schedule(&p.id, input).await?;
    Ok(ScheduleOne { schedule: schedule_dto(s, &schedule).await? })
}

pub async fn delete_schedule(s: &AppState, p: ById) -> Result<Deleted, ApiError> {
    s.engine().delete_schedule(&p.id).await?;
    Ok(Deleted { deleted: true, id: p.id })
}
