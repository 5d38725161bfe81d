// Unit tests of the board's state: columns built from a read, moves, archives and notifications.
import { describe, expect, it } from 'vitest';
import type { GitStatusDto, Notification, TaskCardDto } from '../api/types';
import { applyTaskNotification, boardOf, dropPosition, gitSummary, matches, place, remove } from './boardState';

function card(id: string, step: string, position: number, more: Partial<TaskCardDto> = {}): TaskCardDto {
  return {
    id,
    workflow_id: 'wf',
    step_id: step,
    title: `Task ${id}`,
    state: 'TODO',
    position,
    repository_ids: [],
    primary_session_id: null,
    archived_at: null,
    needs_you: null,
    parent_id: null,
    blocked_by: [],
    git: null,
    ...more,
  } as TaskCardDto;
}

/** A `workspace:` notification about one task. */
function taskEvent(action: string, payload: unknown): Notification {
  return { type: 'notification', seq: 1, topic: 'workspace:ws', action, payload } as unknown as Notification;
}

describe('boardOf', () => {
  it('puts each task in its step, in position order', () => {
    const board = boardOf([card('b', 's1', 1), card('c', 's2', 0), card('a', 's1', 0)]);
    expect(board.columns.get('s1')).toEqual(['a', 'b']);
    expect(board.columns.get('s2')).toEqual(['c']);
    expect(board.tasks.get('c')?.step_id).toBe('s2');
  });
});

describe('place', () => {
  it('moves a task to another step at its position', () => {
    const board = boardOf([card('a', 's1', 0), card('b', 's2', 0), card('c', 's2', 1)]);
    const moved = place(board, card('a', 's2', 1));
    expect(moved.columns.get('s1')).toEqual([]);
    expect(moved.columns.get('s2')).toEqual(['b', 'a', 'c']);
  });

  it('takes an archived task off the board', () => {
    const board = boardOf([card('a', 's1', 0)]);
    const after = place(board, card('a', 's1', 0, { archived_at: '2024-01-01T00:00:00Z' }));
    expect(after.columns.get('s1')).toEqual([]);
    expect(after.tasks.has('a')).toBe(false);
  });

  it('leaves the state it was given unchanged', () => {
    const board = boardOf([card('a', 's1', 0)]);
    place(board, card('a', 's2', 0));
    expect(board.columns.get('s1')).toEqual(['a']);
  });
});

describe('remove', () => {
  it('drops the task from its column and the task map', () => {
    const after = remove(boardOf([card('a', 's1', 0), card('b', 's1', 1)]), 'a');
    expect(after.columns.get('s1')).toEqual(['b']);
    expect(after.tasks.has('a')).toBe(false);
  });
});

describe('applyTaskNotification', () => {
  const board = boardOf([card('a', 's1', 0), card('b', 's1', 1)]);

  it('ignores a task of another workflow', () => {
    const other = card('x', 's1', 0, { workflow_id: 'other' });
    expect(applyTaskNotification(board, taskEvent('task.created', { task: other }), 'wf')).toBe(board);
  });

  it('places a moved task', () => {
    const after = applyTaskNotification(board, taskEvent('task.moved', { task: card('b', 's2', 0) }), 'wf');
    expect(after.columns.get('s1')).toEqual(['a']);
    expect(after.columns.get('s2')).toEqual(['b']);
  });

  it('keeps the order when an update leaves the task in its step', () => {
    const renamed = card('a', 's1', 5, { title: 'Renamed' });
    const after = applyTaskNotification(board, taskEvent('task.updated', { task: renamed }), 'wf');
    expect(after.columns.get('s1')).toEqual(['a', 'b']);
    expect(after.tasks.get('a')?.title).toBe('Renamed');
  });

  it('removes a deleted task', () => {
    const after = applyTaskNotification(board, taskEvent('task.deleted', { id: 'a' }), 'wf');
    expect(after.columns.get('s1')).toEqual(['b']);
  });

  it('sums a git status onto the card', () => {
    const status = gitStatus({ ahead: 2, pr: 'open' });
    const after = applyTaskNotification(board, taskEvent('task.git_status', { task_id: 'a', repositories: [status] }), 'wf');
    expect(after.tasks.get('a')?.git).toEqual({ ahead: 2, behind: 0, dirty: 0, conflicts: 0, pr_state: 'open', merged: false });
  });
});

function gitStatus(o: { ahead?: number; pr?: string; dirty?: number; conflicts?: string[]; merged?: boolean }): GitStatusDto {
  return {
    merged: o.merged ?? false,
    ahead: o.ahead ?? 0,
    behind: 0,
    dirty: { uncommitted: o.dirty ?? 0, untracked: 0 },
    conflicts_with_base: o.conflicts ?? [],
    pr: o.pr ? { state: o.pr, number: 1, url: 'https://example.invalid/pr/1' } : null,
  } as unknown as GitStatusDto;
}

describe('gitSummary', () => {
  it('sums the repositories and reads the PRs as one state', () => {
    const summary = gitSummary([gitStatus({ ahead: 1, dirty: 2, pr: 'merged' }), gitStatus({ conflicts: ['f'], pr: 'closed' })]);
    expect(summary).toEqual({ ahead: 1, behind: 0, dirty: 2, conflicts: 1, pr_state: 'closed', merged: false });
  });

  it('says merged only when every PR is merged', () => {
    expect(gitSummary([gitStatus({ pr: 'merged' }), gitStatus({ pr: 'merged' })]).pr_state).toBe('merged');
    expect(gitSummary([gitStatus({ pr: 'merged' }), gitStatus({ pr: 'open' })]).pr_state).toBe('open');
    expect(gitSummary([gitStatus({})]).pr_state).toBeNull();
  });

  it('says merged only when every repository is merged', () => {
    expect(gitSummary([gitStatus({ merged: true }), gitStatus({ merged: true })]).merged).toBe(true);
    expect(gitSummary([gitStatus({ merged: true }), gitStatus({})]).merged).toBe(false);
    expect(gitSummary([]).merged).toBe(false);
  });
});

describe('matches', () => {
  it('matches the title, or a task the full-text search found', () => {
    const task = card('a', 's1', 0, { title: 'Fix the Login page' });
    expect(matches(task, '  login ', new Set())).toBe(true);
    expect(matches(task, 'signup', new Set())).toBe(false);
    expect(matches(task, 'signup', new Set(['a']))).toBe(true);
    expect(matches(task, '', new Set())).toBe(true);
  });
});

describe('dropPosition', () => {
  const ids = ['a', 'b', 'c'];
  const all = ids.map((id, i) => card(id, 's1', i));

  it('is null when the card would not move', () => {
    expect(dropPosition(ids, all, all[1]!, 's1', 1)).toBeNull();
  });

  it('counts the card itself out when it moves down its column', () => {
    expect(dropPosition(ids, all, all[0]!, 's1', 2)).toBe(1);
  });

  it('places among all cards when the search hides some', () => {
    const visible = [all[0]!, all[2]!]; // 'b' is hidden
    expect(dropPosition(ids, visible, card('x', 's2', 0), 's1', 1)).toBe(2);
  });

  it('drops at the end below the last card', () => {
    expect(dropPosition(ids, all, card('x', 's2', 0), 's1', 3)).toBe(3);
  });
});
