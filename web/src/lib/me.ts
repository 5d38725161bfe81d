// Who is signed in and what they may do (`user.me`), read once for the page and shared: the
// header's user menu, the account page, and every control that hides itself from a role that
// cannot use it (./roles.ts). Read again after the live connection comes back: the server
// closes a user's sockets when their roles change, and ../api/live.ts reconnects them.
import { createContext, useCallback, useContext, useEffect } from 'react';
import { call } from '../api/client';
import { live } from '../api/live';
import type { Me } from '../api/types';
import { useData } from './data';
import { can, canSomewhere, roleIn, type Need } from './roles';
import { type Read, useRead } from './useRead';

const readMe = () => call('user.me', {});

/** The page's one read of `user.me`, re-read whenever the live connection opens again. */
export function useMeRead(): Read<Me> {
  const me = useRead(readMe);
  const { retry } = me;
  useEffect(() => {
    let was = live.status;
    return live.onStatus((status) => {
      if (status === 'open' && was === 'reconnecting') retry();
      was = status;
    });
  }, [retry]);
  return me;
}

export const MeContext = createContext<Read<Me> | null>(null);

/** The shared read of `user.me` (App provides it). */
export function useMe(): Read<Me> {
  const me = useContext(MeContext);
  if (!me) throw new Error('useMe outside MeContext');
  return me;
}

export interface Role {
  /** Whether the person may do what needs `need` here. False until `user.me` answered; true
   * when it could not be read (the server still refuses what they may not do). */
  can: (need: Need) => boolean;
  /** Whether they may do what needs `need` in at least one workspace (profiles, executors,
   * notification channels, new workspaces: things every workspace shares). */
  canSomewhere: (need: Need) => boolean;
  /** Their role here (`admin` for the owner); `null`: not known yet, or not a member. */
  role: Me['roles'][number]['role'] | null;
  /** The answer of `user.me`, once read. */
  me: Me | null;
}

/** What the person may do in `workspaceId` (by default the workspace the header shows). */
export function useRole(workspaceId?: string | null): Role {
  const { data: me, error } = useMe();
  const current = useData().workspace?.id ?? null;
  const where = workspaceId === undefined ? current : workspaceId;
  const canHere = useCallback(
    (need: Need) => (me ? can(me, where, need) : error !== null),
    [me, where, error],
  );
  const canAny = useCallback((need: Need) => (me ? canSomewhere(me, need) : error !== null), [me, error]);
  return { can: canHere, canSomewhere: canAny, role: me ? roleIn(me, where) : null, me };
}
