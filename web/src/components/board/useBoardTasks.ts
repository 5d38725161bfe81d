// The tasks of one board, live over `workspace:<id>`: read page by page, changed by task
// notifications, and moved or archived optimistically (a refusal is shown and the board read
// afresh).
import { useCallback } from 'react';
import { call } from '../../api/client';
import type { Notification, TaskCardDto } from '../../api/types';
import { useLiveQuery } from '../../lib/useLiveQuery';
import { useMutation } from '../../lib/useMutation';
import { applyTaskNotification, type BoardState, boardOf, EMPTY_BOARD, place, remove } from '../../lib/boardState';

const PAGE = 1000;

/** Every unarchived task of the workflow, read in pages of `PAGE`. */
async function readTasks(workflowId: string): Promise<TaskCardDto[]> {
  const all: TaskCardDto[] = [];
  let cursor: string | null = null;
  do {
    const page: { tasks: TaskCardDto[]; next_cursor: string | null } = await call('task.list', {
      workflow_id: workflowId,
      include_archived: false,
      limit: PAGE,
      ...(cursor ? { cursor } : {}),
    });
    all.push(...page.tasks);
    cursor = page.next_cursor;
  } while (cursor);
  return all;
}

export interface BoardTasks {
  board: BoardState;
  /** The first read is in. */
  loaded: boolean;
  /** A read or an action failed: for a person. */
  error: string | null;
  dismissError: () => void;
  move: (task: TaskCardDto, stepId: string, position: number) => Promise<void>;
  /** Takes the card off the board; true when the server archived it. */
  archive: (task: TaskCardDto) => Promise<boolean>;
  /** Shows a task this page just created (its notification may come later). */
  add: (task: TaskCardDto) => void;
}

export function useBoardTasks(workspaceId: string | null, workflowId: string | null): BoardTasks {
  const load = useCallback(async () => boardOf(await readTasks(workflowId ?? '')), [workflowId]);
  const apply = useCallback(
    (state: BoardState, n: Notification) =>
      applyTaskNotification(state, n, workflowId ?? ''),
    [workflowId],
  );
  const topic = workspaceId && workflowId ? `workspace:${workspaceId}` : null;
  const query = useLiveQuery(topic, load, apply);
  // A refused move or archive stays shown until dismissed, whatever moves come after it.
  const { run, error: actionError, setError: setActionError } = useMutation();
  const { update, reload, dismissError } = query;

  const move = useCallback(
    async (task: TaskCardDto, stepId: string, position: number) => {
      update((s) => place(s, { ...task, step_id: stepId, position }));
      const moved = await run(() => call('task.move', { id: task.id, step_id: stepId, position }), { keepError: true });
      if (!moved) reload(); // undo the optimistic move: a failed read shows its own error
    },
    [update, reload, run],
  );

  const archive = useCallback(
    async (task: TaskCardDto) => {
      update((s) => remove(s, task.id));
      const archived = await run(() => call('task.archive', { id: task.id }), { keepError: true });
      if (!archived) reload();
      return archived;
    },
    [update, reload, run],
  );

  const add = useCallback((task: TaskCardDto) => update((s) => place(s, task)), [update]);

  return {
    board: query.data ?? EMPTY_BOARD,
    loaded: query.data !== null,
    error: actionError ?? query.error,
    dismissError: () => {
      setActionError(null);
      dismissError();
    },
    move,
    archive,
    add,
  };
}
