// Settings › Members (issue 49): who belongs to the workspace shown and with which role. An
// admin of it invites a user by name with a role, changes a role and removes a member; others
// read the list. The server refuses demoting or removing the last admin, and says so here.
import { useCallback, useState } from 'react';
import { call } from '../../api/client';
import type { MemberDto, RoleDto } from '../../api/types';
import { readState, useData } from '../../lib/data';
import { useRole } from '../../lib/me';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
import { RoleNote } from '../RoleNote';
import { EmptyRow } from './EmptyRow';
import { useFormError } from './useFormError';

export const ROLES: [RoleDto, string][] = [
  ['viewer', 'Viewer: reads tasks and conversations'],
  ['member', 'Member: works on tasks, runs agents, ships'],
  ['admin', 'Admin: also repositories, workflows, terminals and members'],
];

const readUsers = () => call('user.list', {}).then((r) => r.users);

export function Members() {
  const { workspace } = useData();
  const role = useRole();
  const manages = role.can('admin');
  const workspaceId = workspace?.id ?? null;
  // Kept with the workspace it was read for: another workspace's shows nothing until read.
  const readMembers = useCallback(
    async (): Promise<MemberDto[]> =>
      workspaceId ? (await call('workspace.member.list', { workspace_id: workspaceId })).members : [],
    [workspaceId],
  );
  const list = useRead(readMembers);
  const members = list.data;
  // The rows' changes report under the table; the invite form has its own.
  const rows = useFormError();
  if (!workspace) return null;
  const accounts = role.me?.accounts ?? true;
  const change = (work: () => Promise<unknown>) =>
    rows.wrap(async () => {
      try {
        await work();
      } finally {
        list.retry();
      }
    });
  return (
    <section>
      <h1>Members of {workspace.name}</h1>
      {!accounts && (
        <p className="hint">
          This server is used without accounts: whoever reaches it may do everything. Members matter once users exist; add
          the first one on the server's machine with <code>kandev user add NAME</code>.
        </p>
      )}
      {accounts && !manages && <RoleNote>Members are invited and changed by admins of the workspace.</RoleNote>}
      <InlineError error={list.error} onRetry={list.retry} testId="members-error" />
      <table className="table" aria-label="Members">
        <thead>
          <tr>
            <th>Name</th>
            <th>Role</th>
            <th>Added</th>
            {manages && <th />}
          </tr>
        </thead>
        <tbody>
          {!members?.length && (
            <EmptyRow columns={manages ? 4 : 3} state={readState(list)} what="members" none="No members yet." />
          )}
          {members?.map((m) => (
            <tr key={m.user_id} data-member={m.name}>
              <td>{m.name}</td>
              <td>
                {manages ? (
                  <select
                    aria-label={`Role of ${m.name}`}
                    value={m.role}
                    onChange={(e) => {
                      const next = e.target.value as RoleDto;
                      void change(() => call('workspace.member.set', { workspace_id: workspace.id, user: m.name, role: next }));
                    }}
                  >
                    {ROLES.map(([value]) => (
                      <option key={value} value={value}>
                        {value}
                      </option>
                    ))}
                  </select>
                ) : (
                  <span className="badge" data-testid="member-role">
                    {m.role}
                  </span>
                )}
              </td>
              <td>{new Date(m.added_at).toLocaleString()}</td>
              {manages && (
                <td className="row-actions">
                  <button
                    className="danger-outline"
                    aria-label={`Remove ${m.name}`}
                    onClick={() => void change(() => call('workspace.member.remove', { workspace_id: workspace.id, user: m.name }))}
                  >
                    Remove
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {rows.view}
      {manages && accounts && (
        <Invite workspaceId={workspace.id} owner={role.me?.owner ?? false} members={members ?? []} onDone={list.retry} />
      )}
    </section>
  );
}

/** Adds a user to the workspace by name with a role (or changes the role of one already in). */
function Invite(props: { workspaceId: string; owner: boolean; members: MemberDto[]; onDone: () => void }) {
  const [name, setName] = useState('');
  const [role, setRole] = useState<RoleDto>('member');
  const { wrap, view } = useFormError({ user: 'User' });
  return (
    <form
      className="form card-form"
      aria-label="Add member"
      onSubmit={async (e) => {
        e.preventDefault();
        const ok = await wrap(async () => {
          await call('workspace.member.set', { workspace_id: props.workspaceId, user: name.trim(), role });
          props.onDone();
        });
        if (ok) setName('');
      }}
    >
      <h2>Add a member</h2>
      <div className="row">
        <label>
          User <span className="hint">their name on this server</span>
          <input
            value={name}
            onChange={(e) => setName(e.target.value)}
            required
            autoComplete="off"
            list={props.owner ? 'known-users' : undefined}
          />
        </label>
        <label>
          Role
          <select value={role} onChange={(e) => setRole(e.target.value as RoleDto)}>
            {ROLES.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </label>
      </div>
      {props.owner && <KnownUsers members={props.members} />}
      {view}
      <div className="actions">
        <button className="primary" type="submit">
          Add member
        </button>
      </div>
    </form>
  );
}

/** The owner's suggestions: the users not in the workspace yet (only the owner may list users). */
function KnownUsers({ members }: { members: MemberDto[] }) {
  const users = useRead(readUsers);
  const inside = new Set(members.map((m) => m.user_id));
  return (
    <datalist id="known-users">
      {(users.data ?? [])
        .filter((u) => !inside.has(u.id))
        .map((u) => (
          <option key={u.id} value={u.name} />
        ))}
    </datalist>
  );
}
