// Response and notification shapes. Objects and requests come from ./generated/api.ts (generated
// from the Rust types); the envelopes below are built with `json!` on the server and are
// written out here by hand, checked by the browser tests.
export type * from './generated/api';
import type {
  AgentProfileDto,
  CommitDto,
  FileChangeDto,
  WorktreeDto,
  ErrorCode,
  JsonValue,
  MessageDto,
  QueuedPromptDto,
  RepositoryDto,
  SessionDto,
  TaskDto,
  WorkflowDto,
  WorkspaceDto,
} from './generated/api';

export type SessionState =
  | 'CREATED'
  | 'STARTING'
  | 'RUNNING'
  | 'WAITING_FOR_INPUT'
  | 'COMPLETED'
  | 'FAILED'
  | 'CANCELLED';

export type TaskState = 'TODO' | 'IN_PROGRESS' | 'WAITING_FOR_INPUT' | 'FAILED' | 'COMPLETED';

export type MessageKind =
  | 'user'
  | 'agent'
  | 'thought'
  | 'tool_call'
  | 'plan'
  | 'usage'
  | 'status'
  | 'error'
  | 'permission_request';

export interface AgentKind {
  kind: string;
  command: string;
  installed: boolean;
  install: string | null;
}

export interface WorkflowTemplate {
  id: string;
  name: string;
  description: string;
  steps: unknown;
}

/** Results of the actions the UI calls, by action name. */
export interface Results {
  'workspace.list': { workspaces: WorkspaceDto[]; next_cursor: string | null };
  'workflow.list': { workflows: WorkflowDto[]; next_cursor: string | null };
  'workflow.get': { workflow: WorkflowDto };
  'workflow.create': { workflow: WorkflowDto };
  'workflow.update': { workflow: WorkflowDto };
  'workflow.delete': { deleted: boolean };
  'workflow.template.list': { templates: WorkflowTemplate[] };
  'workflow.export': { yaml: string };
  'workflow.import': { workflows: WorkflowDto[] };
  'workflow.step.create': { workflow: WorkflowDto };
  'workflow.step.update': { workflow: WorkflowDto };
  'workflow.step.delete': { workflow: WorkflowDto };
  'workflow.step.reorder': { workflow: WorkflowDto };
  'repository.list': { repositories: RepositoryDto[]; next_cursor: string | null };
  'repository.create': { repository: RepositoryDto };
  'repository.update': { repository: RepositoryDto };
  'repository.delete': { deleted: boolean };
  'task.list': { tasks: TaskDto[]; next_cursor: string | null };
  'task.get': { task: TaskDto };
  'task.create': { task: TaskDto };
  'task.update': { task: TaskDto };
  'task.move': { task: TaskDto; from_step_id: string };
  'task.archive': { task: TaskDto };
  'task.delete': { deleted: boolean };
  'agent.kinds': { kinds: AgentKind[] };
  'agent.profile.list': { profiles: AgentProfileDto[]; next_cursor: string | null };
  'agent.profile.create': { profile: AgentProfileDto };
  'agent.profile.update': { profile: AgentProfileDto };
  'agent.profile.delete': { deleted: boolean };
  'task.session.list': { sessions: SessionDto[] };
  'session.get': { session: SessionDto };
  'session.launch': { session: SessionDto };
  'session.stop': { session: SessionDto };
  'session.delete': { deleted: boolean; id: string };
  'session.reset_context': { session?: SessionDto };
  'session.resume': { session?: SessionDto };
  'agent.cancel': { session: SessionDto };
  'message.add':
    | { status: 'sent' | 'duplicate'; message: MessageDto }
    | { status: 'queued'; queued: QueuedPromptDto };
  'message.list': { messages: MessageDto[] };
  'message.queue.list': { queue: QueuedPromptDto[] };
  'message.queue.add': { queue: QueuedPromptDto[] };
  'message.queue.update': { queue: QueuedPromptDto[] };
  'message.queue.remove': { queue: QueuedPromptDto[] };
  'message.queue.reorder': { queue: QueuedPromptDto[] };
  'message.queue.auto_run.set': { queue: QueuedPromptDto[] };
  'message.queue.drain': { queue: QueuedPromptDto[] };
  'permission.respond': { message: MessageDto };
  'task.changes': { worktrees: WorktreeDto[]; files: FileChangeDto[] };
  'task.commit': { commit: CommitDto | null; commits: CommitDto[] };
}

export type Action = keyof Results;

/** A notification frame from `/ws`. */
export interface Notification {
  type: 'notification';
  topic: string;
  action: string;
  seq: number;
  payload: Record<string, unknown>;
}

/** `session.message.updated`: a streamed chunk, or a whole-message change. */
export type MessageUpdate =
  | { message_id: string; seq: number; kind: string; delta: string; length: number }
  | { message_id: string; seq: number; message: MessageDto };

export interface ErrorPayload {
  code: ErrorCode | 'NETWORK';
  message: string;
  details?: JsonValue | null;
}
