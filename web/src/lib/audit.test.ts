import { describe, expect, it } from 'vitest';
import type { AuditEntryDto } from '../api/types';
import { appendOlder, olderFrom } from './audit';

const entry = (id: string, at_ms: number): AuditEntryDto => ({
  id,
  at: new Date(at_ms).toISOString(),
  at_ms,
  by: 'owen',
  action: 'prompt.create',
  workspace_id: 'w1',
  target: null,
});

describe('activity paging (issue 49)', () => {
  it('asks from the last entry’s millisecond on, so entries sharing it are not lost', () => {
    expect(olderFrom(1000, false)).toBe(1001);
    expect(olderFrom(1000, true)).toBe(1000);
  });

  it('appends only the entries not shown yet, in the server’s order', () => {
    const shown = [entry('c', 1002), entry('b', 1000)];
    // The next page from millisecond 1000 on holds `b` again and `a`, which shares its millisecond.
    const next = [entry('b', 1000), entry('a', 1000), entry('z', 999)];
    expect(appendOlder(shown, next).map((e) => e.id)).toEqual(['c', 'b', 'a', 'z']);
    expect(appendOlder(shown, [entry('b', 1000)])).toHaveLength(2);
  });
});
