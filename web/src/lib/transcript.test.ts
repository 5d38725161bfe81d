// Unit tests of the transcript window: pages merged in seq order and the streamed-delta rule.
import { describe, expect, it } from 'vitest';
import type { MessageDto } from '../api/types';
import { applyDelta, mergeNewest, prependOlder, upsertMessage, windowOf } from './transcript';

function msg(id: string, seq: number, content = `message ${id}`): MessageDto {
  return {
    id,
    session_id: 's',
    turn_id: null,
    seq,
    content,
    client_message_id: null,
    created_at: '2024-01-01T00:00:00Z',
    updated_at: '2024-01-01T00:00:00Z',
    kind: 'agent',
    metadata: {},
  };
}

const ids = (w: { messages: MessageDto[] }) => w.messages.map((m) => m.id);

describe('mergeNewest', () => {
  it('keeps the older messages read before when the new page joins them', () => {
    const held = prependOlder(windowOf([msg('c', 3), msg('d', 4)], true), [msg('a', 1), msg('b', 2)], true);
    const after = mergeNewest(held, [msg('c', 3), msg('d', 4), msg('e', 5)], true);
    expect(ids(after)).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(after.hasOlder).toBe(true);
    expect(after.index.get('e')).toBe(4);
  });

  it('is the page alone when it does not join what was held', () => {
    const held = windowOf([msg('a', 1)], false);
    expect(ids(mergeNewest(held, [msg('x', 9)], true))).toEqual(['x']);
  });
});

describe('prependOlder', () => {
  it('puts the older page in front, without messages already held', () => {
    const after = prependOlder(windowOf([msg('b', 2), msg('c', 3)], true), [msg('a', 1), msg('b', 2)], false);
    expect(ids(after)).toEqual(['a', 'b', 'c']);
    expect(after.hasOlder).toBe(false);
    expect(after.index.get('c')).toBe(2);
  });
});

describe('upsertMessage', () => {
  it('replaces a held message in place', () => {
    const after = upsertMessage(windowOf([msg('a', 1), msg('b', 2)], false), msg('a', 1, 'edited'));
    expect(after.messages[0]?.content).toBe('edited');
    expect(ids(after)).toEqual(['a', 'b']);
  });

  it('inserts a new message in seq order', () => {
    const after = upsertMessage(windowOf([msg('a', 1), msg('c', 3)], false), msg('b', 2));
    expect(ids(after)).toEqual(['a', 'b', 'c']);
    expect(after.index.get('c')).toBe(2);
  });

  it('leaves out a message older than the window while older pages are unread', () => {
    const w = windowOf([msg('c', 3)], true);
    expect(upsertMessage(w, msg('a', 1))).toBe(w);
  });
});

describe('applyDelta', () => {
  const delta = (message_id: string, seq: number, text: string, length: number) =>
    ({ message_id, seq, kind: 'agent', delta: text, length }) as const;

  it('appends a chunk that continues the message exactly', () => {
    const r = applyDelta(windowOf([msg('a', 1, 'hé')], false), delta('a', 1, 'llo', 6));
    expect(r.kind).toBe('applied');
    if (r.kind === 'applied') expect(r.window.messages[0]?.content).toBe('héllo');
  });

  it('reads the message again when a chunk was missed', () => {
    const r = applyDelta(windowOf([msg('a', 1, 'he')], false), delta('a', 1, 'lo', 5));
    expect(r).toEqual({ kind: 'reread', messageId: 'a', seq: 1 });
  });

  it('ignores a chunk the message already contains', () => {
    const r = applyDelta(windowOf([msg('a', 1, 'hello')], false), delta('a', 1, 'lo', 4));
    expect(r).toEqual({ kind: 'contained' });
  });

  it('reads a message it does not hold when it belongs in the window', () => {
    expect(applyDelta(windowOf([msg('a', 1)], true), delta('z', 2, 'x', 1))).toEqual({ kind: 'reread', messageId: 'z', seq: 2 });
    expect(applyDelta(windowOf([msg('b', 5)], true), delta('z', 2, 'x', 1))).toEqual({ kind: 'contained' });
  });
});
