// Settings: agent profiles (and which agents are installed), repositories, workflows (create
// from a template, edit steps and their actions, import and export YAML).
import { useEffect, useState } from 'react';
import { call, errorText } from '../api/client';
import type {
  ActionDto,
  AgentKind,
  AgentKindDto,
  AgentProfileDto,
  EventsDto,
  StepDto,
  WorkflowDto,
  WorkflowTemplate,
} from '../api/types';
import { useData } from '../lib/data';
import { navigate } from '../lib/router';

const SECTIONS = [
  ['profiles', 'Agent profiles'],
  ['repositories', 'Repositories'],
  ['workflows', 'Workflows'],
] as const;

export function Settings({ section }: { section: string }) {
  return (
    <div className="settings">
      <nav className="settings-nav" aria-label="Settings">
        {SECTIONS.map(([id, label]) => (
          <a
            key={id}
            href={`/settings/${id}`}
            aria-current={section === id ? 'page' : undefined}
            className={section === id ? 'active' : ''}
            onClick={(e) => {
              e.preventDefault();
              navigate(`/settings/${id}`);
            }}
          >
            {label}
          </a>
        ))}
      </nav>
      <div className="settings-body">
        {section === 'repositories' ? <Repositories /> : section === 'workflows' ? <Workflows /> : <Profiles />}
      </div>
    </div>
  );
}

function useError() {
  const [error, setError] = useState<string | null>(null);
  const wrap = async (f: () => Promise<unknown>) => {
    setError(null);
    try {
      await f();
      return true;
    } catch (e) {
      setError(errorText(e));
      return false;
    }
  };
  const view = error ? (
    <p className="form-error" role="alert">
      {error}
    </p>
  ) : null;
  return { wrap, view };
}

// ------------------------------------------------------------------ profiles

function Profiles() {
  const { profiles } = useData();
  const [kinds, setKinds] = useState<AgentKind[]>([]);
  const [editing, setEditing] = useState<AgentProfileDto | 'new' | null>(null);
  const { wrap, view } = useError();
  useEffect(() => {
    call('agent.kinds', {}).then((r) => setKinds(r.kinds)).catch(() => {});
  }, []);
  return (
    <section>
      <h1>Agent profiles</h1>
      <table className="table">
        <thead>
          <tr>
            <th>Name</th>
            <th>Agent</th>
            <th>Command</th>
            <th>Auto-approve</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {profiles.map((p) => (
            <tr key={p.id}>
              <td>{p.name}</td>
              <td>{p.kind}</td>
              <td>
                <code>{[p.command, ...p.args].join(' ') || '(default)'}</code>
              </td>
              <td>{p.auto_approve ? 'yes' : 'no'}</td>
              <td className="row-actions">
                <button onClick={() => setEditing(p)}>Edit</button>
                <button
                  className="danger-outline"
                  onClick={() => void wrap(() => call('agent.profile.delete', { id: p.id }))}
                >
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {view}
      <button className="primary" onClick={() => setEditing('new')}>
        Add profile
      </button>
      {editing && <ProfileForm kinds={kinds} profile={editing === 'new' ? null : editing} onDone={() => setEditing(null)} />}
      <h2>Agents on this machine</h2>
      <table className="table" data-testid="agent-kinds">
        <thead>
          <tr>
            <th>Agent</th>
            <th>Command</th>
            <th>Installed</th>
            <th>How to install</th>
          </tr>
        </thead>
        <tbody>
          {kinds.map((k) => (
            <tr key={k.kind}>
              <td>{k.kind}</td>
              <td>
                <code>{k.command}</code>
              </td>
              <td>{k.installed ? <span className="badge state-completed">installed</span> : <span className="badge">not found</span>}</td>
              <td>{k.install ? <code>{k.install}</code> : ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function ProfileForm({ kinds, profile, onDone }: { kinds: AgentKind[]; profile: AgentProfileDto | null; onDone: () => void }) {
  const [name, setName] = useState(profile?.name ?? '');
  const [kind, setKind] = useState(profile?.kind ?? 'mock');
  const [command, setCommand] = useState(profile?.command ?? '');
  const [args, setArgs] = useState(profile?.args.join(' ') ?? '');
  const [model, setModel] = useState(profile?.model ?? '');
  const [mode, setMode] = useState(profile?.mode ?? '');
  const [autoApprove, setAutoApprove] = useState(profile?.auto_approve ?? false);
  const { wrap, view } = useError();
  const argList = args.split(/\s+/).filter(Boolean);
  return (
    <form
      className="form card-form"
      aria-label={profile ? 'Edit profile' : 'New profile'}
      onSubmit={async (e) => {
        e.preventDefault();
        const ok = await wrap(() =>
          profile
            ? call('agent.profile.update', {
                id: profile.id,
                name,
                command,
                args: argList,
                model: model || null,
                mode: mode || null,
                auto_approve: autoApprove,
              })
            : call('agent.profile.create', {
                name,
                kind,
                command,
                args: argList,
                env: [],
                model: model || undefined,
                mode: mode || undefined,
                auto_approve: autoApprove,
              }),
        );
        if (ok) onDone();
      }}
    >
      <div className="row">
        <label>
          Name
          <input value={name} onChange={(e) => setName(e.target.value)} required />
        </label>
        <label>
          Agent
          <select value={kind} disabled={!!profile} onChange={(e) => setKind(e.target.value as AgentKindDto)}>
            {(kinds.length ? kinds.map((k) => k.kind) : ['mock', 'claude', 'codex', 'gemini', 'opencode', 'custom']).map((k) => (
              <option key={k} value={k}>
                {k}
              </option>
            ))}
          </select>
        </label>
      </div>
      <div className="row">
        <label>
          Command <span className="hint">{kind === 'custom' ? 'required' : 'empty: the default'}</span>
          <input value={command} onChange={(e) => setCommand(e.target.value)} />
        </label>
        <label>
          Arguments
          <input value={args} onChange={(e) => setArgs(e.target.value)} />
        </label>
      </div>
      <div className="row">
        <label>
          Model
          <input value={model} onChange={(e) => setModel(e.target.value)} />
        </label>
        <label>
          Mode
          <input value={mode} onChange={(e) => setMode(e.target.value)} />
        </label>
      </div>
      <label className="check">
        <input type="checkbox" checked={autoApprove} onChange={(e) => setAutoApprove(e.target.checked)} />
        Approve permission requests automatically
      </label>
      {view}
      <div className="actions">
        <button type="button" onClick={onDone}>
          Cancel
        </button>
        <button className="primary" type="submit">
          Save profile
        </button>
      </div>
    </form>
  );
}

// ------------------------------------------------------------------ repositories

function Repositories() {
  const { workspace, repositories } = useData();
  const [path, setPath] = useState('');
  const [name, setName] = useState('');
  const [branch, setBranch] = useState('');
  const [setup, setSetup] = useState('');
  const { wrap, view } = useError();
  if (!workspace) return null;
  return (
    <section>
      <h1>Repositories</h1>
      <table className="table">
        <thead>
          <tr>
            <th>Name</th>
            <th>Path</th>
            <th>Base branch</th>
            <th>Branch template</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {repositories.map((r) => (
            <tr key={r.id}>
              <td>{r.name}</td>
              <td>
                <code>{r.local_path}</code>
              </td>
              <td>{r.default_branch}</td>
              <td>
                <code>{r.branch_template}</code>
              </td>
              <td className="row-actions">
                <button className="danger-outline" onClick={() => void wrap(() => call('repository.delete', { id: r.id }))}>
                  Remove
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
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
            }),
          );
          if (ok) {
            setPath('');
            setName('');
            setBranch('');
            setSetup('');
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
        {view}
        <div className="actions">
          <button className="primary" type="submit">
            Add repository
          </button>
        </div>
      </form>
    </section>
  );
}

// ------------------------------------------------------------------ workflows

function Workflows() {
  const { workspace, workflows } = useData();
  const [templates, setTemplates] = useState<WorkflowTemplate[]>([]);
  const [selected, setSelected] = useState<string | null>(null);
  const [name, setName] = useState('');
  const [template, setTemplate] = useState('');
  const [yaml, setYaml] = useState('');
  const [problems, setProblems] = useState<{ path: string; message: string }[]>([]);
  const { wrap, view } = useError();
  useEffect(() => {
    call('workflow.template.list', {}).then((r) => setTemplates(r.templates)).catch(() => {});
  }, []);
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

const ACTIONS: Record<keyof EventsDto, ActionDto['type'][]> = {
  on_enter: ['reset_agent_context', 'enable_plan_mode', 'set_session_mode', 'auto_start_agent'],
  on_turn_start: ['move_to_next', 'move_to_previous', 'move_to_step'],
  on_turn_complete: ['move_to_next', 'move_to_previous', 'move_to_step', 'disable_plan_mode'],
  on_exit: ['disable_plan_mode'],
};

function WorkflowEditor({ workflow }: { workflow: WorkflowDto }) {
  const steps = [...workflow.steps].sort((a, b) => a.position - b.position);
  const [newStep, setNewStep] = useState('');
  const { wrap, view } = useError();
  const reorder = (i: number, by: number) => {
    const ids = steps.map((s) => s.id);
    const [id] = ids.splice(i, 1);
    if (!id) return;
    ids.splice(i + by, 0, id);
    void wrap(() => call('workflow.step.reorder', { workflow_id: workflow.id, step_ids: ids }));
  };
  return (
    <div className="workflow-editor">
      {steps.map((s, i) => (
        <StepEditor
          key={`${s.id}-${workflow.updated_at}`}
          step={s}
          steps={steps}
          first={i === 0}
          last={i === steps.length - 1}
          onMove={(by) => reorder(i, by)}
        />
      ))}
      {view}
      <form
        className="inline-form"
        onSubmit={async (e) => {
          e.preventDefault();
          if (await wrap(() => call('workflow.step.create', { workflow_id: workflow.id, name: newStep }))) setNewStep('');
        }}
      >
        <label>
          <span className="sr-only">New step name</span>
          <input value={newStep} placeholder="New step name" onChange={(e) => setNewStep(e.target.value)} required />
        </label>
        <button type="submit">Add step</button>
      </form>
    </div>
  );
}

function StepEditor(props: { step: StepDto; steps: StepDto[]; first: boolean; last: boolean; onMove: (by: number) => void }) {
  const { profiles } = useData();
  const [step, setStep] = useState(props.step);
  const { wrap, view } = useError();
  const set = <K extends keyof StepDto>(k: K, v: StepDto[K]) => setStep((s) => ({ ...s, [k]: v }));
  const setEvents = (trigger: keyof EventsDto, list: ActionDto[]) =>
    setStep((s) => ({ ...s, events: { ...s.events, [trigger]: list } }));
  return (
    <details className="step-editor">
      <summary>
        <span className="dot" style={{ background: step.color || 'var(--muted)' }} aria-hidden="true" />
        {props.step.name}
        {props.step.is_start_step && <span className="badge">start</span>}
      </summary>
      <form
        className="form"
        onSubmit={(e) => {
          e.preventDefault();
          void wrap(() =>
            call('workflow.step.update', {
              id: step.id,
              name: step.name,
              color: step.color,
              prompt: step.prompt,
              is_start_step: step.is_start_step,
              allow_manual_move: step.allow_manual_move,
              agent_profile_id: step.agent_profile_id,
              cancel_triggers_turn_complete: step.cancel_triggers_turn_complete,
              events: step.events,
            }),
          );
        }}
      >
        <div className="row">
          <label>
            Name
            <input value={step.name} onChange={(e) => set('name', e.target.value)} />
          </label>
          <label>
            Color
            <input type="color" value={step.color || '#888888'} onChange={(e) => set('color', e.target.value)} />
          </label>
          <label>
            Agent profile
            <select value={step.agent_profile_id ?? ''} onChange={(e) => set('agent_profile_id', e.target.value || null)}>
              <option value="">The task's</option>
              {profiles.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
          </label>
        </div>
        <label>
          Prompt <span className="hint">{'{{task_prompt}}'} is replaced by the task's title and description</span>
          <textarea rows={3} value={step.prompt} onChange={(e) => set('prompt', e.target.value)} />
        </label>
        <div className="row checks">
          <label className="check">
            <input type="checkbox" checked={step.is_start_step} onChange={(e) => set('is_start_step', e.target.checked)} />
            Start step
          </label>
          <label className="check">
            <input type="checkbox" checked={step.allow_manual_move} onChange={(e) => set('allow_manual_move', e.target.checked)} />
            Manual moves allowed
          </label>
          <label className="check">
            <input
              type="checkbox"
              checked={step.cancel_triggers_turn_complete}
              onChange={(e) => set('cancel_triggers_turn_complete', e.target.checked)}
            />
            A cancel counts as turn complete
          </label>
        </div>
        {(Object.keys(ACTIONS) as (keyof EventsDto)[]).map((trigger) => (
          <fieldset key={trigger} className="events">
            <legend>{trigger.replace(/_/g, ' ')}</legend>
            {step.events[trigger].map((a, i) => (
              <div key={i} className="action-row">
                <select
                  aria-label="Action"
                  value={a.type}
                  onChange={(e) => {
                    const list = step.events[trigger].slice();
                    list[i] = makeAction(e.target.value as ActionDto['type'], props.steps);
                    setEvents(trigger, list);
                  }}
                >
                  {ACTIONS[trigger].map((t) => (
                    <option key={t} value={t}>
                      {t.replace(/_/g, ' ')}
                    </option>
                  ))}
                </select>
                {a.type === 'move_to_step' && (
                  <select
                    aria-label="Target step"
                    value={a.step_id}
                    onChange={(e) => {
                      const list = step.events[trigger].slice();
                      list[i] = { type: 'move_to_step', step_id: e.target.value };
                      setEvents(trigger, list);
                    }}
                  >
                    {props.steps.map((s) => (
                      <option key={s.id} value={s.id}>
                        {s.name}
                      </option>
                    ))}
                  </select>
                )}
                {a.type === 'set_session_mode' && (
                  <input
                    aria-label="Mode id"
                    value={a.mode_id}
                    onChange={(e) => {
                      const list = step.events[trigger].slice();
                      list[i] = { type: 'set_session_mode', mode_id: e.target.value };
                      setEvents(trigger, list);
                    }}
                  />
                )}
                <button
                  type="button"
                  className="icon"
                  aria-label="Remove action"
                  onClick={() => setEvents(trigger, step.events[trigger].filter((_, j) => j !== i))}
                >
                  ×
                </button>
              </div>
            ))}
            <button
              type="button"
              className="link"
              onClick={() => setEvents(trigger, [...step.events[trigger], makeAction(ACTIONS[trigger][0]!, props.steps)])}
            >
              + action
            </button>
          </fieldset>
        ))}
        {view}
        <div className="actions">
          <button type="button" disabled={props.first} onClick={() => props.onMove(-1)}>
            Move left
          </button>
          <button type="button" disabled={props.last} onClick={() => props.onMove(1)}>
            Move right
          </button>
          <button
            type="button"
            className="danger-outline"
            onClick={() => void wrap(() => call('workflow.step.delete', { id: step.id }))}
          >
            Delete step
          </button>
          <button className="primary" type="submit">
            Save step
          </button>
        </div>
      </form>
    </details>
  );
}

function makeAction(type: ActionDto['type'], steps: StepDto[]): ActionDto {
  if (type === 'move_to_step') return { type, step_id: steps[0]?.id ?? '' };
  if (type === 'set_session_mode') return { type, mode_id: '' };
  return { type } as ActionDto;
}
