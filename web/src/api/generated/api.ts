// Generated from crates/kandev-api-types by its `ts_bindings` test. Do not edit:
// change the Rust types, run `cargo test -p kandev-api-types --test ts_bindings`
// twice and commit this file.

export type JsonValue = number | string | boolean | Array<JsonValue> | { [key in string]: JsonValue } | null;

export type ErrorCode = "BAD_REQUEST" | "VALIDATION_ERROR" | "NOT_FOUND" | "CONFLICT" | "BUSY" | "QUEUE_FULL" | "RESET_IN_PROGRESS" | "ALREADY_RESOLVED" | "UNAUTHORIZED" | "FORBIDDEN" | "UNAVAILABLE" | "INTERNAL_ERROR" | "UNKNOWN_ACTION" | "RATE_LIMITED";

export type ErrorBody = { code: ErrorCode, message: string, details?: JsonValue | null, };

export type WorkspaceDto = { id: string, name: string, created_at: string, updated_at: string, };

export type RepositoryDto = { id: string, workspace_id: string, name: string, local_path: string, default_branch: string, branch_template: string, setup_script: string, created_at: string, updated_at: string, };

export type ActionDto = { "type": "reset_agent_context" } | { "type": "enable_plan_mode" } | { "type": "disable_plan_mode" } | { "type": "set_session_mode", mode_id: string, } | { "type": "auto_start_agent" } | { "type": "move_to_next" } | { "type": "move_to_previous" } | { "type": "move_to_step", step_id: string, };

export type EventsDto = { on_enter: Array<ActionDto>, on_turn_start: Array<ActionDto>, on_turn_complete: Array<ActionDto>, on_exit: Array<ActionDto>, };

export type StepDto = { id: string, workflow_id: string, name: string, position: number, color: string, prompt: string, is_start_step: boolean, allow_manual_move: boolean, agent_profile_id: string | null, cancel_triggers_turn_complete: boolean, events: EventsDto, };

export type WorkflowDto = { id: string, workspace_id: string, name: string, description: string, template_id: string | null, steps: Array<StepDto>, created_at: string, updated_at: string, };

export type TaskDto = { id: string, workspace_id: string, workflow_id: string, step_id: string, title: string, description: string, state: string, position: number, repository_ids: Array<string>, agent_profile_id: string | null, primary_session_id: string | null, archived_at: string | null, created_at: string, updated_at: string, };

export type EnvVarDto = { name: string, value: string, };

export type AgentProfileDto = { id: string, name: string, kind: string, command: string, args: Array<string>, env: Array<EnvVarDto>, model: string | null, mode: string | null, auto_approve: boolean, created_at: string, updated_at: string, };

export type LastErrorDto = { code: string, message: string, details: JsonValue, at: string, };

export type SessionDto = { id: string, task_id: string, agent_profile_id: string | null, state: string, epoch: number, acp_session_id: string | null, session_mode: string | null, model: string | null, config_options: JsonValue, plan_mode: boolean, auto_run: boolean, last_error: LastErrorDto | null, context_window: JsonValue, agent_info: JsonValue, cwd: string, created_at: string, updated_at: string, };

export type MessageDto = { id: string, session_id: string, turn_id: string | null, seq: number, kind: string, content: string, metadata: JsonValue, client_message_id: string | null, created_at: string, updated_at: string, };

export type QueuedPromptDto = { id: string, session_id: string, position: number, content: string, client_message_id: string | null, queued_by: string, created_at: string, };

export type DiffLineDto = { kind: string, text: string, };

export type HunkDto = { header: string, old_start: number, old_lines: number, new_start: number, new_lines: number, lines: Array<DiffLineDto>, };

export type FileChangeDto = { repository_id: string | null, path: string, old_path: string | null, status: string, additions: number, deletions: number, binary: boolean, truncated: boolean, hunks: Array<HunkDto>, };

export type WorktreeDto = { repository_id: string | null, folder: string | null, path: string, branch: string, base_commit: string, };

export type TreeEntryDto = { path: string, kind: string, size: number, };

export type FileContentDto = { path: string, content: string, binary: boolean, truncated: boolean, size: number, };

export type CommitDto = { repository_id: string | null, branch: string, sha: string, summary: string, files_changed: number, };

export type KeptWorktreeDto = { repository_id: string | null, path: string, reason: string, };

export type ById = { id: string, };

export type Page = { limit?: number, cursor?: string, };

export type WorkspaceCreate = { name: string, };

export type WorkspaceUpdate = { id: string, name: string, };

export type ByWorkspace = { workspace_id: string, };

export type RepositoryCreate = { workspace_id: string, local_path: string, name?: string, default_branch?: string, branch_template?: string, setup_script?: string, };

export type RepositoryUpdate = { id: string, name?: string, default_branch?: string, branch_template?: string, setup_script?: string, };

export type WorkflowCreate = { workspace_id: string, name: string, description?: string, template_id?: string, };

export type WorkflowUpdate = { id: string, name?: string, description?: string, };

export type WorkflowExport = { ids: Array<string>, };

export type WorkflowImport = { workspace_id: string, yaml: string, };

export type StepCreate = { workflow_id: string, name: string, position?: number, color?: string, prompt?: string, is_start_step?: boolean, allow_manual_move?: boolean, 
/**
 * `null` clears the step's agent profile.
 */
agent_profile_id?: string | null, cancel_triggers_turn_complete?: boolean, events?: EventsDto, };

export type StepUpdate = { id: string, name?: string, color?: string, prompt?: string, is_start_step?: boolean, allow_manual_move?: boolean, 
/**
 * `null` clears the step's agent profile.
 */
agent_profile_id?: string | null, cancel_triggers_turn_complete?: boolean, events?: EventsDto, };

export type StepReorder = { workflow_id: string, step_ids: Array<string>, };

export type TaskCreate = { workflow_id: string, title: string, description?: string, step_id?: string, repository_ids: Array<string>, agent_profile_id?: string, 
/**
 * Start the task's first session with the task prompt.
 */
start_agent: boolean, };

export type TaskList = { workflow_id: string, step_id?: string, query?: string, include_archived: boolean, limit?: number, cursor?: string, };

export type TaskUpdate = { id: string, title?: string, description?: string, repository_ids?: Array<string>, agent_profile_id?: string | null, };

export type TaskMove = { id: string, step_id: string, position?: number, };

export type ProfileCreate = { name: string, kind: string, command: string, args: Array<string>, env: Array<EnvVarDto>, model?: string, mode?: string, auto_approve: boolean, };

export type ProfileUpdate = { id: string, name?: string, command?: string, args?: Array<string>, env?: Array<EnvVarDto>, model?: string | null, mode?: string | null, auto_approve?: boolean, };

export type ByTask = { task_id: string, };

export type BySession = { session_id: string, };

export type SessionLaunch = { task_id: string, agent_profile_id?: string, 
/**
 * The first message; without it the agent starts and waits.
 */
prompt?: string, };

export type SessionSetMode = { id: string, mode_id: string, };

export type SessionSetConfigOption = { id: string, config_id: string, value: JsonValue, };

export type MessageAdd = { session_id: string, content: string, 
/**
 * Idempotency key: a retry with the same id is recorded once.
 */
client_message_id?: string, 
/**
 * Queue while the agent is busy (default); `false` fails with `BUSY` instead.
 */
queue: boolean, };

export type MessageList = { session_id: string, after_seq?: number, before_seq?: number, limit?: number, };

export type PermissionRespond = { session_id: string, request_id: string, option_id?: string, cancelled: boolean, };

export type QueueAdd = { session_id: string, content: string, client_message_id?: string, };

export type QueueUpdate = { session_id: string, id: string, content: string, };

export type QueueRemove = { session_id: string, id: string, };

export type QueueReorder = { session_id: string, ids: Array<string>, };

export type AutoRunSet = { session_id: string, enabled: boolean, };

export type Subscribe = { topics: Array<string>, since: { [key in string]: number }, };

export type Unsubscribe = { topics: Array<string>, };

export type SessionResume = { id: string, mode?: string, };

export type SessionAuthenticate = { id: string, method_id: string, };

export type TaskRemove = { id: string, force: boolean, };

export type TaskFileRead = { task_id: string, path: string, };

export type TaskCommit = { task_id: string, message: string, };
