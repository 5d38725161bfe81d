// Shipping a task from its Changes tab: where the branch stands against its base
// (`task.git_status`), Rebase, Merge (with a confirmation), Push, Create PR, and review
// comments sent to the agent as one prompt (`review.comment.*`, `review.submit`).
import { useCallback, useEffect, useState } from 'react';
import { ApiError, call, errorText } from '../api/client';
import type { GitStatusDto, ReviewCommentDto } from '../api/types';
import { useMutation } from '../lib/useMutation';

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

export function ShipPanel(props: { taskId: string; version: number; onChanged: () => void }) {
  const { taskId, version, onChanged } = props;
  const [status, setStatus] = useState<GitStatusDto[] | null>(null);
  const [note, setNote] = useState<string | null>(null);
  // An action's outcome, success or refusal, is the one note under the buttons.
  const { busy, run: mutate } = useMutation(setNote);
  const [comments, setComments] = useState<ReviewCommentDto[]>([]);
  const [path, setPath] = useState('');
  const [line, setLine] = useState('1');
  const [text, setText] = useState('');
  // Files a refused rebase listed: the agent can be asked to resolve them.
  const [conflicts, setConflicts] = useState<string[]>([]);

  const load = useCallback(() => {
    call('task.git_status', { task_id: taskId })
      .then((r) => setStatus(r.repositories))
      .catch((e: unknown) => setNote(errorText(e)));
    call('review.comment.list', { task_id: taskId })
      .then((r) => setComments(r.comments))
      .catch((e: unknown) => setNote(errorText(e)));
  }, [taskId]);
  useEffect(load, [load, version]);

  const run = (what: string, act: () => Promise<string>) =>
    mutate(
      async () => {
        setNote(await act());
        onChanged(); // reads the diff again, then this panel (`version`)
      },
      { describe: (e) => `${what} refused: ${refusal(e)}` },
    );

  const open = comments.filter((c) => !c.sent_at);
  return (
    <section className="ship" aria-label="Ship">
      {status?.map((s) => <StatusLine key={s.repository_id} s={s} />)}
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
        <button disabled={busy} onClick={() => {
          if (!window.confirm('Squash-merge the task branch into its base branch?')) return;
          void run('Merge', async () => {
            const r = await call('task.merge', { task_id: taskId, strategy: 'squash' });
            return `Merged into ${r.merged.map((m) => m.base_branch).join(', ')}.`;
          });
        }}>
          Merge
        </button>
        <button disabled={busy} onClick={() => run('Push', async () => {
          const r = await call('task.push', { task_id: taskId });
          return `Pushed ${r.pushed.map((p) => p.branch).join(', ')}.`;
        })}>
          Push
        </button>
        <button disabled={busy} onClick={() => run('Create PR', async () => {
          const r = await call('task.pr.create', { task_id: taskId });
          return `Opened ${r.pull_requests.map((p) => p.url).join(', ')}.`;
        })}>
          Create PR
        </button>
      </div>
      {note && <p role="status" data-testid="ship-note">{note}</p>}
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
      <form
        className="review-box"
        aria-label="Review comment"
        onSubmit={(e) => {
          e.preventDefault();
          void run('Comment', async () => {
            await call('review.comment.add', { task_id: taskId, path, line: Number(line), text });
            setText('');
            return 'Comment saved.';
          });
        }}
      >
        <label>
          File <input value={path} onChange={(e) => setPath(e.target.value)} required />
        </label>
        <label>
          Line <input type="number" min={1} value={line} onChange={(e) => setLine(e.target.value)} required />
        </label>
        <label>
          Comment <input value={text} onChange={(e) => setText(e.target.value)} required />
        </label>
        <button type="submit" disabled={busy}>Add comment</button>
      </form>
      <ul aria-label="Review comments">
        {comments.map((c) => (
          <li key={c.id} data-sent={c.sent_at ? 'yes' : 'no'}>
            <code>{c.path}:{c.line}</code> {c.quote && <q>{c.quote}</q>} {c.text}
            {c.sent_at && <span className="hint"> (sent)</span>}
          </li>
        ))}
      </ul>
      <button disabled={busy || open.length === 0} onClick={() => run('Send review', async () => {
        const r = await call('review.submit', { task_id: taskId });
        return `Sent ${r.comments.length} comment${r.comments.length === 1 ? '' : 's'} to the agent${r.queued ? ' (queued)' : ''}.`;
      })}>
        Send review to agent
      </button>
    </section>
  );
}
