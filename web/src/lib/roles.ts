// What the signed-in person may do (issue 49), from `user.me`: a role per workspace
// (viewer < member < admin), or the server's owner, who may do everything (so is a server
// without accounts, and a page let in with the server token). The server checks every action
// itself; the UI asks here only to hide what would be refused.
import type { Me, RoleDto } from '../api/types';

/** What a control needs: a role in a workspace, or the server's owner. */
export type Need = RoleDto | 'owner';

const RANK: Record<RoleDto, number> = { viewer: 0, member: 1, admin: 2 };

/** The role `me` has in `workspaceId` (`admin` for the owner); `null`: not a member. */
export function roleIn(me: Me, workspaceId: string | null): RoleDto | null {
  if (me.owner) return 'admin';
  if (workspaceId === null) return null;
  return me.roles.find((r) => r.workspace_id === workspaceId)?.role ?? null;
}

/** Whether `me` meets `need` in `workspaceId`. */
export function can(me: Me, workspaceId: string | null, need: Need): boolean {
  if (me.owner) return true;
  if (need === 'owner') return false;
  const role = roleIn(me, workspaceId);
  return role !== null && RANK[role] >= RANK[need];
}

/** Whether `me` meets `need` in at least one workspace: what the server asks of an action on
 * something shared by every workspace (agent profiles, executors, notification channels, a new
 * workspace, the activity log). */
export function canSomewhere(me: Me, need: Need): boolean {
  if (me.owner) return true;
  if (need === 'owner') return false;
  return me.roles.some((r) => RANK[r.role] >= RANK[need]);
}

/** Whether two answers of `user.me` grant the same: a page re-reads what it may see when not. */
export function sameGrants(a: Me, b: Me): boolean {
  if (a.owner !== b.owner || a.roles.length !== b.roles.length) return false;
  const roles = new Map(a.roles.map((r) => [r.workspace_id, r.role]));
  return b.roles.every((r) => roles.get(r.workspace_id) === r.role);
}
