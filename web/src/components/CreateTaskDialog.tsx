// The create-task form: title, description, repositories (one or more, each with its base
// branch; the first defaults to the one chosen last, or the only one), agent profile, step,
// start now (by default only when the step starts the agent), and the task it is a subtask of
// and those it is blocked by.
import { useEffect, useState } from 'react';
import { call, errorText } from '../api/client';
import type { RepositoryDto, TaskDto, WorkflowDto } from '../api/types';
import { useData } from '../lib/data';
import { readPref, writePref } from '../lib/prefs';
import { useMutation } from '../lib/useMutation';
import { Dialog } from './Dialog';
import { type Links, TaskLinksFields, linksErrorText } from './TaskLinks';
import { ProfileSelect } from './ProfileSelect';

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
  // The chosen repositories in order (the first is the task's main one); '' is "none yet".
  // The repository this browser chose last, else the only one there is.
  const [repos, setRepos] = useState<RepoPick[]>(() => [defaultRepository(repositories)]);
  const [profile, setProfile] = useState(profiles[0]?.id ?? '');
  const [stepId, setStepId] = useState(start?.id ?? '');
  // Ticked only by hand: by default a task starts its agent when its step does, no sooner.
  const [startNow, setStartNow] = useState(false);
  const [links, setLinks] = useState<Links>({ parentId: '', blockedBy: [] });
  // A step whose on_enter starts the agent starts it whatever the box says: say so.
  const chosen = steps.find((s) => s.id === stepId);
  const stepStarts = chosen?.events.on_enter.some((a) => a.type === 'auto_start_agent') ?? false;
  const { busy, error, setError, run } = useMutation();

  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    if (!title.trim()) {
      setError('Give the task a title.');
      return;
    }
    await run(async () => {
      const { task } = await call('task.create', {
        workflow_id: props.workflow.id,
        title: title.trim(),
        description,
        step_id: stepId || undefined,
        repositories: repos.filter((r) => r.id).map((r) => ({ id: r.id, base_branch: r.baseBranch || undefined })),
        agent_profile_id: profile || undefined,
        start_agent: startNow || stepStarts,
        parent_id: links.parentId || undefined,
        blocked_by: links.blockedBy,
      });
      writePref(LAST_REPOSITORY, repos[0]?.id ?? '');
      props.onCreated(task);
    }, { describe: linksErrorText });
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
          <RepositoryPick
            index={0}
            pick={repos[0] ?? { id: '', baseBranch: '' }}
            taken={repos.map((r) => r.id)}
            onChange={(p) => setRepos((now) => now.map((r, i) => (i === 0 ? p : r)))}
            onError={setError}
          />
          <ProfileSelect name="profile" value={profile} onChange={setProfile} />
          <label>
            Step
            <select
              name="step"
              value={stepId}
              onChange={(e) => {
                setStepId(e.target.value);
                setStartNow(false); // back to what the new step does
              }}
            >
              {steps.map((s) => (
                <option key={s.id} value={s.id}>
                  {s.name}
                </option>
              ))}
            </select>
          </label>
        </div>
        {repos.slice(1).map((pick, k) => (
          <div className="row" key={k + 1}>
            <RepositoryPick
              index={k + 1}
              pick={pick}
              taken={repos.map((r) => r.id)}
              onChange={(p) => setRepos((now) => now.map((r, i) => (i === k + 1 ? p : r)))}
              onError={setError}
            />
            <button
              type="button"
              className="remove-repository"
              aria-label={`Remove repository ${k + 2}`}
              onClick={() => setRepos((now) => now.filter((_, i) => i !== k + 1))}
            >
              Remove
            </button>
          </div>
        ))}
        {repos.every((r) => r.id) && repos.length < repositories.length && (
          <div>
            <button type="button" onClick={() => setRepos((now) => [...now, { id: '', baseBranch: '' }])}>
              Add another repository
            </button>
          </div>
        )}
        <TaskLinksFields workflowId={props.workflow.id} links={links} onChange={setLinks} />
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

/** Where the repository chosen last for a new task is kept (this browser). */
const LAST_REPOSITORY = 'kandev.new-task.repository';

/** The first pick of a new task: the repository chosen last, if it is still there, else the
 * only repository, else none. */
function defaultRepository(repositories: RepositoryDto[]): RepoPick {
  const last = readPref(LAST_REPOSITORY);
  const chosen =
    last === ''
      ? undefined
      : (repositories.find((r) => r.id === last) ?? (repositories.length === 1 ? repositories[0] : undefined));
  return { id: chosen?.id ?? '', baseBranch: chosen?.default_branch ?? '' };
}

/** A repository chosen for the task and the branch its worktree starts from. */
interface RepoPick {
  id: string;
  baseBranch: string;
}

/** One repository picker and its base branch (the repository's branches, its default first).
 * The first is labelled "Repository", later ones "Repository 2", ...; a repository chosen in
 * another picker is not offered again. */
function RepositoryPick(props: {
  index: number;
  pick: RepoPick;
  taken: string[];
  onChange: (pick: RepoPick) => void;
  onError: (error: string) => void;
}) {
  const { repositories } = useData();
  const [branches, setBranches] = useState<string[]>([]);
  const { id, baseBranch } = props.pick;
  const { onError } = props;
  useEffect(() => {
    setBranches([]);
    if (!id) return;
    call('repository.branches', { id })
      .then((r) => setBranches(r.branches))
      .catch((e: unknown) => onError(errorText(e)));
  }, [id, onError]);
  const suffix = props.index === 0 ? '' : ` ${props.index + 1}`;
  const choose = (next: string) =>
    props.onChange({ id: next, baseBranch: repositories.find((r) => r.id === next)?.default_branch ?? '' });
  return (
    <>
      <label>
        Repository{suffix}
        <select name={`repository${suffix ? `-${props.index + 1}` : ''}`} value={id} onChange={(e) => choose(e.target.value)}>
          <option value="">{props.index === 0 ? 'None' : 'Choose…'}</option>
          {repositories
            .filter((r) => r.id === id || !props.taken.includes(r.id))
            .map((r) => (
              <option key={r.id} value={r.id}>
                {r.name}
              </option>
            ))}
        </select>
      </label>
      {id && (
        <label>
          Base branch{suffix}
          <select
            name={`base_branch${suffix ? `-${props.index + 1}` : ''}`}
            value={baseBranch}
            onChange={(e) => props.onChange({ id, baseBranch: e.target.value })}
          >
            {[baseBranch, ...branches.filter((b) => b !== baseBranch)].filter(Boolean).map((b) => (
              <option key={b} value={b}>
                {b}
              </option>
            ))}
          </select>
        </label>
      )}
    </>
  );
}
