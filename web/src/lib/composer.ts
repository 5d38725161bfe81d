// What the composer's menu offers while a message is typed (no React): the agent's `/commands`
// and the `@name` of a saved prompt.
import type { AvailableCommandDto } from '../api/types';

/** The agent's commands that `text` (a `/name` being typed, no space yet) could be. */
export function commandMatches(text: string, commands: AvailableCommandDto[]): AvailableCommandDto[] {
  if (!text.startsWith('/') || /\s/.test(text)) return [];
  const typed = text.slice(1).toLowerCase();
  return commands.filter((c) => c.name.toLowerCase().startsWith(typed));
}

/** The `@name` being typed at the end of `text` (after a space or at the start), if any. */
export function promptMention(text: string): { at: number; typed: string } | null {
  const m = /(^|\s)@([A-Za-z0-9_-]*)$/.exec(text);
  return m ? { at: m.index + (m[1] ?? '').length, typed: (m[2] ?? '').toLowerCase() } : null;
}
