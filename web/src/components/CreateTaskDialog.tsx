// The create-task form: title, description, repository, agent profile, step, start now.
import { useEffect, useState } from 'react';
import { call, errorText } from '../api/client';
import type { TaskDto, WorkflowDto } from '../api/types';
import { useData } from '../lib/data';
import { Dialog } from './Dialog';

export function CreateTaskDialog(props: {
  workflow: WorkflowDto;
  onClose: () => void;
  onCreated: (task: TaskDto) => void;
}) {
  const { repositories, profiles } = useData();
  const steps = [...props.workflow.steps].sort((a, b) => a.position - b.position);
  const start = steps.find((s) => s.is_start_step) ?? steps[0];
  const [title, setTitle] = useState('');
  const [description, setDescription] = useState('');
  const [repo, setRepo] = useState('');
  const [branches, setBranches] = useState<string[]>([]);
  const [baseBranch, setBaseBranch] = useState('');
  const [profile, setProfile] = useState(profiles[0]?.id ?? '');
  const [stepId, setStepId] = useState(start?.id ?? '');
  const [startNow, setStartNow] = useState(true);
  const [busy, setBusy] = useState(false);
  // A step whose on_enter starts the agent starts it whatever the box says: say so.
  const chosen = steps.find((s) => s.id === stepId);
  const stepStarts = chosen?.events.on_enter.some((a) => a.type === 'auto_start_agent') ?? false;
  const [error, setError] = useState<string | null>(null);

  // The base branch picker: the chosen repository's branches, its default first.
  useEffect(() => {
    setBranches([]);
    setBaseBranch('');
    if (!repo) return;
    const fallback = repositories.find((r) => r.id === repo)?.default_branch ?? '';
    setBaseBranch(fallback);
    call('repository.branches', { id: repo })
      .then((r) => setBranches(r.branches))
      .catch((e: unknown) => setError(errorText(e)));
  }, [repo, repositories]);

  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    if (!title.trim()) {
      setError('Give the task a title.');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const { task } = await call('task.create', {
        workflow_id: props.workflow.id,
        title: title.trim(),
        description,
        step_id: stepId || undefined,
        repositories: repo ? [{ id: repo, base_branch: baseBranch || undefined }] : [],
        agent_profile_id: profile || undefined,
        start_agent: startNow || stepStarts,
      });
      props.onCreated(task);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <Dialog title="New task" onClose={props.onClose}>
      <form className="form" onSubmit={submit}>
        <label>
          Title
          <input name="title" value={title} onChange={(e) => setTitle(e.target.value)} autoFocus required />
        </label>
        <label>
          Description <span className="hint">the agent's first prompt</span>
          <textarea
            name="description"
            rows={5}
            value={description}
            onChange={(e) => setDescription(e.target.value)}
          />
        </label>
        <div className="row">
          <label>
            Repository
            <select name="repository" value={repo} onChange={(e) => setRepo(e.target.value)}>
              <option value="">None</option>
              {repositories.map((r) => (
                <option key={r.id} value={r.id}>
                  {r.name}
                </option>
              ))}
            </select>
          </label>
          {repo && (
            <label>
              Base branch
              <select name="base_branch" value={baseBranch} onChange={(e) => setBaseBranch(e.target.value)}>
                {[baseBranch, ...branches.filter((b) => b !== baseBranch)].filter(Boolean).map((b) => (
                  <option key={b} value={b}>
                    {b}
                  </option>
                ))}
              </select>
            </label>
          )}
          <label>
            Agent profile
            <select name="profile" value={profile} onChange={(e) => setProfile(e.target.value)}>
              {profiles.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
          </label>
          <label>
            Step
            <select name="step" value={stepId} onChange={(e) => setStepId(e.target.value)}>
              {steps.map((s) => (
                <option key={s.id} value={s.id}>
                  {s.name}
                </option>
              ))}
            </select>
          </label>
        </div>
        <label className="check">
          <input
            type="checkbox"
            checked={startNow || stepStarts}
            disabled={stepStarts}
            aria-describedby={stepStarts ? 'step-starts-hint' : undefined}
            onChange={(e) => setStartNow(e.target.checked)}
          />
          Start the agent now
        </label>
        {stepStarts && chosen && (
          <p className="hint" id="step-starts-hint">
            {chosen.name} starts the agent when a task enters it; choose another step to start it later.
          </p>
        )}
        {error && (
          <p className="form-error" role="alert">
            {error}
          </p>
        )}
        <div className="actions">
          <button type="button" onClick={props.onClose}>
            Cancel
          </button>
          <button className="primary" type="submit" disabled={busy}>
            {busy ? 'Creating…' : 'Create task'}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
