// Shipping a task from its Changes tab: where the branch stands against its base
// (`task.git_status`), Rebase, Merge (a composer: strategy and message), Push, Create PR (a
// composer: title and body prefilled from the task, draft, the base it targets). An action's
// outcome is one note: a success and a refusal look different. Under an open pull request:
// its CI jobs with their links and log tails, the feedback rounds sent to the agent, and why
// auto-fix stopped or a merge was refused (`task.pr.get`). (Review threads are on the diff
// itself: ReviewDiff.)
import { useCallback, useEffect, useState } from 'react';
import { ApiError, call, errorText } from '../api/client';
import type { GitStatusDto, MergeStrategyDto, TaskPullRequests } from '../api/types';
import { useRole } from '../lib/me';
import { useMutation } from '../lib/useMutation';
import { Dialog } from './Dialog';

/** A refusal with the files that block it (`details.dirty` / `details.conflicts`). */
function refusal(e: unknown): string {
  const text = errorText(e);
  if (e instanceof ApiError && e.details && typeof e.details === 'object') {
    const d = e.details as { dirty?: string[]; conflicts?: string[] };
    const files = d.conflicts ?? d.dirty;
    if (files && files.length) return `${text} [${files.join(', ')}]`;
  }
  return text;
}

function StatusLine({ s }: { s: GitStatusDto }) {
  const dirty = s.dirty.uncommitted + s.dirty.untracked;
  return (
    <p className="hint" data-testid="git-status">
      {s.merged && (
        <span className="badge merged" data-testid="merged">
          merged
        </span>
      )}{' '}
      <code>{s.branch}</code> → <code>{s.base_branch}</code>: {s.ahead} ahead, {s.behind} behind
      {dirty > 0 && <>, {dirty} uncommitted</>}
      {s.conflicts_with_base.length > 0 && <>, conflicts: {s.conflicts_with_base.join(', ')}</>}
      {s.remote && <>, pushed</>}
      {s.pr && (
        <>
          , PR{' '}
          <a href={s.pr.url} target="_blank" rel="noreferrer">
            #{s.pr.number}
          </a>{' '}
          {s.pr.state}
        </>
      )}
    </p>
  );
}

/** What an event's outcome is called next to its detail. */
const OUTCOME: Record<string, string> = {
  sent: 'sent to the agent',
  inherited: 'inherited from the base branch',
  capped: 'auto-fix stopped',
  merged: 'merged',
  merge_refused: 'merge refused',
  ignored: 'ignored',
};

/** The pull requests' CI jobs, the feedback rounds, and the latest outcome worth saying. */
function PrChecks({ taskId, version, needsYou }: { taskId: string; version: number; needsYou: string | null }) {
  const [got, setGot] = useState<TaskPullRequests | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    call('task.pr.get', { task_id: taskId })
      .then((r) => live && (setGot(r), setError(null)))
      .catch((e: unknown) => live && setError(errorText(e)));
    return () => {
      live = false;
    };
  }, [taskId, version, needsYou]);
  if (error) return <p className="hint">The pull request’s checks could not be read: {error}</p>;
  if (!got || (got.checks.length === 0 && got.events.length === 0)) return null;
  const last = [...got.events].reverse().find((e) => e.detail && e.outcome !== 'none');
  return (
    <section className="pr-checks" aria-label="Checks">
      <h3>Checks</h3>
      <ul>
        {got.checks.map((c) => (
          <li key={`${c.repository_id}/${c.name}`} data-testid="check" data-state={c.state}>
            <span className={`badge check-${c.state}`}>{c.state}</span>{' '}
            <a href={c.url} target="_blank" rel="noreferrer">
              {c.name}
            </a>
            {c.inherited && <span className="hint"> · fails on the base branch too, not this branch’s doing</span>}
            {c.log_tail && (
              <details>
                <summary>End of its log</summary>
                <pre className="log-tail">{c.log_tail}</pre>
              </details>
            )}
          </li>
        ))}
      </ul>
      <p className="hint" data-testid="feedback-rounds">
        Feedback sent to the agent: {got.feedback_rounds} {got.feedback_rounds === 1 ? 'round' : 'rounds'}
      </p>
      {got.stopped ? (
        <p role="alert" className="ship-note refused" data-testid="autofix-stopped">
          {got.stopped}
        </p>
      ) : (
        last && (
          <p className="hint" data-testid="pr-last-event">
            {OUTCOME[last.outcome] ?? last.outcome}: {last.detail}
          </p>
        )
      )}
    </section>
  );
}

export function ShipPanel(props: { taskId: string; version: number; needsYou?: string | null; onChanged: () => void }) {
  const { taskId, version, onChanged } = props;
  const [status, setStatus] = useState<GitStatusDto[] | null>(null);
  const [note, setNote] = useState<{ text: string; ok: boolean } | null>(null);
  // An action's outcome, success or refusal, is the one note under the buttons.
  const refused = useCallback((text: string | null) => setNote(text ? { text, ok: false } : null), []);
  const { busy, run: mutate } = useMutation(refused);
  // The composer open, if any.
  const [composer, setComposer] = useState<'pr' | 'merge' | null>(null);
  const [prKept, setPrKept] = useState<PrRequest | null>(null);
  // Files a refused rebase listed: the agent can be asked to resolve them.
  const [conflicts, setConflicts] = useState<string[]>([]);
  // Shipping is a member's; a viewer sees where the branch stands (issue 49).
  const works = useRole().can('member');

  const load = useCallback(() => {
    call('task.git_status', { task_id: taskId })
      .then((r) => setStatus(r.repositories))
      .catch((e: unknown) => refused(errorText(e)));
  }, [taskId, refused]);
  useEffect(load, [load, version]);

  const run = (what: string, act: () => Promise<string>) =>
    mutate(
      async () => {
        setNote({ text: await act(), ok: true });
        onChanged(); // reads the diff again, then this panel (`version`)
      },
      { describe: (e) => `${what} refused: ${refusal(e)}` },
    );

  return (
    <section className="ship" aria-label="Ship">
      {status?.map((s) => <StatusLine key={s.repository_id} s={s} />)}
      {status?.some((s) => s.pr) && <PrChecks taskId={taskId} version={version} needsYou={props.needsYou ?? null} />}
      {works && (
        <div className="changes-bar">
          <button disabled={busy} onClick={() => run('Rebase', async () => {
            setConflicts([]);
            await call('task.rebase', { task_id: taskId }).catch((e: unknown) => {
              const d = e instanceof ApiError ? (e.details as { conflicts?: string[] } | null) : null;
              setConflicts(d?.conflicts ?? []);
              throw e;
            });
            return 'Rebased onto the base branch.';
          })}>
            Rebase
          </button>
          <button disabled={busy} onClick={() => setComposer('merge')}>
            Merge…
          </button>
          <button disabled={busy} onClick={() => run('Push', async () => {
            const r = await call('task.push', { task_id: taskId });
            return `Pushed ${r.pushed.map((p) => p.branch).join(', ')}.`;
          })}>
            Push
          </button>
          <button disabled={busy} onClick={() => setComposer('pr')}>
            Create PR…
          </button>
        </div>
      )}
      {note && (
        <p
          role="status"
          data-testid="ship-note"
          data-ok={note.ok ? 'yes' : 'no'}
          className={note.ok ? 'ship-note ok' : 'ship-note refused'}
        >
          {note.text}
        </p>
      )}
      {composer === 'pr' && (
        <PrComposer
          taskId={taskId}
          bases={status?.map((s) => s.base_branch) ?? []}
          kept={prKept}
          onClose={() => setComposer(null)}
          onSend={(request) => {
            setComposer(null);
            // Kept until the pull request is opened: a refusal loses nothing typed.
            setPrKept(request);
            void run('Create PR', async () => {
              const r = await call('task.pr.create', { task_id: taskId, ...request });
              setPrKept(null);
              return `Opened ${r.pull_requests.map((p) => p.url).join(', ')}.`;
            });
          }}
        />
      )}
      {composer === 'merge' && (
        <MergeComposer
          taskId={taskId}
          bases={status?.map((s) => s.base_branch) ?? []}
          dirty={status?.reduce((n, s) => n + s.dirty.uncommitted + s.dirty.untracked, 0) ?? 0}
          onClose={() => setComposer(null)}
          onSend={(request) => {
            setComposer(null);
            void run('Merge', async () => {
              const r = await call('task.merge', { task_id: taskId, ...request });
              return `Merged into ${r.merged.map((m) => m.base_branch).join(', ')}.`;
            });
          }}
        />
      )}
      {conflicts.length > 0 && (
        <button disabled={busy} onClick={() => run('Asking the agent', async () => {
          const { task } = await call('task.get', { id: taskId });
          if (!task.primary_session_id) throw new Error('the task has no session; launch one first');
          const content =
            `Rebasing this branch onto its base branch conflicts in: ${conflicts.join(', ')}. ` +
            'Rebase onto the base branch, resolve the conflicts in these files, and finish the rebase.';
          const r = await call('message.add', { session_id: task.primary_session_id, content });
          setConflicts([]);
          return r.status === 'queued' ? 'Asked the agent (queued).' : 'Asked the agent to resolve the conflicts.';
        })}>
          Ask the agent to resolve
        </button>
      )}
    </section>
  );
}

/** The task's title and description, to prefill a composer (`null` until read). */
function useTaskText(taskId: string): { title: string; description: string } | null {
  const [text, setText] = useState<{ title: string; description: string } | null>(null);
  useEffect(() => {
    let stop = false;
    call('task.get', { id: taskId }).then(
      (r) => !stop && setText({ title: r.task.title, description: r.task.description }),
      () => !stop && setText({ title: '', description: '' }),
    );
    return () => {
      stop = true;
    };
  }, [taskId]);
  return text;
}

/** What a pull request is opened with: nothing is sent before the person says so. */
type PrRequest = { title: string; body: string; draft: boolean };

function PrComposer(props: {
  taskId: string;
  bases: string[];
  /** What was sent last and refused: shown again rather than the task's text. */
  kept: PrRequest | null;
  onClose: () => void;
  onSend: (request: PrRequest) => void;
}) {
  const task = useTaskText(props.taskId);
  if (task === null) return null;
  const { kept } = props;
  return <PrForm {...props} title={kept?.title ?? task.title} body={kept?.body ?? task.description} draft={kept?.draft ?? false} />;
}

function PrForm(props: {
  bases: string[];
  title: string;
  body: string;
  draft: boolean;
  onClose: () => void;
  onSend: (request: PrRequest) => void;
}) {
  const [title, setTitle] = useState(props.title);
  const [body, setBody] = useState(props.body);
  const [draft, setDraft] = useState(props.draft);
  return (
    <Dialog title="Create pull request" onClose={props.onClose}>
      <form
        className="form"
        onSubmit={(e) => {
          e.preventDefault();
          if (title.trim()) props.onSend({ title: title.trim(), body, draft });
        }}
      >
        <p className="hint" data-testid="pr-base">
          Into <code>{props.bases.join(', ') || 'the base branch'}</code> (the task's base branch; the branch is pushed
          first when the remote lacks it).
        </p>
        <label>
          Title
          <input value={title} onChange={(e) => setTitle(e.target.value)} required />
        </label>
        <label>
          Description
          <textarea rows={6} value={body} onChange={(e) => setBody(e.target.value)} />
        </label>
        <label className="check">
          <input type="checkbox" checked={draft} onChange={(e) => setDraft(e.target.checked)} />
          Draft
        </label>
        <div className="row">
          <button type="button" onClick={props.onClose}>
            Cancel
          </button>
          <button className="primary" type="submit" disabled={!title.trim()}>
            Create pull request
          </button>
        </div>
      </form>
    </Dialog>
  );
}

const STRATEGIES: [MergeStrategyDto, string][] = [
  ['squash', 'Squash: one commit'],
  ['merge', 'Merge commit'],
  ['fast_forward', 'Fast-forward only'],
];

/** How the task branch goes into its base: the strategy and the commit's message. */
function MergeComposer(props: {
  taskId: string;
  bases: string[];
  /** Uncommitted and untracked files: a merge lands commits only. */
  dirty: number;
  onClose: () => void;
  onSend: (request: { strategy: MergeStrategyDto; message?: string }) => void;
}) {
  const task = useTaskText(props.taskId);
  if (task === null) return null;
  return <MergeForm {...props} message={task.title} />;
}

function MergeForm(props: {
  bases: string[];
  dirty: number;
  message: string;
  onClose: () => void;
  onSend: (request: { strategy: MergeStrategyDto; message?: string }) => void;
}) {
  const [strategy, setStrategy] = useState<MergeStrategyDto>('squash');
  const [message, setMessage] = useState(props.message);
  return (
    <Dialog title="Merge into the base branch" onClose={props.onClose}>
      <form
        className="form"
        onSubmit={(e) => {
          e.preventDefault();
          // A fast-forward makes no commit: it has no message.
          props.onSend(strategy === 'fast_forward' ? { strategy } : { strategy, message: message.trim() || undefined });
        }}
      >
        <p className="hint">
          Into <code>{props.bases.join(', ') || 'the base branch'}</code>, on this machine.
        </p>
        {props.dirty > 0 && (
          <p className="banner warn" role="alert" data-testid="merge-dirty">
            {props.dirty} uncommitted file{props.dirty === 1 ? ' is' : 's are'} not part of the merge: only commits
            land. Commit them first to include them.
          </p>
        )}
        <label>
          Strategy
          <select value={strategy} onChange={(e) => setStrategy(e.target.value as MergeStrategyDto)}>
            {STRATEGIES.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </label>
        {strategy !== 'fast_forward' && (
          <label>
            Commit message
            <textarea rows={3} value={message} onChange={(e) => setMessage(e.target.value)} />
          </label>
        )}
        <div className="row">
          <button type="button" onClick={props.onClose}>
            Cancel
          </button>
          <button className="primary" type="submit">
            Merge
          </button>
        </div>
      </form>
    </Dialog>
  );
}
