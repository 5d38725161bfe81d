//! Request payloads of the actions. Unknown fields are refused so typos do not pass silently.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::{EnvVarDto, EventsDto};

/// A payload that names one object by id.
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct ById {
    pub id: String,
}

/// Paging of list actions.
#[derive(Debug, Clone, Default, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct Page {
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceCreate {
    pub name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceUpdate {
    pub id: String,
    pub name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct ByWorkspace {
    pub workspace_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct RepositoryCreate {
    pub workspace_id: String,
    pub local_path: String,
    pub name: Option<String>,
    pub default_branch: Option<String>,
    pub branch_template: Option<String>,
    pub setup_script: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct RepositoryUpdate {
    pub id: String,
    pub name: Option<String>,
    pub default_branch: Option<String>,
    pub branch_template: Option<String>,
    pub setup_script: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct WorkflowCreate {
    pub workspace_id: String,
    pub name: String,
    pub description: Option<String>,
    pub template_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct WorkflowUpdate {
    pub id: String,
    pub name: Option<String>,
    pub description: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct WorkflowExport {
    pub ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct WorkflowImport {
    pub workspace_id: String,
    pub yaml: String,
}

/// Adds a step at `position` (end when absent).
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct StepCreate {
    pub workflow_id: String,
    pub name: String,
    pub position: Option<u32>,
    pub color: Option<String>,
    pub prompt: Option<String>,
    pub is_start_step: Option<bool>,
    pub allow_manual_move: Option<bool>,
    /// `null` clears the step's agent profile.
    #[serde(default, deserialize_with = "double_option")]
    pub agent_profile_id: Option<Option<String>>,
    pub cancel_triggers_turn_complete: Option<bool>,
    pub events: Option<EventsDto>,
}

/// Changes a step; absent fields keep their value.
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct StepUpdate {
    pub id: String,
    pub name: Option<String>,
    pub color: Option<String>,
    pub prompt: Option<String>,
    pub is_start_step: Option<bool>,
    pub allow_manual_move: Option<bool>,
    /// `null` clears the step's agent profile.
    #[serde(default, deserialize_with = "double_option")]
    pub agent_profile_id: Option<Option<String>>,
    pub cancel_triggers_turn_complete: Option<bool>,
    pub events: Option<EventsDto>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct StepReorder {
    pub workflow_id: String,
    pub step_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct TaskCreate {
    pub workflow_id: String,
    pub title: String,
    pub description: Option<String>,
    pub step_id: Option<String>,
    #[serde(default)]
    pub repository_ids: Vec<String>,
    pub agent_profile_id: Option<String>,
    /// Start the task's first session with the task prompt.
    #[serde(default)]
    pub start_agent: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct TaskList {
    pub workflow_id: String,
    pub step_id: Option<String>,
    pub query: Option<String>,
    #[serde(default)]
    pub include_archived: bool,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct TaskUpdate {
    pub id: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub repository_ids: Option<Vec<String>>,
    #[serde(default, deserialize_with = "double_option")]
    pub agent_profile_id: Option<Option<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct TaskMove {
    pub id: String,
    pub step_id: String,
    pub position: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct ProfileCreate {
    pub name: String,
    pub kind: String,
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: Vec<EnvVarDto>,
    pub model: Option<String>,
    pub mode: Option<String>,
    #[serde(default)]
    pub auto_approve: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct ProfileUpdate {
    pub id: String,
    pub name: Option<String>,
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    pub env: Option<Vec<EnvVarDto>>,
    #[serde(default, deserialize_with = "double_option")]
    pub model: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    pub mode: Option<Option<String>>,
    pub auto_approve: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct ByTask {
    pub task_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct BySession {
    pub session_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct SessionLaunch {
    pub task_id: String,
    pub agent_profile_id: Option<String>,
    /// The first message; without it the agent starts and waits.
    pub prompt: Option<String>,
}

/// `session.resume`: `mode` is `load` (default: the saved conversation) or `fresh` (a new
/// conversation).
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct SessionResume {
    pub id: String,
    pub mode: Option<String>,
}

/// `session.authenticate`: `method_id` is one of the agent's auth methods (as listed in
/// `last_error.details.auth_methods`); the agent restarts and authenticates with it.
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct SessionAuthenticate {
    pub id: String,
    pub method_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct SessionSetMode {
    pub id: String,
    pub mode_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct SessionSetConfigOption {
    pub id: String,
    pub config_id: String,
    pub value: serde_json::Value,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct MessageAdd {
    pub session_id: String,
    pub content: String,
    /// Idempotency key: a retry with the same id is recorded once.
    pub client_message_id: Option<String>,
    /// Queue while the agent is busy (default); `false` fails with `BUSY` instead.
    #[serde(default = "yes")]
    pub queue: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct MessageList {
    pub session_id: String,
    pub after_seq: Option<i64>,
    pub before_seq: Option<i64>,
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct PermissionRespond {
    pub session_id: String,
    pub request_id: String,
    pub option_id: Option<String>,
    #[serde(default)]
    pub cancelled: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct QueueAdd {
    pub session_id: String,
    pub content: String,
    pub client_message_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct QueueUpdate {
    pub session_id: String,
    pub id: String,
    pub content: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct QueueRemove {
    pub session_id: String,
    pub id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct QueueReorder {
    pub session_id: String,
    pub ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct AutoRunSet {
    pub session_id: String,
    pub enabled: bool,
}

/// Subscribes to topics, replaying what happened after `since` (per topic).
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct Subscribe {
    pub topics: Vec<String>,
    #[serde(default)]
    pub since: std::collections::HashMap<String, i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct Unsubscribe {
    pub topics: Vec<String>,
}

/// `task.archive` and `task.delete`: `force` also removes worktrees with uncommitted or
/// untracked files.
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct TaskRemove {
    pub id: String,
    #[serde(default)]
    pub force: bool,
}

/// `task.file.read`: `path` is relative to the task's working directory.
#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct TaskFileRead {
    pub task_id: String,
    pub path: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct TaskCommit {
    pub task_id: String,
    pub message: String,
}

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(None)`).
fn double_option<'de, D, T>(de: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(de).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_null_differs_from_absent() {
        let absent: TaskUpdate = serde_json::from_str(r#"{"id":"t"}"#).unwrap();
        assert_eq!(absent.agent_profile_id, None);
        let null: TaskUpdate =
            serde_json::from_str(r#"{"id":"t","agent_profile_id":null}"#).unwrap();
        assert_eq!(null.agent_profile_id, Some(None));
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err =
            serde_json::from_str::<WorkspaceCreate>(r#"{"name":"a","nmae":"b"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `nmae`"), "{err}");
    }
}
