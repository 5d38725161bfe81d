// Moving a session to another agent profile (issue 52, `session.rebind`), read for people (no
// React): which profiles it may move to, why it may not move now, and its `rebound` note.
import type { AgentProfileDto, StatusMetaDto } from '../api/types';

/** What the move says it keeps and what changes. */
export const MOVE_EXPLAINED =
  'The same worktree and transcript; the new agent starts a new conversation with a summary of this one.';

/** The profiles a session may move to: every one but its own (a deleted one is not listed). */
export function moveTargets(profiles: AgentProfileDto[], currentProfileId: string | null): AgentProfileDto[] {
  return profiles.filter((p) => p.id !== currentProfileId);
}

/** Why the session cannot move now, or null when it can: the server refuses a move while a
 * turn or a start runs (`BUSY`). */
export function moveBlocked(state: string, turnOpen: boolean): string | null {
  if (state === 'RUNNING' || state === 'STARTING' || turnOpen) {
    return 'The agent is working: wait for its turn to end, or cancel it, then move the session.';
  }
  return null;
}

/** The line of a `rebound` status note ("Moved from A to B"), or null for any other note (or
 * one without both names). */
export function reboundText(meta: StatusMetaDto): string | null {
  if (!('reason' in meta) || meta.reason !== 'rebound') return null;
  const { from, to } = meta as Record<string, unknown>;
  if (typeof from !== 'string' || typeof to !== 'string') return null;
  return `Moved from ${from} to ${to}`;
}
