// Settings › Secrets (issue 50): the API keys and tokens agents get in their environment, kept
// by the server sealed under its key. An admin of the workspace shown lists the server's, the
// workspace's and its repositories' secrets (names and when set, never a value), adds one,
// replaces a value and removes one; the server's own are the owner's to change, and the owner
// also sees the key's id and rotates it. Values are write-only: one typed here goes to the
// server once and is cleared from the form; nothing answers it back.
import { type RefObject, useCallback, useRef, useState } from 'react';
import { call } from '../../api/client';
import type { RepositoryDto, SecretDto, Secrets as SecretsRead } from '../../api/types';
import { readState, useData } from '../../lib/data';
import { useRole } from '../../lib/me';
import { exists, type ScopeChoice, scopeLabel, scopeOf, scopeRequest, sortSecrets } from '../../lib/secrets';
import { toast } from '../../lib/toast';
import { useRead } from '../../lib/useRead';
import { Dialog } from '../Dialog';
import { InlineError } from '../ErrorBanner';
import { RoleNote } from '../RoleNote';
import { ConfirmDelete } from './ConfirmDelete';
import { EmptyRow } from './EmptyRow';
import { useFormError } from './useFormError';

/** What the form sets: a name in a scope (the row's Replace fills both). */
type Draft = { scope: ScopeChoice; name: string };

const NEW: Draft = { scope: 'workspace', name: '' };

export function Secrets() {
  const { workspace, repositories } = useData();
  const role = useRole();
  const manages = role.can('admin');
  const owner = role.me?.owner ?? false;
  // Until `user.me` answers, whether the list may be read is not known.
  const known = role.me !== null || role.canSomewhere('owner');
  const workspaceId = workspace?.id ?? null;
  const read = useCallback(async (): Promise<SecretsRead | null> => {
    if (!manages || !workspaceId) return null;
    return call('secret.list', { workspace_id: workspaceId });
  }, [manages, workspaceId]);
  const list = useRead(read);
  const [draft, setDraft] = useState<Draft>(NEW);
  const valueField = useRef<HTMLInputElement>(null);
  // The rows' removals report under the table; the form has its own.
  const rows = useFormError();
  if (!workspace) return null;
  const secrets = list.data ? sortSecrets(list.data.secrets, repositories) : [];
  return (
    <section>
      <h1>Secrets</h1>
      <p className="hint">
        API keys and tokens for the agents. Values are encrypted at rest with the key in <code>&lt;home&gt;/secret.key</code>,
        which backups leave out: keep a copy of it somewhere safe. A profile&apos;s environment references a secret by name
        (Settings › Agent profiles); when the agent starts it gets the repository&apos;s secret of that name, else the
        workspace&apos;s, else the server&apos;s. SSH and container executors receive a secret only when they allow it
        (Settings › Executors). A saved value is never shown again.
      </p>
      {!known ? (
        <p className="hint">Reading…</p>
      ) : !manages ? (
        <RoleNote>Secrets are set by admins of the workspace; the server&apos;s own by its owner.</RoleNote>
      ) : (
        <>
          {owner && <KeyLine keyId={list.data?.key_id ?? null} onRotated={list.retry} />}
          <InlineError error={list.error} onRetry={list.retry} testId="secrets-error" />
          <table className="table labelled" aria-label="Secrets">
            <thead>
              <tr>
                <th>Name</th>
                <th>Scope</th>
                <th>Value</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {secrets.length === 0 && (
                <EmptyRow columns={4} state={readState(list)} what="secrets" none="No secrets yet: add one below." />
              )}
              {secrets.map((s) => (
                <SecretRow
                  key={s.id}
                  secret={s}
                  repositories={repositories}
                  // The server's secrets are the owner's to change; an admin only names them.
                  changes={s.scope !== 'server' || owner}
                  onReplace={() => {
                    setDraft({ scope: scopeOf(s), name: s.name });
                    valueField.current?.focus();
                  }}
                  onRemove={() =>
                    void rows.wrap(async () => {
                      await call('secret.remove', { ...scopeRequest(scopeOf(s), workspace.id), name: s.name });
                      toast(`Removed the secret ${s.name}`);
                      list.retry();
                    })
                  }
                />
              ))}
            </tbody>
          </table>
          {rows.view}
          <SecretForm
            workspace={{ id: workspace.id, name: workspace.name }}
            repositories={repositories}
            secrets={list.data?.secrets ?? []}
            owner={owner}
            draft={draft}
            setDraft={setDraft}
            valueField={valueField}
            onSaved={list.retry}
          />
        </>
      )}
    </section>
  );
}

function SecretRow(props: {
  secret: SecretDto;
  repositories: RepositoryDto[];
  changes: boolean;
  onReplace: () => void;
  onRemove: () => void;
}) {
  const { secret: s, changes } = props;
  const [removing, setRemoving] = useState(false);
  const scope = scopeOf(s);
  const where = scopeLabel(scope, props.repositories);
  return (
    <tr data-secret={s.name} data-scope={scope}>
      <td data-label="Name">
        <code>{s.name}</code>
      </td>
      <td data-label="Scope" data-testid="secret-scope">
        {where}
      </td>
      <td data-testid="secret-updated">updated {new Date(s.updated_at).toLocaleString()}</td>
      <td className="actions-cell">
        {changes && (
          <div className="row-actions">
            <button aria-label={`Replace ${s.name} (${where})`} onClick={props.onReplace}>
              Replace
            </button>
            <button className="danger-outline" aria-label={`Remove ${s.name} (${where})`} onClick={() => setRemoving(true)}>
              Remove
            </button>
          </div>
        )}
        {removing && (
          <ConfirmDelete title={`Remove the secret ${s.name}?`} what="secret" onCancel={() => setRemoving(false)} onConfirm={props.onRemove}>
            Its value is deleted for good ({where.toLowerCase()}). An agent that references {s.name} then gets a wider secret
            of that name if there is one (the workspace&apos;s, then the server&apos;s); otherwise it does not start until the
            secret is set again.
          </ConfirmDelete>
        )}
      </td>
    </tr>
  );
}

/** Adds a secret, or replaces the value of one of that name in the scope chosen. */
function SecretForm(props: {
  workspace: { id: string; name: string };
  repositories: RepositoryDto[];
  secrets: SecretDto[];
  owner: boolean;
  draft: Draft;
  setDraft: (draft: Draft) => void;
  valueField: RefObject<HTMLInputElement | null>;
  onSaved: () => void;
}) {
  const { draft, setDraft } = props;
  // The value lives only here, until it is sent: cleared after saving, never read back.
  const [value, setValue] = useState('');
  const { wrap, view } = useFormError({ name: 'Name', value: 'Value' });
  const replacing = exists(props.secrets, draft.scope, draft.name);
  const where = scopeLabel(draft.scope, props.repositories).toLowerCase();
  return (
    <form
      className="form card-form"
      aria-label="Set a secret"
      onSubmit={async (e) => {
        e.preventDefault();
        const name = draft.name.trim();
        const ok = await wrap(async () => {
          await call('secret.set', { ...scopeRequest(draft.scope, props.workspace.id), name, value });
          toast(replacing ? `Replaced the value of ${name}` : `Saved the secret ${name}`);
          props.onSaved();
        });
        if (ok) {
          setValue('');
          setDraft({ scope: draft.scope, name: '' });
        }
      }}
    >
      <h2>Add a secret or replace a value</h2>
      <div className="row">
        <label>
          Scope
          <select value={draft.scope} onChange={(e) => setDraft({ ...draft, scope: e.target.value as ScopeChoice })}>
            {props.owner && <option value="server">Server (every workspace)</option>}
            <option value="workspace">Workspace ({props.workspace.name})</option>
            {props.repositories.map((r) => (
              <option key={r.id} value={`repository:${r.id}`}>
                Repository {r.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Name
          <input
            value={draft.name}
            onChange={(e) => setDraft({ ...draft, name: e.target.value })}
            required
            placeholder="OPENAI_API_KEY"
            autoComplete="off"
            spellCheck={false}
          />
        </label>
        <label>
          Value
          {/* new-password: browsers fill a saved login into a password field whose
              autocomplete is only "off". */}
          <input
            ref={props.valueField}
            type="password"
            value={value}
            onChange={(e) => setValue(e.target.value)}
            required
            autoComplete="new-password"
          />
        </label>
      </div>
      <p className="hint" data-testid="secret-form-note">
        {replacing
          ? `${draft.name.trim()} is set in the ${where} scope: saving replaces its value.`
          : 'A name already set in the scope chosen has its value replaced.'}
      </p>
      {view}
      <div className="actions">
        <button className="primary" type="submit">
          {replacing ? 'Replace value' : 'Save secret'}
        </button>
      </div>
    </form>
  );
}

/** The owner's: the id of the key the secrets are sealed with, and its rotation (asked first). */
function KeyLine({ keyId, onRotated }: { keyId: string | null; onRotated: () => void }) {
  const [asking, setAsking] = useState(false);
  const [done, setDone] = useState<string | null>(null);
  const { wrap, view } = useFormError();
  const rotate = () =>
    void wrap(async () => {
      setDone(null);
      const r = await call('secret.key.rotate', {});
      setDone(`Rotated: ${r.resealed} secret${r.resealed === 1 ? '' : 's'} re-sealed with the new key.`);
      onRotated();
    });
  return (
    <div className="secret-key">
      <span>
        Key <code data-testid="secret-key-id">{keyId ?? '…'}</code>
      </span>
      <button type="button" onClick={() => setAsking(true)}>
        Rotate key
      </button>
      {done && (
        <span className="hint" role="status" data-testid="secret-key-rotated">
          {done}
        </span>
      )}
      {view}
      {asking && (
        <Dialog title="Rotate the secret key?" onClose={() => setAsking(false)}>
          <p>
            A new key replaces the one in secret.key and every secret is re-sealed with it, all at once. A copy of the old
            key (beside a backup, say) no longer opens them: keep a copy of the new one.
          </p>
          <div className="actions">
            <button type="button" onClick={() => setAsking(false)}>
              Keep the key
            </button>
            <button
              type="button"
              className="primary"
              onClick={() => {
                setAsking(false);
                rotate();
              }}
            >
              Rotate key
            </button>
          </div>
        </Dialog>
      )}
    </div>
  );
}
