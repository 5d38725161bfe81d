// The names of the stored secrets (issue 50) a field that references one may pick from: the
// server's and the workspace shown's (and its repositories'), each once, with where it is set.
// Only suggestions: the list is read only by an admin of the workspace (the server answers no
// one else), and a name not in it is still taken (a start without the secret says so).
import { useCallback } from 'react';
import { call } from '../../api/client';
import { useData } from '../../lib/data';
import { useRole } from '../../lib/me';
import { suggestions } from '../../lib/secrets';
import { useRead } from '../../lib/useRead';

/** The id of the datalist a secret's field names in its `list`. */
export const SECRET_NAMES = 'secret-names';

/** The names to suggest, each with where it is set: none until read, nor for a non-admin. */
export function useSecretNames(): { name: string; scopes: string }[] {
  const workspaceId = useData().workspace?.id ?? null;
  const admin = useRole().can('admin');
  const read = useCallback(
    async () => (admin && workspaceId ? suggestions((await call('secret.list', { workspace_id: workspaceId })).secrets) : []),
    [admin, workspaceId],
  );
  return useRead(read).data ?? [];
}

export function SecretNames() {
  const names = useSecretNames();
  return (
    <datalist id={SECRET_NAMES}>
      {names.map((n) => (
        <option key={n.name} value={n.name} label={n.scopes} />
      ))}
    </datalist>
  );
}

/** A labelled field for a stored secret's name, offering the names `SecretNames` lists. */
export function SecretNameField({ value, onChange }: { value: string; onChange: (name: string) => void }) {
  return (
    <label>
      Secret
      <input
        value={value}
        onChange={(e) => onChange(e.target.value)}
        list={SECRET_NAMES}
        placeholder="OPENAI_API_KEY"
        spellCheck={false}
        autoComplete="off"
      />
    </label>
  );
}
