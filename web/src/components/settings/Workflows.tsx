// Settings › Workflows: choose a workflow and edit its steps, create one (blank or from a
// template), export and import YAML.
import { useState } from 'react';
import { call, errorText } from '../../api/client';
import { useData } from '../../lib/data';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
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
  if (!workspace) return null;
  const current = workflows.find((w) => w.id === selected) ?? workflows[0] ?? null;
  return (
    <section>
      <h1>Workflows</h1>
      <div className="row">
        <label>
          Workflow
          <select value={current?.id ?? ''} onChange={(e) => setSelected(e.target.value)}>
            {workflows.map((w) => (
              <option key={w.id} value={w.id}>
                {w.name}
              </option>
            ))}
          </select>
        </label>
      </div>
      {current && <WorkflowEditor key={current.id} workflow={current} />}
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
      <div className="form card-form">
        <h2>Import and export</h2>
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
              })
            }
          >
            Export “{current?.name}”
          </button>
          <button
            type="button"
            className="primary"
            disabled={!yaml.trim()}
            onClick={async () => {
              setProblems([]);
              try {
                await call('workflow.import', { workspace_id: workspace.id, yaml });
                setYaml('');
              } catch (e) {
                const details = (e as { details?: { problems?: { path: string; message: string }[] } }).details;
                setProblems(details?.problems ?? [{ path: '', message: errorText(e) }]);
              }
            }}
          >
            Import
          </button>
        </div>
      </div>
    </section>
  );
}
