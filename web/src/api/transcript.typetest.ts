// Type-level tests of the typed transcript and the /ws frames (issue 40, acceptance 3).
// Compiled by `npm run typecheck` (`tsc --noEmit`, run by CI), never run or bundled. Each
// `@ts-expect-error` line must be a type error: should the generated types stop catching one
// (a field renamed in `kandev_domain::message_meta` and its wire mirror, say), tsc fails with
// "Unused '@ts-expect-error' directive", and a line that reads a renamed field fails too.
import type { Frame, MessageDto } from './types';

export function transcriptTypeTests(m: MessageDto, frame: Frame): void {
  // A message's metadata narrows by its kind.
  if (m.kind === 'tool_call') {
    const id: string = m.metadata.tool_call_id;
    const status: string = m.metadata.status;
    for (const c of m.metadata.content) {
      if (c.type === 'diff') {
        const path: string = c.path;
        const old: string | null = c.old_text;
        void [path, old];
      }
      // @ts-expect-error: only a diff has a path
      if (c.type === 'content') void c.path;
    }
    // @ts-expect-error: a renamed (or misspelt) field of a tool call's metadata
    void m.metadata.toolCallId;
    // @ts-expect-error: a tool call has no permission options
    void m.metadata.options;
    void [id, status];
  }
  if (m.kind === 'permission_request') {
    const option: string | undefined = m.metadata.options[0]?.option_id;
    const by: string | undefined = m.metadata.answered_by;
    void [option, by];
  }
  if (m.kind === 'user') {
    const names = (m.metadata.attachments ?? []).map((a) => a.name);
    void names;
  }
  if (m.kind === 'usage') {
    // @ts-expect-error: usage counts are numbers (or null)
    const used: string = m.metadata.used;
    void used;
  }
  // @ts-expect-error: no such kind of message
  void (m.kind === 'tool');

  // Frames narrow by their type, and a response's payload by its action.
  if (frame.type === 'response' && frame.action === 'subscribe') {
    const topics: Record<string, number> = frame.payload.topics;
    void topics;
  }
  if (frame.type === 'resync_required') {
    const oldest: number = frame.oldest_seq;
    // @ts-expect-error: a resync frame carries no payload
    void frame.payload;
    void oldest;
  }
  if (frame.type === 'notification' && frame.action === 'session.message.added') {
    const kind: MessageDto['kind'] = frame.payload.message.kind;
    void kind;
  }
  // @ts-expect-error: no such frame type
  void (frame.type === 'pong');
}
