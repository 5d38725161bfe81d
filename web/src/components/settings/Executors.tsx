// Settings › Executors (issues 20, 42): named SSH build machines and container executors. Add
// one, check it (an SSH one connects as a session would: host key, the remote kandev, the
// runner; a container one checks the engine, the image and kandev in it) and delete it. A
// repository that chooses one (repository.executor.set) has its agents there (README). Each
// SSH or container executor names the secrets its host may receive (issue 50).
import { useState } from 'react';
import { call } from '../../api/client';
import { useRole } from '../../lib/me';
import { namesFrom } from '../../lib/secrets';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
import { RoleNote } from '../RoleNote';
import type { ExecutorChecked, ExecutorDto } from '../../api/generated/api';
import { AllowedSecretsCell, AllowedSecretsField } from './AllowedSecrets';
import { ContainerExecutorForm } from './ContainerExecutorForm';
import { useFormError } from './useFormError';

const EMPTY = {
  name: '',
  host: '',
  port: '22',
  user: '',
  identity_file: '',
  known_hosts: '',
  remote_home: '',
  allowed_secrets: '',
};

/** The form's words for the fields a refusal may start with. */
const LABELS = {
  name: 'Name',
  'ssh.host': 'Host',
  'ssh.port': 'Port',
  'ssh.user': 'User',
  'ssh.identity_file': 'Identity file',
  'ssh.known_hosts': 'Known hosts file',
  'ssh.remote_home': 'Remote home',
  allowed_secrets: 'Allowed secrets',
};

const readExecutors = () => call('executor.list', {}).then((r) => r.executors);

/// Where an executor runs agents, for the table.
function place(x: ExecutorDto): string {
  if (x.ssh) return `${x.ssh.user}@${x.ssh.host}:${x.ssh.port}`;
  if (x.container) {
    const ports = x.container.host_ports.length > 0 ? ` ${x.container.host_ports.join(', ')}` : '';
    return `container ${x.container.image} (network ${x.container.network}${ports})`;
  }
  return 'local';
}

/// What a check found, in one line.
function checkText(r: ExecutorChecked): string {
  if (!r.ok) return `Check failed: ${r.message ?? 'no answer'}`;
  if (r.steps.length > 0) return `Ready: ${r.steps.map((s) => s.detail).join('; ')}`;
  return `Reachable: ${r.remote_version ?? 'kandev'}${r.copied ? ' (installed now)' : ''}`;
}

export function Executors() {
  // `null` until the first read answers: "none yet" would be a guess before that.
  const list = useRead(readExecutors);
  const executors = list.data;
  const [form, setForm] = useState(EMPTY);
  const [checked, setChecked] = useState<Record<string, string>>({});
  const [checking, setChecking] = useState<string | null>(null);
  const { wrap, view } = useFormError(LABELS);
  // Adding, checking and deleting executors is an admin's (of some workspace, issue 49).
  const manages = useRole().canSomewhere('admin');
  const field = (key: keyof typeof EMPTY, label: string, hint: string, placeholder: string) => (
    <label>
      {label} <span className="hint">{hint}</span>
      <input
        value={form[key]}
        onChange={(e) => setForm((f) => ({ ...f, [key]: e.target.value }))}
        required
        placeholder={placeholder}
        inputMode={key === 'port' ? 'numeric' : undefined}
      />
    </label>
  );
  return (
    <section>
      <h1>Executors</h1>
      <p className="hint">
        Machines reached over SSH where agents run, and container executors that run each task's agent in a container
        of its own. Checking an SSH one connects with your system <code>ssh</code> (the host key must already be in the
        known_hosts file), installs this kandev there and starts its runner; a repository set to use one has its tasks'
        worktrees and agents there. A container executor keeps the worktrees on this host and mounts them into the
        task's container; checking it says whether the engine runs, the image is here and kandev runs in it. Either
        kind receives only the secrets it allows; a start that needs another is refused.
      </p>
      {!manages && <RoleNote>Executors are added and checked by admins.</RoleNote>}
      <InlineError error={list.error} onRetry={list.retry} testId="executors-error" />
      {executors === null ? (
        !list.error && <p className="hint">Reading the executors…</p>
      ) : executors.length === 0 ? (
        <p className="hint">No executors yet.</p>
      ) : (
        <table className="table" aria-label="Executors">
          <thead>
            <tr>
              <th>Name</th>
              <th>Where</th>
              <th>Remote home</th>
              <th>Repositories</th>
              <th>Allowed secrets</th>
              {manages && <th />}
            </tr>
          </thead>
          <tbody>
            {executors.map((x) => (
              <tr key={x.id}>
                <td>{x.name}</td>
                <td>
                  <code>{place(x)}</code>
                </td>
                <td>
                  <code>{x.ssh?.remote_home ?? ''}</code>
                </td>
                <td>{x.repository_ids.length}</td>
                <td>
                  <AllowedSecretsCell executor={x} manages={manages} onChanged={list.retry} />
                </td>
                {manages && (
                  <td className="row-actions">
                    {checked[x.id] && (
                      <span className="hint" data-testid="executor-check-result" role="status">
                        {checked[x.id]}
                      </span>
                    )}
                    <button
                      disabled={checking === x.id}
                      onClick={() =>
                        void wrap(async () => {
                          setChecking(x.id);
                          try {
                            const r = await call('executor.check', { id: x.id });
                            setChecked((c) => ({ ...c, [x.id]: checkText(r) }));
                          } finally {
                            setChecking(null);
                          }
                        })
                      }
                    >
                      {checking === x.id ? 'Checking…' : 'Check'}
                    </button>
                    <button
                      className="danger-outline"
                      aria-label={`Delete ${x.name}`}
                      onClick={() =>
                        void wrap(async () => {
                          await call('executor.delete', { id: x.id });
                          list.retry();
                        })
                      }
                    >
                      Delete
                    </button>
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {manages && (
        <form
          className="form card-form"
          aria-label="Add executor"
          onSubmit={async (e) => {
            e.preventDefault();
            const port = Number(form.port);
            const ok = await wrap(async () => {
              await call('executor.create', {
                name: form.name,
                kind: 'ssh',
                ssh: {
                  host: form.host,
                  port: Number.isInteger(port) && port > 0 && port < 65536 ? port : 0,
                  user: form.user,
                  identity_file: form.identity_file,
                  known_hosts: form.known_hosts,
                  remote_home: form.remote_home,
                },
                allowed_secrets: namesFrom(form.allowed_secrets),
              });
              list.retry();
            });
            if (ok) setForm(EMPTY);
          }}
        >
          <h2>Add an SSH executor</h2>
          {field('name', 'Name', '', 'build1')}
          {field('host', 'Host', 'a name or address, without user@', 'build1.example')}
          {field('port', 'Port', '', '22')}
          {field('user', 'User', '', 'build')}
          {field('identity_file', 'Identity file', 'absolute path on this server', '/home/me/.ssh/id_ed25519')}
          {field('known_hosts', 'Known hosts file', 'absolute path on this server', '/home/me/.kandev/known_hosts')}
          {field('remote_home', 'Remote home', 'absolute directory on the remote host', '/home/build/.kandev')}
          <AllowedSecretsField value={form.allowed_secrets} onChange={(v) => setForm((f) => ({ ...f, allowed_secrets: v }))} />
          {view}
          <div className="actions">
            <button className="primary" type="submit">
              Add executor
            </button>
          </div>
        </form>
      )}
      {manages && <ContainerExecutorForm onAdded={list.retry} />}
    </section>
  );
}
