//! Row types as stored, and their conversion to domain types. Rows never leave this crate.

use kandev_domain::agent::{AgentKind, AgentProfile, EnvVar};
use kandev_domain::task::{Task, TaskState};
use kandev_domain::workflow::{Action, Step, StepEvents, Workflow};
use kandev_domain::workspace::{Repository, Workspace};
use kandev_domain::{
    AgentProfileId, RepositoryId, StepId, TaskId, Timestamp, WorkflowId, WorkspaceId,
};
use serde::{Deserialize, Serialize};
use sqlx::FromRow;

use crate::{Result, StoreError};

#[derive(FromRow)]
pub(crate) struct WorkspaceRow {
    pub id: String,
    pub name: String,
    pub created_at: i64,
    pub updated_at: i64,
}

impl From<WorkspaceRow> for Workspace {
    fn from(r: WorkspaceRow) -> Self {
        Workspace {
            id: WorkspaceId::new(r.id),
            name: r.name,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        }
    }
}

#[derive(FromRow)]
pub(crate) struct RepositoryRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub local_path: String,
    pub default_branch: String,
    pub branch_template: String,
    pub setup_script: String,
    pub created_at: i64,
    pub updated_at: i64,
}

impl From<RepositoryRow> for Repository {
    fn from(r: RepositoryRow) -> Self {
        Repository {
            id: RepositoryId::new(r.id),
            workspace_id: WorkspaceId::new(r.workspace_id),
            name: r.name,
            local_path: r.local_path,
            default_branch: r.default_branch,
            branch_template: r.branch_template,
            setup_script: r.setup_script,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        }
    }
}

#[derive(FromRow)]
pub(crate) struct WorkflowRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub description: String,
    pub template_id: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl WorkflowRow {
    pub fn into_workflow(self, steps: Vec<Step>) -> Workflow {
        Workflow {
            id: WorkflowId::new(self.id),
            workspace_id: WorkspaceId::new(self.workspace_id),
            name: self.name,
            description: self.description,
            template_id: self.template_id,
            steps,
            created_at: Timestamp(self.created_at),
            updated_at: Timestamp(self.updated_at),
        }
    }
}

#[derive(FromRow)]
pub(crate) struct StepRow {
    pub id: String,
    pub workflow_id: String,
    pub name: String,
    pub position: i64,
    pub color: String,
    pub prompt: String,
    pub is_start_step: bool,
    pub allow_manual_move: bool,
    pub agent_profile_id: Option<String>,
    pub cancel_triggers_turn_complete: bool,
    pub events: String,
}

impl TryFrom<StepRow> for Step {
    type Error = StoreError;

    fn try_from(r: StepRow) -> Result<Step> {
        let events = events_from_json(&r.events)
            .map_err(|e| StoreError::Corrupt(format!("step {} events: {e}", r.id)))?;
        Ok(Step {
            id: StepId::new(r.id),
            workflow_id: WorkflowId::new(r.workflow_id),
            name: r.name,
            position: r.position.try_into().unwrap_or(0),
            color: r.color,
            prompt: r.prompt,
            is_start_step: r.is_start_step,
            allow_manual_move: r.allow_manual_move,
            agent_profile_id: r.agent_profile_id.map(AgentProfileId::new),
            cancel_triggers_turn_complete: r.cancel_triggers_turn_complete,
            events,
        })
    }
}

/// The stored JSON form of one action (`move_to_step` names a step id).
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ActionJson {
    ResetAgentContext,
    EnablePlanMode,
    DisablePlanMode,
    SetSessionMode { mode_id: String },
    AutoStartAgent,
    MoveToNext,
    MoveToPrevious,
    MoveToStep { step_id: String },
}

#[derive(Serialize, Deserialize, Default)]
struct EventsJson {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    on_enter: Vec<ActionJson>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    on_turn_start: Vec<ActionJson>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    on_turn_complete: Vec<ActionJson>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    on_exit: Vec<ActionJson>,
}

fn action_to_json(a: &Action<StepId>) -> ActionJson {
    match a {
        Action::ResetAgentContext => ActionJson::ResetAgentContext,
        Action::EnablePlanMode => ActionJson::EnablePlanMode,
        Action::DisablePlanMode => ActionJson::DisablePlanMode,
        Action::SetSessionMode { mode_id } => {
            ActionJson::SetSessionMode { mode_id: mode_id.clone() }
        }
        Action::AutoStartAgent => ActionJson::AutoStartAgent,
        Action::MoveToNext => ActionJson::MoveToNext,
        Action::MoveToPrevious => ActionJson::MoveToPrevious,
        Action::MoveToStep(id) => ActionJson::MoveToStep { step_id: id.to_string() },
    }
}

fn action_from_json(a: ActionJson) -> Action<StepId> {
    match a {
        ActionJson::ResetAgentContext => Action::ResetAgentContext,
        ActionJson::EnablePlanMode => Action::EnablePlanMode,
        ActionJson::DisablePlanMode => Action::DisablePlanMode,
        ActionJson::SetSessionMode { mode_id } => Action::SetSessionMode { mode_id },
        ActionJson::AutoStartAgent => Action::AutoStartAgent,
        ActionJson::MoveToNext => Action::MoveToNext,
        ActionJson::MoveToPrevious => Action::MoveToPrevious,
        ActionJson::MoveToStep { step_id } => Action::MoveToStep(StepId::new(step_id)),
    }
}

pub(crate) fn events_to_json(events: &StepEvents<StepId>) -> String {
    let list = |v: &[Action<StepId>]| v.iter().map(action_to_json).collect();
    let json = EventsJson {
        on_enter: list(&events.on_enter),
        on_turn_start: list(&events.on_turn_start),
        on_turn_complete: list(&events.on_turn_complete),
        on_exit: list(&events.on_exit),
    };
    serde_json::to_string(&json).unwrap_or_else(|_| "{}".into())
}

fn events_from_json(text: &str) -> std::result::Result<StepEvents<StepId>, serde_json::Error> {
    let json: EventsJson = serde_json::from_str(text)?;
    let list = |v: Vec<ActionJson>| v.into_iter().map(action_from_json).collect();
    Ok(StepEvents {
        on_enter: list(json.on_enter),
        on_turn_start: list(json.on_turn_start),
        on_turn_complete: list(json.on_turn_complete),
        on_exit: list(json.on_exit),
    })
}

#[derive(FromRow)]
pub(crate) struct TaskRow {
    pub id: String,
    pub workspace_id: String,
    pub workflow_id: String,
    pub step_id: String,
    pub title: String,
    pub description: String,
    pub state: String,
    pub position: i64,
    pub agent_profile_id: Option<String>,
    pub primary_session_id: Option<String>,
    pub archived_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    /// Comma-separated repository ids in order (from `group_concat`).
    pub repository_ids: Option<String>,
}

impl TryFrom<TaskRow> for Task {
    type Error = StoreError;

    fn try_from(r: TaskRow) -> Result<Task> {
        let state = TaskState::parse(&r.state)
            .ok_or_else(|| StoreError::Corrupt(format!("task {} state {:?}", r.id, r.state)))?;
        let repository_ids = r
            .repository_ids
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(|s| s.split(',').map(RepositoryId::new).collect())
            .unwrap_or_default();
        Ok(Task {
            id: TaskId::new(r.id),
            workspace_id: WorkspaceId::new(r.workspace_id),
            workflow_id: WorkflowId::new(r.workflow_id),
            step_id: StepId::new(r.step_id),
            title: r.title,
            description: r.description,
            state,
            position: r.position.try_into().unwrap_or(0),
            repository_ids,
            agent_profile_id: r.agent_profile_id.map(AgentProfileId::new),
            primary_session_id: r.primary_session_id.map(kandev_domain::SessionId::new),
            archived_at: r.archived_at.map(Timestamp),
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        })
    }
}

#[derive(FromRow)]
pub(crate) struct ProfileRow {
    pub id: String,
    pub name: String,
    pub kind: String,
    pub command: String,
    pub args: String,
    pub env: String,
    pub model: Option<String>,
    pub mode: Option<String>,
    pub auto_approve: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct EnvJson {
    pub name: String,
    pub value: String,
}

impl TryFrom<ProfileRow> for AgentProfile {
    type Error = StoreError;

    fn try_from(r: ProfileRow) -> Result<AgentProfile> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("agent profile {} {what}", r.id));
        let kind = AgentKind::parse(&r.kind).ok_or_else(|| corrupt("kind"))?;
        let args: Vec<String> = serde_json::from_str(&r.args).map_err(|_| corrupt("args"))?;
        let env: Vec<EnvJson> = serde_json::from_str(&r.env).map_err(|_| corrupt("env"))?;
        Ok(AgentProfile {
            id: AgentProfileId::new(r.id),
            name: r.name,
            kind,
            command: r.command,
            args,
            env: env.into_iter().map(|e| EnvVar { name: e.name, value: e.value }).collect(),
            model: r.model,
            mode: r.mode,
            auto_approve: r.auto_approve,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_events_json_round_trips() {
        let events = StepEvents {
            on_enter: vec![
                Action::ResetAgentContext,
                Action::SetSessionMode { mode_id: "plan".into() },
                Action::AutoStartAgent,
            ],
            on_turn_start: vec![Action::MoveToPrevious],
            on_turn_complete: vec![Action::MoveToStep(StepId::new("s-3")), Action::DisablePlanMode],
            on_exit: vec![Action::DisablePlanMode],
        };
        let text = events_to_json(&events);
        assert_eq!(events_from_json(&text).unwrap(), events);
        assert_eq!(events_from_json("{}").unwrap(), StepEvents::default());
    }
}
