//! Request payloads of the actions. Every one refuses unknown fields, so typos do not pass
//! silently, and an error names the field (`serde_path_to_error` in the server's decoder).

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::{AgentKindDto, EnvVarDto, EventsDto, McpServerDto};

/// Declares request payloads with the attributes every one of them carries: `Debug, Clone`,
/// serde both ways, `deny_unknown_fields`, and TypeScript where an `Option` field may be left
/// out (`field?: T`). A field that is not an `Option` but has a serde default says so to
/// TypeScript itself with `#[ts(optional = nullable)]`.
///
/// No payload here uses `#[serde(flatten)]`: serde does not support it together with
/// `deny_unknown_fields`, and the errors of a flattened field do not name it.
macro_rules! requests {
    ($($(#[$meta:meta])* pub struct $name:ident $body:tt)*) => {
        $(
            $(#[$meta])*
            #[derive(Debug, Clone, Serialize, Deserialize, TS)]
            #[ts(optional_fields)]
            #[serde(deny_unknown_fields)]
            pub struct $name $body
        )*
    };
}

/// How `session.resume` restarts the agent: `load` (the saved conversation) or `fresh` (a new
/// conversation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ResumeMode {
    Load,
    Fresh,
}

fn yes() -> bool {
    true
}

/// `user.password.set`: the caller's password now and the new one. Its `Debug` hides both.
#[derive(Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct PasswordSet {
    pub current_password: String,
    pub new_password: String,
}

impl std::fmt::Debug for PasswordSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasswordSet")
            .field("current_password", &"<hidden>")
            .field("new_password", &"<hidden>")
            .finish()
    }
}

/// `user.create` (a name and a first password) and `user.password.reset` (the user and the
/// new password), both the owner's. Its `Debug` hides the password.
#[derive(Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct UserCreate {
    pub name: String,
    pub password: String,
}

impl std::fmt::Debug for UserCreate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserCreate").field("name", &self.name).finish_non_exhaustive()
    }
}

/// `user.password.reset`: the same shape as [`UserCreate`].
pub type UserPasswordReset = UserCreate;

/// `secret.set`: sets the secret `name` to `value` (a new one, or a new value): for the
/// server without `workspace_id` (the owner's), for a workspace with it, for one of its
/// repositories with `repository_id` too. Its `Debug` hides the value; no answer returns it.
#[derive(Clone, Serialize, Deserialize, TS)]
#[ts(optional_fields)]
#[serde(deny_unknown_fields)]
pub struct SecretSet {
    pub workspace_id: Option<String>,
    pub repository_id: Option<String>,
    pub name: String,
    pub value: String,
}

impl std::fmt::Debug for SecretSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretSet")
            .field("workspace_id", &self.workspace_id)
            .field("repository_id", &self.repository_id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

requests! {
/// `secret.list`: the server's secrets and, with `workspace_id`, that workspace's and its
/// repositories' (names and scopes; never a value).
pub struct SecretList {
    pub workspace_id: Option<String>,
}

/// `secret.remove`: the secret `name` of the scope `workspace_id` and `repository_id` name
/// (both left out: the server's).
pub struct SecretRemove {
    pub workspace_id: Option<String>,
    pub repository_id: Option<String>,
    pub name: String,
}

/// A payload that names one user by name (`user.remove`).
pub struct ByName {
    pub name: String,
}

/// `workspace.member.set`: adds `user` (a user name) to the workspace with `role`, or changes
/// their role there.
pub struct MemberSet {
    pub workspace_id: String,
    pub user: String,
    pub role: crate::RoleDto,
}

/// `workspace.member.remove`: takes `user` (a user name) out of the workspace.
pub struct MemberRemove {
    pub workspace_id: String,
    pub user: String,
}

/// `audit.list`: the newest entries first, narrowed by workspace, by who (a `by` value) and by
/// action (a name, or a prefix ending in `.` such as `task.`); `cursor` (the previous page's
/// `next_cursor`) pages.
pub struct AuditList {
    pub workspace_id: Option<String>,
    pub by: Option<String>,
    pub action: Option<String>,
    pub cursor: Option<String>,
    pub limit: Option<u32>,
}

/// A payload that names one object by id.
pub struct ById {
    pub id: String,
}

/// Paging of list actions (the whole payload of a list with no filter).
#[derive(Default)]
pub struct Page {
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

/// The payload of an action that takes none (`{}` or no body).
pub struct Empty {}

/// `user.token.create`: a label for the new personal token (where it is used).
pub struct TokenCreate {
    pub name: String,
}

pub struct WorkspaceCreate {
    pub name: String,
}

pub struct WorkspaceUpdate {
    pub id: String,
    pub name: String,
}

pub struct ByWorkspace {
    pub workspace_id: String,
}

pub struct RepositoryCreate {
    pub workspace_id: String,
    pub local_path: String,
    pub name: Option<String>,
    pub default_branch: Option<String>,
    pub branch_template: Option<String>,
    pub setup_script: Option<String>,
    pub copy_files: Option<Vec<String>>,
    pub cleanup_script: Option<String>,
    pub forge_api_base_url: Option<String>,
    pub forge_token_env: Option<String>,
    pub dev_script: Option<String>,
    /// The setup and cleanup scripts' time limit in seconds (at most a day); 0: the server's.
    pub script_timeout_s: Option<u32>,
    /// The secrets its setup, cleanup and dev scripts get as environment variables, by name.
    pub script_secrets: Option<Vec<String>>,
}

pub struct RepositoryUpdate {
    pub id: String,
    pub name: Option<String>,
    pub default_branch: Option<String>,
    pub branch_template: Option<String>,
    pub setup_script: Option<String>,
    pub copy_files: Option<Vec<String>>,
    pub cleanup_script: Option<String>,
    pub forge_api_base_url: Option<String>,
    pub forge_token_env: Option<String>,
    pub dev_script: Option<String>,
    /// The setup and cleanup scripts' time limit in seconds (at most a day); 0: the server's.
    pub script_timeout_s: Option<u32>,
    /// The secrets its setup, cleanup and dev scripts get as environment variables, by name.
    pub script_secrets: Option<Vec<String>>,
}

pub struct WorkflowCreate {
    pub workspace_id: String,
    pub name: String,
    pub description: Option<String>,
    pub template_id: Option<String>,
}

pub struct WorkflowUpdate {
    pub id: String,
    pub name: Option<String>,
    pub description: Option<String>,
}

pub struct WorkflowExport {
    pub ids: Vec<String>,
}

pub struct WorkflowImport {
    pub workspace_id: String,
    pub yaml: String,
}

/// Adds a step at `position` (end when absent).
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

pub struct StepReorder {
    pub workflow_id: String,
    pub step_ids: Vec<String>,
}

pub struct TaskCreate {
    pub workflow_id: String,
    pub title: String,
    pub description: Option<String>,
    pub step_id: Option<String>,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub repository_ids: Vec<String>,
    /// Repositories with the branch the task starts from (`origin/feature` is fetched
    /// first); joins `repository_ids`. Without `base_branch`, the repository's default.
    #[serde(default)]
    #[ts(optional = nullable)]
    pub repositories: Vec<TaskRepositoryRef>,
    pub agent_profile_id: Option<String>,
    /// Start the task's first session with the task prompt.
    #[serde(default)]
    #[ts(optional = nullable)]
    pub start_agent: bool,
    /// Makes the new task a subtask of this one (same workspace).
    pub parent_id: Option<String>,
    /// Tasks that must be done first (same workspace, no cycles).
    #[serde(default)]
    #[ts(optional = nullable)]
    pub blocked_by: Vec<String>,
}

pub struct TaskList {
    pub workflow_id: String,
    pub step_id: Option<String>,
    pub query: Option<String>,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub include_archived: bool,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

pub struct TaskUpdate {
    pub id: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub repository_ids: Option<Vec<String>>,
    #[serde(default, deserialize_with = "double_option")]
    pub agent_profile_id: Option<Option<String>>,
    /// A new parent; `null` makes the task top-level again.
    #[serde(default, deserialize_with = "double_option")]
    pub parent_id: Option<Option<String>>,
    /// Replaces the task's blockers.
    pub blocked_by: Option<Vec<String>>,
}

pub struct TaskMove {
    pub id: String,
    pub step_id: String,
    pub position: Option<u32>,
}

pub struct ProfileCreate {
    pub name: String,
    pub kind: AgentKindDto,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub command: String,
    /// A version of the kind's agent installed by Kandev (`agent.install`) to run instead of
    /// the command on `PATH`; only without `command`.
    #[serde(default)]
    #[ts(optional)]
    pub agent_version: Option<String>,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub args: Vec<String>,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub env: Vec<EnvVarDto>,
    pub model: Option<String>,
    pub mode: Option<String>,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub auto_approve: bool,
    /// Extra MCP servers for the agent, besides Kandev's own.
    #[serde(default)]
    #[ts(optional = nullable)]
    pub mcp_servers: Vec<McpServerDto>,
}

pub struct ProfileUpdate {
    pub id: String,
    pub name: Option<String>,
    pub command: Option<String>,
    /// `null` runs the command on `PATH` again.
    #[serde(default, deserialize_with = "double_option")]
    pub agent_version: Option<Option<String>>,
    pub args: Option<Vec<String>>,
    pub env: Option<Vec<EnvVarDto>>,
    #[serde(default, deserialize_with = "double_option")]
    pub model: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    pub mode: Option<Option<String>>,
    pub auto_approve: Option<bool>,
    /// Replaces the extra MCP servers; a [`crate::SECRET_MASK`] env or header value keeps
    /// the current value of that server's variable or header of the same name.
    pub mcp_servers: Option<Vec<McpServerDto>>,
}

/// `agent.versions`: the versions of a kind's agent, installed and available.
pub struct AgentVersionsQuery {
    pub kind: AgentKindDto,
    /// An SSH executor: its build host's installs (default: this machine's, which local and
    /// container executors use).
    #[serde(default)]
    #[ts(optional)]
    pub executor_id: Option<String>,
}

/// `agent.install` and `agent.uninstall`: one exact version of a kind's agent (`1.2.3`),
/// on this machine or an SSH executor's build host.
pub struct AgentInstall {
    pub kind: AgentKindDto,
    pub version: String,
    #[serde(default)]
    #[ts(optional)]
    pub executor_id: Option<String>,
}

pub struct ByTask {
    pub task_id: String,
}

pub struct BySession {
    pub session_id: String,
}

/// Answers a question of an agent: one of its options, or free text when it has none.
pub struct QuestionAnswer {
    pub id: String,
    pub answer: String,
}

pub struct SessionLaunch {
    pub task_id: String,
    pub agent_profile_id: Option<String>,
    /// The first message; without it the agent starts and waits.
    pub prompt: Option<String>,
    /// Runs the agent's own terminal UI in a terminal instead of speaking ACP with it
    /// (issue 52); its prompt is typed in once the UI waits for input.
    pub terminal_ui: Option<bool>,
}

/// `session.resume`: `mode` is `load` (default: the saved conversation) or `fresh` (a new
/// conversation).
pub struct SessionResume {
    pub id: String,
    pub mode: Option<ResumeMode>,
}

/// `turn.revert`: the session's worktrees back to before `turn_id` (it and every later turn
/// undone). `dry_run` only answers what it would do. Edits made since the agent's last turn
/// by someone else are refused unless `force` (discard whatever they are) or each is named in
/// `discard` (the paths a person confirmed, as a dry run listed them).
pub struct TurnRevert {
    pub session_id: String,
    pub turn_id: String,
    pub force: Option<bool>,
    pub discard: Option<Vec<String>>,
    pub dry_run: Option<bool>,
}

/// One attempt of `task.attempt.create`: its profile (the task's by default) and its first
/// prompt (the task's title and description by default).
pub struct AttemptSpec {
    pub profile_id: Option<String>,
    pub prompt: Option<String>,
}

/// `task.attempt.create`: one session per entry of `attempts`, each in a worktree and on a
/// branch of its own from the task's base.
pub struct TaskAttemptCreate {
    pub task_id: String,
    pub attempts: Vec<AttemptSpec>,
}

/// `task.attempt.list`: the task's attempts, or only the one of `session_id`.
pub struct TaskAttemptList {
    pub task_id: String,
    pub session_id: Option<String>,
}

/// `task.attempt.pick`, `task.attempt.diff`: one attempt of a task.
pub struct TaskAttempt {
    pub task_id: String,
    pub session_id: String,
}

/// `turn.diff`: what one turn of a session changed.
pub struct TurnDiff {
    pub session_id: String,
    pub turn_id: String,
}

/// `session.authenticate`: `method_id` is one of the agent's auth methods (as listed in
/// `last_error.details.auth_methods`); the agent restarts and authenticates with it.
pub struct SessionAuthenticate {
    pub id: String,
    pub method_id: String,
}

/// `session.rename`: `name` empty or left out clears the name.
pub struct SessionRename {
    pub id: String,
    pub name: Option<String>,
}

/// `session.rebind` (issue 52): the session continues with another agent profile.
pub struct SessionRebind {
    pub session_id: String,
    pub profile_id: String,
}

/// `prompt.create`: a saved prompt in a workspace's library (issue 18).
pub struct PromptCreate {
    pub workspace_id: String,
    pub name: String,
    pub body: String,
}

/// `prompt.update`: a field left out keeps its value.
pub struct PromptUpdate {
    pub id: String,
    pub name: Option<String>,
    pub body: Option<String>,
}

pub struct SessionSetMode {
    pub id: String,
    pub mode_id: String,
}

pub struct SessionSetConfigOption {
    pub id: String,
    pub config_id: String,
    pub value: serde_json::Value,
}

pub struct MessageAdd {
    pub session_id: String,
    pub content: String,
    /// Idempotency key: a retry with the same id is recorded once.
    pub client_message_id: Option<String>,
    /// Queue while the agent is busy (default); `false` fails with `BUSY` instead.
    #[serde(default = "yes")]
    #[ts(optional = nullable)]
    pub queue: bool,
    /// Files uploaded with `attachment.upload` (at most 10).
    pub attachments: Option<Vec<crate::AttachmentDto>>,
}

/// `search`: `query` uses SQLite FTS5 syntax (words, "phrases", prefix*, AND/OR/NOT).
pub struct Search {
    pub workspace_id: String,
    pub query: String,
    /// Default: both.
    pub kinds: Option<Vec<crate::SearchKindDto>>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

pub struct MessageList {
    pub session_id: String,
    pub after_seq: Option<i64>,
    pub before_seq: Option<i64>,
    pub limit: Option<u32>,
}

pub struct PermissionRespond {
    pub session_id: String,
    pub request_id: String,
    pub option_id: Option<String>,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub cancelled: bool,
}

/// `executor.create`: `ssh` is required for kind `ssh`, `container` for kind `container`;
/// each is refused for the other kinds.
pub struct ExecutorCreate {
    pub name: String,
    pub kind: crate::ExecutorKindDto,
    pub ssh: Option<crate::SshSettingsDto>,
    pub container: Option<crate::ContainerSettingsDto>,
    /// The secrets its host may receive, by name (none when left out).
    pub allowed_secrets: Option<Vec<String>>,
}

/// `executor.update`: a field left out keeps its value; `kind` and its settings change
/// together (`ssh` or `container` alone replaces the settings of an executor of that kind).
pub struct ExecutorUpdate {
    pub id: String,
    pub name: Option<String>,
    pub kind: Option<crate::ExecutorKindDto>,
    pub ssh: Option<crate::SshSettingsDto>,
    pub container: Option<crate::ContainerSettingsDto>,
    /// Replaces the secrets its host may receive (kept when left out).
    pub allowed_secrets: Option<Vec<String>>,
}

/// `repository.executor.set`: `executor_id` `null` (or left out) runs the repository's agents
/// locally.
pub struct RepositoryExecutorSet {
    pub repository_id: String,
    pub executor_id: Option<String>,
}

/// `notification.channel.create`: `events` are the kinds it carries (at least one); with a
/// `secret`, webhook deliveries are signed.
pub struct ChannelCreate {
    pub kind: crate::ChannelKindDto,
    pub url: String,
    pub events: Vec<crate::NotificationKindDto>,
    pub secret: Option<String>,
    /// Sign with the server secret of this name (issue 50) instead of `secret`.
    pub secret_name: Option<String>,
}

/// `notification.channel.update`: what is given changes; `secret: null` removes the
/// secret, and leaving it out keeps it.
pub struct ChannelUpdate {
    pub id: String,
    pub url: Option<String>,
    pub events: Option<Vec<crate::NotificationKindDto>>,
    #[serde(default, deserialize_with = "double_option")]
    pub secret: Option<Option<String>>,
    /// `null` stops signing with a stored secret; a name signs with that server secret.
    #[serde(default, deserialize_with = "double_option")]
    pub secret_name: Option<Option<String>>,
}

/// `notification.delivery.retry`.
pub struct DeliveryRetry {
    pub id: i64,
}

pub struct NotificationList {
    /// Records after this event `seq` (default 0: all).
    pub after_seq: Option<i64>,
    pub limit: Option<u32>,
}

pub struct DeliveryList {
    /// One channel's deliveries (default: every channel's).
    pub channel_id: Option<String>,
    pub limit: Option<u32>,
}

pub struct QueueAdd {
    pub session_id: String,
    pub content: String,
    pub client_message_id: Option<String>,
    /// Files uploaded with `attachment.upload` (at most 10).
    pub attachments: Option<Vec<crate::AttachmentDto>>,
}

pub struct QueueUpdate {
    pub session_id: String,
    pub id: String,
    pub content: String,
}

pub struct QueueRemove {
    pub session_id: String,
    pub id: String,
}

pub struct QueueReorder {
    pub session_id: String,
    pub ids: Vec<String>,
}

pub struct AutoRunSet {
    pub session_id: String,
    pub enabled: bool,
}

/// Subscribes to topics, replaying what happened after `since` (per topic).
pub struct Subscribe {
    pub topics: Vec<String>,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub since: std::collections::HashMap<String, i64>,
}

pub struct Unsubscribe {
    pub topics: Vec<String>,
}

/// `task.archive` and `task.delete`: `force` also removes worktrees with uncommitted or
/// untracked files.
pub struct TaskRemove {
    pub id: String,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub force: bool,
}

/// `task.file.read`: `path` is relative to the task's working directory.
pub struct TaskFileRead {
    pub task_id: String,
    pub path: String,
}

pub struct TaskCommit {
    pub task_id: String,
    pub message: String,
    /// Commit only what is staged (`task.stage`), not everything.
    #[serde(default)]
    #[ts(optional = nullable)]
    pub staged_only: bool,
}

/// `task.commit.diff`: one commit of `task.commits` (`repository_id` when the task has
/// several repositories).
pub struct TaskCommitDiff {
    pub task_id: String,
    pub repository_id: Option<String>,
    pub sha: String,
}

/// `task.stage`, `task.unstage`, `task.discard`: a file of `task.index`, or one hunk of it
/// (`hunk`: its index in that file's diff, with `diff_hash`, the hash of the diff it was
/// chosen from, as `task.index` gives it).
pub struct TaskIndexChange {
    pub task_id: String,
    pub repository_id: Option<String>,
    pub path: String,
    pub hunk: Option<u32>,
    pub diff_hash: Option<String>,
}

/// `task.amend`: the last commit of the task branch with what is staged; `message` replaces
/// its message.
pub struct TaskAmend {
    pub task_id: String,
    pub repository_id: Option<String>,
    pub message: Option<String>,
}

/// `task.file.viewed.set`: a file of `task.changes` (its `repository_id` and `path`), marked
/// viewed or not.
pub struct FileViewedSet {
    pub task_id: String,
    #[serde(default)]
    pub repository_id: Option<String>,
    pub path: String,
    pub viewed: bool,
}

/// `devserver.start` and `devserver.stop`: the task's first repository unless one is named.
pub struct DevServerTarget {
    pub task_id: String,
    pub repository_id: Option<String>,
}

/// `terminal.open`: a shell in the task's worktree of `repository_id` (the task's first
/// repository unless one is named), in a terminal of `cols` x `rows` cells (1 to 1000).
pub struct TerminalOpen {
    pub task_id: String,
    pub repository_id: Option<String>,
    pub cols: u16,
    pub rows: u16,
}

/// `terminal.close`, `terminal.attach`, `terminal.detach`.
pub struct ByTerminal {
    pub terminal_id: String,
}

/// `intake.source.create`: where work comes from and where its tasks go. An `issues` source
/// reads the open issues of `repository_id`'s forge with `label`; a `webhook` source takes
/// only what its webhook delivers (`hook_scheme` `hmac`).
pub struct IntakeSourceCreate {
    pub workspace_id: String,
    pub name: String,
    /// `issues` or `webhook`.
    pub kind: String,
    pub repository_id: Option<String>,
    pub label: Option<String>,
    /// Default: the workspace's first workflow.
    pub workflow_id: Option<String>,
    /// Default: the workflow's start step.
    pub step_id: Option<String>,
    /// `github`, `gitlab` or `hmac` gives the source a webhook (`/hooks/<id>`) with a new
    /// secret, answered once.
    pub hook_scheme: Option<String>,
}

/// `intake.source.update`: turns a source on or off.
pub struct IntakeSourceUpdate {
    pub id: String,
    pub enabled: bool,
}

/// `schedule.create`: makes a task from `title` and `description` at each occurrence of
/// `cron` read in `time_zone`.
pub struct ScheduleCreate {
    pub workspace_id: String,
    pub name: String,
    pub cron: String,
    pub time_zone: String,
    pub title: String,
    pub description: Option<String>,
    pub workflow_id: Option<String>,
    pub step_id: Option<String>,
    pub repository_ids: Option<Vec<String>>,
    /// `run_once` (default) or `skip`.
    pub missed: Option<String>,
}

/// `schedule.update`: a field left out keeps its value.
pub struct ScheduleUpdate {
    pub id: String,
    pub name: Option<String>,
    pub cron: Option<String>,
    pub time_zone: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub step_id: Option<String>,
    pub repository_ids: Option<Vec<String>>,
    pub missed: Option<String>,
    pub enabled: Option<bool>,
}
}

requests! {
/// A repository of `task.create` with the branch the task starts from.
pub struct TaskRepositoryRef {
    pub id: String,
    pub base_branch: Option<String>,
}

/// `task.rebase`: every repository of the task, or only `repository_id`.
pub struct TaskRebase {
    pub task_id: String,
    pub repository_id: Option<String>,
}

/// `task.merge`: lands the task branch on its base branch in the main repository.
pub struct TaskMerge {
    pub task_id: String,
    pub repository_id: Option<String>,
    pub strategy: crate::MergeStrategyDto,
    /// The merge (or squash) commit's message; default: the task's title.
    pub message: Option<String>,
}

/// `task.push`: pushes the task branch (never forced unless `force_with_lease`).
pub struct TaskPush {
    pub task_id: String,
    pub repository_id: Option<String>,
    /// Default `origin`.
    pub remote: Option<String>,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub force_with_lease: bool,
}

/// `task.pr.create`: title and body default to the task's title, description and commits.
pub struct TaskPrCreate {
    pub task_id: String,
    pub repository_id: Option<String>,
    pub title: Option<String>,
    pub body: Option<String>,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub draft: bool,
}

/// `review.comment.add`: a comment on `line` (1-based) of `path` on `side` (`old` or `new`)
/// of the task's diff.
pub struct ReviewCommentAdd {
    pub task_id: String,
    pub path: String,
    pub line: u32,
    pub side: Option<String>,
    pub text: String,
    /// A reply in this thread (its first comment's id): on that comment's line.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// A range of lines: its first line (`line` is its last).
    #[serde(default)]
    pub start_line: Option<u32>,
}

/// `review.thread.resolve`: the thread's first comment, resolved or opened again.
pub struct ReviewThreadResolve {
    pub id: String,
    pub resolved: bool,
}

pub struct ReviewCommentUpdate {
    pub id: String,
    pub text: String,
}
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
