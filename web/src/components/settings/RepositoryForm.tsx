// The form that edits a registered repository (issue 45, item 1): its name, base branch,
// branch template, setup, dev and cleanup scripts, the git-ignored files copied into each new
// worktree, the forge's API URL and the variable holding its token, the executor its agents
// run on, the time limit of its setup and cleanup scripts (empty: the server's), and the
// secrets its scripts get (issue 50).
import { useCallback, useState } from 'react';
import { call } from '../../api/client';
import type { RepositoryDto } from '../../api/types';
import { namesFrom } from '../../lib/secrets';
import { useRead } from '../../lib/useRead';
import { toast } from '../../lib/toast';
import { InlineError } from '../ErrorBanner';
import { ScriptSecretsField } from './ScriptSecrets';
import { useFormError } from './useFormError';

/** The form's words for the fields a refusal may start with. */
const LABELS: Record<string, string> = {
  name: 'Name',
  default_branch: 'Base branch',
  branch_template: 'Branch template',
  setup_script: 'Setup script',
  dev_script: 'Dev server command',
  cleanup_script: 'Cleanup script',
  copy_files: 'Files copied into each worktree',
  forge_api_base_url: 'Forge API URL',
  forge_token_env: 'Token variable',
  script_timeout_s: 'Script time limit',
  script_secrets: 'Script secrets',
};

export function RepositoryForm({ repository: r, onDone }: { repository: RepositoryDto; onDone: () => void }) {
  const [name, setName] = useState(r.name);
  const [branch, setBranch] = useState(r.default_branch);
  const [template, setTemplate] = useState(r.branch_template);
  const [setup, setSetup] = useState(r.setup_script);
  const [dev, setDev] = useState(r.dev_script);
  const [cleanup, setCleanup] = useState(r.cleanup_script);
  const [secrets, setSecrets] = useState(r.script_secrets.join(', '));
  const [copyFiles, setCopyFiles] = useState(r.copy_files.join('\n'));
  const [forgeUrl, setForgeUrl] = useState(r.forge_api_base_url);
  const [tokenEnv, setTokenEnv] = useState(r.forge_token_env);
  // In minutes, as people think of scripts; empty: the server's limit.
  const [limit, setLimit] = useState(r.script_timeout_s ? String(r.script_timeout_s / 60) : '');
  const readExecutors = useCallback(() => call('executor.list', {}).then((x) => x.executors), []);
  const executors = useRead(readExecutors);
  const current = executors.data?.find((x) => x.repository_ids.includes(r.id))?.id ?? '';
  // `null` until chosen: the select shows the executor the server says, once it has said.
  const [executor, setExecutor] = useState<string | null>(null);
  const { wrap, view } = useFormError(LABELS);
  const text = (label: string, value: string, set: (v: string) => void, hint?: string, placeholder?: string) => (
    <label>
      {label} {hint && <span className="hint">{hint}</span>}
      <input value={value} onChange={(e) => set(e.target.value)} placeholder={placeholder} />
    </label>
  );
  const script = (label: string, value: string, set: (v: string) => void, hint: string) => (
    <label>
      {label} <span className="hint">{hint}</span>
      <textarea rows={2} value={value} onChange={(e) => set(e.target.value)} />
    </label>
  );
  return (
    <form
      className="form card-form"
      aria-label={`Edit repository ${r.name}`}
      onSubmit={async (e) => {
        e.preventDefault();
        const ok = await wrap(async () => {
          await call('repository.update', {
            id: r.id,
            name,
            default_branch: branch,
            branch_template: template,
            setup_script: setup,
            dev_script: dev,
            cleanup_script: cleanup,
            copy_files: copyFiles
              .split('\n')
              .map((g) => g.trim())
              .filter(Boolean),
            forge_api_base_url: forgeUrl,
            forge_token_env: tokenEnv,
            script_timeout_s: Math.round(Number(limit || 0) * 60),
            script_secrets: namesFrom(secrets),
          });
          if (executor !== null && executor !== current) {
            await call('repository.executor.set', { repository_id: r.id, executor_id: executor || undefined });
          }
        });
        if (ok) {
          toast(`Saved ${name}`);
          onDone();
        }
      }}
    >
      <h2>Edit {r.name}</h2>
      <p className="hint">
        <code>{r.local_path}</code>
      </p>
      <div className="row">
        <label>
          Name
          {/* Focused when the form opens, which also brings it into view. */}
          <input value={name} onChange={(e) => setName(e.target.value)} required autoFocus />
        </label>
        {text('Base branch', branch, setBranch, 'new tasks start from it')}
      </div>
      <div className="row">
        {text('Branch template', template, setTemplate, '{task-slug}, {short-id}', 'kandev/{task-slug}-{short-id}')}
        <label>
          Executor <span className="hint">where its agents run</span>
          <select
            value={executor ?? current}
            disabled={executors.data === null}
            onChange={(e) => setExecutor(e.target.value)}
          >
            <option value="">This machine</option>
            {(executors.data ?? []).map((x) => (
              <option key={x.id} value={x.id}>
                {x.name} ({x.kind})
              </option>
            ))}
          </select>
        </label>
      </div>
      <InlineError error={executors.error && `The executors could not be read: ${executors.error}`} onRetry={executors.retry} />
      {script('Setup script', setup, setSetup, 'runs in a new worktree before the agent starts')}
      {script('Dev server command', dev, setDev, 'runs with PORT set, from the task’s Terminal tab')}
      {script('Cleanup script', cleanup, setCleanup, 'runs in a worktree before it is removed')}
      <ScriptSecretsField value={secrets} onChange={setSecrets} />
      <label>
        Script time limit <span className="hint">minutes; a setup or cleanup script running longer is stopped</span>
        <input
          type="number"
          min={0}
          max={1440}
          step="any"
          inputMode="decimal"
          value={limit}
          placeholder="the server’s"
          onChange={(e) => setLimit(e.target.value)}
        />
      </label>
      <label>
        Files copied into each worktree{' '}
        <span className="hint">git-ignored files such as .env, one pattern a line; never over a tracked file</span>
        <textarea rows={2} value={copyFiles} onChange={(e) => setCopyFiles(e.target.value)} />
      </label>
      <div className="row">
        {text('Forge API URL', forgeUrl, setForgeUrl, 'empty: from the origin remote', 'https://api.github.com')}
        {text('Token variable', tokenEnv, setTokenEnv, 'the environment variable holding the forge token', 'GITHUB_TOKEN')}
      </div>
      {view}
      <div className="actions">
        <button type="button" onClick={onDone}>
          Cancel
        </button>
        <button className="primary" type="submit">
          Save repository
        </button>
      </div>
    </form>
  );
}
