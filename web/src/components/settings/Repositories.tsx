// Settings › Repositories: the workspace's repositories (edit, remove, add by local path).
// Their scripts run on the server: adding and changing one is an admin's of the workspace
// (issue 49); others read the list.
import { useState } from 'react';
import { call } from '../../api/client';
import { useData } from '../../lib/data';
import { useRole } from '../../lib/me';
import { namesFrom } from '../../lib/secrets';
import { RoleNote } from '../RoleNote';
import { EmptyRow } from './EmptyRow';
import { RepositoryForm } from './RepositoryForm';
import { ScriptSecretsField, ScriptSecretsSummary } from './ScriptSecrets';
import { useFormError } from './useFormError';

/** The add form's words for the fields a refusal may start with. */
const LABELS = { local_path: 'Local path', name: 'Name', default_branch: 'Base branch', setup_script: 'Setup script', script_secrets: 'Script secrets' };

export function Repositories() {
  const { workspace, repositories, listsRead } = useData();
  const [path, setPath] = useState('');
  const [name, setName] = useState('');
  const [branch, setBranch] = useState('');
  const [setup, setSetup] = useState('');
  const [secrets, setSecrets] = useState('');
  const [editing, setEditing] = useState<string | null>(null);
  const { wrap, view } = useFormError(LABELS);
  const manages = useRole().can('admin');
  if (!workspace) return null;
  const edited = repositories.find((r) => r.id === editing);
  return (
    <section>
      <h1>Repositories</h1>
      {!manages && (
        <RoleNote>Repositories and their scripts are added and changed by admins of the workspace.</RoleNote>
      )}
      {manages && edited && <RepositoryForm key={edited.id} repository={edited} onDone={() => setEditing(null)} />}
      <table className="table">
        <thead>
          <tr>
            <th>Name</th>
            <th>Path</th>
            <th>Base branch</th>
            <th>Branch template</th>
            {manages && <th />}
          </tr>
        </thead>
        <tbody>
          {repositories.length === 0 && (
            <EmptyRow
              columns={manages ? 5 : 4}
              state={listsRead}
              what="repositories"
              none={manages ? 'No repositories yet: add one below by its local path.' : 'No repositories yet.'}
            />
          )}
          {repositories.map((r) => (
            <tr key={r.id}>
              <td>
                {r.name}
                <ScriptSecretsSummary names={r.script_secrets} />
              </td>
              <td>
                <code>{r.local_path}</code>
              </td>
              <td>{r.default_branch}</td>
              <td>
                <code>{r.branch_template}</code>
              </td>
              {manages && (
                <td className="row-actions">
                  <button aria-label={`Edit ${r.name}`} onClick={() => setEditing(r.id)}>
                    Edit
                  </button>
                  <button className="danger-outline" onClick={() => void wrap(() => call('repository.delete', { id: r.id }))}>
                    Remove
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {manages && (
        <form
          className="form card-form"
          aria-label="Add repository"
          onSubmit={async (e) => {
            e.preventDefault();
            const ok = await wrap(() =>
              call('repository.create', {
                workspace_id: workspace.id,
                local_path: path,
                name: name || undefined,
                default_branch: branch || undefined,
                setup_script: setup || undefined,
                script_secrets: namesFrom(secrets),
              }),
            );
            if (ok) {
              setPath('');
              setName('');
              setBranch('');
              setSetup('');
              setSecrets('');
            }
          }}
        >
          <h2>Add a repository</h2>
          <label>
            Local path <span className="hint">absolute path of a git repository on the server</span>
            <input value={path} onChange={(e) => setPath(e.target.value)} required placeholder="/home/me/src/project" />
          </label>
          <div className="row">
            <label>
              Name
              <input value={name} onChange={(e) => setName(e.target.value)} />
            </label>
            <label>
              Base branch
              <input value={branch} onChange={(e) => setBranch(e.target.value)} placeholder="HEAD's branch" />
            </label>
          </div>
          <label>
            Setup script
            <textarea rows={2} value={setup} onChange={(e) => setSetup(e.target.value)} />
          </label>
          <ScriptSecretsField value={secrets} onChange={setSecrets} />
          {view}
          <div className="actions">
            <button className="primary" type="submit">
              Add repository
            </button>
          </div>
        </form>
      )}
    </section>
  );
}
