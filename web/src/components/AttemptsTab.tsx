// The task's attempts side by side (issue 48): each one's state, usage, branch and what it
// changed, its diff, its chat, and "Pick this one", which makes its branch the task's and
// ends the others.
import { useCallback, useState } from 'react';
import { call, errorText } from '../api/client';
import type { FileChangeDto, Notification, SessionDto, TaskAttemptDto } from '../api/types';
import { useRole } from '../lib/me';
import { navigate, taskPath } from '../lib/router';
import { toast } from '../lib/toast';
import { useLiveQuery } from '../lib/useLiveQuery';
import { useMutation } from '../lib/useMutation';
import { Dialog } from './Dialog';
import { FileDiffs } from './GitPanel';
import { UsageBadge } from './session/Badges';
import { StateBadge } from './StateBadge';

/** One attempt, live: its session's changes follow its topic; what it changed is read again
 * when a turn of it ends. */
function useAttempt(taskId: string, sessionId: string) {
  const load = useCallback(
    () =>
      call('task.attempt.list', { task_id: taskId, session_id: sessionId }).then(
        (r) => r.attempts[0] ?? null,
      ),
    [taskId, sessionId],
  );
  const apply = useCallback(
    (d: TaskAttemptDto | null, n: Notification, control: { reload: () => void }): TaskAttemptDto | null => {
      if (!d) return d;
      switch (n.action) {
        case 'session.updated':
        case 'session.state_changed':
        case 'session.mode_changed':
        case 'session.config_changed':
          return { ...d, session: n.payload.session };
        case 'session.turn.completed':
          control.reload();
          return d;
        default:
          return d;
      }
    },
    [],
  );
  return useLiveQuery<TaskAttemptDto | null>(`session:${sessionId}`, load, apply);
}

function AttemptCard(props: { taskId: string; session: SessionDto; profileName: string; onPicked: () => void }) {
  const { taskId, session } = props;
  const attempt = useAttempt(taskId, session.id);
  const action = useMutation();
  // Picking an attempt is a member's (issue 49).
  const works = useRole().can('member');
  const [diff, setDiff] = useState<FileChangeDto[] | null>(null);
  const [asking, setAsking] = useState(false);
  const a = attempt.data;
  const live = a?.session ?? session;
  const title = `Attempt ${session.attempt ?? '?'}`;

  const showDiff = () =>
    action.run(async () => setDiff((await call('task.attempt.diff', { task_id: taskId, session_id: session.id })).files), {
      describe: (e) => `Diff of ${title}: ${errorText(e)}`,
    });
  const pick = () =>
    action.run(
      async () => {
        const picked = await call('task.attempt.pick', { task_id: taskId, session_id: session.id });
        setAsking(false);
        const kept = picked.worktrees_kept.map((k) => k.path);
        toast(
          `${title} picked: its branch ${picked.branch} is the task's` +
            (kept.length ? `. Kept on disk with uncommitted work: ${kept.join(', ')}` : ''),
        );
        props.onPicked();
        navigate(taskPath(taskId, session.id), true);
      },
      { describe: (e) => `Pick ${title}: ${errorText(e)}` },
    );

  return (
    <article className="attempt-card" aria-label={title} data-session-id={session.id}>
      <header className="row">
        <strong>{title}</strong>
        <span className="hint">{props.profileName}</span>
        <span className="spacer" />
        <StateBadge state={live.state} />
      </header>
      <UsageBadge session={live} />
      {attempt.error && (
        <p className="form-error" role="alert">
          {attempt.error}
        </p>
      )}
      {a?.branch ? (
        <p className="attempt-branch">
          <code>{a.branch}</code>
        </p>
      ) : (
        <p className="hint">{attempt.loading ? 'Reading…' : 'No worktree yet: the agent is starting.'}</p>
      )}
      {a && a.branch && (
        <p className="attempt-stats" data-testid="attempt-stats">
          {a.files} file{a.files === 1 ? '' : 's'} changed <span className="adds">+{a.additions}</span>{' '}
          <span className="dels">−{a.deletions}</span>
        </p>
      )}
      {live.last_error && <p className="form-error">{live.last_error.message}</p>}
      <div className="actions">
        <button type="button" disabled={action.busy || !a?.branch} onClick={() => void showDiff()}>
          Show diff
        </button>
        <button type="button" onClick={() => navigate(taskPath(taskId, session.id), true)}>
          Open chat
        </button>
        {works && (
          <button type="button" className="primary" disabled={action.busy || !a?.branch} onClick={() => setAsking(true)}>
            Pick this one
          </button>
        )}
      </div>
      {action.error && (
        <p className="form-error" role="alert">
          {action.error}
        </p>
      )}
      {diff && (
        <Dialog title={`Diff of ${title}`} wide onClose={() => setDiff(null)}>
          {diff.length === 0 ? <p className="hint">This attempt changed no file yet.</p> : <FileDiffs files={diff} />}
        </Dialog>
      )}
      {asking && (
        <Dialog title={`Pick ${title}?`} onClose={() => setAsking(false)}>
          <p>
            Its branch <code>{a?.branch}</code> becomes the task's and its session the primary one. Every other session of the task is
            stopped, and the other attempts' worktrees and the task's earlier worktree are removed; one with uncommitted work is kept
            on disk and listed. Every branch stays.
          </p>
          {live.state === 'RUNNING' && <p className="banner warn">{title}'s agent is still working; what it writes from now on stays in the task.</p>}
          <div className="actions">
            <button onClick={() => setAsking(false)}>Keep comparing</button>
            <button className="primary" disabled={action.busy} onClick={() => void pick()}>
              Pick {title}
            </button>
          </div>
        </Dialog>
      )}
    </article>
  );
}

export function AttemptsTab(props: {
  taskId: string;
  sessions: SessionDto[];
  profileName: (s: SessionDto) => string;
  /** The attempts are over: the task's sessions are read again. */
  onPicked: () => void;
}) {
  const attempts = props.sessions.filter((s) => s.attempt != null);
  if (attempts.length === 0) {
    return <p className="empty-page">No attempts are running. Start some with “Attempts…”.</p>;
  }
  return (
    <section className="attempts" aria-label="Attempts side by side">
      {attempts.map((s) => (
        <AttemptCard key={s.id} taskId={props.taskId} session={s} profileName={props.profileName(s)} onPicked={props.onPicked} />
      ))}
    </section>
  );
}
