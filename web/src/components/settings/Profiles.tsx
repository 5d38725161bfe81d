// Settings › Agent profiles: the profiles (edit, delete, add) and the agents on the server's
// machine: whether each is installed, how to log in, and the versions Kandev installed, with
// their versions panel (issue 51). Adding, editing and deleting a profile, and installing an
// agent, is for an admin of some workspace (profiles are shared by every workspace, issue 49);
// others read the lists.
import { useState } from 'react';
import { call } from '../../api/client';
import type { AgentKindDto, AgentProfileDto } from '../../api/types';
import { useData } from '../../lib/data';
import { useRole } from '../../lib/me';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
import { CodeText } from '../CodeText';
import { RoleNote } from '../RoleNote';
import { AgentVersions } from './AgentVersions';
import { EmptyRow } from './EmptyRow';
import { ProfileForm } from './ProfileForm';
import { useFormError } from './useFormError';

const readKinds = () => call('agent.kinds', {}).then((r) => r.kinds);

export function Profiles() {
  const { profiles, profilesRead } = useData();
  const installed = useRead(readKinds);
  const kinds = installed.data ?? [];
  const [editing, setEditing] = useState<AgentProfileDto | 'new' | null>(null);
  const [versionsOf, setVersionsOf] = useState<AgentKindDto | null>(null);
  const versionsKind = kinds.find((k) => k.kind === versionsOf);
  const title = (kind: AgentKindDto) => kinds.find((k) => k.kind === kind)?.title ?? kind;
  const { wrap, view } = useFormError();
  const manages = useRole().canSomewhere('admin');
  return (
    <section>
      {/* The button sits above the list so that it stays put when the list arrives (a click
          whose press and release straddled the rows' arrival used to open nothing). */}
      <div className="settings-head">
        <h1>Agent profiles</h1>
        {manages && (
          <button className="primary" onClick={() => setEditing('new')}>
            Add profile
          </button>
        )}
      </div>
      {!manages && <RoleNote>Agent profiles are added and changed, and agents installed, by admins.</RoleNote>}
      {manages && editing && (
        <ProfileForm
          kinds={kinds}
          profile={editing === 'new' ? null : editing}
          onKindsChanged={installed.retry}
          onDone={() => setEditing(null)}
        />
      )}
      <table className="table" aria-label="Agent profiles">
        <thead>
          <tr>
            <th>Name</th>
            <th>Agent</th>
            <th>Command</th>
            <th>Auto-approve</th>
            <th>MCP servers</th>
            {manages && <th />}
          </tr>
        </thead>
        <tbody>
          {profiles.length === 0 && (
            <EmptyRow columns={6} state={profilesRead} what="profiles" none="No profiles yet: add one to choose an agent for new tasks." />
          )}
          {profiles.map((p) => (
            <tr key={p.id}>
              <td>{p.name}</td>
              <td>
                {title(p.kind)}{' '}
                {p.agent_version && (
                  <span className="badge" data-testid="profile-agent-version" title="A version installed by Kandev">
                    {p.agent_version}
                  </span>
                )}
              </td>
              <td>
                <code>{[p.command, ...p.args].join(' ') || '(default)'}</code>
              </td>
              <td>{p.auto_approve ? 'yes' : 'no'}</td>
              <td>{p.mcp_servers.map((s) => s.name).join(', ') || 'none'}</td>
              {manages && (
                <td className="row-actions">
                  <button onClick={() => setEditing(p)}>Edit</button>
                  <button
                    className="danger-outline"
                    onClick={() => void wrap(() => call('agent.profile.delete', { id: p.id }))}
                  >
                    Delete
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {view}
      <h2>Agents on this machine</h2>
      <table className="table" data-testid="agent-kinds" aria-label="Agents on this machine">
        <thead>
          <tr>
            <th>Agent</th>
            <th>Command</th>
            <th>On PATH</th>
            <th>Installed by Kandev</th>
            <th>How to log in</th>
            <th>How to install</th>
            {manages && <th />}
          </tr>
        </thead>
        <tbody>
          {kinds.map((k) => (
            <tr key={k.kind} data-kind={k.kind}>
              <td>
                {k.title} <span className="hint">({k.kind})</span>
              </td>
              <td>
                <code>{k.command}</code>
              </td>
              <td>{k.installed ? <span className="badge state-completed">installed</span> : <span className="badge">not found</span>}</td>
              <td data-testid="kind-installed-versions">{k.installed_versions.join(', ') || (k.package ? 'none' : '')}</td>
              <td data-testid="kind-login">
                <CodeText text={k.login} />
              </td>
              <td>
                <CodeText text={k.install} />
              </td>
              {manages && (
                <td className="actions-cell">
                  {k.package && (
                    <div className="row-actions">
                      <button aria-expanded={versionsOf === k.kind} onClick={() => setVersionsOf(versionsOf === k.kind ? null : k.kind)}>
                        Versions…
                      </button>
                    </div>
                  )}
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      <InlineError error={installed.error} onRetry={installed.retry} testId="agent-kinds-error" />
      {manages && versionsKind && (
        <AgentVersions key={versionsKind.kind} kind={versionsKind} onChanged={installed.retry} onClose={() => setVersionsOf(null)} />
      )}
    </section>
  );
}
