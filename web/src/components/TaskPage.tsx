// The task page: title, step and state, session tabs (several sessions per task), the chat of
// the selected session, and the Changes tab.
import { useEffect, useState } from 'react';
import { call, errorText } from '../api/client';
import { live } from '../api/live';
import type { SessionDto, TaskDto } from '../api/types';
import { useData } from '../lib/data';
import { navigate, taskPath } from '../lib/router';
import { ChangesTab } from './ChangesTab';
import { Dialog } from './Dialog';
import { SessionView } from './SessionView';
import { StateBadge } from './StateBadge';

export function TaskPage(props: { taskId: string; sessionId: string | null; tab: 'chat' | 'changes' }) {
  const { workflows, profiles } = useData();
  const [task, setTask] = useState<TaskDto | null>(null);
  const [sessions, setSessions] = useState<SessionDto[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [launching, setLaunching] = useState(false);
  const { taskId } = props;

  useEffect(() => {
    let stop = false;
    let sub: { close: () => void } | null = null;
    const reloadTask = () => void load().catch(() => {});
    const load = async () => {
      const [t, s] = await Promise.all([call('task.get', { id: taskId }), call('task.session.list', { task_id: taskId })]);
      if (stop) return;
      setTask(t.task);
      setSessions(s.sessions);
      setError(null);
      if (!sub) {
        sub = live.subscribe(`workspace:${t.task.workspace_id}`, (n) => {
          const changed = 'task' in n.payload ? n.payload.task : undefined;
          if (changed && changed.id === taskId) setTask(changed);
          if (n.action === 'task.deleted' && n.payload.id === taskId) setError('This task was deleted.');
          if (n.action === 'session.created' || n.action === 'session.deleted') {
            const sid = 'session' in n.payload ? n.payload.session.task_id : n.payload.task_id;
            if (sid === taskId) {
              call('task.session.list', { task_id: taskId })
                .then((r) => !stop && setSessions(r.sessions))
                .catch(() => {});
            }
          }
        }, reloadTask);
      }
    };
    load().catch((e: unknown) => !stop && setError(errorText(e)));
    const off = live.onReconnect(reloadTask);
    return () => {
      stop = true;
      sub?.close();
      off();
    };
  }, [taskId]);

  const workflow = workflows.find((w) => w.id === task?.workflow_id);
  const step = workflow?.steps.find((s) => s.id === task?.step_id);
  const active =
    sessions.find((s) => s.id === props.sessionId) ??
    sessions.find((s) => s.id === task?.primary_session_id) ??
    sessions[sessions.length - 1] ??
    null;

  if (error && !task) {
    return (
      <div className="empty-page" role="alert">
        {error}{' '}
        <button className="link" onClick={() => navigate('/')}>
          Back to the board
        </button>
      </div>
    );
  }
  if (!task) return <div className="empty-page">Loading…</div>;

  return (
    <div className="task-page">
      <div className="task-head">
        <button className="icon back" aria-label="Back to the board" onClick={() => navigate('/')}>
          ←
        </button>
        <div className="task-title-block">
          <h1>{task.title}</h1>
          <div className="task-meta">
            {step && (
              <span className="step-pill" data-testid="task-step">
                <span className="dot" style={{ background: step.color || 'var(--muted)' }} aria-hidden="true" />
                {step.name}
              </span>
            )}
            <StateBadge state={task.state} />
            {task.archived_at && <span className="badge">archived</span>}
          </div>
        </div>
        <span className="spacer" />
        {!task.archived_at && (
          <button
            onClick={() =>
              call('task.archive', { id: task.id })
                .then(() => navigate('/'))
                .catch((e: unknown) => setError(errorText(e)))
            }
          >
            Archive
          </button>
        )}
      </div>
      {error && (
        <div className="banner error" role="alert">
          {error}
        </div>
      )}
      {task.description && (
        <details className="task-description">
          <summary>Description</summary>
          <p>{task.description}</p>
        </details>
      )}
      <Relations task={task} />
      <div className="tabs" role="tablist" aria-label="Sessions and changes">
        {sessions.map((s, i) => (
          <button
            key={s.id}
            role="tab"
            aria-selected={props.tab === 'chat' && active?.id === s.id}
            className={props.tab === 'chat' && active?.id === s.id ? 'active' : ''}
            onClick={() => navigate(taskPath(task.id, s.id), true)}
            data-session-id={s.id}
          >
            {profiles.find((p) => p.id === s.agent_profile_id)?.name ?? 'Session'} {i + 1}
            {s.id === task.primary_session_id && <span className="primary-dot" title="primary session" />}
          </button>
        ))}
        <button className="tab-add" onClick={() => setLaunching(true)} aria-label="New session">
          + Session
        </button>
        <span className="spacer" />
        <button
          role="tab"
          aria-selected={props.tab === 'changes'}
          className={props.tab === 'changes' ? 'active' : ''}
          onClick={() => navigate(taskPath(task.id, active?.id, 'changes'), true)}
        >
          Changes
        </button>
      </div>
      {props.tab === 'changes' ? (
        <ChangesTab taskId={task.id} />
      ) : active ? (
        <SessionView key={active.id} sessionId={active.id} />
      ) : (
        <StartSession taskId={task.id} defaultProfile={task.agent_profile_id} prompt={task.description || task.title} />
      )}
      {launching && (
        <Dialog title="New session" onClose={() => setLaunching(false)}>
          <StartSession
            taskId={task.id}
            defaultProfile={task.agent_profile_id}
            prompt=""
            onStarted={(s) => {
              setLaunching(false);
              setSessions((list) => (list.some((x) => x.id === s.id) ? list : [...list, s]));
              navigate(taskPath(task.id, s.id), true);
            }}
          />
        </Dialog>
      )}
    </div>
  );
}

function StartSession(props: {
  taskId: string;
  defaultProfile: string | null;
  prompt: string;
  onStarted?: (s: SessionDto) => void;
}) {
  const { profiles } = useData();
  const [profile, setProfile] = useState(props.defaultProfile ?? profiles[0]?.id ?? '');
  const [prompt, setPrompt] = useState(props.prompt);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  return (
    <form
      className="form start-session"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        setError(null);
        try {
          const { session } = await call('session.launch', {
            task_id: props.taskId,
            agent_profile_id: profile || undefined,
            prompt: prompt.trim() ? prompt : undefined,
          });
          props.onStarted?.(session);
        } catch (err) {
          setError(errorText(err));
        } finally {
          setBusy(false);
        }
      }}
    >
      {!props.onStarted && <p>No agent session yet.</p>}
      <label>
        Agent profile
        <select value={profile} onChange={(e) => setProfile(e.target.value)}>
          {profiles.map((p) => (
            <option key={p.id} value={p.id}>
              {p.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        First message
        <textarea rows={4} value={prompt} onChange={(e) => setPrompt(e.target.value)} />
      </label>
      {error && (
        <p className="form-error" role="alert">
          {error}
        </p>
      )}
      <div className="actions">
        <button className="primary" type="submit" disabled={busy}>
          Start agent
        </button>
      </div>
    </form>
  );
}

/** The task's parent, blockers and subtasks (with their steps), live with the board. */
function Relations({ task }: { task: TaskDto }) {
  const { workflows } = useData();
  const [tasks, setTasks] = useState<TaskDto[]>([]);
  const { workflow_id: workflowId, workspace_id: workspaceId } = task;
  useEffect(() => {
    let stop = false;
    const load = () =>
      call('task.list', { workflow_id: workflowId })
        .then((r) => !stop && setTasks(r.tasks))
        .catch(() => {});
    const sub = live.subscribe(
      `workspace:${workspaceId}`,
      (n) => {
        if (n.action.startsWith('task.')) void load();
      },
      () => void load(),
    );
    void load();
    return () => {
      stop = true;
      sub.close();
    };
  }, [workflowId, workspaceId]);
  const steps = workflows.find((w) => w.id === workflowId)?.steps ?? [];
  const stepName = (t: TaskDto) => steps.find((s) => s.id === t.step_id)?.name ?? '';
  const subtasks = tasks.filter((t) => t.parent_id === task.id);
  const blockers = task.blocked_by.map((id) => tasks.find((t) => t.id === id)).filter((t): t is TaskDto => !!t);
  const parent = tasks.find((t) => t.id === task.parent_id);
  if (!subtasks.length && !blockers.length && !parent) return null;
  const link = (t: TaskDto) => (
    <li key={t.id}>
      <button className="link" onClick={() => navigate(taskPath(t.id))}>
        {t.title}
      </button>{' '}
      <span className="step-pill">{stepName(t)}</span>
    </li>
  );
  return (
    <div className="task-relations">
      {parent && (
        <p>
          Subtask of{' '}
          <button className="link" onClick={() => navigate(taskPath(parent.id))}>
            {parent.title}
          </button>
        </p>
      )}
      {blockers.length > 0 && (
        <section aria-label="Blocked by">
          <h2>Blocked by</h2>
          <ul>{blockers.map(link)}</ul>
        </section>
      )}
      {subtasks.length > 0 && (
        <section aria-label="Subtasks">
          <h2>Subtasks</h2>
          <ul data-testid="subtasks">{subtasks.map(link)}</ul>
        </section>
      )}
    </div>
  );
}
