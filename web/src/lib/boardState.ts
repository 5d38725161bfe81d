// The board's tasks as columns of ids per step (pure functions, no React): built from a read,
// changed by a task notification, an optimistic move or an archive.
import type { GitStatusDto, GitSummaryDto, Notification, TaskCardDto } from '../api/types';

export interface BoardState {
  tasks: Map<string, TaskCardDto>;
  /** Task ids per step id, in position order. */
  columns: Map<string, string[]>;
}

export const EMPTY_BOARD: BoardState = { tasks: new Map(), columns: new Map() };

/** The board of one read of a workflow's (unarchived) tasks. */
export function boardOf(all: TaskCardDto[]): BoardState {
  const columns = new Map<string, string[]>();
  const tasks = new Map<string, TaskCardDto>();
  for (const t of [...all].sort((a, b) => a.position - b.position)) {
    tasks.set(t.id, t);
    const col = columns.get(t.step_id) ?? [];
    col.push(t.id);
    columns.set(t.step_id, col);
  }
  return { tasks, columns };
}

/** `task` at its step and position (taken off the board when archived). */
export function place(state: BoardState, task: TaskCardDto): BoardState {
  const tasks = new Map(state.tasks);
  const columns = new Map(state.columns);
  for (const [step, ids] of columns) {
    if (ids.includes(task.id)) columns.set(step, ids.filter((id) => id !== task.id));
  }
  if (task.archived_at) {
    tasks.delete(task.id);
    return { tasks, columns };
  }
  tasks.set(task.id, task);
  const column = [...(columns.get(task.step_id) ?? [])];
  column.splice(Math.min(task.position, column.length), 0, task.id);
  columns.set(task.step_id, column);
  return { tasks, columns };
}

export function remove(state: BoardState, id: string): BoardState {
  const tasks = new Map(state.tasks);
  tasks.delete(id);
  const columns = new Map(state.columns);
  for (const [step, ids] of columns) {
    if (ids.includes(id)) columns.set(step, ids.filter((x) => x !== id));
  }
  return { tasks, columns };
}

/** The board after one `workspace:<id>` notification (tasks of other boards are ignored). */
export function applyTaskNotification(state: BoardState, n: Notification, workflowId: string): BoardState {
  // Destructured, `p` is narrowed to each action's payload.
  const { action, payload: p } = n;
  switch (action) {
    case 'task.deleted':
      return remove(state, p.id);
    case 'task.updated': {
      const task = p.task;
      if (task.workflow_id !== workflowId) return state;
      const old = state.tasks.get(task.id);
      if (old && old.step_id === task.step_id && !task.archived_at) {
        const tasks = new Map(state.tasks);
        tasks.set(task.id, task);
        return { ...state, tasks };
      }
      return place(state, task);
    }
    case 'task.created':
    case 'task.archived':
    case 'task.moved':
      return p.task.workflow_id === workflowId ? place(state, p.task) : state;
    case 'task.git_status': {
      const old = state.tasks.get(p.task_id);
      if (!old) return state;
      const tasks = new Map(state.tasks);
      tasks.set(old.id, { ...old, git: gitSummary(p.repositories) });
      return { ...state, tasks };
    }
    default:
      return state;
  }
}

/**
 * Whether a card matches the board's search at once, by its title; descriptions and
 * transcripts match through the server's full-text `search` (`found`: the ids it returned).
 */
export function matches(task: TaskCardDto, query: string, found: ReadonlySet<string>): boolean {
  const q = query.trim().toLowerCase();
  if (!q) return true;
  return task.title.toLowerCase().includes(q) || found.has(task.id);
}

/**
 * Where a card dropped at `visibleIndex` among the cards shown in a column (the search may
 * hide some) goes among all of the step's cards `ids`; `null` when it would not move.
 */
export function dropPosition(
  ids: string[],
  visible: TaskCardDto[],
  task: TaskCardDto,
  stepId: string,
  visibleIndex: number,
): number | null {
  const before = visible[visibleIndex];
  let position = before ? ids.indexOf(before.id) : ids.length;
  const from = ids.indexOf(task.id);
  if (from !== -1 && from < position) position -= 1;
  if (task.step_id === stepId && from === position) return null;
  return Math.max(0, position);
}

/** A task's git status summed over its repositories, as the server stores it for cards. */
export function gitSummary(repositories: GitStatusDto[]): GitSummaryDto {
  const states = repositories.flatMap((r) => (r.pr ? [r.pr.state] : []));
  const pr_state =
    states.length === 0
      ? null
      : states.includes('open')
        ? 'open'
        : states.every((s) => s === 'merged')
          ? 'merged'
          : 'closed';
  const sum = (f: (r: GitStatusDto) => number) => repositories.reduce((n, r) => n + f(r), 0);
  return {
    ahead: sum((r) => r.ahead),
    behind: sum((r) => r.behind),
    dirty: sum((r) => r.dirty.uncommitted + r.dirty.untracked),
    conflicts: sum((r) => r.conflicts_with_base.length),
    pr_state,
    merged: repositories.length > 0 && repositories.every((r) => r.merged),
  };
}
