//! Objects as the API returns them, converted from domain types.

use kandev_domain::StepId;
use kandev_domain::agent::{AgentKind, AgentProfile, EnvVar, McpServerConfig, McpTransport};
use kandev_domain::needs_you::NeedsYou;
use kandev_domain::question::{Question, QuestionStatus};
use kandev_domain::task::{Task, TaskCard, TaskState};
use kandev_domain::workflow::{Action, Step, StepEvents, Workflow};
use kandev_domain::workspace::{Repository, Workspace};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::rfc3339;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct WorkspaceDto {
    pub id: String,
    pub name: String,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&Workspace> for WorkspaceDto {
    fn from(w: &Workspace) -> Self {
        WorkspaceDto {
            id: w.id.to_string(),
            name: w.name.clone(),
            created_at: rfc3339(w.created_at),
            updated_at: rfc3339(w.updated_at),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct RepositoryDto {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub local_path: String,
    pub default_branch: String,
    pub branch_template: String,
    pub setup_script: String,
    pub copy_files: Vec<String>,
    pub cleanup_script: String,
    pub forge_api_base_url: String,
    pub forge_token_env: String,
    pub dev_script: String,
    /// The setup and cleanup scripts' time limit in seconds; 0: the server's.
    pub script_timeout_s: u32,
    /// The secrets (issue 50) its setup, cleanup and dev scripts get as environment
    /// variables of the same names.
    pub script_secrets: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&Repository> for RepositoryDto {
    fn from(r: &Repository) -> Self {
        RepositoryDto {
            id: r.id.to_string(),
            workspace_id: r.workspace_id.to_string(),
            name: r.name.clone(),
            local_path: r.local_path.clone(),
            default_branch: r.default_branch.clone(),
            branch_template: r.branch_template.clone(),
            setup_script: r.setup_script.clone(),
            copy_files: r.copy_files.clone(),
            cleanup_script: r.cleanup_script.clone(),
            forge_api_base_url: r.forge_api_base_url.clone(),
            forge_token_env: r.forge_token_env.clone(),
            dev_script: r.dev_script.clone(),
            script_timeout_s: r.script_timeout_s,
            script_secrets: r.script_secrets.clone(),
            created_at: rfc3339(r.created_at),
            updated_at: rfc3339(r.updated_at),
        }
    }
}

/// One step action; `move_to_step` names its target by step id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ActionDto {
    ResetAgentContext,
    EnablePlanMode,
    DisablePlanMode,
    SetSessionMode {
        mode_id: String,
    },
    AutoStartAgent,
    MoveToNext,
    MoveToPrevious,
    MoveToStep {
        step_id: String,
    },
    Push,
    CreatePullRequest,
    Merge {
        #[serde(default)]
        strategy: crate::MergeStrategyDto,
    },
    Rebase,
    /// Sends the failed checks or the review comments to the agent, at most `max_rounds`
    /// (default 3, at most 20) times per task; bots' comments only with `include_bots`.
    SendFeedback {
        #[serde(default = "default_rounds")]
        max_rounds: u32,
        #[serde(default)]
        include_bots: bool,
    },
    /// Merges the pull request on its forge once its checks passed and approvals are met.
    AutoMerge {
        #[serde(default)]
        strategy: crate::MergeStrategyDto,
    },
    /// Comments on the issue the task was made from with its pull requests' links and states.
    CommentIssue,
    /// Closes the issue the task was made from.
    CloseIssue,
    /// Starts `count` attempts of the task (1 to 6), each in a worktree of its own.
    StartAttempts {
        count: u32,
    },
}

fn default_rounds() -> u32 {
    kandev_domain::workflow::Feedback::DEFAULT_ROUNDS
}

impl From<&Action<StepId>> for ActionDto {
    fn from(a: &Action<StepId>) -> Self {
        match a {
            Action::ResetAgentContext => ActionDto::ResetAgentContext,
            Action::EnablePlanMode => ActionDto::EnablePlanMode,
            Action::DisablePlanMode => ActionDto::DisablePlanMode,
            Action::SetSessionMode { mode_id } => {
                ActionDto::SetSessionMode { mode_id: mode_id.clone() }
            }
            Action::AutoStartAgent => ActionDto::AutoStartAgent,
            Action::MoveToNext => ActionDto::MoveToNext,
            Action::MoveToPrevious => ActionDto::MoveToPrevious,
            Action::MoveToStep(id) => ActionDto::MoveToStep { step_id: id.to_string() },
            Action::Push => ActionDto::Push,
            Action::CreatePullRequest => ActionDto::CreatePullRequest,
            Action::Merge { strategy } => ActionDto::Merge { strategy: (*strategy).into() },
            Action::Rebase => ActionDto::Rebase,
            Action::SendFeedback(f) => {
                ActionDto::SendFeedback { max_rounds: f.max_rounds, include_bots: f.include_bots }
            }
            Action::AutoMerge { strategy } => ActionDto::AutoMerge { strategy: (*strategy).into() },
            Action::CommentIssue => ActionDto::CommentIssue,
            Action::CloseIssue => ActionDto::CloseIssue,
            Action::StartAttempts { count } => ActionDto::StartAttempts { count: *count },
        }
    }
}

impl From<ActionDto> for Action<StepId> {
    fn from(a: ActionDto) -> Self {
        match a {
            ActionDto::ResetAgentContext => Action::ResetAgentContext,
            ActionDto::EnablePlanMode => Action::EnablePlanMode,
            ActionDto::DisablePlanMode => Action::DisablePlanMode,
            ActionDto::SetSessionMode { mode_id } => Action::SetSessionMode { mode_id },
            ActionDto::AutoStartAgent => Action::AutoStartAgent,
            ActionDto::MoveToNext => Action::MoveToNext,
            ActionDto::MoveToPrevious => Action::MoveToPrevious,
            ActionDto::MoveToStep { step_id } => Action::MoveToStep(StepId::new(step_id)),
            ActionDto::Push => Action::Push,
            ActionDto::CreatePullRequest => Action::CreatePullRequest,
            ActionDto::Merge { strategy } => Action::Merge { strategy: strategy.into() },
            ActionDto::Rebase => Action::Rebase,
            ActionDto::SendFeedback { max_rounds, include_bots } => {
                Action::SendFeedback(kandev_domain::workflow::Feedback { max_rounds, include_bots })
            }
            ActionDto::AutoMerge { strategy } => Action::AutoMerge { strategy: strategy.into() },
            ActionDto::CommentIssue => Action::CommentIssue,
            ActionDto::CloseIssue => Action::CloseIssue,
            ActionDto::StartAttempts { count } => Action::StartAttempts { count },
        }
    }
}

/// A step's actions per trigger.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields)]
pub struct EventsDto {
    #[serde(default)]
    pub on_enter: Vec<ActionDto>,
    #[serde(default)]
    pub on_turn_start: Vec<ActionDto>,
    #[serde(default)]
    pub on_turn_complete: Vec<ActionDto>,
    #[serde(default)]
    pub on_exit: Vec<ActionDto>,
    #[serde(default)]
    pub on_pr_merged: Vec<ActionDto>,
    #[serde(default)]
    pub on_pr_closed: Vec<ActionDto>,
    #[serde(default)]
    pub on_pr_checks_failed: Vec<ActionDto>,
    #[serde(default)]
    pub on_pr_checks_passed: Vec<ActionDto>,
    #[serde(default)]
    pub on_pr_review: Vec<ActionDto>,
}

impl From<&StepEvents<StepId>> for EventsDto {
    fn from(e: &StepEvents<StepId>) -> Self {
        let list = |v: &[Action<StepId>]| v.iter().map(ActionDto::from).collect();
        EventsDto {
            on_enter: list(&e.on_enter),
            on_turn_start: list(&e.on_turn_start),
            on_turn_complete: list(&e.on_turn_complete),
            on_exit: list(&e.on_exit),
            on_pr_merged: list(&e.on_pr_merged),
            on_pr_closed: list(&e.on_pr_closed),
            on_pr_checks_failed: list(&e.on_pr_checks_failed),
            on_pr_checks_passed: list(&e.on_pr_checks_passed),
            on_pr_review: list(&e.on_pr_review),
        }
    }
}

impl From<EventsDto> for StepEvents<StepId> {
    fn from(e: EventsDto) -> Self {
        let list = |v: Vec<ActionDto>| v.into_iter().map(Action::from).collect();
        StepEvents {
            on_enter: list(e.on_enter),
            on_turn_start: list(e.on_turn_start),
            on_turn_complete: list(e.on_turn_complete),
            on_exit: list(e.on_exit),
            on_pr_merged: list(e.on_pr_merged),
            on_pr_closed: list(e.on_pr_closed),
            on_pr_checks_failed: list(e.on_pr_checks_failed),
            on_pr_checks_passed: list(e.on_pr_checks_passed),
            on_pr_review: list(e.on_pr_review),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct StepDto {
    pub id: String,
    pub workflow_id: String,
    pub name: String,
    pub position: u32,
    pub color: String,
    pub prompt: String,
    pub is_start_step: bool,
    pub allow_manual_move: bool,
    pub agent_profile_id: Option<String>,
    pub cancel_triggers_turn_complete: bool,
    pub events: EventsDto,
}

impl From<&Step> for StepDto {
    fn from(s: &Step) -> Self {
        StepDto {
            id: s.id.to_string(),
            workflow_id: s.workflow_id.to_string(),
            name: s.name.clone(),
            position: s.position,
            color: s.color.clone(),
            prompt: s.prompt.clone(),
            is_start_step: s.is_start_step,
            allow_manual_move: s.allow_manual_move,
            agent_profile_id: s.agent_profile_id.as_ref().map(|p| p.to_string()),
            cancel_triggers_turn_complete: s.cancel_triggers_turn_complete,
            events: EventsDto::from(&s.events),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct WorkflowDto {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub description: String,
    pub template_id: Option<String>,
    pub steps: Vec<StepDto>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&Workflow> for WorkflowDto {
    fn from(w: &Workflow) -> Self {
        WorkflowDto {
            id: w.id.to_string(),
            workspace_id: w.workspace_id.to_string(),
            name: w.name.clone(),
            description: w.description.clone(),
            template_id: w.template_id.clone(),
            steps: w.steps.iter().map(StepDto::from).collect(),
            created_at: rfc3339(w.created_at),
            updated_at: rfc3339(w.updated_at),
        }
    }
}

/// A task card's state, kept in step with its primary session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskStateDto {
    Todo,
    InProgress,
    WaitingForInput,
    Failed,
    Completed,
}

impl From<TaskState> for TaskStateDto {
    fn from(state: TaskState) -> Self {
        match state {
            TaskState::Todo => TaskStateDto::Todo,
            TaskState::InProgress => TaskStateDto::InProgress,
            TaskState::WaitingForInput => TaskStateDto::WaitingForInput,
            TaskState::Failed => TaskStateDto::Failed,
            TaskState::Completed => TaskStateDto::Completed,
        }
    }
}

/// Why a task needs its developer (`kandev_domain::needs_you`); absent when it does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum NeedsYouDto {
    Permission,
    Question,
    Error,
    PullRequest,
}

impl From<NeedsYou> for NeedsYouDto {
    fn from(n: NeedsYou) -> Self {
        match n {
            NeedsYou::Permission => NeedsYouDto::Permission,
            NeedsYou::Question => NeedsYouDto::Question,
            NeedsYou::Error => NeedsYouDto::Error,
            NeedsYou::PullRequest => NeedsYouDto::PullRequest,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct TaskDto {
    pub id: String,
    pub workspace_id: String,
    pub workflow_id: String,
    pub step_id: String,
    pub title: String,
    pub description: String,
    pub state: TaskStateDto,
    /// Set while the task needs its developer (a pending permission, a question, an error).
    pub needs_you: Option<NeedsYouDto>,
    pub position: u32,
    pub repository_ids: Vec<String>,
    pub agent_profile_id: Option<String>,
    pub primary_session_id: Option<String>,
    /// The task this one is a subtask of.
    pub parent_id: Option<String>,
    /// Tasks that must be done (last step, or archived) before this one's agent auto-starts.
    pub blocked_by: Vec<String>,
    /// Its git status as last published (`task.git_status`), summed over its repositories.
    pub git: Option<crate::GitSummaryDto>,
    /// What intake made it from (an issue, a webhook's delivery, a schedule), if it did.
    pub origin: Option<crate::TaskOriginDto>,
    pub archived_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// A task as its board card shows it (`task.list`, issue 15): no description, profile or
/// timestamps — `task.get` answers the whole task. `state` follows the primary session.
/// Every field has the name and type it has in [`TaskDto`], so a client keeps cards and
/// applies `task.created`/`task.updated` (whole tasks) to them alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct TaskCardDto {
    pub id: String,
    pub workflow_id: String,
    pub step_id: String,
    pub title: String,
    pub state: TaskStateDto,
    pub position: u32,
    pub repository_ids: Vec<String>,
    pub primary_session_id: Option<String>,
    pub archived_at: Option<String>,
    pub needs_you: Option<NeedsYouDto>,
    pub parent_id: Option<String>,
    pub blocked_by: Vec<String>,
    /// Its git status as last published (`task.git_status`), summed over its repositories.
    pub git: Option<crate::GitSummaryDto>,
}

impl From<&Task> for TaskCardDto {
    fn from(t: &Task) -> Self {
        TaskCardDto {
            id: t.id.to_string(),
            workflow_id: t.workflow_id.to_string(),
            step_id: t.step_id.to_string(),
            title: t.title.clone(),
            state: t.state.into(),
            position: t.position,
            repository_ids: t.repository_ids.iter().map(|r| r.to_string()).collect(),
            primary_session_id: t.primary_session_id.as_ref().map(|s| s.to_string()),
            archived_at: t.archived_at.map(rfc3339),
            needs_you: t.needs_you.map(NeedsYouDto::from),
            parent_id: t.parent_id.as_ref().map(|p| p.to_string()),
            blocked_by: t.blocked_by.iter().map(|b| b.to_string()).collect(),
            git: t.git.as_ref().map(crate::GitSummaryDto::from),
        }
    }
}

/// By value: a board of 2,000 cards moves its strings instead of copying each (`task.list`).
impl From<TaskCard> for TaskCardDto {
    fn from(t: TaskCard) -> Self {
        TaskCardDto {
            id: t.id.into_string(),
            workflow_id: t.workflow_id.into_string(),
            step_id: t.step_id.into_string(),
            title: t.title,
            state: t.state.into(),
            position: t.position,
            repository_ids: t.repository_ids.into_iter().map(|r| r.into_string()).collect(),
            primary_session_id: t.primary_session_id.map(|s| s.into_string()),
            archived_at: t.archived_at.map(rfc3339),
            needs_you: t.needs_you.map(NeedsYouDto::from),
            parent_id: t.parent_id.map(|p| p.into_string()),
            blocked_by: t.blocked_by.into_iter().map(|b| b.into_string()).collect(),
            git: t.git.as_ref().map(crate::GitSummaryDto::from),
        }
    }
}

impl From<&Task> for TaskDto {
    fn from(t: &Task) -> Self {
        TaskDto {
            id: t.id.to_string(),
            workspace_id: t.workspace_id.to_string(),
            workflow_id: t.workflow_id.to_string(),
            step_id: t.step_id.to_string(),
            title: t.title.clone(),
            description: t.description.clone(),
            state: t.state.into(),
            needs_you: t.needs_you.map(NeedsYouDto::from),
            position: t.position,
            repository_ids: t.repository_ids.iter().map(|r| r.to_string()).collect(),
            agent_profile_id: t.agent_profile_id.as_ref().map(|p| p.to_string()),
            primary_session_id: t.primary_session_id.as_ref().map(|s| s.to_string()),
            parent_id: t.parent_id.as_ref().map(|p| p.to_string()),
            blocked_by: t.blocked_by.iter().map(|b| b.to_string()).collect(),
            git: t.git.as_ref().map(crate::GitSummaryDto::from),
            origin: t.origin.as_ref().map(crate::TaskOriginDto::from),
            archived_at: t.archived_at.map(rfc3339),
            created_at: rfc3339(t.created_at),
            updated_at: rfc3339(t.updated_at),
        }
    }
}

/// What the API shows instead of every profile env value: a fixed string that reveals
/// nothing of the value (not a character, not its length). Sent back as a value in
/// `agent.profile.update`, it means "keep this variable's current value".
pub const SECRET_MASK: &str = "********";

/// An environment variable of a profile: a `value`, or `secret`, the name of a stored secret
/// (issue 50) whose value the process gets when it starts (`value` then empty). A value is
/// [`SECRET_MASK`] on output. Its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields)]
pub struct EnvVarDto {
    pub name: String,
    #[serde(default)]
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub secret: Option<String>,
}

impl std::fmt::Debug for EnvVarDto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvVarDto")
            .field("name", &self.name)
            .field("value", &"<hidden>")
            .field("secret", &self.secret)
            .finish()
    }
}

/// Names with [`SECRET_MASK`] for values, and the secrets referenced by name: what the API
/// shows of env vars and headers.
fn masked(vars: &[EnvVar]) -> Vec<EnvVarDto> {
    vars.iter()
        .map(|e| match &e.secret {
            Some(secret) => EnvVarDto {
                name: e.name.clone(),
                value: String::new(),
                secret: Some(secret.clone()),
            },
            None => EnvVarDto { name: e.name.clone(), value: SECRET_MASK.to_owned(), secret: None },
        })
        .collect()
}

/// Where a secret applies (issue 50).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "lowercase")]
pub enum SecretScopeDto {
    Server,
    Workspace,
    Repository,
}

/// A stored secret: its name and scope, never its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct SecretDto {
    pub id: String,
    pub name: String,
    pub scope: SecretScopeDto,
    pub workspace_id: Option<String>,
    pub repository_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&kandev_domain::secret::Secret> for SecretDto {
    fn from(s: &kandev_domain::secret::Secret) -> Self {
        use kandev_domain::secret::SecretScope;
        let scope = match &s.scope {
            SecretScope::Server => SecretScopeDto::Server,
            SecretScope::Workspace { .. } => SecretScopeDto::Workspace,
            SecretScope::Repository { .. } => SecretScopeDto::Repository,
        };
        SecretDto {
            id: s.id.clone(),
            name: s.name.clone(),
            scope,
            workspace_id: s.scope.workspace_id().map(str::to_owned),
            repository_id: s.scope.repository_id().map(str::to_owned),
            created_at: crate::rfc3339(s.created_at),
            updated_at: crate::rfc3339(s.updated_at),
        }
    }
}

/// How the agent reaches a remote MCP server of a profile (ACP `McpServer` `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "lowercase")]
pub enum McpTransportDto {
    /// Streamable HTTP (the default).
    Http,
    /// The older HTTP+SSE transport.
    Sse,
}

impl From<McpTransport> for McpTransportDto {
    fn from(transport: McpTransport) -> Self {
        match transport {
            McpTransport::Http => McpTransportDto::Http,
            McpTransport::Sse => McpTransportDto::Sse,
        }
    }
}

impl From<McpTransportDto> for McpTransport {
    fn from(transport: McpTransportDto) -> Self {
        match transport {
            McpTransportDto::Http => McpTransport::Http,
            McpTransportDto::Sse => McpTransport::Sse,
        }
    }
}

/// An extra MCP server of a profile, handed to its agent next to Kandev's own: `command` (with
/// `args` and `env`) for a server the agent starts over stdio, or `url` (with `headers` and
/// `transport`, default `http`) for one it reaches over HTTP. Env and header values are
/// [`SECRET_MASK`] on output; sent back in `agent.profile.update`, the mask keeps the value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields)]
pub struct McpServerDto {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub args: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub env: Option<Vec<EnvVarDto>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub transport: Option<McpTransportDto>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub headers: Option<Vec<EnvVarDto>>,
}

impl From<&McpServerConfig> for McpServerDto {
    fn from(server: &McpServerConfig) -> Self {
        let name = server.name().to_owned();
        match server {
            McpServerConfig::Stdio { command, args, env, .. } => McpServerDto {
                name,
                command: Some(command.clone()),
                args: Some(args.clone()),
                env: Some(masked(env)),
                url: None,
                transport: None,
                headers: None,
            },
            McpServerConfig::Remote { transport, url, headers, .. } => McpServerDto {
                name,
                command: None,
                args: None,
                env: None,
                url: Some(url.clone()),
                transport: Some((*transport).into()),
                headers: Some(masked(headers)),
            },
        }
    }
}

/// The kinds of agent Kandev knows how to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[serde(rename_all = "lowercase")]
pub enum AgentKindDto {
    Mock,
    Claude,
    Codex,
    Gemini,
    OpenCode,
    Qwen,
    Kilo,
    Copilot,
    Auggie,
    Custom,
}

impl From<AgentKind> for AgentKindDto {
    fn from(kind: AgentKind) -> Self {
        match kind {
            AgentKind::Mock => AgentKindDto::Mock,
            AgentKind::Claude => AgentKindDto::Claude,
            AgentKind::Codex => AgentKindDto::Codex,
            AgentKind::Gemini => AgentKindDto::Gemini,
            AgentKind::OpenCode => AgentKindDto::OpenCode,
            AgentKind::Qwen => AgentKindDto::Qwen,
            AgentKind::Kilo => AgentKindDto::Kilo,
            AgentKind::Copilot => AgentKindDto::Copilot,
            AgentKind::Auggie => AgentKindDto::Auggie,
            AgentKind::Custom => AgentKindDto::Custom,
        }
    }
}

impl From<AgentKindDto> for AgentKind {
    fn from(kind: AgentKindDto) -> Self {
        match kind {
            AgentKindDto::Mock => AgentKind::Mock,
            AgentKindDto::Claude => AgentKind::Claude,
            AgentKindDto::Codex => AgentKind::Codex,
            AgentKindDto::Gemini => AgentKind::Gemini,
            AgentKindDto::OpenCode => AgentKind::OpenCode,
            AgentKindDto::Qwen => AgentKind::Qwen,
            AgentKindDto::Kilo => AgentKind::Kilo,
            AgentKindDto::Copilot => AgentKind::Copilot,
            AgentKindDto::Auggie => AgentKind::Auggie,
            AgentKindDto::Custom => AgentKind::Custom,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct AgentProfileDto {
    pub id: String,
    pub name: String,
    pub kind: AgentKindDto,
    pub command: String,
    /// The version of the kind's agent installed by Kandev that this profile runs
    /// (`agent.install`); `null` runs the command found on `PATH`.
    pub agent_version: Option<String>,
    pub args: Vec<String>,
    pub env: Vec<EnvVarDto>,
    pub model: Option<String>,
    pub mode: Option<String>,
    pub auto_approve: bool,
    /// Extra MCP servers for the agent, besides Kandev's own (secrets masked).
    pub mcp_servers: Vec<McpServerDto>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&AgentProfile> for AgentProfileDto {
    fn from(p: &AgentProfile) -> Self {
        AgentProfileDto {
            id: p.id.to_string(),
            name: p.name.clone(),
            kind: p.kind.into(),
            command: p.command.clone(),
            agent_version: p.agent_version.clone(),
            args: p.args.clone(),
            env: masked(&p.env),
            model: p.model.clone(),
            mode: p.mode.clone(),
            auto_approve: p.auto_approve,
            mcp_servers: p.mcp_servers.iter().map(McpServerDto::from).collect(),
            created_at: rfc3339(p.created_at),
            updated_at: rfc3339(p.updated_at),
        }
    }
}

/// What a search looks in: task titles and descriptions, or message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum SearchKindDto {
    Task,
    Message,
}

/// A piece of a search hit's snippet; `highlight` marks the words that matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct SnippetPartDto {
    pub text: String,
    pub highlight: bool,
}

/// One search hit, best first: a task, or a message of one of the task's sessions (then
/// `session_id`, `message_id` and `message_seq` are set).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct SearchHitDto {
    pub kind: SearchKindDto,
    pub task_id: String,
    pub task_title: String,
    pub session_id: Option<String>,
    pub message_id: Option<String>,
    pub message_seq: Option<i64>,
    pub snippet: Vec<SnippetPartDto>,
}

/// Where a question of an agent stands (`ask_user`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum QuestionStatusDto {
    Pending,
    Answered,
    Cancelled,
    TimedOut,
    Expired,
}

impl From<QuestionStatus> for QuestionStatusDto {
    fn from(s: QuestionStatus) -> Self {
        match s {
            QuestionStatus::Pending => QuestionStatusDto::Pending,
            QuestionStatus::Answered => QuestionStatusDto::Answered,
            QuestionStatus::Cancelled => QuestionStatusDto::Cancelled,
            QuestionStatus::TimedOut => QuestionStatusDto::TimedOut,
            QuestionStatus::Expired => QuestionStatusDto::Expired,
        }
    }
}

/// A question an agent asked the user through MCP `ask_user`: `options` are answers to pick
/// from (empty: free text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct QuestionDto {
    pub id: String,
    pub session_id: String,
    pub task_id: String,
    pub question: String,
    pub options: Vec<String>,
    pub status: QuestionStatusDto,
    pub answer: Option<String>,
    pub created_at: String,
    pub expires_at: String,
    pub resolved_at: Option<String>,
}

impl From<&Question> for QuestionDto {
    fn from(q: &Question) -> Self {
        QuestionDto {
            id: q.id.clone(),
            session_id: q.session_id.to_string(),
            task_id: q.task_id.to_string(),
            question: q.question.clone(),
            options: q.options.clone(),
            status: q.status.into(),
            answer: q.answer.clone(),
            created_at: rfc3339(q.created_at),
            expires_at: rfc3339(q.expires_at),
            resolved_at: q.resolved_at.map(rfc3339),
        }
    }
}

/// A user (issue 21).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct UserDto {
    pub id: String,
    pub name: String,
}

impl From<&kandev_domain::account::User> for UserDto {
    fn from(u: &kandev_domain::account::User) -> Self {
        UserDto { id: u.id.clone(), name: u.name.clone() }
    }
}

/// A personal API token, never with its secret (shown once by `user.token.create`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct ApiTokenDto {
    pub id: String,
    pub name: String,
    pub created_at: String,
}

impl From<&kandev_domain::account::ApiToken> for ApiTokenDto {
    fn from(t: &kandev_domain::account::ApiToken) -> Self {
        ApiTokenDto { id: t.id.clone(), name: t.name.clone(), created_at: rfc3339(t.created_at) }
    }
}

/// How a request was let in: no accounts and no token (`open`), the server's `--token`
/// (`server_token`), a login session's cookie (`session`) or a personal token (`token`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum AuthVia {
    Open,
    ServerToken,
    Session,
    Token,
    /// A trusted proxy's user header (`serve --proxy-user-header`).
    Proxy,
}

/// A role in a workspace (issue 49): `viewer` reads, `member` works on tasks, `admin` also
/// changes the workspace's setup and what runs commands on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum RoleDto {
    Viewer,
    Member,
    Admin,
}

impl From<kandev_domain::account::Role> for RoleDto {
    fn from(role: kandev_domain::account::Role) -> Self {
        use kandev_domain::account::Role;
        match role {
            Role::Viewer => RoleDto::Viewer,
            Role::Member => RoleDto::Member,
            Role::Admin => RoleDto::Admin,
        }
    }
}

impl From<RoleDto> for kandev_domain::account::Role {
    fn from(role: RoleDto) -> Self {
        use kandev_domain::account::Role;
        match role {
            RoleDto::Viewer => Role::Viewer,
            RoleDto::Member => Role::Member,
            RoleDto::Admin => Role::Admin,
        }
    }
}

/// A role in one workspace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct WorkspaceRoleDto {
    pub workspace_id: String,
    pub role: RoleDto,
}

/// A member of a workspace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct MemberDto {
    pub user_id: String,
    pub name: String,
    pub role: RoleDto,
    pub added_at: String,
}

impl From<&kandev_domain::account::Member> for MemberDto {
    fn from(m: &kandev_domain::account::Member) -> Self {
        MemberDto {
            user_id: m.user_id.clone(),
            name: m.name.clone(),
            role: m.role.into(),
            added_at: rfc3339(m.added_at),
        }
    }
}

/// A user as the owner's Users page shows them: whether they own the server, and their role
/// in each workspace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct UserEntryDto {
    pub id: String,
    pub name: String,
    pub owner: bool,
    pub created_at: String,
    pub roles: Vec<WorkspaceRoleDto>,
}

/// One audited write action (Settings → Activity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct AuditEntryDto {
    pub id: String,
    pub at: String,
    /// Milliseconds since the epoch.
    pub at_ms: i64,
    pub by: String,
    pub action: String,
    pub workspace_id: Option<String>,
    pub target: Option<String>,
}

impl From<&kandev_domain::account::AuditEntry> for AuditEntryDto {
    fn from(e: &kandev_domain::account::AuditEntry) -> Self {
        AuditEntryDto {
            id: e.id.clone(),
            at: rfc3339(e.at),
            at_ms: e.at.millis(),
            by: e.by.clone(),
            action: e.action.clone(),
            workspace_id: e.workspace_id.clone(),
            target: e.target.clone(),
        }
    }
}
