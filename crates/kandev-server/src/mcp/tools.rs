//! The MCP tools of spec/mcp.md. Each is a thin call into the action table (the same
//! handler, validation, errors and events as `POST /api/v1/<action>`); what MCP adds is only
//! the defaults a session gives (its task, its workflow), names for steps, and what a
//! session token may do (issue 38 item 8):
//! - its scope, the workflow of the session's task: every argument that names a task (the
//!   task acted on, a parent, each blocker) goes through [`Call::task`], the one check;
//! - the agents it may start: a task it creates runs its own agent profile, and it makes an
//!   agent run only on tasks at most `MAX_AGENT_DEPTH` agents deep
//!   (`kandev_engine::mcp::check_agent_depth`);
//! - at most `MAX_PENDING_QUESTIONS` questions waiting (the engine's `ask_user`).

use std::sync::Arc;

use kandev_api_types::actions;
use kandev_api_types::requests::{
    ById, TaskCreate, TaskList, TaskMove, TaskRepositoryRef, TaskUpdate,
};
use kandev_api_types::{ErrorCode, TaskCardDto, TaskDto};
use kandev_domain::message_meta::StatusNote;
use kandev_domain::question::QuestionStatus;
use kandev_domain::task::Task;
use kandev_domain::workflow::{Action, Step, Workflow};
use kandev_domain::{AgentProfileId, SessionId, TaskId};
use kandev_engine::mcp::check_agent_depth;
use rmcp::model::Tool;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::Caller;
use crate::accounts::Identity;
use crate::dispatch::Handler;
use crate::roles::{self, AgentRights, Grants};
use crate::{ApiError, AppState};
use kandev_api_types::AuthVia;
use kandev_api_types::access::{Access, Subject, Subjects};
use kandev_api_types::actions::Action as _;
use kandev_domain::account::Actor;

/// The action each tool is: its access rule is the tool's (issue 49), checked for the caller
/// before the tool runs; the actions a tool then calls are checked again on their own objects.
/// A tool missing here is refused (and `mcp.rs` checks every listed tool has one).
pub(crate) fn tool_access(name: &str) -> Option<Access> {
    Some(match name {
        "get_task" => actions::TaskGet::ACCESS,
        "list_tasks" => actions::TaskList::ACCESS,
        "create_task" => actions::TaskCreate::ACCESS,
        "update_task" => actions::TaskUpdate::ACCESS,
        "move_task" | "complete_step" => actions::TaskMove::ACCESS,
        // Both write into the session's transcript, as a message does.
        "ask_user" | "add_note" => actions::MessageAdd::ACCESS,
        _ => return None,
    })
}

/// The tools, with their input schemas.
pub(crate) fn list() -> Vec<Tool> {
    let tool = |name: &'static str, description: &'static str, schema: Value| {
        let Value::Object(schema) = schema else { unreachable!("schemas are objects") };
        Tool::new(name, description, Arc::new(schema))
    };
    let string = json!({ "type": "string" });
    let strings = json!({ "type": "array", "items": { "type": "string" } });
    vec![
        tool(
            "get_task",
            "Read a task: description, step, the workflow's steps, parent, subtasks, blockers. \
             Default: the task this session works on.",
            json!({ "type": "object", "properties": { "task_id": string } }),
        ),
        tool(
            "list_tasks",
            "List the tasks of a workflow (default: this session's), optionally in one step \
             (name or id) or matching a query.",
            json!({ "type": "object", "properties": {
                "workflow_id": string, "step": string, "query": string } }),
        ),
        tool(
            "create_task",
            "Create a task in this session's workflow. parent_id \"current\" makes it a \
             subtask of this session's task (a subtask works on its parent's repositories); \
             step is a step name or id (default: the start step, or, unless start_agent is \
             true, the first step that does not start an agent); blocked_by lists task ids \
             that must be done first.",
            json!({ "type": "object", "required": ["title"], "properties": {
                "title": string, "description": string, "parent_id": string, "step": string,
                "blocked_by": strings, "start_agent": { "type": "boolean" },
                "agent_profile": string } }),
        ),
        tool(
            "update_task",
            "Change a task's title, description or blockers (blocked_by: task ids).",
            json!({ "type": "object", "required": ["task_id"], "properties": {
                "task_id": string, "title": string, "description": string,
                "blocked_by": strings } }),
        ),
        tool(
            "move_task",
            "Move a task (default: this session's) to a step (name or id); the step's actions \
             run as for a manual move.",
            json!({ "type": "object", "required": ["step"], "properties": {
                "task_id": string, "step": string } }),
        ),
        tool(
            "complete_step",
            "Say this session's step is done: the task moves to the workflow's next step and \
             the summary is kept in the transcript.",
            json!({ "type": "object", "properties": { "summary": string } }),
        ),
        tool(
            "ask_user",
            "Ask the developer a question and wait for the answer (a card on the task page). \
             With options the answer is one of them. Returns {answer}, or {cancelled: true} \
             when the turn was cancelled, the session stopped or the question timed out.",
            json!({ "type": "object", "required": ["question"], "properties": {
                "question": string, "options": strings,
                "timeout_s": { "type": "integer", "minimum": 1 } } }),
        ),
        tool(
            "add_note",
            "Leave a note (a status message) in this session's transcript.",
            json!({ "type": "object", "required": ["text"], "properties": { "text": string } }),
        ),
    ]
}

/// Runs tool `name` for `caller`; errors carry the API's code and message.
pub(crate) async fn call(
    state: &AppState,
    caller: &Caller,
    name: &str,
    arguments: Value,
    _cancel: &CancellationToken,
) -> Result<Value, ApiError> {
    let Some(access) = tool_access(name) else {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            format!("no tool {name:?}; see tools/list for the tools Kandev offers"),
        ));
    };
    let identity = identity(state, caller).await?;
    let grants = roles::grants(state, &identity).await?;
    roles::precheck(&grants, access)?;
    if let Caller::Session(session) = caller {
        let own = Access { subject: Subject::Session, ..access };
        roles::check_subjects(state, &grants, own, &[session.session_id.as_str()]).await?;
    }
    let call = Call { state, caller, identity, grants, access };
    match name {
        "get_task" => call.get_task(args(arguments)?).await,
        "list_tasks" => call.list_tasks(args(arguments)?).await,
        "create_task" => call.create_task(args(arguments)?).await,
        "update_task" => call.update_task(args(arguments)?).await,
        "move_task" => call.move_task(args(arguments)?).await,
        "complete_step" => call.complete_step(args(arguments)?).await,
        "add_note" => call.add_note(args(arguments)?).await,
        "ask_user" => call.ask_user(args(arguments)?).await,
        other => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("no tool {other:?}; see tools/list for the tools Kandev offers"),
        )),
    }
}

/// A tool's arguments as their type; an error names the field.
fn args<T: DeserializeOwned>(arguments: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(arguments).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." {
            ApiError::validation(format!("invalid arguments: {inner}"))
        } else {
            ApiError::validation(format!("invalid argument {path}: {inner}"))
        }
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetTask {
    task_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListTasks {
    workflow_id: Option<String>,
    step: Option<String>,
    query: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateTask {
    title: String,
    description: Option<String>,
    parent_id: Option<String>,
    step: Option<String>,
    #[serde(default)]
    blocked_by: Vec<String>,
    #[serde(default)]
    start_agent: bool,
    agent_profile: Option<String>,
    /// Server token only: the workflow to create in.
    workflow_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateTask {
    task_id: String,
    title: Option<String>,
    description: Option<String>,
    blocked_by: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MoveTask {
    task_id: Option<String>,
    step: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompleteStep {
    summary: Option<String>,
    /// Server token only: the session whose task completes its step.
    session_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AskUser {
    question: String,
    #[serde(default)]
    options: Vec<String>,
    timeout_s: Option<u64>,
    /// Server token only: the session that asks.
    session_id: Option<String>,
}

/// Default and longest wait of `ask_user`.
const ASK_DEFAULT_S: u64 = 3600;
const ASK_MAX_S: u64 = 7 * 24 * 3600;

/// Cancels a question whose tool call went away (the agent's request broke off) unless it
/// was resolved.
struct Unanswered<'a> {
    state: &'a AppState,
    id: Option<String>,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        // A server going down leaves it pending: the next start marks it expired.
        if self.state.closing().is_cancelled() {
            return;
        }
        if let Some(id) = self.id.take() {
            self.state.engine().drop_question(id);
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddNote {
    text: String,
    /// Server token only: the session to note in.
    session_id: Option<String>,
}

/// The session a session-bound tool acts for: the caller's own, or (server token) the one
/// named by `session_id`.
struct ActingSession {
    id: SessionId,
    task_id: TaskId,
    epoch: Option<i64>,
}

/// Who a tool call acts as: the person who called `/mcp` with their own credential, or the
/// agent of a session, with the rights of the user who started it (`roles.rs`).
async fn identity(state: &AppState, caller: &Caller) -> Result<Identity, ApiError> {
    let session = match caller {
        Caller::Server(identity) => return Ok(identity.clone()),
        Caller::Session(session) => session,
    };
    let task = state.store().get_task(&session.task_id).await?;
    let started_by = state.store().session_started_by(&session.session_id).await?.flatten();
    let rights = AgentRights { workspace_id: task.workspace_id.to_string(), started_by };
    Ok(Identity { actor: Actor::Agent, via: AuthVia::Open, credential: None, agent: Some(rights) })
}

struct Call<'a> {
    state: &'a AppState,
    caller: &'a Caller,
    identity: Identity,
    grants: Grants,
    /// The tool's access rule.
    access: Access,
}

impl Call<'_> {
    /// Runs one action of the table with its typed request, checked and audited as when a
    /// client calls it.
    async fn act<A: Handler>(&self, request: A::Request) -> Result<A::Response, ApiError> {
        let (_, workspace) = roles::authorize::<A>(self.state, &self.identity, &request).await?;
        let target = request.target().map(str::to_owned);
        let response = A::handle(self.state, &self.identity, request).await?;
        crate::dispatch::record::<A>(
            self.state,
            &self.identity,
            workspace.as_deref(),
            target.as_deref(),
        )
        .await;
        Ok(response)
    }

    /// The task an argument names (`task_id`, a parent, a blocker), else the session's
    /// task: the one scope check of every tool. A session token reaches only tasks of its
    /// own task's workflow (`FORBIDDEN`); the server token reaches every task.
    /// A task's repositories as a new task takes them: each with the task's base branch.
    async fn repositories_of(&self, task_id: &TaskId) -> Result<Vec<TaskRepositoryRef>, ApiError> {
        let task = self.state.store().get_task(task_id).await?;
        let mut out = vec![];
        for id in &task.repository_ids {
            let base_branch = self.state.store().task_base_branch(task_id, id).await?;
            out.push(TaskRepositoryRef { id: id.to_string(), base_branch });
        }
        Ok(out)
    }

    async fn task(&self, task_id: Option<String>) -> Result<Task, ApiError> {
        let id = match (task_id, self.caller) {
            (Some(id), _) => TaskId::new(id),
            (None, Caller::Session(session)) => session.task_id.clone(),
            (None, Caller::Server(_)) => {
                return Err(ApiError::validation("task_id is required with the server token"));
            }
        };
        let task = self.state.store().get_task(&id).await?;
        self.check_workflow(&task.workflow_id.to_string()).await?;
        Ok(task)
    }

    /// The tasks of a list argument (`blocked_by`), each through [`Call::task`].
    async fn tasks(&self, ids: Vec<String>) -> Result<Vec<String>, ApiError> {
        let mut checked = Vec::with_capacity(ids.len());
        for id in ids {
            checked.push(self.task(Some(id)).await?.id.to_string());
        }
        Ok(checked)
    }

    /// The workflow of the session's task (a session token's scope).
    async fn own_workflow(&self) -> Result<Option<String>, ApiError> {
        match self.caller {
            Caller::Server(_) => Ok(None),
            Caller::Session(session) => {
                let task = self.state.store().get_task(&session.task_id).await?;
                Ok(Some(task.workflow_id.to_string()))
            }
        }
    }

    async fn check_workflow(&self, workflow_id: &str) -> Result<(), ApiError> {
        match self.own_workflow().await? {
            Some(own) if own != workflow_id => Err(ApiError::forbidden(
                "a session token reaches only the tasks of its own task's workflow",
            )),
            _ => Ok(()),
        }
    }

    async fn acting_session(&self, session_id: Option<String>) -> Result<ActingSession, ApiError> {
        match (self.caller, session_id) {
            (Caller::Session(s), None) => Ok(ActingSession {
                id: s.session_id.clone(),
                task_id: s.task_id.clone(),
                epoch: Some(s.epoch),
            }),
            (Caller::Session(_), Some(_)) => {
                Err(ApiError::validation("session_id is only for the server token; leave it out"))
            }
            (Caller::Server(_), Some(id)) => {
                let own = Access { subject: Subject::Session, ..self.access };
                roles::check_subjects(self.state, &self.grants, own, &[id.as_str()]).await?;
                let session = self.state.store().get_session(&SessionId::new(id)).await?;
                Ok(ActingSession { id: session.id, task_id: session.task_id, epoch: None })
            }
            (Caller::Server(_), None) => Err(ApiError::validation(
                "session_id is required with the server token (agents' tokens name their session)",
            )),
        }
    }

    async fn workflow(&self, id: &kandev_domain::WorkflowId) -> Result<Workflow, ApiError> {
        Ok(self.state.store().get_workflow(id).await?)
    }

    async fn get_task(&self, a: GetTask) -> Result<Value, ApiError> {
        let task = self.task(a.task_id).await?;
        let found = self.act::<actions::TaskGet>(ById { id: task.id.to_string() }).await?;
        let workflow = self.workflow(&task.workflow_id).await?;
        let step = workflow.step(&task.step_id).map(|s| s.name.clone());
        let steps: Vec<Value> = workflow.steps.iter().map(step_json).collect();
        Ok(json!({
            "task": found.task,
            "step": step,
            "workflow_steps": steps,
        }))
    }

    async fn list_tasks(&self, a: ListTasks) -> Result<Value, ApiError> {
        let workflow_id = match (a.workflow_id, self.own_workflow().await?) {
            (Some(id), _) => {
                self.check_workflow(&id).await?;
                id
            }
            (None, Some(own)) => own,
            (None, None) => {
                return Err(ApiError::validation("workflow_id is required with the server token"));
            }
        };
        let workflow = self.workflow(&kandev_domain::WorkflowId::new(&workflow_id)).await?;
        let step_id = a.step.map(|s| step_named(&workflow, &s).map(|s| s.id.to_string()));
        let request = TaskList {
            workflow_id,
            step_id: step_id.transpose()?,
            query: a.query,
            include_archived: false,
            limit: None,
            cursor: None,
        };
        let found = self.act::<actions::TaskList>(request).await?;
        let tasks: Vec<Value> = found.tasks.iter().map(|t| lean(&workflow, t)).collect();
        Ok(json!({ "tasks": tasks }))
    }

    async fn create_task(&self, a: CreateTask) -> Result<Value, ApiError> {
        let workflow_id = match (a.workflow_id, self.own_workflow().await?) {
            (Some(_), Some(_)) => {
                return Err(ApiError::validation(
                    "workflow_id is only for the server token; a session creates in its workflow",
                ));
            }
            (Some(id), None) | (None, Some(id)) => id,
            (None, None) => {
                return Err(ApiError::validation("workflow_id is required with the server token"));
            }
        };
        let workflow = self.workflow(&kandev_domain::WorkflowId::new(&workflow_id)).await?;
        let step = match &a.step {
            Some(step) => Some(step_named(&workflow, step)?),
            // An agent's task starts an agent only when it asks for one (issue 45 item 7).
            None if matches!(self.caller, Caller::Session(_)) && !a.start_agent => {
                quiet_step(&workflow)
            }
            None => workflow.start_step(),
        };
        let step_id = step.map(|s| s.id.to_string());
        let parent_id = match a.parent_id.as_deref() {
            Some("current") => match self.caller {
                Caller::Session(s) => Some(s.task_id.to_string()),
                Caller::Server(_) => {
                    return Err(ApiError::validation(
                        "parent_id \"current\" needs a session token; give a task id",
                    ));
                }
            },
            Some(id) => Some(self.task(Some(id.to_owned())).await?.id.to_string()),
            None => None,
        };
        // A subtask works on its parent's repositories, from the same base branches.
        let repositories = match &parent_id {
            Some(parent) => self.repositories_of(&TaskId::new(parent)).await?,
            None => vec![],
        };
        let blocked_by = self.tasks(a.blocked_by).await?;
        let named = match a.agent_profile {
            Some(name) => Some(self.profile_named(&name).await?),
            None => None,
        };
        let starts = a.start_agent
            || step.is_some_and(|s| s.events.on_enter.contains(&Action::AutoStartAgent));
        let (agent_profile_id, depth) = match self.caller {
            Caller::Server(_) => (named, 0),
            Caller::Session(session) => self.agents_task(session, named, step, starts).await?,
        };
        let request = TaskCreate {
            workflow_id,
            title: a.title,
            description: a.description,
            step_id,
            repository_ids: vec![],
            repositories,
            agent_profile_id: agent_profile_id.map(|p| p.to_string()),
            start_agent: a.start_agent,
            parent_id,
            blocked_by,
        };
        // `task.create` by another way in (the depth): its check and its record as for a
        // client's call.
        let (_, workspace) =
            roles::authorize::<actions::TaskCreate>(self.state, &self.identity, &request).await?;
        let starter = roles::starter(&self.identity);
        let created =
            crate::handlers::task::create_at_depth(self.state, request, depth, starter).await?;
        let id = created.task.id.clone();
        crate::dispatch::record::<actions::TaskCreate>(
            self.state,
            &self.identity,
            workspace.as_deref(),
            Some(&id),
        )
        .await;
        Ok(json!({ "task": created.task, "session": created.session }))
    }

    /// The profile and depth of a task an agent creates in `step`, and whether it may
    /// `start` an agent there: the task runs the agent's own profile (naming another is
    /// refused), and is one agent deeper than the agent's task; an agent starts only with its
    /// own profile (not in a step that names another) and down to `MAX_AGENT_DEPTH`.
    async fn agents_task(
        &self,
        session: &kandev_engine::mcp::McpSession,
        named: Option<AgentProfileId>,
        step: Option<&Step>,
        starts: bool,
    ) -> Result<(Option<AgentProfileId>, u32), ApiError> {
        let own = self.state.store().get_session(&session.session_id).await?.agent_profile_id;
        if named.is_some() && named != own {
            return Err(ApiError::forbidden(
                "an agent creates tasks only with its own agent profile; leave agent_profile \
                 out and the task runs the agent's own",
            ));
        }
        let depth = self.state.store().task_agent_depth(&session.task_id).await?;
        let depth = depth.saturating_add(1);
        if starts {
            check_agent_depth(depth)?;
            if let Some(step) = step
                && step.agent_profile_id.is_some()
                && step.agent_profile_id != own
            {
                return Err(ApiError::forbidden(format!(
                    "step {:?} starts its agent with another agent profile, and an agent \
                     starts agents only with its own agent profile: create the task in a step \
                     that does not start an agent, and without start_agent",
                    step.name
                )));
            }
        }
        Ok((own, depth))
    }

    async fn update_task(&self, a: UpdateTask) -> Result<Value, ApiError> {
        let task = self.task(Some(a.task_id)).await?;
        let blocked_by = match a.blocked_by {
            Some(ids) => Some(self.tasks(ids).await?),
            None => None,
        };
        let request = TaskUpdate {
            id: task.id.to_string(),
            title: a.title,
            description: a.description,
            repository_ids: None,
            agent_profile_id: None,
            parent_id: None,
            blocked_by,
        };
        let updated = self.act::<actions::TaskUpdate>(request).await?;
        Ok(json!({ "task": updated.task }))
    }

    async fn move_task(&self, a: MoveTask) -> Result<Value, ApiError> {
        let task = self.task(a.task_id).await?;
        let workflow = self.workflow(&task.workflow_id).await?;
        let step = step_named(&workflow, &a.step)?;
        let starts =
            step.id != task.step_id && step.events.on_enter.contains(&Action::AutoStartAgent);
        if starts && let Caller::Session(session) = self.caller {
            check_agent_depth(self.state.store().task_agent_depth(&task.id).await?)?;
            // The agent the step would start must be of the agent's own profile, as with
            // `create_task`.
            let own = self.state.store().get_session(&session.session_id).await?.agent_profile_id;
            if self.profile_started(&task, step).await? != self.profile_or_mock(own).await? {
                return Err(ApiError::forbidden(format!(
                    "moving the task to step {:?} would start an agent of another agent \
                     profile, and an agent starts agents only with its own agent profile: \
                     move it to a step that does not start an agent",
                    step.name
                )));
            }
        }
        let request =
            TaskMove { id: task.id.to_string(), step_id: step.id.to_string(), position: None };
        let moved = self.act::<actions::TaskMove>(request).await?;
        Ok(json!({ "task": moved.task, "step": step.name }))
    }

    /// The profile of the agent entering `step` starts for `task` (as the engine chooses the
    /// session a step works in): the task's primary session's when the step names none or
    /// the same, else the step's, else the task's, else the built-in Mock profile.
    async fn profile_started(
        &self,
        task: &Task,
        step: &Step,
    ) -> Result<Option<AgentProfileId>, ApiError> {
        let primary = match &task.primary_session_id {
            Some(id) => Some(self.state.store().get_session(id).await?.agent_profile_id),
            None => None,
        };
        let profile = match (primary, &step.agent_profile_id) {
            (Some(primary), None) => primary,
            (_, Some(wanted)) => Some(wanted.clone()),
            (None, None) => task.agent_profile_id.clone(),
        };
        self.profile_or_mock(profile).await
    }

    /// `profile`, or the built-in Mock profile's id for none (what a session without one runs).
    async fn profile_or_mock(
        &self,
        profile: Option<AgentProfileId>,
    ) -> Result<Option<AgentProfileId>, ApiError> {
        if profile.is_some() {
            return Ok(profile);
        }
        let profiles = self.state.store().list_profiles().await?;
        let mock = profiles.into_iter().find(|p| p.kind == kandev_domain::agent::AgentKind::Mock);
        Ok(mock.map(|p| p.id))
    }

    async fn complete_step(&self, a: CompleteStep) -> Result<Value, ApiError> {
        let session = self.acting_session(a.session_id).await?;
        let task = self.state.store().get_task(&session.task_id).await?;
        let workflow = self.workflow(&task.workflow_id).await?;
        let mut steps: Vec<&Step> = workflow.steps.iter().collect();
        steps.sort_by_key(|s| s.position);
        let here = steps.iter().position(|s| s.id == task.step_id);
        let Some(next) = here.and_then(|i| steps.get(i + 1)) else {
            return Err(ApiError::conflict(
                "the task is in the workflow's last step already; there is no next step",
            ));
        };
        let (next_id, next_name) = (next.id.clone(), next.name.clone());
        let summary = a.summary.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
        let here_name = here.and_then(|i| steps.get(i)).map(|s| s.name.clone()).unwrap_or_default();
        let text = match &summary {
            Some(summary) => format!("step {here_name:?} done: {summary}"),
            None => format!("step {here_name:?} done"),
        };
        let metadata = StatusNote::CompleteStep { step: here_name };
        // A workflow move: the agent finished the step, so `allow_manual_move` does not apply.
        // Made only from the step it finished: a person who moved the task meanwhile wins, and
        // then there is no note either.
        let engine = self.state.engine();
        let (from, note) = (&task.step_id, (text, metadata));
        let moved = engine
            .complete_step(&session.id, session.epoch, &task.id, from, &next_id, note)
            .await?;
        let Some((moved, _)) = moved else {
            return Err(ApiError::conflict(
                "the task moved to another step meanwhile; nothing was moved (read the task again)",
            ));
        };
        let workspace = moved.workspace_id.to_string();
        crate::dispatch::record::<actions::TaskMove>(
            self.state,
            &self.identity,
            Some(&workspace),
            Some(moved.id.as_str()),
        )
        .await;
        Ok(json!({ "task": TaskDto::from(&moved), "step": next_name }))
    }

    async fn add_note(&self, a: AddNote) -> Result<Value, ApiError> {
        let session = self.acting_session(a.session_id).await?;
        let text = a.text.trim().to_owned();
        if text.is_empty() {
            return Err(ApiError::validation("text must not be empty"));
        }
        if text.len() > 64 * 1024 {
            return Err(ApiError::validation("text is longer than 64 KiB; shorten it"));
        }
        let note = StatusNote::McpNote;
        self.state.engine().add_note(&session.id, text, note, session.epoch).await?;
        Ok(json!({ "added": true }))
    }

    async fn ask_user(&self, a: AskUser) -> Result<Value, ApiError> {
        let session = self.acting_session(a.session_id).await?;
        let question = a.question.trim();
        if question.is_empty() {
            return Err(ApiError::validation("question must not be empty"));
        }
        if question.len() > 16 * 1024 {
            return Err(ApiError::validation("question is longer than 16 KiB; shorten it"));
        }
        let options: Vec<String> =
            a.options.iter().map(|o| o.trim().to_owned()).filter(|o| !o.is_empty()).collect();
        if options.len() > 20 || options.iter().any(|o| o.len() > 500) {
            return Err(ApiError::validation(
                "options: at most 20, each at most 500 bytes; ask for free text instead",
            ));
        }
        let seconds = a.timeout_s.unwrap_or(ASK_DEFAULT_S).clamp(1, ASK_MAX_S);
        let timeout = std::time::Duration::from_secs(seconds);
        let engine = self.state.engine();
        let (asked, answered) = engine.ask_user(&session.id, question, &options, timeout).await?;
        let mut guard = Unanswered { state: self.state, id: Some(asked.id.clone()) };
        let resolved = match tokio::time::timeout(timeout, answered).await {
            Ok(Ok(resolved)) => resolved,
            // Timed out (or the waiter was dropped): time it out, unless it was resolved.
            _ => {
                match engine.resolve_question(&asked.id, QuestionStatus::TimedOut, None, None).await
                {
                    Ok(resolved) => resolved,
                    Err(_) => self.state.store().get_question(&asked.id).await?,
                }
            }
        };
        guard.id = None;
        Ok(match (resolved.status, resolved.answer) {
            (QuestionStatus::Answered, Some(answer)) => json!({ "answer": answer }),
            (status, _) => json!({ "cancelled": true, "reason": status.as_str() }),
        })
    }

    /// A profile by id or name.
    async fn profile_named(&self, name: &str) -> Result<AgentProfileId, ApiError> {
        let profiles = self.state.store().list_profiles().await?;
        profiles
            .iter()
            .find(|p| p.id.as_str() == name)
            .or_else(|| profiles.iter().find(|p| p.name.eq_ignore_ascii_case(name)))
            .map(|p| p.id.clone())
            .ok_or_else(|| {
                ApiError::validation(format!(
                    "no agent profile {name:?}; give a profile's id or name"
                ))
            })
    }
}

/// The step an agent's task lands in when it does not ask for an agent: the start step if
/// it starts none, else the first step (in board order) that starts none, else the start step.
fn quiet_step(workflow: &Workflow) -> Option<&Step> {
    let starts = |s: &Step| s.events.on_enter.contains(&Action::AutoStartAgent);
    match workflow.start_step() {
        Some(start) if !starts(start) => Some(start),
        start => {
            let mut steps: Vec<&Step> = workflow.steps.iter().collect();
            steps.sort_by_key(|s| s.position);
            steps.into_iter().find(|s| !starts(s)).or(start)
        }
    }
}

/// A step by id or name (case-insensitive).
fn step_named<'w>(workflow: &'w Workflow, name: &str) -> Result<&'w Step, ApiError> {
    workflow
        .steps
        .iter()
        .find(|s| s.id.as_str() == name)
        .or_else(|| workflow.steps.iter().find(|s| s.name.eq_ignore_ascii_case(name.trim())))
        .ok_or_else(|| {
            let names: Vec<&str> = workflow.steps.iter().map(|s| s.name.as_str()).collect();
            ApiError::validation(format!(
                "no step {name:?} in the workflow; its steps are {}",
                names.join(", ")
            ))
        })
}

fn step_json(step: &Step) -> Value {
    json!({ "id": step.id.to_string(), "name": step.name, "position": step.position })
}

/// A task as `list_tasks` shows it: what an agent needs to pick one.
fn lean(workflow: &Workflow, task: &TaskCardDto) -> Value {
    let step = workflow.steps.iter().find(|s| s.id.as_str() == task.step_id).map(|s| &s.name);
    let mut object = Map::new();
    object.insert("id".into(), json!(task.id));
    object.insert("title".into(), json!(task.title));
    object.insert("step".into(), json!(step));
    object.insert("state".into(), json!(task.state));
    Value::Object(object)
}
