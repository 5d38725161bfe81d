// Settings › Workflows: choose a workflow and edit its steps, create one (blank or from a
// template), export and import YAML. Changing workflows is an admin's of the workspace (issue
// 49); others see the steps and may export.
import { useState } from 'react';
import { call, errorText } from '../../api/client';
import { useData } from '../../lib/data';
import { useRole } from '../../lib/me';
import { toast } from '../../lib/toast';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
import { RoleNote } from '../RoleNote';
import { useFormError } from './useFormError';
import { WorkflowEditor } from './WorkflowEditor';

const readTemplates = () => call('workflow.template.list', {}).then((r) => r.templates);

export function Workflows() {
  const { workspace, workflows } = useData();
  const templateList = useRead(readTemplates);
  const templates = templateList.data ?? [];
  const [selected, setSelected] = useState<string | null>(null);
  const [name, setName] = useState('');
  const [template, setTemplate] = useState('');
  const [yaml, setYaml] = useState('');
  const [problems, setProblems] = useState<{ path: string; message: string }[]>([]);
  const { wrap, view } = useFormError();
  const manages = useRole().can('admin');
  if (!workspace) return null;
  const current = workflows.find((w) => w.id === selected) ?? workflows[0] ?? null;
  return (
    <section>
      <h1>Workflows</h1>
      <div className="row">
        <label>
          Workflow
          <select aria-label="Workflow" value={current?.id ?? ''} onChange={(e) => setSelected(e.target.value)}>
            {workflows.map((w) => (
              <option key={w.id} value={w.id}>
                {w.name}
              </option>
            ))}
          </select>
        </label>
      </div>
      {!manages && <RoleNote>Workflows and their steps are changed by admins of the workspace.</RoleNote>}
      {!manages && current && (
        <ol className="steps-read" aria-label="Steps">
          {[...current.steps]
            .sort((a, b) => a.position - b.position)
            .map((s) => (
              <li key={s.id}>{s.name}</li>
            ))}
        </ol>
      )}
      {manages && current && (
        <RenameOrDelete
          key={`rename-${current.id}`}
          id={current.id}
          name={current.name}
          onDeleted={() => setSelected(null)}
          last={workflows.length <= 1}
        />
      )}
      {manages && current && <WorkflowEditor key={current.id} workflow={current} />}
      {manages && (
        <form
          className="form card-form"
          aria-label="New workflow"
          onSubmit={async (e) => {
            e.preventDefault();
            const ok = await wrap(async () => {
              const r = await call('workflow.create', {
                workspace_id: workspace.id,
                name,
                template_id: template || undefined,
              });
              setSelected(r.workflow.id);
            });
            if (ok) setName('');
          }}
        >
          <h2>New workflow</h2>
          <div className="row">
            <label>
              Name
              <input value={name} onChange={(e) => setName(e.target.value)} required />
            </label>
            <label>
              Template
              <select value={template} onChange={(e) => setTemplate(e.target.value)}>
                <option value="">Blank (Todo → In Progress → Done)</option>
                {templates.map((t) => (
                  <option key={t.id} value={t.id}>
                    {t.name}
                  </option>
                ))}
              </select>
            </label>
          </div>
          <InlineError error={templateList.error} onRetry={templateList.retry} testId="templates-error" />
          {view}
          <div className="actions">
            <button className="primary" type="submit">
              Create workflow
            </button>
          </div>
        </form>
      )}
      <div className="form card-form">
        <h2>{manages ? 'Import and export' : 'Export'}</h2>
        <label>
          YAML
          <textarea rows={10} value={yaml} onChange={(e) => setYaml(e.target.value)} spellCheck={false} className="mono" />
        </label>
        {problems.length > 0 && (
          <ul className="form-error" role="alert">
            {problems.map((p, i) => (
              <li key={i}>
                <code>{p.path}</code>: {p.message}
              </li>
            ))}
          </ul>
        )}
        <div className="actions">
          <button
            type="button"
            disabled={!current}
            onClick={() =>
              current &&
              void wrap(async () => {
                const r = await call('workflow.export', { ids: [current.id] });
                setYaml(r.yaml);
                download(`${current.name.replace(/[^\w.-]+/g, '-').toLowerCase() || 'workflow'}.yaml`, r.yaml);
                toast(`Exported “${current.name}”: downloaded, and shown below to copy`);
              })
            }
          >
            Export “{current?.name}”
          </button>
          {manages && (
            <button
              type="button"
              className="primary"
              disabled={!yaml.trim()}
              onClick={async () => {
                setProblems([]);
                try {
                  const r = await call('workflow.import', { workspace_id: workspace.id, yaml });
                  setYaml('');
                  const first = r.workflows[0];
                  if (first) setSelected(first.id);
                  toast(`Imported ${r.workflows.map((w) => `“${w.name}”`).join(', ')}`);
                } catch (e) {
                  const details = (e as { details?: { problems?: { path: string; message: string }[] } }).details;
                  setProblems(details?.problems ?? [{ path: '', message: errorText(e) }]);
                }
              }}
            >
              Import
            </button>
          )}
        </div>
      </div>
    </section>
  );
}

/** Saves `text` as a file named `name` (a download the browser makes from memory). */
function download(name: string, text: string) {
  const url = URL.createObjectURL(new Blob([text], { type: 'application/yaml' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  window.setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function RenameOrDelete(props: { id: string; name: string; last: boolean; onDeleted: () => void }) {
  const [name, setName] = useState(props.name);
  const [confirming, setConfirming] = useState(false);
  const { wrap, view } = useFormError();
  return (
    <form
      className="inline-form"
      aria-label="Rename workflow"
      onSubmit={(e) => {
        e.preventDefault();
        void wrap(async () => {
          await call('workflow.update', { id: props.id, name });
          toast(`Renamed to “${name}”`);
        });
      }}
    >
      <label>
        <span className="sr-only">Workflow name</span>
        <input aria-label="Workflow name" value={name} onChange={(e) => setName(e.target.value)} required />
      </label>
      <button type="submit" disabled={!name.trim() || name === props.name}>
        Rename
      </button>
      {confirming ? (
        <>
          <button
            type="button"
            className="danger"
            onClick={() =>
              void wrap(async () => {
                await call('workflow.delete', { id: props.id });
                toast(`Deleted “${props.name}”`);
                props.onDeleted();
              })
            }
          >
            Delete “{props.name}”
          </button>
          <button type="button" onClick={() => setConfirming(false)}>
            Keep it
          </button>
        </>
      ) : (
        <button
          type="button"
          className="danger-outline"
          disabled={props.last}
          title={props.last ? 'The only workflow cannot be deleted' : undefined}
          onClick={() => setConfirming(true)}
        >
          Delete workflow
        </button>
      )}
      {view}
    </form>
  );
}
