import { describe, expect, it } from 'vitest';
import type { SearchHitDto } from '../api/types';
import { byTask } from './search';

const hit = (task: string, kind: 'task' | 'message', id = ''): SearchHitDto =>
  ({ kind, task_id: task, task_title: task, session_id: null, message_id: id || null, message_seq: null, snippet: [] }) as unknown as SearchHitDto;

describe('byTask', () => {
  it('keeps one row per task, title hits first, the best hit of each', () => {
    const rows = byTask([hit('b', 'message', '1'), hit('a', 'task'), hit('b', 'message', '2'), hit('c', 'message', '3'), hit('c', 'task')]);
    expect(rows.map((r) => [r.hit.task_id, r.hit.kind, r.more])).toEqual([
      ['a', 'task', 0],
      ['c', 'task', 1],
      ['b', 'message', 1],
    ]);
  });
});
