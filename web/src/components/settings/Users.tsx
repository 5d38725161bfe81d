// Settings › Users (issue 49): the server owner's list of every user, with their role in each
// workspace; the owner adds a user with a first password, sets a new password for one who
// lost theirs (their login sessions end), and removes a user (asked first). The owner cannot
// be removed. Shown only to the owner of a server with accounts.
import { useState } from 'react';
import { call } from '../../api/client';
import type { UserEntryDto } from '../../api/types';
import { readState, useData } from '../../lib/data';
import { toast } from '../../lib/toast';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
import { ConfirmDelete } from './ConfirmDelete';
import { EmptyRow } from './EmptyRow';
import { useFormError } from './useFormError';

const readUsers = () => call('user.list', {}).then((r) => r.users);

export function Users() {
  const list = useRead(readUsers);
  const users = list.data;
  const rows = useFormError();
  return (
    <section>
      <h1>Users</h1>
      <p className="hint">
        Everyone who can sign in to this server. A new user belongs to no workspace: add them in Settings → Members of a
        workspace.
      </p>
      <InlineError error={list.error} onRetry={list.retry} testId="users-error" />
      <table className="table labelled" aria-label="Users">
        <thead>
          <tr>
            <th>Name</th>
            <th>Workspaces</th>
            <th>Added</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {!users?.length && <EmptyRow columns={4} state={readState(list)} what="users" none="No users yet." />}
          {users?.map((u) => <UserRow key={u.id} user={u} wrap={rows.wrap} onChanged={list.retry} />)}
        </tbody>
      </table>
      {rows.view}
      <AddUser onAdded={list.retry} />
    </section>
  );
}

function UserRow(props: {
  user: UserEntryDto;
  wrap: (f: () => Promise<unknown>) => Promise<boolean>;
  onChanged: () => void;
}) {
  const { user: u, wrap, onChanged } = props;
  const { workspaces } = useData();
  const [resetting, setResetting] = useState(false);
  const [removing, setRemoving] = useState(false);
  const workspaceName = (id: string) => workspaces.find((w) => w.id === id)?.name ?? 'a removed workspace';
  return (
    <>
      <tr data-user={u.name}>
        <td>
          {u.name} {u.owner && <span className="badge" data-testid="owner-badge">owner</span>}
        </td>
        <td data-label="Workspaces" data-testid="user-roles">
          {u.owner
            ? 'all, as the owner'
            : u.roles.length === 0
              ? 'none yet'
              : u.roles.map((r) => `${workspaceName(r.workspace_id)}: ${r.role}`).join(', ')}
        </td>
        <td data-label="Added">{new Date(u.created_at).toLocaleString()}</td>
        <td className="actions-cell">
          <div className="row-actions">
            <button aria-label={`New password for ${u.name}`} aria-expanded={resetting} onClick={() => setResetting(!resetting)}>
              New password
            </button>
            {!u.owner && (
              <button className="danger-outline" aria-label={`Remove ${u.name}`} onClick={() => setRemoving(true)}>
                Remove
              </button>
            )}
          </div>
          {removing && (
            <ConfirmDelete
              title={`Remove user ${u.name}?`}
              what="user"
              onCancel={() => setRemoving(false)}
              onConfirm={() =>
                void wrap(async () => {
                  await call('user.remove', { name: u.name });
                  toast(`Removed ${u.name}`);
                  onChanged();
                })
              }
            >
              They can no longer sign in: their login sessions, personal tokens and memberships go, and their open pages
              close. What they did stays in the activity log.
            </ConfirmDelete>
          )}
        </td>
      </tr>
      {resetting && (
        <tr>
          <td colSpan={4}>
            <ResetPassword name={u.name} onDone={() => setResetting(false)} />
          </td>
        </tr>
      )}
    </>
  );
}

function ResetPassword({ name, onDone }: { name: string; onDone: () => void }) {
  const [password, setPassword] = useState('');
  const { wrap, view } = useFormError({ password: 'Password' });
  return (
    <form
      className="form"
      aria-label={`New password for ${name}`}
      onSubmit={async (e) => {
        e.preventDefault();
        const ok = await wrap(() => call('user.password.reset', { name, password }));
        if (ok) {
          toast(`New password set for ${name}: their login sessions ended`);
          onDone();
        }
      }}
    >
      <input type="text" name="username" autoComplete="off" value={name} readOnly hidden />
      <div className="row">
        <label>
          New password for {name} <span className="hint">at least 8 characters; tell it to them</span>
          <NewPassword value={password} onChange={setPassword} />
        </label>
      </div>
      {view}
      <div className="actions">
        <button type="button" onClick={onDone}>
          Cancel
        </button>
        <button className="primary" type="submit">
          Set password
        </button>
      </div>
    </form>
  );
}

function AddUser({ onAdded }: { onAdded: () => void }) {
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const { wrap, view } = useFormError({ name: 'Name', password: 'Password' });
  return (
    <form
      className="form card-form"
      aria-label="Add user"
      onSubmit={async (e) => {
        e.preventDefault();
        const ok = await wrap(async () => {
          const { user } = await call('user.create', { name: name.trim(), password });
          toast(`Added ${user.name}`);
          onAdded();
        });
        if (ok) {
          setName('');
          setPassword('');
        }
      }}
    >
      <h2>Add a user</h2>
      <div className="row">
        <label>
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} required autoComplete="off" />
        </label>
        <label>
          Password <span className="hint">at least 8 characters; they can change it on their account page</span>
          <NewPassword value={password} onChange={setPassword} />
        </label>
      </div>
      {view}
      <div className="actions">
        <button className="primary" type="submit">
          Add user
        </button>
      </div>
    </form>
  );
}

/** A new password's field: at least 8 characters, never filled in by the browser's saved ones. */
function NewPassword({ value, onChange }: { value: string; onChange: (value: string) => void }) {
  return (
    <input
      type="password"
      autoComplete="new-password"
      value={value}
      onChange={(e) => onChange(e.target.value)}
      required
      minLength={8}
    />
  );
}
