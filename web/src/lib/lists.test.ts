import { describe, expect, it } from 'vitest';
import type { Notification, TaskCardDto } from '../api/types';
import { applyTaskEvent } from './lists';

const card = (id: string, needs: string | null = null): TaskCardDto => ({ id, needs_you: needs }) as unknown as TaskCardDto;
const event = (action: string, payload: object): Notification =>
  ({ topic: 'workspace:w', action, payload, seq: 1 }) as unknown as Notification;

describe('applyTaskEvent (issue 45: the lists of tasks a live query keeps)', () => {
  const needsYou = (t: TaskCardDto) => !!t.needs_you;

  it('puts a task that still belongs in place, appends a new one, and takes out one that no longer does', () => {
    const list = [card('a', 'permission'), card('b', 'question')];
    const changed = applyTaskEvent(list, event('task.updated', { task: card('a', 'error') }), needsYou);
    expect(changed.map((t) => [t.id, t.needs_you])).toEqual([
      ['a', 'error'],
      ['b', 'question'],
    ]);
    expect(applyTaskEvent(list, event('task.created', { task: card('c', 'error') }), needsYou).map((t) => t.id)).toEqual(['a', 'b', 'c']);
    expect(applyTaskEvent(list, event('task.updated', { task: card('a') }), needsYou).map((t) => t.id)).toEqual(['b']);
  });

  it('drops a deleted task and ignores other notifications', () => {
    const list = [card('a'), card('b')];
    expect(applyTaskEvent(list, event('task.deleted', { id: 'a' })).map((t) => t.id)).toEqual(['b']);
    expect(applyTaskEvent(list, event('repository.created', { repository: {} }))).toBe(list);
  });
});
