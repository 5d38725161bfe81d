// One task's live state for its page: the task and its sessions, one live query over the
// task's `workspace:<id>` topic (the workspace is learned from a first read of the task).
import { useCallback } from 'react';
import { call } from '../api/client';
import type { Notification, SessionDto, TaskDto } from '../api/types';
import { removeById, upsertById } from './lists';
import { useLiveQuery } from './useLiveQuery';
import { useRead } from './useRead';

interface TaskData {
  task: TaskDto;
  sessions: SessionDto[];
  deleted: boolean;
}

export interface TaskLive {
  task: TaskDto | null;
  sessions: SessionDto[];
  /** The task was deleted while shown. */
  deleted: boolean;
  /** A read failed, for a person. */
  error: string | null;
  retry: () => void;
  /** Shows a session this page just launched (its notification may come later). */
  addSession: (session: SessionDto) => void;
}

export function useTask(taskId: string): TaskLive {
  // The topic to follow is the task's workspace: read the task once to learn it.
  const readWorkspace = useCallback(() => call('task.get', { id: taskId }).then((r) => r.task.workspace_id), [taskId]);
  const workspace = useRead(readWorkspace);
  const workspaceId = workspace.data;

  const load = useCallback(async (): Promise<TaskData> => {
    const [t, s] = await Promise.all([call('task.get', { id: taskId }), call('task.session.list', { task_id: taskId })]);
    return { task: t.task, sessions: s.sessions, deleted: false };
  }, [taskId]);

  const apply = useCallback(
    (d: TaskData, n: Notification): TaskData => {
      // Destructured, `p` is narrowed to each action's payload.
      const { action, payload: p } = n;
      switch (action) {
        case 'task.created':
        case 'task.updated':
        case 'task.archived':
        case 'task.moved':
          return p.task.id === taskId ? { ...d, task: p.task } : d;
        case 'task.deleted':
          return p.id === taskId ? { ...d, deleted: true } : d;
        case 'session.created':
        case 'session.renamed':
        case 'session.attempt_changed':
          return p.session.task_id === taskId ? { ...d, sessions: upsertById(d.sessions, p.session) } : d;
        case 'session.deleted':
          return p.task_id === taskId ? { ...d, sessions: removeById(d.sessions, p.id) } : d;
        default:
          return d;
      }
    },
    [taskId],
  );

  const query = useLiveQuery(workspaceId ? `workspace:${workspaceId}` : null, load, apply);
  const { update, reload } = query;
  const { retry: retryWorkspace } = workspace;
  const retry = useCallback(() => {
    if (workspaceId) reload();
    else retryWorkspace();
  }, [workspaceId, reload, retryWorkspace]);
  const addSession = useCallback(
    (session: SessionDto) => update((d) => ({ ...d, sessions: upsertById(d.sessions, session) })),
    [update],
  );

  return {
    task: query.data?.task ?? null,
    sessions: query.data?.sessions ?? [],
    deleted: query.data?.deleted ?? false,
    error: workspace.error ?? query.error,
    retry,
    addSession,
  };
}
