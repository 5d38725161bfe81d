// Settings › Intake › Add a source, and the panel that shows a new webhook's URL and secret
// the one time the server answers the secret.
import { useState } from 'react';
import { call } from '../../api/client';
import type { IntakeSourceDto } from '../../api/types';
import { useData } from '../../lib/data';
import { HOOK_SCHEMES, hookUrl } from '../../lib/intake';
import { copyText } from './Copyable';
import { chosenStep, StepPicker } from './StepPicker';
import { useFormError } from './useFormError';

/** The form's words for the fields a refusal may start with. */
const LABELS = {
  name: 'Name',
  kind: 'Kind',
  repository_id: 'Repository',
  label: 'Label',
  workflow_id: 'Step',
  step_id: 'Step',
  hook_scheme: 'Webhook',
};

const EMPTY = { name: '', kind: 'issues', repositoryId: '', label: '', stepId: '', scheme: '' };

/** A source just made with a webhook, and its secret (answered only once). */
export interface MadeHook {
  source: IntakeSourceDto;
  secret: string;
}

export function SourceForm({ workspaceId, onAdded }: { workspaceId: string; onAdded: (hook: MadeHook | null) => void }) {
  const { workflows, repositories } = useData();
  const [form, setForm] = useState(EMPTY);
  const set = (key: keyof typeof EMPTY, value: string) => setForm((f) => ({ ...f, [key]: value }));
  const { wrap, view } = useFormError(LABELS);
  const issues = form.kind === 'issues';
  return (
    <form
      className="form card-form"
      aria-label="Add source"
      onSubmit={async (e) => {
        e.preventDefault();
        const step = chosenStep(workflows, form.stepId);
        const ok = await wrap(async () => {
          const r = await call('intake.source.create', {
            workspace_id: workspaceId,
            name: form.name,
            kind: form.kind,
            repository_id: issues ? form.repositoryId : undefined,
            label: issues && form.label ? form.label : undefined,
            workflow_id: step?.workflowId,
            step_id: step?.stepId,
            hook_scheme: issues ? form.scheme || undefined : 'hmac',
          });
          onAdded(r.hook_secret === null ? null : { source: r.source, secret: r.hook_secret });
        });
        if (ok) setForm(EMPTY);
      }}
    >
      <h3>Add a source</h3>
      <div className="row">
        <label>
          Name
          <input value={form.name} onChange={(e) => set('name', e.target.value)} required placeholder="Bugs" />
        </label>
        <label>
          Kind
          <select value={form.kind} onChange={(e) => set('kind', e.target.value)}>
            <option value="issues">Issues from a repository's forge</option>
            <option value="webhook">Webhook only</option>
          </select>
        </label>
      </div>
      {issues && (
        <div className="row">
          <label>
            Repository <span className="hint">whose forge's open issues become tasks</span>
            <select value={form.repositoryId} onChange={(e) => set('repositoryId', e.target.value)} required>
              <option value="" disabled>
                {repositories.length ? 'Choose a repository' : 'No repositories yet: add one in Repositories'}
              </option>
              {repositories.map((r) => (
                <option key={r.id} value={r.id}>
                  {r.name}
                </option>
              ))}
            </select>
          </label>
          <label>
            Label <span className="hint">only issues with this label; empty: every open issue</span>
            <input value={form.label} onChange={(e) => set('label', e.target.value)} placeholder="kandev" />
          </label>
        </div>
      )}
      <StepPicker value={form.stepId} onChange={(id) => set('stepId', id)} />
      <label>
        Webhook{' '}
        <span className="hint">
          {issues
            ? 'lets the forge tell of new issues at once, and of pull request changes, besides polling'
            : 'a webhook-only source checks a generic HMAC signature'}
        </span>
        <select value={issues ? form.scheme : 'hmac'} onChange={(e) => set('scheme', e.target.value)} disabled={!issues}>
          <option value="">None</option>
          {HOOK_SCHEMES.map(([value, name]) => (
            <option key={value} value={value}>
              {name}
            </option>
          ))}
        </select>
      </label>
      {view}
      <div className="actions">
        <button className="primary" type="submit">
          Add source
        </button>
      </div>
    </form>
  );
}

/** How to point a sender at the webhook, by its scheme. */
function HookHowTo({ scheme }: { scheme: string }) {
  if (scheme === 'github') {
    return (
      <p className="hint">
        On GitHub: the repository's Settings › Webhooks › Add webhook, with this URL as the payload URL, content type
        application/json, this secret, and the events Issues, Pull requests, Pull request reviews, Pull request review
        comments, Check runs, Check suites, Workflow runs and Statuses.
      </p>
    );
  }
  if (scheme === 'gitlab') {
    return (
      <p className="hint">
        On GitLab: the project's Settings › Webhooks, with this URL, this secret as the secret token, and the events
        Issues, Merge requests, Pipelines, Jobs and Comments.
      </p>
    );
  }
  return (
    <p className="hint">
      Send each task as a POST of a JSON body such as{' '}
      <code>{'{"title": "…", "description": "…", "external_id": "…", "url": "…"}'}</code> with the headers{' '}
      <code>X-Kandev-Event: task</code>, a new <code>X-Kandev-Delivery</code> each time, and{' '}
      <code>X-Kandev-Signature: sha256=</code> followed by the hex HMAC-SHA256 of the body with this secret.
    </p>
  );
}

/** A new webhook's URL and secret: shown this once, with ways to copy them. */
export function NewHook({ made, onDone }: { made: MadeHook; onDone: () => void }) {
  const url = hookUrl(location.origin, made.source.id);
  const field = (label: string, value: string, what: string) => (
    <div className="row">
      <label className="grow">
        {label}
        <input readOnly value={value} spellCheck={false} onFocus={(e) => e.target.select()} className="secret" />
      </label>
      <button type="button" className="copy" aria-label={`Copy ${what}`} onClick={() => copyText(value)}>
        Copy
      </button>
    </div>
  );
  return (
    <div className="new-secret form" role="status" aria-label={`Webhook of ${made.source.name}`}>
      <p>
        Source <strong>{made.source.name}</strong> is made, with a webhook. Copy its secret now: it is not shown again.
      </p>
      {field('Webhook URL', url, 'the URL')}
      {field('Webhook secret', made.secret, 'the secret')}
      <HookHowTo scheme={made.source.hook_scheme ?? 'hmac'} />
      <div className="actions">
        <button type="button" onClick={onDone}>
          Done
        </button>
      </div>
    </div>
  );
}
