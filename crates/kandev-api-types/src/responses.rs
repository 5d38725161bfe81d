//! Response payloads of the actions: what a success answers, by action (see [`crate::actions`]).
//! Lists carry `next_cursor` (`null` on the last page, and for lists that are never paged).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::{
    AgentKindDto, AgentProfileDto, BranchCommitDto, CommitDto, FileChangeDto, IndexDto,
    KeptWorktreeDto, MessageDto, QuestionDto, QueuedPromptDto, RepositoryDto, SessionDto, TaskDto,
    TreeEntryDto, WorkflowDto, WorkspaceDto, WorktreeDto,
};

/// Declares response payloads with the attributes every one of them carries.
macro_rules! responses {
    ($($(#[$meta:meta])* pub struct $name:ident $body:tt)*) => {
        $(
            $(#[$meta])*
            #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
            pub struct $name $body
        )*
    };
}

responses! {
    /// `user.me`: who the request is from. `user` is `null` for the server's `--token` and
    /// without accounts; `accounts` says whether any user exists (then logins are required).
    pub struct Me {
        pub user: Option<crate::UserDto>,
        pub via: crate::AuthVia,
        pub accounts: bool,
        /// Whether the caller passes every role check: the server's owner, the server token,
        /// or a server without accounts.
        pub owner: bool,
        /// The caller's role in each workspace they belong to (every workspace, as `admin`,
        /// when `owner`).
        pub roles: Vec<crate::WorkspaceRoleDto>,
    }

    /// `secret.list`: names and scopes, by scope then name; `key_id` names the key they are
    /// sealed with.
    pub struct Secrets {
        pub secrets: Vec<crate::SecretDto>,
        pub key_id: String,
    }

    /// `secret.set`: the secret (never its value).
    pub struct SecretOne {
        pub secret: crate::SecretDto,
    }

    /// `secret.key.rotate`: the new key's id, and how many secrets were re-sealed with it.
    pub struct SecretKeyRotated {
        pub key_id: String,
        pub resealed: u32,
    }

    /// `workspace.member.list`, and `workspace.member.set`/`remove`: the members after it.
    pub struct Members {
        pub members: Vec<crate::MemberDto>,
    }

    /// `user.list` (the owner's): every user with their roles.
    pub struct Users {
        pub users: Vec<crate::UserEntryDto>,
    }

    /// `user.create` and `user.password.reset`: the user.
    pub struct UserOne {
        pub user: crate::UserEntryDto,
    }

    /// `audit.list`: newest first; `next_cursor` pages (`null` on the last page).
    pub struct AuditEntries {
        pub entries: Vec<crate::AuditEntryDto>,
        pub next_cursor: Option<String>,
    }

    /// `user.token.create`: the token and its secret, shown this once (only a hash is kept).
    pub struct TokenCreated {
        pub token: crate::ApiTokenDto,
        pub secret: String,
    }

    /// `user.password.set`: the password is changed. The user's other login sessions ended;
    /// `session_kept` says whether the one the request came with goes on (a personal token's
    /// request has none).
    pub struct PasswordChanged {
        pub user: crate::UserDto,
        pub session_kept: bool,
    }

    /// `user.token.list`: the caller's personal tokens, without secrets.
    pub struct Tokens {
        pub tokens: Vec<crate::ApiTokenDto>,
    }

    /// `*.delete`: the id of what is gone (`deleted` is always `true`).
    pub struct Deleted {
        pub deleted: bool,
        pub id: String,
    }

    /// `intake.source.list`: the workspace's sources by name.
    pub struct IntakeSources {
        pub sources: Vec<crate::IntakeSourceDto>,
    }

    pub struct IntakeSourceOne {
        pub source: crate::IntakeSourceDto,
    }

    /// `intake.source.create`: the source and, when it has a webhook, the secret the sender
    /// signs with (answered only here).
    pub struct IntakeSourceCreated {
        pub source: crate::IntakeSourceDto,
        pub hook_secret: Option<String>,
    }

    /// `intake.source.poll`: the source after one poll, and the tasks it made.
    pub struct IntakePolled {
        pub source: crate::IntakeSourceDto,
        pub created: Vec<TaskDto>,
    }

    /// `schedule.list`: the workspace's schedules by name.
    pub struct Schedules {
        pub schedules: Vec<crate::ScheduleDto>,
    }

    pub struct ScheduleOne {
        pub schedule: crate::ScheduleDto,
    }

    pub struct Workspaces {
        pub workspaces: Vec<WorkspaceDto>,
        pub next_cursor: Option<String>,
    }

    pub struct WorkspaceOne {
        pub workspace: WorkspaceDto,
    }

    pub struct Repositories {
        pub repositories: Vec<RepositoryDto>,
        pub next_cursor: Option<String>,
    }

    pub struct RepositoryOne {
        pub repository: RepositoryDto,
    }

    /// A built-in workflow template: its id for `workflow.create`, and its step names.
    pub struct WorkflowTemplateDto {
        pub id: String,
        pub name: String,
        pub description: String,
        pub steps: Vec<String>,
    }

    pub struct WorkflowTemplates {
        pub templates: Vec<WorkflowTemplateDto>,
        pub next_cursor: Option<String>,
    }

    pub struct Workflows {
        pub workflows: Vec<WorkflowDto>,
        pub next_cursor: Option<String>,
    }

    pub struct WorkflowOne {
        pub workflow: WorkflowDto,
    }

    /// `workflow.import`: the workflows created, in document order.
    pub struct WorkflowsImported {
        pub workflows: Vec<WorkflowDto>,
    }

    pub struct WorkflowYaml {
        pub yaml: String,
    }

    /// `task.create`: with `start_agent` (or a start step that starts an agent), the task's
    /// first session too.
    pub struct TaskCreated {
        pub task: TaskDto,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        pub session: Option<SessionDto>,
    }

    /// `task.list`: board cards (`task.get` answers a whole task).
    pub struct Tasks {
        pub tasks: Vec<crate::TaskCardDto>,
        pub next_cursor: Option<String>,
    }

    pub struct TaskOne {
        pub task: TaskDto,
    }

    /// `task.needs_you`: a workspace's tasks that need their developer, the longest waiting
    /// first (at most 100).
    pub struct TasksNeedingYou {
        pub tasks: Vec<TaskDto>,
    }

    pub struct TaskMoved {
        pub task: TaskDto,
        pub from_step_id: String,
    }

    /// `task.attempt.list`: the task's attempts, oldest first.
    pub struct TaskAttempts {
        pub attempts: Vec<crate::TaskAttemptDto>,
    }

    /// `task.attempt.pick`: the task afterwards (the picked attempt is its primary session),
    /// the branch that is now the task's, and the other worktrees removed or kept (with why).
    pub struct AttemptPicked {
        pub task: TaskDto,
        pub branch: String,
        pub worktrees_removed: Vec<String>,
        pub worktrees_kept: Vec<KeptWorktreeDto>,
    }

    /// `task.archive`: the worktrees removed (paths) and those kept, with why.
    pub struct TaskArchived {
        pub task: TaskDto,
        pub worktrees_removed: Vec<String>,
        pub worktrees_kept: Vec<KeptWorktreeDto>,
    }

    /// `task.delete`.
    pub struct TaskDeleted {
        pub deleted: bool,
        pub id: String,
        pub worktrees_removed: Vec<String>,
        pub worktrees_kept: Vec<KeptWorktreeDto>,
    }

    pub struct TaskChanges {
        pub worktrees: Vec<WorktreeDto>,
        pub files: Vec<FileChangeDto>,
    }

    pub struct TaskTree {
        pub entries: Vec<TreeEntryDto>,
        pub truncated: bool,
    }

    /// `task.commits`: the task branch's own commits, newest first, per repository.
    pub struct TaskCommits {
        pub commits: Vec<BranchCommitDto>,
    }

    /// `task.commit.diff`.
    pub struct CommitDiff {
        pub files: Vec<FileChangeDto>,
    }

    /// `task.index`: one entry per worktree.
    pub struct TaskIndex {
        pub repositories: Vec<IndexDto>,
    }

    /// `task.stage`, `task.unstage`, `task.discard`: the worktree's index afterwards.
    pub struct TaskIndexChanged {
        pub index: IndexDto,
    }

    /// `task.amend`.
    pub struct TaskAmended {
        pub commit: CommitDto,
    }

    /// `task.commit`: `commit` is the first of `commits` (one per worktree that had changes).
    pub struct TaskCommitted {
        pub commit: Option<CommitDto>,
        pub commits: Vec<CommitDto>,
    }

    /// One kind of agent: its name, default command, whether that is on `PATH`, how to
    /// install it and to log in, the npm package Kandev installs it from (`null`: none), the
    /// versions Kandev installed (`agent.install`, newest first), and the version an agent of
    /// this kind last reported in `initialize` (else `null`).
    pub struct AgentKindInfo {
        pub kind: AgentKindDto,
        pub title: String,
        pub command: String,
        pub installed: bool,
        pub install: String,
        pub login: String,
        pub package: Option<String>,
        pub installed_versions: Vec<String>,
        pub version: Option<String>,
    }

    /// One version of an agent that Kandev installed, and the profiles that run it.
    pub struct InstalledAgentVersion {
        pub version: String,
        /// The agent's command in Kandev's prefix.
        pub path: String,
        pub profiles: Vec<String>,
    }

    /// `agent.versions`: the versions installed under `$KANDEV_HOME/agents` (newest first),
    /// and those the package registry offers (newest first, at most 50; empty with
    /// `registry_error` when it could not be asked).
    pub struct AgentVersions {
        pub kind: AgentKindDto,
        pub package: String,
        pub installed: Vec<InstalledAgentVersion>,
        pub available: Vec<String>,
        pub latest: Option<String>,
        pub registry_error: Option<String>,
    }

    /// `agent.install`: the version now installed (`already` when it was before).
    pub struct AgentInstalled {
        pub kind: AgentKindDto,
        pub version: String,
        pub path: String,
        pub already: bool,
    }

    /// `agent.uninstall`.
    pub struct AgentUninstalled {
        pub kind: AgentKindDto,
        pub version: String,
    }

    pub struct AgentKinds {
        pub kinds: Vec<AgentKindInfo>,
    }

    pub struct Profiles {
        pub profiles: Vec<AgentProfileDto>,
        pub next_cursor: Option<String>,
    }

    /// `agent.profile.create` and `.update`: `installed` says whether the profile's command is
    /// found; when it is not, `install` says how to install the agent.
    pub struct ProfileSaved {
        pub profile: AgentProfileDto,
        pub installed: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional)]
        pub install: Option<String>,
    }

    pub struct Sessions {
        pub sessions: Vec<SessionDto>,
        pub next_cursor: Option<String>,
    }

    pub struct SessionOne {
        pub session: SessionDto,
    }

    pub struct Messages {
        pub messages: Vec<MessageDto>,
    }

    pub struct NotificationRecords {
        pub notifications: Vec<crate::NotificationRecordDto>,
    }

    /// `executor.list`: every executor, by name.
    pub struct Executors {
        pub executors: Vec<crate::ExecutorDto>,
    }

    /// `executor.create`, `executor.update`.
    pub struct ExecutorOne {
        pub executor: crate::ExecutorDto,
    }

    /// `executor.check`: whether the executor can be reached and runs this server's kandev.
    /// On failure `message` says why and what to do (an unknown host key: how to trust it).
    pub struct ExecutorChecked {
        pub ok: bool,
        pub message: Option<String>,
        /// This server's binary was copied there (the remote one was missing or of another
        /// version: `previous_version`).
        pub copied: bool,
        pub previous_version: Option<String>,
        pub remote_version: Option<String>,
        /// A container executor's checks in order (the engine runs, the image exists, this
        /// server's kandev runs in it), each with what fixes it; empty for the other kinds.
        pub steps: Vec<crate::CheckStepDto>,
    }

    /// `task.file.viewed.set`: the file's mark as it is now.
    pub struct FileViewed {
        pub repository_id: Option<String>,
        pub path: String,
        pub viewed: bool,
    }

    /// `system.doctor`: what `kandev doctor` checks that a running server can (git, its home
    /// and free space, the database's integrity, the agents the profiles use, the executors'
    /// tools, the runner), each with what was found or the line that fixes it.
    pub struct SystemHealth {
        /// Every check held.
        pub ok: bool,
        pub findings: Vec<crate::CheckStepDto>,
    }

    /// `repository.executor.set`: the repository's executor (`null`: local).
    pub struct RepositoryExecutor {
        pub repository_id: String,
        pub executor: Option<crate::ExecutorDto>,
    }

    pub struct Channels {
        pub channels: Vec<crate::ChannelDto>,
    }

    pub struct ChannelOne {
        pub channel: crate::ChannelDto,
    }

    /// `notification.channel.test`: one test notification sent now (not retried, not in the
    /// delivery log): whether the receiver took it, its HTTP status, and why not.
    pub struct ChannelTested {
        pub delivered: bool,
        pub http_status: Option<u16>,
        pub error: Option<String>,
        /// The start of the receiver's answer (at most 500 characters), when it sent one.
        pub body: Option<String>,
    }

    /// `notification.delivery.retry`: the delivery, due now.
    pub struct DeliveryOne {
        pub delivery: crate::DeliveryDto,
    }

    /// `notification.delivery.list`: newest first, each with every attempt.
    pub struct Deliveries {
        pub deliveries: Vec<crate::DeliveryDto>,
    }

    /// `turn.checkpoint.list`: the session's turns that can be reverted to or diffed, oldest
    /// first.
    pub struct TurnCheckpoints {
        pub turns: Vec<crate::TurnCheckpointDto>,
    }

    /// `turn.revert`: the turns undone (the one reverted to first), the files changed back,
    /// the files changed since the agent's last turn by someone else, and whether the revert
    /// happened (`false` for a dry run).
    pub struct TurnReverted {
        pub turns: Vec<crate::UndoneTurnDto>,
        pub files: Vec<crate::RevertFileDto>,
        pub outside_edits: Vec<crate::RevertFileDto>,
        pub reverted: bool,
    }

    /// `session.turn.list`: the newest 1000 turns, oldest first.
    pub struct Turns {
        pub turns: Vec<crate::TurnDto>,
    }

    pub struct SearchResults {
        pub hits: Vec<crate::SearchHitDto>,
        pub next_cursor: Option<String>,
    }

    /// `prompt.list`: the workspace's saved prompts by name.
    pub struct SavedPrompts {
        pub prompts: Vec<crate::SavedPromptDto>,
    }

    pub struct SavedPromptOne {
        pub prompt: crate::SavedPromptDto,
    }

    pub struct MessageOne {
        pub message: MessageDto,
    }

    pub struct QuestionOne {
        pub question: QuestionDto,
    }

    /// A session's questions, oldest first.
    pub struct Questions {
        pub questions: Vec<QuestionDto>,
    }

    /// Every `message.queue.*` action answers the whole queue after the change.
    pub struct Queue {
        pub queue: Vec<QueuedPromptDto>,
    }

    /// `subscribe`: the last `seq` sent per topic now followed (a topic told
    /// `resync_required` is left out).
    pub struct Subscribed {
        pub topics: HashMap<String, i64>,
    }

    /// `devserver.start`, `devserver.stop`.
    pub struct DevServerOne {
        pub dev_server: crate::DevServerDto,
    }

    /// `terminal.open`, `terminal.close`, `terminal.attach`, `terminal.detach`.
    pub struct TerminalOne {
        pub terminal: crate::TerminalDto,
    }

    /// `terminal.list`: the task's open terminals, oldest first.
    pub struct Terminals {
        pub terminals: Vec<crate::TerminalDto>,
    }

    /// `devserver.list`: the task's dev servers.
    pub struct DevServers {
        pub dev_servers: Vec<crate::DevServerDto>,
    }

    /// `unsubscribe`: the topics named.
    pub struct Unsubscribed {
        pub topics: Vec<String>,
    }
}

/// `message.add`: sent as a turn now, recorded once for a repeated `client_message_id`, or
/// queued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum MessageAdded {
    Sent { message: MessageDto },
    Duplicate { message: MessageDto },
    Queued { queued: QueuedPromptDto },
}

responses! {
    /// `repository.branches`: local branches, then remote-tracking ones (`origin/x`).
    pub struct Branches {
        pub branches: Vec<String>,
    }

    /// `repository.usage`: the disk each live task worktree takes (`bytes` of its files,
    /// `.git` excluded; `null` when it could not be measured).
    pub struct RepositoryUsage {
        pub worktrees: Vec<WorktreeUsageDto>,
        pub total_bytes: u64,
    }

    pub struct WorktreeUsageDto {
        pub task_id: String,
        pub path: String,
        pub branch: String,
        pub bytes: Option<u64>,
        pub truncated: bool,
    }

    /// `task.git_status`, and what `task.rebase` answers: one entry per repository with a
    /// worktree.
    pub struct TaskGitStatus {
        pub repositories: Vec<crate::GitStatusDto>,
    }

    /// `task.merge`: the base branch's new commit per repository, and the status after.
    pub struct TaskMerged {
        pub merged: Vec<MergeMadeDto>,
        pub repositories: Vec<crate::GitStatusDto>,
    }

    /// One repository's merge.
    pub struct MergeMadeDto {
        pub repository_id: String,
        pub base_branch: String,
        pub commit: String,
    }

    /// `task.push`: what was pushed where, and the status after.
    pub struct TaskPushed {
        pub pushed: Vec<PushMadeDto>,
        pub repositories: Vec<crate::GitStatusDto>,
    }

    pub struct PushMadeDto {
        pub repository_id: String,
        pub remote: String,
        pub branch: String,
        pub head: String,
    }

    /// `task.pr.create` and `task.pr.get`: the task's pull requests, the CI jobs of their
    /// head commits, the forge events their triggers ran for (oldest first), the feedback
    /// messages sent so far, and why auto-fix stopped, when it did.
    pub struct TaskPullRequests {
        pub pull_requests: Vec<crate::PullRequestDto>,
        pub checks: Vec<crate::PrCheckDto>,
        pub events: Vec<crate::PrEventDto>,
        pub feedback_rounds: u32,
        pub stopped: Option<String>,
    }

    /// `review.comment.list`: the task's comments, oldest first, sent ones included.
    pub struct ReviewComments {
        pub comments: Vec<crate::ReviewCommentDto>,
    }

    pub struct ReviewCommentOne {
        pub comment: crate::ReviewCommentDto,
    }

    /// `review.submit`: the comments sent, and whether the prompt ran now or was queued.
    pub struct ReviewSubmitted {
        pub comments: Vec<crate::ReviewCommentDto>,
        pub session_id: String,
        pub queued: bool,
    }
}
