// A session's transcript window (no React): the newest page and the older pages read so far,
// in seq order, with each message's UTF-8 length for the streamed-delta rule. Each change
// returns a window with a new `messages` array (so React sees it); the `index` and `bytes`
// maps are the holder's bookkeeping and are updated in place (a window is held by one query,
// and a change is applied to it exactly once), which keeps a streamed chunk cheap on a long
// transcript.
import type { MessageDto, MessageUpdate } from '../api/types';
import { utf8Length } from './bytes';

export interface TranscriptWindow {
  messages: MessageDto[];
  /** Message id → index in `messages`. */
  index: Map<string, number>;
  /** Message id → UTF-8 length of its content as held here. */
  bytes: Map<string, number>;
  /** There are older messages than the first one held. */
  hasOlder: boolean;
}

function reindex(messages: MessageDto[]): Map<string, number> {
  return new Map(messages.map((m, i) => [m.id, i]));
}

export function windowOf(messages: MessageDto[], hasOlder: boolean): TranscriptWindow {
  return {
    messages,
    index: reindex(messages),
    bytes: new Map(messages.map((m) => [m.id, utf8Length(m.content)])),
    hasOlder,
  };
}

/**
 * The window after a fresh read of the newest `page` (a reload): the older messages held
 * before are kept when the page joins them (its first message is one of them), so a reader
 * scrolled up keeps their place; otherwise the page alone.
 */
export function mergeNewest(previous: TranscriptWindow | null, page: MessageDto[], full: boolean): TranscriptWindow {
  const first = page[0];
  if (previous && full && first) {
    const at = previous.index.get(first.id);
    if (at !== undefined) return windowOf([...previous.messages.slice(0, at), ...page], previous.hasOlder);
  }
  return windowOf(page, full);
}

/** The window with `older` (a page read before its first message) in front. */
export function prependOlder(w: TranscriptWindow, older: MessageDto[], full: boolean): TranscriptWindow {
  const fresh = older.filter((m) => !w.index.has(m.id));
  const messages = [...fresh, ...w.messages];
  for (const m of fresh) w.bytes.set(m.id, utf8Length(m.content));
  return { messages, index: reindex(messages), bytes: w.bytes, hasOlder: full };
}

/**
 * The window with `m` added or replaced. A message older than the window while older pages
 * are still unread is not added (it belongs to a page read later).
 */
export function upsertMessage(w: TranscriptWindow, m: MessageDto): TranscriptWindow {
  const i = w.index.get(m.id);
  const messages = w.messages.slice();
  let index = w.index;
  if (i !== undefined) {
    messages[i] = m;
  } else {
    const oldest = w.messages[0];
    if (oldest && m.seq < oldest.seq && w.hasOlder) return w; // not in the loaded window
    let at = messages.length;
    while (at > 0 && (messages[at - 1]?.seq ?? 0) > m.seq) at--;
    messages.splice(at, 0, m);
    index = at === messages.length - 1 ? index.set(m.id, at) : reindex(messages);
  }
  w.bytes.set(m.id, utf8Length(m.content));
  return { ...w, messages, index };
}

/** A streamed chunk's effect: applied, already contained, or a gap to repair by a re-read. */
export type DeltaResult =
  | { kind: 'applied'; window: TranscriptWindow }
  | { kind: 'contained' }
  | { kind: 'reread'; messageId: string; seq: number };

/**
 * The streamed-delta rule: a chunk is appended only when the message's UTF-8 length plus the
 * chunk's equals the announced `length`. A longer announced length is a gap (a chunk was
 * missed): the message is read again. A shorter one is already contained (the read happened
 * after this chunk was written). A message the window does not hold is read when it belongs
 * in the window.
 */
export function applyDelta(
  w: TranscriptWindow,
  u: Extract<MessageUpdate, { delta: string }>,
): DeltaResult {
  const i = w.index.get(u.message_id);
  const m = i === undefined ? undefined : w.messages[i];
  if (!m || i === undefined) {
    const oldest = w.messages[0];
    if (!oldest || u.seq >= oldest.seq || !w.hasOlder) return { kind: 'reread', messageId: u.message_id, seq: u.seq };
    return { kind: 'contained' };
  }
  const have = w.bytes.get(m.id) ?? utf8Length(m.content);
  if (have + utf8Length(u.delta) === u.length) {
    const messages = w.messages.slice();
    messages[i] = { ...m, content: m.content + u.delta };
    w.bytes.set(m.id, u.length);
    return { kind: 'applied', window: { ...w, messages } };
  }
  if (have < u.length) return { kind: 'reread', messageId: m.id, seq: m.seq };
  return { kind: 'contained' };
}
