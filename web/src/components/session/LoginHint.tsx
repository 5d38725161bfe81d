// Beside an `agent_auth_required` error: how to log in to the session's agent, from the kinds'
// table (`agent.kinds`' `login`, issue 51), for an agent whose own login methods say little.
import { useCallback } from 'react';
import { call } from '../../api/client';
import { useData } from '../../lib/data';
import { useRead } from '../../lib/useRead';
import { CodeText } from '../CodeText';

export function LoginHint({ profileId }: { profileId: string | null }) {
  const { profiles } = useData();
  const kind = profiles.find((p) => p.id === profileId)?.kind ?? null;
  const load = useCallback(() => (kind ? call('agent.kinds', {}).then((r) => r.kinds.find((k) => k.kind === kind) ?? null) : Promise.resolve(null)), [kind]);
  const info = useRead(load).data;
  if (!info) return null;
  return (
    <p className="hint" data-testid="login-hint">
      {info.title}: <CodeText text={info.login} />
    </p>
  );
}
