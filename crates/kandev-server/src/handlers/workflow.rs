//! `workflow.*` actions: boards from templates, steps, and YAML export/import.

use std::collections::HashSet;
use std::sync::OnceLock;
use std::time::Duration;

use kandev_api_types::requests::{
    ById, ByWorkspace, Empty, StepCreate, StepReorder, StepUpdate, WorkflowCreate, WorkflowExport,
    WorkflowImport, WorkflowUpdate,
};
use kandev_api_types::responses::{
    Deleted, WorkflowOne, WorkflowTemplateDto, WorkflowTemplates, WorkflowYaml, Workflows,
    WorkflowsImported,
};
use kandev_api_types::{ErrorCode, EventsDto, WorkflowDto};
use kandev_domain::workflow::{
    Action, Feedback, MAX_ATTEMPTS, StepEvents, StepSpec, Workflow, WorkflowSpec,
};
use kandev_domain::{AgentProfileId, StepId, WorkflowId, WorkspaceId, validate};
use kandev_store::StepPatch;
use kandev_workflow_yaml::Limits;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::{ApiError, AppState};

pub async fn template_list(_: &AppState, _: Empty) -> Result<WorkflowTemplates, ApiError> {
    let templates = kandev_workflow_yaml::templates()
        .iter()
        .map(|t| WorkflowTemplateDto {
            id: t.id.to_string(),
            name: t.name.to_string(),
            description: t.description.to_string(),
            steps: t.spec.steps.iter().map(|s| s.name.clone()).collect(),
        })
        .collect();
    Ok(WorkflowTemplates { templates, next_cursor: None })
}

/// Steps of a workflow created without a template, coloured like the templates' (a board of
/// grey columns reads as one column).
fn blank_spec(name: String, description: String) -> WorkflowSpec {
    let step =
        |name: &str, color: &str| StepSpec { color: color.to_owned(), ..StepSpec::named(name) };
    let mut todo = step("Todo", "#64748b");
    todo.is_start_step = true;
    WorkflowSpec {
        name,
        description,
        steps: vec![todo, step("In Progress", "#3b82f6"), step("Done", "#22c55e")],
    }
}

pub async fn create(s: &AppState, p: WorkflowCreate) -> Result<WorkflowOne, ApiError> {
    let name = validate::name("name", &p.name)?;
    let description = validate::description("description", p.description.as_deref().unwrap_or(""))?;
    let spec = match &p.template_id {
        Some(id) => {
            let template = kandev_workflow_yaml::template(id).ok_or_else(|| {
                ApiError::validation(format!(
                    "there is no workflow template {id:?}; choose one of the templates offered"
                ))
            })?;
            let description =
                if p.description.is_some() { description } else { template.spec.description };
            WorkflowSpec { name, description, steps: template.spec.steps }
        }
        None => blank_spec(name, description),
    };
    let workspace_id = WorkspaceId::new(p.workspace_id);
    let template_id = p.template_id.as_deref();
    let created = s.engine().create_workflows(&workspace_id, &[spec], template_id).await?;
    let Some(workflow) = created.first() else { return Err(ApiError::internal()) };
    Ok(WorkflowOne { workflow: WorkflowDto::from(workflow) })
}

pub async fn list(s: &AppState, p: ByWorkspace) -> Result<Workflows, ApiError> {
    let workspace_id = WorkspaceId::new(p.workspace_id);
    s.store().get_workspace(&workspace_id).await?;
    let workflows =
        s.store().list_workflows(&workspace_id).await?.iter().map(WorkflowDto::from).collect();
    Ok(Workflows { workflows, next_cursor: None })
}

pub async fn get(s: &AppState, p: ById) -> Result<WorkflowOne, ApiError> {
    let workflow = s.store().get_workflow(&WorkflowId::new(p.id)).await?;
    Ok(WorkflowOne { workflow: WorkflowDto::from(&workflow) })
}

pub async fn update(s: &AppState, p: WorkflowUpdate) -> Result<WorkflowOne, ApiError> {
    let name = p.name.as_deref().map(|n| validate::name("name", n)).transpose()?;
    let description =
        p.description.as_deref().map(|d| validate::description("description", d)).transpose()?;
    let id = WorkflowId::new(p.id);
    let workflow = s.engine().update_workflow(&id, name.as_deref(), description.as_deref()).await?;
    Ok(WorkflowOne { workflow: WorkflowDto::from(&workflow) })
}

pub async fn delete(s: &AppState, p: ById) -> Result<Deleted, ApiError> {
    s.engine().delete_workflow(&WorkflowId::new(&p.id)).await?;
    Ok(Deleted { deleted: true, id: p.id })
}

pub async fn export(s: &AppState, p: WorkflowExport) -> Result<WorkflowYaml, ApiError> {
    if p.ids.is_empty() {
        return Err(ApiError::validation("ids must name at least one workflow"));
    }
    let mut workflows = Vec::with_capacity(p.ids.len());
    for id in p.ids {
        workflows.push(s.store().get_workflow(&WorkflowId::new(id)).await?);
    }
    Ok(WorkflowYaml { yaml: kandev_workflow_yaml::export(&workflows) })
}

/// Documents that may wait for the reader thread; further imports wait for room, up to
/// [`PARSE_QUEUE_WAIT`].
const PARSE_QUEUE: usize = 4;

/// Longest an import waits for room in the queue before it is refused as `BUSY`.
const PARSE_QUEUE_WAIT: Duration = Duration::from_secs(10);

/// Longest an import waits for its answer once queued: the parses ahead of it and its own.
/// Each parse stops itself at `Limits::max_time` (2 s, checked between events); this bounds
/// the request should one event take longer.
const PARSE_WAIT: Duration = Duration::from_secs(15);

type ImportResult = Result<Vec<WorkflowSpec>, Vec<kandev_workflow_yaml::Problem>>;

/// A document for the reader thread, and where its result goes.
struct ParseJob {
    yaml: String,
    reply: oneshot::Sender<ImportResult>,
}

/// The one thread that reads workflow documents, started on first use and idle between
/// imports. Parsing never runs on the async workers, so health and every other request keep
/// answering; one thread uses at most one core; and since the allocator keeps freed memory
/// in an arena per thread, one thread keeps at most one parse's worth (a pool of blocking
/// threads would keep one per thread it happened to use).
static READER: OnceLock<Option<mpsc::Sender<ParseJob>>> = OnceLock::new();

fn reader() -> Option<&'static mpsc::Sender<ParseJob>> {
    READER
        .get_or_init(|| {
            let (jobs, mut queue) = mpsc::channel::<ParseJob>(PARSE_QUEUE);
            let spawned = std::thread::Builder::new().name("kandev-yaml".into()).spawn(move || {
                while let Some(job) = queue.blocking_recv() {
                    if job.reply.is_closed() {
                        continue; // the request gave up waiting
                    }
                    // A bug in the parser must not end the thread for every later import: the
                    // request whose document hit it gets INTERNAL_ERROR (its reply is dropped).
                    let read = std::panic::catch_unwind(|| {
                        kandev_workflow_yaml::import_with(&job.yaml, &Limits::DEFAULT)
                    });
                    match read {
                        Ok(result) => {
                            let _ = job.reply.send(result);
                        }
                        Err(_) => tracing::error!("reading a workflow document panicked"),
                    }
                }
            });
            match spawned {
                Ok(_) => Some(jobs),
                Err(err) => {
                    tracing::error!(error = %err, "cannot start the workflow document reader");
                    None
                }
            }
        })
        .as_ref()
}

pub async fn import(s: &AppState, p: WorkflowImport) -> Result<WorkflowsImported, ApiError> {
    let specs = parse_document(p.yaml).await?.map_err(|problems| {
        let list: Vec<Value> =
            problems.iter().map(|pr| json!({ "path": pr.path, "message": pr.message })).collect();
        let first = problems.first().map(|pr| pr.to_string()).unwrap_or_default();
        let message = match problems.len() {
            1 => format!("the document is invalid: {first}"),
            n => format!("the document has {n} problems, first: {first}"),
        };
        ApiError::validation(message).with_details(json!({ "problems": list }))
    })?;
    let workspace_id = WorkspaceId::new(p.workspace_id);
    let created = s.engine().create_workflows(&workspace_id, &specs, None).await?;
    Ok(WorkflowsImported { workflows: created.iter().map(WorkflowDto::from).collect() })
}

/// Parses and validates a workflow document on the reader thread, within
/// [`Limits::DEFAULT`] and [`PARSE_WAIT`].
async fn parse_document(yaml: String) -> Result<ImportResult, ApiError> {
    let limits = Limits::DEFAULT;
    if yaml.len() > limits.max_bytes {
        // Refused before queueing: the loader would refuse it at once anyway.
        return Ok(kandev_workflow_yaml::import_with(&yaml, &limits));
    }
    let Some(reader) = reader() else { return Err(ApiError::internal()) };
    let (reply, answer) = oneshot::channel();
    match tokio::time::timeout(PARSE_QUEUE_WAIT, reader.send(ParseJob { yaml, reply })).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => return Err(ApiError::internal()),
        Err(_) => {
            return Err(ApiError::new(
                ErrorCode::Busy,
                "too many workflow imports at once; try again shortly",
            ));
        }
    }
    match tokio::time::timeout(PARSE_WAIT, answer).await {
        Ok(Ok(result)) => Ok(result),
        Ok(Err(_)) => {
            tracing::error!("the workflow document reader stopped");
            Err(ApiError::internal())
        }
        Err(_) => Err(ApiError::validation(format!(
            "reading the document took longer than the time limit of {} s; simplify it",
            PARSE_WAIT.as_secs()
        ))),
    }
}

pub async fn step_create(s: &AppState, p: StepCreate) -> Result<WorkflowOne, ApiError> {
    let name = validate::name("name", &p.name)?;
    let workflow_id = WorkflowId::new(&p.workflow_id);
    // Checked against the workflow as it is: no move target can name the step to come.
    let workflow = s.store().get_workflow(&workflow_id).await?;
    let fields = StepUpdate {
        id: String::new(),
        name: None,
        color: p.color,
        prompt: p.prompt,
        is_start_step: p.is_start_step,
        allow_manual_move: p.allow_manual_move,
        agent_profile_id: p.agent_profile_id,
        cancel_triggers_turn_complete: p.cancel_triggers_turn_complete,
        events: p.events,
    };
    let patch = step_patch(s, &workflow, fields).await?;
    let position = p.position.map(|x| x as usize);
    let workflow = s.engine().create_step(&workflow_id, &name, position, &patch).await?;
    Ok(WorkflowOne { workflow: WorkflowDto::from(&workflow) })
}

pub async fn step_update(s: &AppState, p: StepUpdate) -> Result<WorkflowOne, ApiError> {
    let step_id = StepId::new(&p.id);
    let workflow = s.store().workflow_of_step(&step_id).await?;
    let patch = step_patch(s, &workflow, p).await?;
    let workflow = s.engine().update_step(&step_id, &patch).await?;
    Ok(WorkflowOne { workflow: WorkflowDto::from(&workflow) })
}

pub async fn step_delete(s: &AppState, p: ById) -> Result<WorkflowOne, ApiError> {
    let workflow = s.engine().delete_step(&StepId::new(p.id)).await?;
    Ok(WorkflowOne { workflow: WorkflowDto::from(&workflow) })
}

pub async fn step_reorder(s: &AppState, p: StepReorder) -> Result<WorkflowOne, ApiError> {
    let order: Vec<StepId> = p.step_ids.into_iter().map(StepId::new).collect();
    let workflow = s.engine().reorder_steps(&WorkflowId::new(p.workflow_id), &order).await?;
    Ok(WorkflowOne { workflow: WorkflowDto::from(&workflow) })
}

/// Validates a step change against its workflow: names, actions per trigger, move targets.
async fn step_patch(
    s: &AppState,
    workflow: &Workflow,
    p: StepUpdate,
) -> Result<StepPatch, ApiError> {
    let agent_profile_id = match p.agent_profile_id {
        Some(Some(id)) => {
            let id = AgentProfileId::new(id);
            s.store().get_profile(&id).await?;
            Some(Some(id))
        }
        other => other.map(|_| None),
    };
    Ok(StepPatch {
        name: p.name.as_deref().map(|n| validate::name("name", n)).transpose()?,
        color: p.color.as_deref().map(|c| validate::color("color", c)).transpose()?,
        prompt: p.prompt.as_deref().map(|t| validate::prompt("prompt", t)).transpose()?,
        is_start_step: p.is_start_step,
        allow_manual_move: p.allow_manual_move,
        agent_profile_id,
        cancel_triggers_turn_complete: p.cancel_triggers_turn_complete,
        events: p.events.map(|e| checked_events(workflow, e)).transpose()?,
    })
}

fn checked_events(workflow: &Workflow, events: EventsDto) -> Result<StepEvents<StepId>, ApiError> {
    let events: StepEvents<StepId> = events.into();
    if let Some((trigger, index, action)) = events.misplaced().first() {
        return Err(ApiError::validation(format!(
            "events.{}[{index}]: {} is not allowed under {}",
            trigger.as_str(),
            action.type_name(),
            trigger.as_str()
        )));
    }
    let known: HashSet<&StepId> = workflow.steps.iter().map(|s| &s.id).collect();
    for trigger in kandev_domain::workflow::Trigger::ALL {
        for action in events.actions(trigger) {
            if let Action::SendFeedback(feedback) = action
                && !(1..=Feedback::MAX_ROUNDS).contains(&feedback.max_rounds)
            {
                return Err(ApiError::validation(format!(
                    "send feedback under {}: the rounds must be from 1 to {}",
                    trigger.as_str(),
                    Feedback::MAX_ROUNDS
                )));
            }
            if let Action::StartAttempts { count } = action
                && !(1..=MAX_ATTEMPTS).contains(count)
            {
                return Err(ApiError::validation(format!(
                    "start attempts under {}: the count must be from 1 to {MAX_ATTEMPTS}",
                    trigger.as_str()
                )));
            }
            if let Action::MoveToStep(target) = action
                && !known.contains(target)
            {
                return Err(ApiError::validation(format!(
                    "events.{}: move_to_step names step {target}, which is not in this workflow",
                    trigger.as_str()
                )));
            }
        }
    }
    Ok(events)
}
