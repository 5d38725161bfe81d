// The secrets an SSH or container executor's host may receive (issue 50): an agent started
// there gets only the secrets its executor allows, and a start that needs another is refused
// (saying which). A local executor's agents run on this machine and receive every secret, so
// the list matters only for the other kinds. Typed as names separated by commas.
import { useState } from 'react';
import { call } from '../../api/client';
import type { ExecutorDto } from '../../api/generated/api';
import { namesFrom } from '../../lib/secrets';
import { useFormError } from './useFormError';

/** The field of an executor's add form. */
export function AllowedSecretsField({ value, onChange }: { value: string; onChange: (next: string) => void }) {
  return (
    <label>
      Allowed secrets <span className="hint">names from Settings › Secrets, separated by commas; empty: none</span>
      <input value={value} onChange={(e) => onChange(e.target.value)} placeholder="OPENAI_API_KEY, GITHUB_TOKEN" spellCheck={false} autoComplete="off" />
    </label>
  );
}

/** An executor's allowed secrets in its row, changed in place by an admin. */
export function AllowedSecretsCell(props: { executor: ExecutorDto; manages: boolean; onChanged: () => void }) {
  const x = props.executor;
  const [editing, setEditing] = useState<string | null>(null);
  const { wrap, view } = useFormError();
  if (x.kind === 'local') return <span className="hint">all (this machine)</span>;
  const shown = x.allowed_secrets.length > 0 ? x.allowed_secrets.join(', ') : 'none';
  if (editing === null) {
    return (
      <span className="allowed-secrets">
        <span data-testid="allowed-secrets">{shown}</span>
        {props.manages && (
          <button className="link" aria-label={`Change the allowed secrets of ${x.name}`} onClick={() => setEditing(x.allowed_secrets.join(', '))}>
            Change
          </button>
        )}
      </span>
    );
  }
  return (
    <form
      className="allowed-secrets"
      aria-label={`Allowed secrets of ${x.name}`}
      onSubmit={async (e) => {
        e.preventDefault();
        const ok = await wrap(async () => {
          await call('executor.update', { id: x.id, allowed_secrets: namesFrom(editing) });
          props.onChanged();
        });
        if (ok) setEditing(null);
      }}
    >
      <input
        aria-label="Allowed secrets"
        value={editing}
        onChange={(e) => setEditing(e.target.value)}
        placeholder="OPENAI_API_KEY, GITHUB_TOKEN"
        spellCheck={false}
        autoComplete="off"
        autoFocus
      />
      <button type="submit" className="primary">
        Save
      </button>
      <button type="button" onClick={() => setEditing(null)}>
        Cancel
      </button>
      {view}
    </form>
  );
}
