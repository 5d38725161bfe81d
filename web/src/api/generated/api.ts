// Generated from crates/kandev-api-types by its `ts_bindings` test. Do not edit:
// change the Rust types, run `cargo test -p kandev-api-types --test ts_bindings`
// twice and commit this file.

export type ActionDto = { "type": "reset_agent_context" } | { "type": "enable_plan_mode" } | { "type": "disable_plan_mode" } | { "type": "set_session_mode", mode_id: string, } | { "type": "auto_start_agent" } | { "type": "move_to_next" } | { "type": "move_to_previous" } | { "type": "move_to_step", step_id: string, } | { "type": "push" } | { "type": "create_pull_request" } | { "type": "merge", strategy: MergeStrategyDto, } | { "type": "rebase" } | { "type": "send_feedback", max_rounds: number, include_bots: boolean, } | { "type": "auto_merge", strategy: MergeStrategyDto, } | { "type": "comment_issue" } | { "type": "close_issue" } | { "type": "start_attempts", count: number, };

export type AgentInstall = { kind: AgentKindDto, version: string, executor_id?: string, };

export type AgentInstalled = { kind: AgentKindDto, version: string, path: string, already: boolean, };

export type AgentKindDto = "mock" | "claude" | "codex" | "gemini" | "opencode" | "qwen" | "kilo" | "copilot" | "auggie" | "custom";

export type AgentKindInfo = { kind: AgentKindDto, title: string, command: string, installed: boolean, install: string, login: string, package: string | null, installed_versions: Array<string>, version: string | null, };

export type AgentKinds = { kinds: Array<AgentKindInfo>, };

export type AgentProfileDto = { id: string, name: string, kind: AgentKindDto, command: string, 
/**
 * The version of the kind's agent installed by Kandev that this profile runs
 * (`agent.install`); `null` runs the command found on `PATH`.
 */
agent_version: string | null, args: Array<string>, env: Array<EnvVarDto>, model: string | null, mode: string | null, auto_approve: boolean, 
/**
 * Extra MCP servers for the agent, besides Kandev's own (secrets masked).
 */
mcp_servers: Array<McpServerDto>, created_at: string, updated_at: string, };

export type AgentUninstalled = { kind: AgentKindDto, version: string, };

export type AgentVersions = { kind: AgentKindDto, package: string, installed: Array<InstalledAgentVersion>, available: Array<string>, latest: string | null, registry_error: string | null, };

export type AgentVersionsQuery = { kind: AgentKindDto, 
/**
 * An SSH executor: its build host's installs (default: this machine's, which local and
 * container executors use).
 */
executor_id?: string, };

export type ApiTokenDto = { id: string, name: string, created_at: string, };

export type AttachmentDto = { id: string, name: string, mime: string, size: number, };

export type AttachmentUploaded = { attachment: AttachmentDto, };

export type AttemptDto = { attempt: number, at: string, http_status: number | null, error: string | null, };

export type AttemptPicked = { task: TaskDto, branch: string, worktrees_removed: Array<string>, worktrees_kept: Array<KeptWorktreeDto>, };

export type AttemptSpec = { profile_id?: string, prompt?: string, };

export type AuditEntries = { entries: Array<AuditEntryDto>, next_cursor: string | null, };

export type AuditEntryDto = { id: string, at: string, 
/**
 * Milliseconds since the epoch.
 */
at_ms: number, by: string, action: string, workspace_id: string | null, target: string | null, };

export type AuditList = { workspace_id?: string, by?: string, action?: string, cursor?: string, limit?: number, };

export type AuthVia = "open" | "server_token" | "session" | "token" | "proxy";

export type AutoRunSet = { session_id: string, enabled: boolean, };

export type AvailableCommandDto = { name: string, description: string, 
/**
 * What to type after the name, when the agent says.
 */
input_hint: string | null, };

export type BranchCommitDto = { repository_id: string | null, sha: string, summary: string, author: string, committed_at: string, };

export type Branches = { branches: Array<string>, };

export type ById = { id: string, };

export type ByName = { name: string, };

export type BySession = { session_id: string, };

export type ByTask = { task_id: string, };

export type ByTerminal = { terminal_id: string, };

export type ByWorkspace = { workspace_id: string, };

export type ChannelCreate = { kind: ChannelKindDto, url: string, events: Array<NotificationKindDto>, secret?: string, 
/**
 * Sign with the server secret of this name (issue 50) instead of `secret`.
 */
secret_name?: string, };

export type ChannelDto = { id: string, kind: ChannelKindDto, url_origin: string, has_secret: boolean, 
/**
 * The server secret a webhook signs with (issue 50), by name.
 */
secret_name: string | null, events: Array<NotificationKindDto>, created_at: string, };

export type ChannelKindDto = "webhook" | "ntfy";

export type ChannelOne = { channel: ChannelDto, };

export type ChannelTested = { delivered: boolean, http_status: number | null, error: string | null, 
/**
 * The start of the receiver's answer (at most 500 characters), when it sent one.
 */
body: string | null, };

export type ChannelUpdate = { id: string, url?: string, events?: Array<NotificationKindDto>, secret?: string | null, 
/**
 * `null` stops signing with a stored secret; a name signs with that server secret.
 */
secret_name?: string | null, };

export type Channels = { channels: Array<ChannelDto>, };

export type CheckStepDto = { what: string, ok: boolean, detail: string, };

export type CommitDiff = { files: Array<FileChangeDto>, };

export type CommitDto = { repository_id: string | null, branch: string, sha: string, summary: string, files_changed: number, };

export type ContainerEngineDto = "podman" | "docker";

export type ContainerNetworkDto = "none" | "host_ports" | "full";

export type ContainerSettingsDto = { engine?: ContainerEngineDto | null, image: string, network: ContainerNetworkDto, 
/**
 * With network `host_ports`: the ports (1 to 32); empty otherwise.
 */
host_ports: Array<number>, cpus?: number | null, memory_mib?: number | null, mounts: Array<string>, };

export type Deleted = { deleted: boolean, id: string, };

export type Deliveries = { deliveries: Array<DeliveryDto>, };

export type DeliveryDto = { id: number, notification_id: string, 
/**
 * Its record's kind, task and title.
 */
kind: NotificationKindDto, task_id: string, title: string, channel_id: string, status: DeliveryStatusDto, next_at: string | null, attempts: Array<AttemptDto>, };

export type DeliveryList = { 
/**
 * One channel's deliveries (default: every channel's).
 */
channel_id?: string, limit?: number, };

export type DeliveryOne = { delivery: DeliveryDto, };

export type DeliveryRetry = { id: number, };

export type DeliveryStatusDto = "pending" | "delivered" | "failed";

export type DevServerDto = { task_id: string, repository_id: string, port: number, url: string, 
/**
 * The id its log streams under (`terminal.attach`): `dev_<port>`.
 */
terminal_id: string, 
/**
 * `running` or `exited`.
 */
state: string, exit_code: number | null, log: string, 
/**
 * Older output was dropped (the log keeps the last 256 KiB).
 */
truncated: boolean, };

export type DevServerOne = { dev_server: DevServerDto, };

export type DevServerTarget = { task_id: string, repository_id?: string, };

export type DevServers = { dev_servers: Array<DevServerDto>, };

export type DiffLineDto = { kind: string, text: string, };

export type DirtyDto = { uncommitted: number, untracked: number, 
/**
 * The files, uncommitted first (at most 200).
 */
files: Array<string>, };

export type Empty = Record<symbol, never>;

export type EmptyMetaDto = Record<symbol, never>;

export type EnvVarDto = { name: string, value: string, secret?: string, };

export type ErrorBody = { code: ErrorCode, message: string, details?: JsonValue | null, };

export type ErrorCode = "BAD_REQUEST" | "VALIDATION_ERROR" | "NOT_FOUND" | "CONFLICT" | "BUSY" | "QUEUE_FULL" | "RESET_IN_PROGRESS" | "ALREADY_RESOLVED" | "UNAUTHORIZED" | "FORBIDDEN" | "UNAVAILABLE" | "INTERNAL_ERROR" | "UNKNOWN_ACTION" | "RATE_LIMITED";

export type ErrorMetaDto = { code?: string, action?: string, stderr?: string, };

export type EventsDto = { on_enter: Array<ActionDto>, on_turn_start: Array<ActionDto>, on_turn_complete: Array<ActionDto>, on_exit: Array<ActionDto>, on_pr_merged: Array<ActionDto>, on_pr_closed: Array<ActionDto>, on_pr_checks_failed: Array<ActionDto>, on_pr_checks_passed: Array<ActionDto>, on_pr_review: Array<ActionDto>, };

export type ExecutorChecked = { ok: boolean, message: string | null, 
/**
 * This server's binary was copied there (the remote one was missing or of another
 * version: `previous_version`).
 */
copied: boolean, previous_version: string | null, remote_version: string | null, 
/**
 * A container executor's checks in order (the engine runs, the image exists, this
 * server's kandev runs in it), each with what fixes it; empty for the other kinds.
 */
steps: Array<CheckStepDto>, };

export type ExecutorCreate = { name: string, kind: ExecutorKindDto, ssh?: SshSettingsDto, container?: ContainerSettingsDto, 
/**
 * The secrets its host may receive, by name (none when left out).
 */
allowed_secrets?: Array<string>, };

export type ExecutorDto = { id: string, name: string, kind: ExecutorKindDto, ssh: SshSettingsDto | null, container: ContainerSettingsDto | null, repository_ids: Array<string>, 
/**
 * The secrets its host may receive (issue 50), by name.
 */
allowed_secrets: Array<string>, created_at: string, updated_at: string, };

export type ExecutorKindDto = "local" | "ssh" | "container";

export type ExecutorOne = { executor: ExecutorDto, };

export type ExecutorUpdate = { id: string, name?: string, kind?: ExecutorKindDto, ssh?: SshSettingsDto, container?: ContainerSettingsDto, 
/**
 * Replaces the secrets its host may receive (kept when left out).
 */
allowed_secrets?: Array<string>, };

export type Executors = { executors: Array<ExecutorDto>, };

export type FileChangeDto = { repository_id: string | null, path: string, old_path: string | null, status: string, additions: number, deletions: number, binary: boolean, truncated: boolean, hunks: Array<HunkDto>, 
/**
 * Marked viewed (`task.file.viewed.set`) and its diff unchanged since.
 */
viewed: boolean, 
/**
 * The hash of this diff of the file: names it when one hunk is staged, unstaged or
 * discarded (`task.stage`), so a diff that changed since is refused.
 */
diff_hash: string, };

export type FileContentDto = { path: string, content: string, binary: boolean, truncated: boolean, size: number, };

export type FileViewed = { repository_id: string | null, path: string, viewed: boolean, };

export type FileViewedSet = { task_id: string, repository_id?: string, path: string, viewed: boolean, };

export type GitStatusDto = { repository_id: string, branch: string, base_branch: string, base_commit: string, base_tip: string, head: string, ahead: number, behind: number, dirty: DirtyDto, conflicts_with_base: Array<string>, remote: RemoteStatusDto | null, pr: PullRequestDto | null, 
/**
 * `task.merge` landed the branch as it is now on the base branch.
 */
merged: boolean, };

export type GitSummaryDto = { ahead: number, behind: number, dirty: number, conflicts: number, pr_state: string | null, 
/**
 * Every repository's task branch is merged into its base as it is now (`task.merge`).
 */
merged: boolean, };

export type HunkDto = { header: string, old_start: number, old_lines: number, new_start: number, new_lines: number, lines: Array<DiffLineDto>, };

export type IndexDto = { repository_id: string | null, staged: Array<FileChangeDto>, unstaged: Array<FileChangeDto>, };

export type InstalledAgentVersion = { version: string, 
/**
 * The agent's command in Kandev's prefix.
 */
path: string, profiles: Array<string>, };

export type IntakePolled = { source: IntakeSourceDto, created: Array<TaskDto>, };

export type IntakeSourceCreate = { workspace_id: string, name: string, 
/**
 * `issues` or `webhook`.
 */
kind: string, repository_id?: string, label?: string, 
/**
 * Default: the workspace's first workflow.
 */
workflow_id?: string, 
/**
 * Default: the workflow's start step.
 */
step_id?: string, 
/**
 * `github`, `gitlab` or `hmac` gives the source a webhook (`/hooks/<id>`) with a new
 * secret, answered once.
 */
hook_scheme?: string, };

export type IntakeSourceCreated = { source: IntakeSourceDto, hook_secret: string | null, };

export type IntakeSourceDto = { id: string, workspace_id: string, name: string, 
/**
 * `issues` (a repository's forge issues, polled) or `webhook` (only what its webhook
 * delivers).
 */
kind: string, repository_id: string | null, 
/**
 * Only issues with this label (empty: every open issue).
 */
label: string, workflow_id: string, step_id: string, 
/**
 * Its webhook's scheme (`github`, `gitlab`, `hmac`), when it has one; its URL is
 * `/hooks/<id>`. The secret is shown once, when the source is created.
 */
hook_scheme: string | null, enabled: boolean, last_polled_at: string | null, 
/**
 * Why the last poll failed (empty after a good one).
 */
last_error: string, created_at: string, };

export type IntakeSourceOne = { source: IntakeSourceDto, };

export type IntakeSourceUpdate = { id: string, enabled: boolean, };

export type IntakeSources = { sources: Array<IntakeSourceDto>, };

export type JsonValue = number | string | boolean | Array<JsonValue> | { [key in string]: JsonValue } | null;

export type KeptWorktreeDto = { repository_id: string | null, path: string, reason: string, };

export type LastErrorDto = { code: string, message: string, details: JsonValue, at: string, };

export type McpServerDto = { name: string, command?: string, args?: Array<string>, env?: Array<EnvVarDto>, url?: string, transport?: McpTransportDto, headers?: Array<EnvVarDto>, };

export type McpTransportDto = "http" | "sse";

export type Me = { user: UserDto | null, via: AuthVia, accounts: boolean, 
/**
 * Whether the caller passes every role check: the server's owner, the server token,
 * or a server without accounts.
 */
owner: boolean, 
/**
 * The caller's role in each workspace they belong to (every workspace, as `admin`,
 * when `owner`).
 */
roles: Array<WorkspaceRoleDto>, };

export type MemberDto = { user_id: string, name: string, role: RoleDto, added_at: string, };

export type MemberRemove = { workspace_id: string, user: string, };

export type MemberSet = { workspace_id: string, user: string, role: RoleDto, };

export type Members = { members: Array<MemberDto>, };

export type MergeMadeDto = { repository_id: string, base_branch: string, commit: string, };

export type MergeStrategyDto = "merge" | "squash" | "fast_forward";

export type MessageAdd = { session_id: string, content: string, 
/**
 * Idempotency key: a retry with the same id is recorded once.
 */
client_message_id?: string, 
/**
 * Queue while the agent is busy (default); `false` fails with `BUSY` instead.
 */
queue?: boolean, 
/**
 * Files uploaded with `attachment.upload` (at most 10).
 */
attachments?: Array<AttachmentDto>, };

export type MessageAdded = { "status": "sent", message: MessageDto, } | { "status": "duplicate", message: MessageDto, } | { "status": "queued", queued: QueuedPromptDto, };

export type MessageDto = { id: string, session_id: string, turn_id: string | null, seq: number, content: string, client_message_id: string | null, created_at: string, updated_at: string, } & ({ "kind": "user", "metadata": UserMetaDto } | { "kind": "agent", "metadata": EmptyMetaDto } | { "kind": "thought", "metadata": EmptyMetaDto } | { "kind": "tool_call", "metadata": ToolCallMetaDto } | { "kind": "plan", "metadata": PlanMetaDto } | { "kind": "usage", "metadata": UsageMetaDto } | { "kind": "status", "metadata": StatusMetaDto } | { "kind": "error", "metadata": ErrorMetaDto } | { "kind": "permission_request", "metadata": PermissionMetaDto });

export type MessageKindDto = "user" | "agent" | "thought" | "tool_call" | "plan" | "usage" | "status" | "error" | "permission_request";

export type MessageList = { session_id: string, after_seq?: number, before_seq?: number, limit?: number, };

export type MessageOne = { message: MessageDto, };

export type MessageUpdate = { message_id: string, seq: number, kind: MessageKindDto, delta: string, length: number, } | { message_id: string, seq: number, message: MessageDto, };

export type Messages = { messages: Array<MessageDto>, };

export type NeedsYouDto = "permission" | "question" | "error" | "pull_request";

export type NotificationKindDto = "permission_requested" | "question_asked" | "turn_completed" | "session_failed" | "pr_state_changed";

export type NotificationList = { 
/**
 * Records after this event `seq` (default 0: all).
 */
after_seq?: number, limit?: number, };

export type NotificationRecordDto = { id: string, kind: NotificationKindDto, seq: number, task_id: string, session_id: string, title: string, data: JsonValue, created_at: string, };

export type NotificationRecords = { notifications: Array<NotificationRecordDto>, };

export type NotificationsEvent = { "action": "notification.created", "payload": { notification: NotificationRecordDto, } } | { "action": "notification.delivery.updated", "payload": { delivery: DeliveryDto, } } | { "action": "notification.delivery.retried", "payload": { delivery: DeliveryDto, } };

export type Page = { limit?: number, cursor?: string, };

export type PasswordChanged = { user: UserDto, session_kept: boolean, };

export type PasswordSet = { current_password: string, new_password: string, };

export type PermissionMetaDto = { request_id: string, options: Array<PermissionOptionDto>, status: string, 
/**
 * The tool call the agent asks about, as it sent it.
 */
tool_call: JsonValue, selected_option_id?: string, answered_by?: string, };

export type PermissionOptionDto = { option_id: string, name: string, kind: string, };

export type PermissionRespond = { session_id: string, request_id: string, option_id?: string, cancelled?: boolean, };

export type PlanEntryDto = { content: string, priority: string, status: string, };

export type PlanMetaDto = { entries: Array<PlanEntryDto>, };

export type PrCheckDto = { repository_id: string, name: string, head_sha: string, state: string, url: string, log_tail: string, inherited: boolean, };

export type PrEventDto = { repository_id: string, kind: string, key: string, outcome: string, detail: string, at: string, };

export type ProfileCreate = { name: string, kind: AgentKindDto, command?: string, 
/**
 * A version of the kind's agent installed by Kandev (`agent.install`) to run instead of
 * the command on `PATH`; only without `command`.
 */
agent_version?: string, args?: Array<string>, env?: Array<EnvVarDto>, model?: string, mode?: string, auto_approve?: boolean, 
/**
 * Extra MCP servers for the agent, besides Kandev's own.
 */
mcp_servers?: Array<McpServerDto>, };

export type ProfileSaved = { profile: AgentProfileDto, installed: boolean, install?: string, };

export type ProfileUpdate = { id: string, name?: string, command?: string, 
/**
 * `null` runs the command on `PATH` again.
 */
agent_version?: string | null, args?: Array<string>, env?: Array<EnvVarDto>, model?: string | null, mode?: string | null, auto_approve?: boolean, 
/**
 * Replaces the extra MCP servers; a [`crate::SECRET_MASK`] env or header value keeps
 * the current value of that server's variable or header of the same name.
 */
mcp_servers?: Array<McpServerDto>, };

export type Profiles = { profiles: Array<AgentProfileDto>, next_cursor: string | null, };

export type ProfilesEvent = { "action": "agent.profile.created", "payload": { profile: AgentProfileDto, } } | { "action": "agent.profile.updated", "payload": { profile: AgentProfileDto, } } | { "action": "agent.profile.deleted", "payload": { id: string, } };

export type PromptCreate = { workspace_id: string, name: string, body: string, };

export type PromptUpdate = { id: string, name?: string, body?: string, };

export type PullRequestDto = { repository_id: string, forge: string, number: number, url: string, state: string, checks: string | null, review_decision: string | null, head_branch: string, base_branch: string, updated_at: string, };

export type PushMadeDto = { repository_id: string, remote: string, branch: string, head: string, };

export type QuestionAnswer = { id: string, answer: string, };

export type QuestionDto = { id: string, session_id: string, task_id: string, question: string, options: Array<string>, status: QuestionStatusDto, answer: string | null, created_at: string, expires_at: string, resolved_at: string | null, };

export type QuestionOne = { question: QuestionDto, };

export type QuestionStatusDto = "pending" | "answered" | "cancelled" | "timed_out" | "expired";

export type Questions = { questions: Array<QuestionDto>, };

export type Queue = { queue: Array<QueuedPromptDto>, };

export type QueueAdd = { session_id: string, content: string, client_message_id?: string, 
/**
 * Files uploaded with `attachment.upload` (at most 10).
 */
attachments?: Array<AttachmentDto>, };

export type QueueRemove = { session_id: string, id: string, };

export type QueueReorder = { session_id: string, ids: Array<string>, };

export type QueueUpdate = { session_id: string, id: string, content: string, };

export type QueuedPromptDto = { id: string, session_id: string, position: number, content: string, client_message_id: string | null, queued_by: string, created_at: string, attachments: Array<AttachmentDto>, };

export type RemoteStatusDto = { remote: string, pushed_head: string, upstream_ahead: number, upstream_behind: number, };

export type Repositories = { repositories: Array<RepositoryDto>, next_cursor: string | null, };

export type RepositoryCreate = { workspace_id: string, local_path: string, name?: string, default_branch?: string, branch_template?: string, setup_script?: string, copy_files?: Array<string>, cleanup_script?: string, forge_api_base_url?: string, forge_token_env?: string, dev_script?: string, 
/**
 * The setup and cleanup scripts' time limit in seconds (at most a day); 0: the server's.
 */
script_timeout_s?: number, 
/**
 * The secrets its setup, cleanup and dev scripts get as environment variables, by name.
 */
script_secrets?: Array<string>, };

export type RepositoryDto = { id: string, workspace_id: string, name: string, local_path: string, default_branch: string, branch_template: string, setup_script: string, copy_files: Array<string>, cleanup_script: string, forge_api_base_url: string, forge_token_env: string, dev_script: string, 
/**
 * The setup and cleanup scripts' time limit in seconds; 0: the server's.
 */
script_timeout_s: number, 
/**
 * The secrets (issue 50) its setup, cleanup and dev scripts get as environment
 * variables of the same names.
 */
script_secrets: Array<string>, created_at: string, updated_at: string, };

export type RepositoryExecutor = { repository_id: string, executor: ExecutorDto | null, };

export type RepositoryExecutorSet = { repository_id: string, executor_id?: string, };

export type RepositoryOne = { repository: RepositoryDto, };

export type RepositoryUpdate = { id: string, name?: string, default_branch?: string, branch_template?: string, setup_script?: string, copy_files?: Array<string>, cleanup_script?: string, forge_api_base_url?: string, forge_token_env?: string, dev_script?: string, 
/**
 * The setup and cleanup scripts' time limit in seconds (at most a day); 0: the server's.
 */
script_timeout_s?: number, 
/**
 * The secrets its setup, cleanup and dev scripts get as environment variables, by name.
 */
script_secrets?: Array<string>, };

export type RepositoryUsage = { worktrees: Array<WorktreeUsageDto>, total_bytes: number, };

export type ResumeMode = "load" | "fresh";

export type RevertFileDto = { repository_id: string | null, path: string, };

export type ReviewCommentAdd = { task_id: string, path: string, line: number, side?: string, text: string, 
/**
 * A reply in this thread (its first comment's id): on that comment's line.
 */
thread_id?: string, 
/**
 * A range of lines: its first line (`line` is its last).
 */
start_line?: number, };

export type ReviewCommentDto = { id: string, task_id: string, path: string, line: number, side: string, text: string, quote: string, diff_hash: string, created_at: string, updated_at: string, sent_at: string | null, 
/**
 * The thread it replies in (its first comment's id); `null` on a first comment.
 */
thread_id: string | null, 
/**
 * The first line of a range of lines ending at `line`; `null` for one line.
 */
start_line: number | null, 
/**
 * On a thread's first comment: when it was resolved.
 */
resolved_at: string | null, 
/**
 * The lines it was made on changed since (`review.comment.list` says; `false` elsewhere).
 */
outdated: boolean, };

export type ReviewCommentOne = { comment: ReviewCommentDto, };

export type ReviewCommentUpdate = { id: string, text: string, };

export type ReviewComments = { comments: Array<ReviewCommentDto>, };

export type ReviewSubmitted = { comments: Array<ReviewCommentDto>, session_id: string, queued: boolean, };

export type ReviewThreadResolve = { id: string, resolved: boolean, };

export type RoleDto = "viewer" | "member" | "admin";

export type SavedPromptDto = { id: string, workspace_id: string, name: string, body: string, created_at: string, updated_at: string, };

export type SavedPromptOne = { prompt: SavedPromptDto, };

export type SavedPrompts = { prompts: Array<SavedPromptDto>, };

export type ScheduleCreate = { workspace_id: string, name: string, cron: string, time_zone: string, title: string, description?: string, workflow_id?: string, step_id?: string, repository_ids?: Array<string>, 
/**
 * `run_once` (default) or `skip`.
 */
missed?: string, };

export type ScheduleDto = { id: string, workspace_id: string, name: string, 
/**
 * Five fields: minute hour day-of-month month day-of-week (or `@daily` and the like).
 */
cron: string, 
/**
 * An IANA time zone the expression is read in (`Europe/Berlin`).
 */
time_zone: string, title: string, description: string, workflow_id: string, step_id: string, repository_ids: Array<string>, 
/**
 * `run_once` (occurrences missed while the server was down fire once at startup) or
 * `skip`.
 */
missed: string, enabled: boolean, 
/**
 * When it fires next (none while disabled).
 */
next_at: string | null, 
/**
 * Its newest runs, newest first.
 */
runs: Array<ScheduleRunDto>, created_at: string, };

export type ScheduleOne = { schedule: ScheduleDto, };

export type ScheduleRunDto = { occurrence: string, 
/**
 * The task it made; none when it was skipped or failed.
 */
task_id: string | null, 
/**
 * Why it made no task when it failed (empty otherwise).
 */
error: string, at: string, };

export type ScheduleUpdate = { id: string, name?: string, cron?: string, time_zone?: string, title?: string, description?: string, step_id?: string, repository_ids?: Array<string>, missed?: string, enabled?: boolean, };

export type Schedules = { schedules: Array<ScheduleDto>, };

export type Search = { workspace_id: string, query: string, 
/**
 * Default: both.
 */
kinds?: Array<SearchKindDto>, limit?: number, cursor?: string, };

export type SearchHitDto = { kind: SearchKindDto, task_id: string, task_title: string, session_id: string | null, message_id: string | null, message_seq: number | null, snippet: Array<SnippetPartDto>, };

export type SearchKindDto = "task" | "message";

export type SearchResults = { hits: Array<SearchHitDto>, next_cursor: string | null, };

export type SecretDto = { id: string, name: string, scope: SecretScopeDto, workspace_id: string | null, repository_id: string | null, created_at: string, updated_at: string, };

export type SecretKeyRotated = { key_id: string, resealed: number, };

export type SecretList = { workspace_id?: string, };

export type SecretOne = { secret: SecretDto, };

export type SecretRemove = { workspace_id?: string, repository_id?: string, name: string, };

export type SecretScopeDto = "server" | "workspace" | "repository";

export type SecretSet = { workspace_id?: string, repository_id?: string, name: string, value: string, };

export type Secrets = { secrets: Array<SecretDto>, key_id: string, };

export type SessionAuthenticate = { id: string, method_id: string, };

export type SessionDto = { id: string, task_id: string, agent_profile_id: string | null, 
/**
 * The name of its agent profile once that profile was deleted: it starts again only
 * after `session.rebind` moves it to another agent.
 */
deleted_profile: string | null, 
/**
 * The name a person gave it (`session.rename`), if any.
 */
name: string | null, 
/**
 * Set when the session runs its agent's own terminal UI in a terminal (its id is the
 * session's: `terminal.attach`) instead of speaking ACP: the agent kind it runs.
 */
terminal_ui: AgentKindDto | null, 
/**
 * What a terminal-UI session's screen shows; `null` while no program runs.
 */
tui_screen: TuiScreenDto | null, state: SessionStateDto, epoch: number, 
/**
 * The live agent's ACP session; `None` while no agent process runs (never started,
 * stopped, exited).
 */
acp_session_id: string | null, 
/**
 * The conversation the agent's next start loads (`session/load`): kept when the agent
 * stops or exits, replaced only by a new conversation (rules 22, 31).
 */
resume_token: string | null, session_mode: string | null, model: string | null, config_options: JsonValue, plan_mode: boolean, auto_run: boolean, last_error: LastErrorDto | null, 
/**
 * The agent's latest usage report, if any.
 */
context_window: UsageMetaDto | null, agent_info: JsonValue, cwd: string, 
/**
 * Its number among the task's attempts, each in worktrees of its own; `null` for a
 * session in the task's worktrees.
 */
attempt: number | null, 
/**
 * The agent's slash commands (its latest `available_commands_update`).
 */
available_commands: Array<AvailableCommandDto>, created_at: string, updated_at: string, };

export type SessionEvent = { "action": "session.created", "payload": { session: SessionDto, } } | { "action": "session.updated", "payload": { session: SessionDto, } } | { "action": "session.state_changed", "payload": { session: SessionDto, } } | { "action": "session.mode_changed", "payload": { session: SessionDto, } } | { "action": "session.config_changed", "payload": { session: SessionDto, } } | { "action": "session.deleted", "payload": { id: string, task_id: string, } } | { "action": "session.error", "payload": { session_id: string, last_error: LastErrorDto | null, } } | { "action": "session.turn.started", "payload": { session_id: string, turn_id: string, message_id: string, } } | { "action": "session.turn.completed", "payload": { session_id: string, turn_id: string, stop_reason: string, tokens: JsonValue, } } | { "action": "session.message.added", "payload": { message: MessageDto, } } | { "action": "session.message.updated", "payload": MessageUpdate } | { "action": "session.queue.changed", "payload": { session_id: string, queue: Array<QueuedPromptDto>, } } | { "action": "session.permission.requested", "payload": { session_id: string, request_id: string, message: MessageDto, } } | { "action": "session.permission.resolved", "payload": { session_id: string, request_id: string | null, status: string, option_id: string | null, } } | { "action": "session.permission.expired", "payload": { session_id: string, request_id: string | null, status: string, option_id: string | null, } } | { "action": "session.question.asked", "payload": { question: QuestionDto, } } | { "action": "session.question.resolved", "payload": { question: QuestionDto, } } | { "action": "session.usage", "payload": { session_id: string, usage: UsageMetaDto, } };

export type SessionLaunch = { task_id: string, agent_profile_id?: string, 
/**
 * The first message; without it the agent starts and waits.
 */
prompt?: string, 
/**
 * Runs the agent's own terminal UI in a terminal instead of speaking ACP with it
 * (issue 52); its prompt is typed in once the UI waits for input.
 */
terminal_ui?: boolean, };

export type SessionOne = { session: SessionDto, };

export type SessionRebind = { session_id: string, profile_id: string, };

export type SessionRename = { id: string, name?: string, };

export type SessionResume = { id: string, mode?: ResumeMode, };

export type SessionSetConfigOption = { id: string, config_id: string, value: JsonValue, };

export type SessionSetMode = { id: string, mode_id: string, };

export type SessionStateDto = "CREATED" | "STARTING" | "RUNNING" | "WAITING_FOR_INPUT" | "COMPLETED" | "FAILED" | "CANCELLED";

export type Sessions = { sessions: Array<SessionDto>, next_cursor: string | null, };

export type SnippetPartDto = { text: string, highlight: boolean, };

export type SshSettingsDto = { host: string, port: number, user: string, identity_file: string, known_hosts: string, remote_home: string, };

export type StatusMetaDto = StatusNoteDto | { [key in string]: JsonValue };

export type StatusNoteDto = { "reason": "agent_warning" } | { "reason": "cancelled" } | { "reason": "stopped" } | { "reason": "idle" } | { "reason": "stall" } | { "reason": "interrupted" } | { "reason": "context_reset" } | { "reason": "resumed" } | { "reason": "fresh" } | { "reason": "mcp_transport", servers: Array<string>, } | { "reason": "unknown_saved_prompt", names: Array<string>, } | { "reason": "saved_prompts_too_large" } | { "reason": "task_moved", by: string, } | { "reason": "ship_action", action: string, } | { "reason": "ship_by", action: string, by: string, } | { "reason": "worktree_reused", repository_id: string, path: string, branch: string, } | { "reason": "worktree_created", repository_id: string, path: string, branch: string, base_commit: string, } | { "reason": "setup_script", repository_id: string, status: string, exit_code: number | null, } | { "reason": "cleanup_script", repository_id: string, status: string, } | { "reason": "pull_request", repository_id: string, number: number, url: string, state: string, was: string, } | { "reason": "authenticated", auth_method: string, } | { "reason": "mcp_note" } | { "reason": "complete_step", step: string, } | { "reason": "question_resolved", question_id: string, status: string, answer: string | null, by: string | null, } | { "reason": "pr_feedback", repository_id: string, event: string, outcome: string, } | { "reason": "issue_update", action: string, outcome: string, } | { "reason": "reverted", turn_id: string, undone: Array<string>, files: Array<string>, } | { "reason": "attempts", outcome: string, sessions: Array<string>, } | { "reason": "rebound", from: string, to: string, };

export type StepCreate = { workflow_id: string, name: string, position?: number, color?: string, prompt?: string, is_start_step?: boolean, allow_manual_move?: boolean, 
/**
 * `null` clears the step's agent profile.
 */
agent_profile_id?: string | null, cancel_triggers_turn_complete?: boolean, events?: EventsDto, };

export type StepDto = { id: string, workflow_id: string, name: string, position: number, color: string, prompt: string, is_start_step: boolean, allow_manual_move: boolean, agent_profile_id: string | null, cancel_triggers_turn_complete: boolean, events: EventsDto, };

export type StepReorder = { workflow_id: string, step_ids: Array<string>, };

export type StepUpdate = { id: string, name?: string, color?: string, prompt?: string, is_start_step?: boolean, allow_manual_move?: boolean, 
/**
 * `null` clears the step's agent profile.
 */
agent_profile_id?: string | null, cancel_triggers_turn_complete?: boolean, events?: EventsDto, };

export type Subscribe = { topics: Array<string>, since?: { [key in string]: number }, };

export type Subscribed = { topics: { [key in string]: number }, };

export type SystemHealth = { 
/**
 * Every check held.
 */
ok: boolean, findings: Array<CheckStepDto>, };

export type TaskAmend = { task_id: string, repository_id?: string, message?: string, };

export type TaskAmended = { commit: CommitDto, };

export type TaskArchived = { task: TaskDto, worktrees_removed: Array<string>, worktrees_kept: Array<KeptWorktreeDto>, };

export type TaskAttempt = { task_id: string, session_id: string, };

export type TaskAttemptCreate = { task_id: string, attempts: Array<AttemptSpec>, };

export type TaskAttemptDto = { session: SessionDto, branch: string | null, worktree: string | null, files: number, additions: number, deletions: number, };

export type TaskAttemptList = { task_id: string, session_id?: string, };

export type TaskAttempts = { attempts: Array<TaskAttemptDto>, };

export type TaskCardDto = { id: string, workflow_id: string, step_id: string, title: string, state: TaskStateDto, position: number, repository_ids: Array<string>, primary_session_id: string | null, archived_at: string | null, needs_you: NeedsYouDto | null, parent_id: string | null, blocked_by: Array<string>, 
/**
 * Its git status as last published (`task.git_status`), summed over its repositories.
 */
git: GitSummaryDto | null, };

export type TaskChanges = { worktrees: Array<WorktreeDto>, files: Array<FileChangeDto>, };

export type TaskCommit = { task_id: string, message: string, 
/**
 * Commit only what is staged (`task.stage`), not everything.
 */
staged_only?: boolean, };

export type TaskCommitDiff = { task_id: string, repository_id?: string, sha: string, };

export type TaskCommits = { commits: Array<BranchCommitDto>, };

export type TaskCommitted = { commit: CommitDto | null, commits: Array<CommitDto>, };

export type TaskCreate = { workflow_id: string, title: string, description?: string, step_id?: string, repository_ids?: Array<string>, 
/**
 * Repositories with the branch the task starts from (`origin/feature` is fetched
 * first); joins `repository_ids`. Without `base_branch`, the repository's default.
 */
repositories?: Array<TaskRepositoryRef>, agent_profile_id?: string, 
/**
 * Start the task's first session with the task prompt.
 */
start_agent?: boolean, 
/**
 * Makes the new task a subtask of this one (same workspace).
 */
parent_id?: string, 
/**
 * Tasks that must be done first (same workspace, no cycles).
 */
blocked_by?: Array<string>, };

export type TaskCreated = { task: TaskDto, session?: SessionDto, };

export type TaskDeleted = { deleted: boolean, id: string, worktrees_removed: Array<string>, worktrees_kept: Array<KeptWorktreeDto>, };

export type TaskDto = { id: string, workspace_id: string, workflow_id: string, step_id: string, title: string, description: string, state: TaskStateDto, 
/**
 * Set while the task needs its developer (a pending permission, a question, an error).
 */
needs_you: NeedsYouDto | null, position: number, repository_ids: Array<string>, agent_profile_id: string | null, primary_session_id: string | null, 
/**
 * The task this one is a subtask of.
 */
parent_id: string | null, 
/**
 * Tasks that must be done (last step, or archived) before this one's agent auto-starts.
 */
blocked_by: Array<string>, 
/**
 * Its git status as last published (`task.git_status`), summed over its repositories.
 */
git: GitSummaryDto | null, 
/**
 * What intake made it from (an issue, a webhook's delivery, a schedule), if it did.
 */
origin: TaskOriginDto | null, archived_at: string | null, created_at: string, updated_at: string, };

export type TaskFileRead = { task_id: string, path: string, };

export type TaskGitStatus = { repositories: Array<GitStatusDto>, };

export type TaskIndex = { repositories: Array<IndexDto>, };

export type TaskIndexChange = { task_id: string, repository_id?: string, path: string, hunk?: number, diff_hash?: string, };

export type TaskIndexChanged = { index: IndexDto, };

export type TaskList = { workflow_id: string, step_id?: string, query?: string, include_archived?: boolean, limit?: number, cursor?: string, };

export type TaskMerge = { task_id: string, repository_id?: string, strategy: MergeStrategyDto, 
/**
 * The merge (or squash) commit's message; default: the task's title.
 */
message?: string, };

export type TaskMerged = { merged: Array<MergeMadeDto>, repositories: Array<GitStatusDto>, };

export type TaskMove = { id: string, step_id: string, position?: number, };

export type TaskMoved = { task: TaskDto, from_step_id: string, };

export type TaskOne = { task: TaskDto, };

export type TaskOriginDto = { 
/**
 * Its key in the workspace (`github:owner/repo#12`, `schedule:<id>@<ms>`).
 */
external_id: string, 
/**
 * Its web page (empty when it has none).
 */
url: string, };

export type TaskPrCreate = { task_id: string, repository_id?: string, title?: string, body?: string, draft?: boolean, };

export type TaskPullRequests = { pull_requests: Array<PullRequestDto>, checks: Array<PrCheckDto>, events: Array<PrEventDto>, feedback_rounds: number, stopped: string | null, };

export type TaskPush = { task_id: string, repository_id?: string, 
/**
 * Default `origin`.
 */
remote?: string, force_with_lease?: boolean, };

export type TaskPushed = { pushed: Array<PushMadeDto>, repositories: Array<GitStatusDto>, };

export type TaskRebase = { task_id: string, repository_id?: string, };

export type TaskRemove = { id: string, force?: boolean, };

export type TaskRepositoryRef = { id: string, base_branch?: string, };

export type TaskStateDto = "TODO" | "IN_PROGRESS" | "WAITING_FOR_INPUT" | "FAILED" | "COMPLETED";

export type TaskTree = { entries: Array<TreeEntryDto>, truncated: boolean, };

export type TaskUpdate = { id: string, title?: string, description?: string, repository_ids?: Array<string>, agent_profile_id?: string | null, 
/**
 * A new parent; `null` makes the task top-level again.
 */
parent_id?: string | null, 
/**
 * Replaces the task's blockers.
 */
blocked_by?: Array<string>, };

export type Tasks = { tasks: Array<TaskCardDto>, next_cursor: string | null, };

export type TasksNeedingYou = { tasks: Array<TaskDto>, };

export type TerminalDto = { id: string, task_id: string, repository_id: string, 
/**
 * `running` or `exited`.
 */
state: string, exit_code: number | null, 
/**
 * The signal that ended it (`SIGKILL`), if one did.
 */
signal: string | null, };

export type TerminalMetaDto = { output: string, truncated: boolean, exit_code: number | null, signal: string | null, exited: boolean, };

export type TerminalOne = { terminal: TerminalDto, };

export type TerminalOpen = { task_id: string, repository_id?: string, cols: number, rows: number, };

export type Terminals = { terminals: Array<TerminalDto>, };

export type TokenCreate = { name: string, };

export type TokenCreated = { token: ApiTokenDto, secret: string, };

export type Tokens = { tokens: Array<ApiTokenDto>, };

export type ToolCallMetaDto = { tool_call_id: string, title: string, kind: string, status: string, content: Array<ToolContentDto>, locations: Array<ToolLocationDto>, raw_input: JsonValue | null, raw_output?: JsonValue, 
/**
 * The agent terminals the call shows, by terminal id.
 */
terminals?: { [key in string]: TerminalMetaDto }, };

export type ToolContentDto = { "type": "content", text: string, } | { "type": "diff", path: string, old_text: string | null, new_text: string, } | { "type": "terminal", terminal_id: string, } | { "type": "other", raw: JsonValue, };

export type ToolLocationDto = { path: string, line: number | null, };

export type TreeEntryDto = { path: string, kind: string, size: number, };

export type TuiScreenDto = "working" | "waiting" | "permission" | "unknown";

export type TurnCheckpointDto = { turn_id: string, number: number, message_id: string | null, undone: boolean, diff: boolean, };

export type TurnCheckpoints = { turns: Array<TurnCheckpointDto>, };

export type TurnDiff = { session_id: string, turn_id: string, };

export type TurnDto = { id: string, session_id: string, epoch: number, started_at: string, completed_at: string | null, stop_reason: string | null, usage: JsonValue, };

export type TurnRevert = { session_id: string, turn_id: string, force?: boolean, discard?: Array<string>, dry_run?: boolean, };

export type TurnReverted = { turns: Array<UndoneTurnDto>, files: Array<RevertFileDto>, outside_edits: Array<RevertFileDto>, reverted: boolean, };

export type Turns = { turns: Array<TurnDto>, };

export type UndoneTurnDto = { turn_id: string, number: number, prompt: string, };

export type Unsubscribe = { topics: Array<string>, };

export type Unsubscribed = { topics: Array<string>, };

export type UsageMetaDto = { used: number | null, size: number | null, cost: JsonValue | null, };

export type UserCreate = { name: string, password: string, };

export type UserDto = { id: string, name: string, };

export type UserEntryDto = { id: string, name: string, owner: boolean, created_at: string, roles: Array<WorkspaceRoleDto>, };

export type UserMetaDto = { 
/**
 * Absent when nothing is attached.
 */
attachments?: Array<AttachmentDto>, };

export type UserOne = { user: UserEntryDto, };

export type Users = { users: Array<UserEntryDto>, };

export type WorkflowCreate = { workspace_id: string, name: string, description?: string, template_id?: string, };

export type WorkflowDto = { id: string, workspace_id: string, name: string, description: string, template_id: string | null, steps: Array<StepDto>, created_at: string, updated_at: string, };

export type WorkflowExport = { ids: Array<string>, };

export type WorkflowImport = { workspace_id: string, yaml: string, };

export type WorkflowOne = { workflow: WorkflowDto, };

export type WorkflowTemplateDto = { id: string, name: string, description: string, steps: Array<string>, };

export type WorkflowTemplates = { templates: Array<WorkflowTemplateDto>, next_cursor: string | null, };

export type WorkflowUpdate = { id: string, name?: string, description?: string, };

export type WorkflowYaml = { yaml: string, };

export type Workflows = { workflows: Array<WorkflowDto>, next_cursor: string | null, };

export type WorkflowsImported = { workflows: Array<WorkflowDto>, };

export type WorkspaceCreate = { name: string, };

export type WorkspaceDto = { id: string, name: string, created_at: string, updated_at: string, };

export type WorkspaceEvent = { "action": "repository.created", "payload": { repository: RepositoryDto, } } | { "action": "repository.updated", "payload": { repository: RepositoryDto, } } | { "action": "repository.deleted", "payload": { id: string, } } | { "action": "workflow.created", "payload": { workflow: WorkflowDto, } } | { "action": "workflow.updated", "payload": { workflow: WorkflowDto, } } | { "action": "workflow.deleted", "payload": { id: string, } } | { "action": "task.created", "payload": { task: TaskDto, } } | { "action": "task.updated", "payload": { task: TaskDto, } } | { "action": "task.archived", "payload": { task: TaskDto, } } | { "action": "task.moved", "payload": { task: TaskDto, from_step_id: string, trigger: string, } } | { "action": "task.git_status", "payload": { task_id: string, repositories: Array<GitStatusDto>, } } | { "action": "task.deleted", "payload": { id: string, workflow_id: string, step_id: string, } } | { "action": "session.created", "payload": { session: SessionDto, } } | { "action": "session.deleted", "payload": { id: string, task_id: string, } } | { "action": "session.renamed", "payload": { session: SessionDto, } } | { "action": "session.attempt_changed", "payload": { session: SessionDto, } };

export type WorkspaceOne = { workspace: WorkspaceDto, };

export type WorkspaceRoleDto = { workspace_id: string, role: RoleDto, };

export type WorkspaceUpdate = { id: string, name: string, };

export type Workspaces = { workspaces: Array<WorkspaceDto>, next_cursor: string | null, };

export type WorkspacesEvent = { "action": "workspace.created", "payload": { workspace: WorkspaceDto, } } | { "action": "workspace.updated", "payload": { workspace: WorkspaceDto, } } | { "action": "workspace.deleted", "payload": { id: string, } };

export type WorktreeDto = { repository_id: string | null, folder: string | null, path: string, branch: string, base_commit: string, };

export type WorktreeUsageDto = { task_id: string, path: string, branch: string, bytes: number | null, truncated: boolean, };

export type Actions = {
  "workspace.list": { request: Page, response: Workspaces },
  "workspace.create": { request: WorkspaceCreate, response: WorkspaceOne },
  "workspace.get": { request: ById, response: WorkspaceOne },
  "workspace.update": { request: WorkspaceUpdate, response: WorkspaceOne },
  "workspace.delete": { request: ById, response: Deleted },
  "repository.list": { request: ByWorkspace, response: Repositories },
  "repository.create": { request: RepositoryCreate, response: RepositoryOne },
  "repository.get": { request: ById, response: RepositoryOne },
  "repository.update": { request: RepositoryUpdate, response: RepositoryOne },
  "repository.delete": { request: ById, response: Deleted },
  "workflow.template.list": { request: Empty, response: WorkflowTemplates },
  "workflow.create": { request: WorkflowCreate, response: WorkflowOne },
  "workflow.list": { request: ByWorkspace, response: Workflows },
  "workflow.get": { request: ById, response: WorkflowOne },
  "workflow.update": { request: WorkflowUpdate, response: WorkflowOne },
  "workflow.delete": { request: ById, response: Deleted },
  "workflow.export": { request: WorkflowExport, response: WorkflowYaml },
  "workflow.import": { request: WorkflowImport, response: WorkflowsImported },
  "workflow.step.create": { request: StepCreate, response: WorkflowOne },
  "workflow.step.update": { request: StepUpdate, response: WorkflowOne },
  "workflow.step.delete": { request: ById, response: WorkflowOne },
  "workflow.step.reorder": { request: StepReorder, response: WorkflowOne },
  "task.create": { request: TaskCreate, response: TaskCreated },
  "task.list": { request: TaskList, response: Tasks },
  "task.needs_you": { request: ByWorkspace, response: TasksNeedingYou },
  "task.get": { request: ById, response: TaskOne },
  "task.update": { request: TaskUpdate, response: TaskOne },
  "task.move": { request: TaskMove, response: TaskMoved },
  "task.archive": { request: TaskRemove, response: TaskArchived },
  "task.unarchive": { request: ById, response: TaskOne },
  "task.delete": { request: TaskRemove, response: TaskDeleted },
  "task.changes": { request: ByTask, response: TaskChanges },
  "task.tree": { request: ByTask, response: TaskTree },
  "task.file.read": { request: TaskFileRead, response: FileContentDto },
  "task.file.viewed.set": { request: FileViewedSet, response: FileViewed },
  "task.commit": { request: TaskCommit, response: TaskCommitted },
  "task.commits": { request: ByTask, response: TaskCommits },
  "task.commit.diff": { request: TaskCommitDiff, response: CommitDiff },
  "task.index": { request: ByTask, response: TaskIndex },
  "task.stage": { request: TaskIndexChange, response: TaskIndexChanged },
  "task.unstage": { request: TaskIndexChange, response: TaskIndexChanged },
  "task.discard": { request: TaskIndexChange, response: TaskIndexChanged },
  "task.amend": { request: TaskAmend, response: TaskAmended },
  "repository.branches": { request: ById, response: Branches },
  "repository.usage": { request: ById, response: RepositoryUsage },
  "task.git_status": { request: ByTask, response: TaskGitStatus },
  "task.rebase": { request: TaskRebase, response: TaskGitStatus },
  "task.merge": { request: TaskMerge, response: TaskMerged },
  "task.push": { request: TaskPush, response: TaskPushed },
  "task.pr.create": { request: TaskPrCreate, response: TaskPullRequests },
  "task.pr.get": { request: ByTask, response: TaskPullRequests },
  "review.comment.add": { request: ReviewCommentAdd, response: ReviewCommentOne },
  "review.comment.list": { request: ByTask, response: ReviewComments },
  "review.comment.update": { request: ReviewCommentUpdate, response: ReviewCommentOne },
  "review.comment.delete": { request: ById, response: Deleted },
  "review.thread.resolve": { request: ReviewThreadResolve, response: ReviewCommentOne },
  "review.submit": { request: ByTask, response: ReviewSubmitted },
  "devserver.start": { request: DevServerTarget, response: DevServerOne },
  "devserver.stop": { request: DevServerTarget, response: DevServerOne },
  "devserver.list": { request: ByTask, response: DevServers },
  "terminal.open": { request: TerminalOpen, response: TerminalOne },
  "terminal.close": { request: ByTerminal, response: TerminalOne },
  "terminal.list": { request: ByTask, response: Terminals },
  "agent.kinds": { request: Empty, response: AgentKinds },
  "agent.versions": { request: AgentVersionsQuery, response: AgentVersions },
  "agent.install": { request: AgentInstall, response: AgentInstalled },
  "agent.uninstall": { request: AgentInstall, response: AgentUninstalled },
  "agent.profile.list": { request: Page, response: Profiles },
  "agent.profile.create": { request: ProfileCreate, response: ProfileSaved },
  "agent.profile.update": { request: ProfileUpdate, response: ProfileSaved },
  "agent.profile.delete": { request: ById, response: Deleted },
  "session.launch": { request: SessionLaunch, response: SessionOne },
  "task.session.list": { request: ByTask, response: Sessions },
  "session.get": { request: ById, response: SessionOne },
  "session.stop": { request: ById, response: SessionOne },
  "session.delete": { request: ById, response: Deleted },
  "session.resume": { request: SessionResume, response: SessionOne },
  "session.authenticate": { request: SessionAuthenticate, response: SessionOne },
  "session.reset_context": { request: ById, response: SessionOne },
  "session.set_mode": { request: SessionSetMode, response: SessionOne },
  "session.set_config_option": { request: SessionSetConfigOption, response: SessionOne },
  "session.rename": { request: SessionRename, response: SessionOne },
  "session.rebind": { request: SessionRebind, response: SessionOne },
  "session.set_primary": { request: ById, response: TaskOne },
  "session.retry": { request: ById, response: MessageOne },
  "agent.cancel": { request: BySession, response: SessionOne },
  "message.add": { request: MessageAdd, response: MessageAdded },
  "message.list": { request: MessageList, response: Messages },
  "session.turn.list": { request: BySession, response: Turns },
  "turn.checkpoint.list": { request: BySession, response: TurnCheckpoints },
  "task.attempt.create": { request: TaskAttemptCreate, response: Sessions },
  "task.attempt.list": { request: TaskAttemptList, response: TaskAttempts },
  "task.attempt.diff": { request: TaskAttempt, response: CommitDiff },
  "task.attempt.pick": { request: TaskAttempt, response: AttemptPicked },
  "turn.revert": { request: TurnRevert, response: TurnReverted },
  "turn.diff": { request: TurnDiff, response: CommitDiff },
  "message.queue.list": { request: BySession, response: Queue },
  "message.queue.add": { request: QueueAdd, response: Queue },
  "message.queue.update": { request: QueueUpdate, response: Queue },
  "message.queue.remove": { request: QueueRemove, response: Queue },
  "message.queue.reorder": { request: QueueReorder, response: Queue },
  "message.queue.drain": { request: BySession, response: Queue },
  "message.queue.auto_run.set": { request: AutoRunSet, response: Queue },
  "permission.respond": { request: PermissionRespond, response: MessageOne },
  "prompt.list": { request: ByWorkspace, response: SavedPrompts },
  "prompt.create": { request: PromptCreate, response: SavedPromptOne },
  "prompt.update": { request: PromptUpdate, response: SavedPromptOne },
  "prompt.delete": { request: ById, response: Deleted },
  "intake.source.list": { request: ByWorkspace, response: IntakeSources },
  "intake.source.create": { request: IntakeSourceCreate, response: IntakeSourceCreated },
  "intake.source.update": { request: IntakeSourceUpdate, response: IntakeSourceOne },
  "intake.source.delete": { request: ById, response: Deleted },
  "intake.source.poll": { request: ById, response: IntakePolled },
  "schedule.list": { request: ByWorkspace, response: Schedules },
  "schedule.create": { request: ScheduleCreate, response: ScheduleOne },
  "schedule.update": { request: ScheduleUpdate, response: ScheduleOne },
  "schedule.delete": { request: ById, response: Deleted },
  "executor.list": { request: Empty, response: Executors },
  "executor.create": { request: ExecutorCreate, response: ExecutorOne },
  "executor.update": { request: ExecutorUpdate, response: ExecutorOne },
  "executor.delete": { request: ById, response: Deleted },
  "executor.check": { request: ById, response: ExecutorChecked },
  "system.doctor": { request: Empty, response: SystemHealth },
  "repository.executor.set": { request: RepositoryExecutorSet, response: RepositoryExecutor },
  "search": { request: Search, response: SearchResults },
  "question.list": { request: BySession, response: Questions },
  "question.answer": { request: QuestionAnswer, response: QuestionOne },
  "notification.list": { request: NotificationList, response: NotificationRecords },
  "notification.channel.create": { request: ChannelCreate, response: ChannelOne },
  "notification.channel.list": { request: Empty, response: Channels },
  "notification.channel.update": { request: ChannelUpdate, response: ChannelOne },
  "notification.channel.delete": { request: ById, response: Deleted },
  "notification.channel.test": { request: ById, response: ChannelTested },
  "notification.delivery.list": { request: DeliveryList, response: Deliveries },
  "notification.delivery.retry": { request: DeliveryRetry, response: DeliveryOne },
  "user.me": { request: Empty, response: Me },
  "user.token.create": { request: TokenCreate, response: TokenCreated },
  "user.token.list": { request: Empty, response: Tokens },
  "user.token.revoke": { request: ById, response: Deleted },
  "user.password.set": { request: PasswordSet, response: PasswordChanged },
  "user.list": { request: Empty, response: Users },
  "user.create": { request: UserCreate, response: UserOne },
  "user.password.reset": { request: UserCreate, response: UserOne },
  "user.remove": { request: ByName, response: Deleted },
  "workspace.member.list": { request: ByWorkspace, response: Members },
  "workspace.member.set": { request: MemberSet, response: Members },
  "workspace.member.remove": { request: MemberRemove, response: Members },
  "audit.list": { request: AuditList, response: AuditEntries },
  "secret.list": { request: SecretList, response: Secrets },
  "secret.set": { request: SecretSet, response: SecretOne },
  "secret.remove": { request: SecretRemove, response: Deleted },
  "secret.key.rotate": { request: Empty, response: SecretKeyRotated },
};

export type SocketActions = {
  "subscribe": { request: Subscribe, response: Subscribed },
  "unsubscribe": { request: Unsubscribe, response: Unsubscribed },
  "terminal.attach": { request: ByTerminal, response: TerminalOne },
  "terminal.detach": { request: ByTerminal, response: TerminalOne },
};

export type Notification = { type: "notification", seq: number } & (
  | ({ topic: "workspaces" } & WorkspacesEvent)
  | ({ topic: "profiles" } & ProfilesEvent)
  | ({ topic: "notifications" } & NotificationsEvent)
  | ({ topic: `workspace:${string}` } & WorkspaceEvent)
  | ({ topic: `session:${string}` } & SessionEvent)
);

/** A request's id as the client chose it, echoed in the answer. */
export type RequestId = string | number | null;

/** A frame the client sends on /ws. */
export type RequestFrame = { [A in keyof SocketActions | keyof Actions]: {
  id: RequestId, type: "request", action: A,
  payload: A extends keyof SocketActions ? SocketActions[A]["request"] : A extends keyof Actions ? Actions[A]["request"] : never,
} }[keyof SocketActions | keyof Actions];

/** The answer to a request, its payload typed by its action. */
export type ResponseFrame = { [A in keyof SocketActions | keyof Actions]: {
  type: "response", id: RequestId, action: A,
  payload: A extends keyof SocketActions ? SocketActions[A]["response"] : A extends keyof Actions ? Actions[A]["response"] : never,
} }[keyof SocketActions | keyof Actions];

export type ErrorFrame = { type: "error", id: RequestId, action: string, payload: ErrorBody };

export type ResyncRequiredFrame = { type: "resync_required", topic: string, oldest_seq: number };

/** A frame the server sends on /ws. */
export type Frame = ResponseFrame | ErrorFrame | ResyncRequiredFrame | Notification;
