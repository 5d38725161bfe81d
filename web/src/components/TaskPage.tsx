// The task page: title, step and state, session tabs (several sessions per task), the chat of
// the selected session, the Changes tab (with the chat beside the diff on a wide screen, so a
// review goes on while talking to the agent), and the Terminal tab (shells and dev servers).
import { useEffect, useState } from 'react';
import { call, errorText } from '../api/client';
import type { SessionDto } from '../api/types';
import { useData } from '../lib/data';
import { useRole } from '../lib/me';
import { navigate, type TaskTab, taskPath } from '../lib/router';
import { useTask } from '../lib/task';
import { usePhone, useWide } from '../lib/useWide';
import { NEEDS_YOU_LABEL, usePageTitle } from '../lib/title';
import { toast } from '../lib/toast';
import { ChangesTab } from './ChangesTab';
import { FilesTab } from './FilesTab';
import { Dialog } from './Dialog';
import { ErrorBanner } from './ErrorBanner';
import { RoleNote, VIEWER_NOTE } from './RoleNote';
import { SessionView } from './SessionView';
import { AttemptsTab } from './AttemptsTab';
import { StartAttempts } from './StartAttempts';
import { StartSession } from './StartSession';
import { StateBadge } from './StateBadge';
import { StepControls } from './StepControls';
import { TaskRelations } from './TaskRelations';
import { DeleteTaskDialog, EditTaskDialog } from './TaskEdit';
import { TerminalsTab } from './TerminalsTab';

/** The narrowest window (px) that shows the chat beside the diff. */
const WIDE_SPLIT = 1280;


export function TaskPage(props: { taskId: string; sessionId: string | null; tab: TaskTab }) {
  const data = useData();
  const { workflows, profiles } = data;
  const { task, sessions, deleted, error, retry, addSession } = useTask(props.taskId);
  const [actionError, setActionError] = useState<string | null>(null);
  const [launching, setLaunching] = useState(false);
  const [racing, setRacing] = useState(false);
  const [editing, setEditing] = useState(false);
  const [deleting, setDeleting] = useState(false);
  // Wide enough for the diff and the chat side by side.
  const wide = useWide(WIDE_SPLIT);
  const phone = usePhone();
  const [menuOpen, setMenuOpen] = useState(false);
  // A viewer reads the task; a member works on it (issue 49).
  const works = useRole(task?.workspace_id).can('member');

  const profileName = (s: SessionDto) => profiles.find((p) => p.id === s.agent_profile_id)?.name ?? 'Session';
  const workflow = workflows.find((w) => w.id === task?.workflow_id);
  const step = workflow?.steps.find((s) => s.id === task?.step_id);
  const active =
    sessions.find((s) => s.id === props.sessionId) ??
    sessions.find((s) => s.id === task?.primary_session_id) ??
    sessions[sessions.length - 1] ??
    null;

  // A task opened by its link from another workspace (a notification, a bookmark) switches
  // the header to its workspace and board: its steps are there, and ← leads to its board.
  const taskWorkspace = task?.workspace_id;
  const taskWorkflow = task?.workflow_id;
  const shownWorkspace = data.workspace?.id;
  useEffect(() => {
    if (!taskWorkspace || !taskWorkflow || !shownWorkspace || taskWorkspace === shownWorkspace) return;
    data.setWorkspaceId(taskWorkspace);
    data.setWorkflowId(taskWorkflow);
  }, [taskWorkspace, taskWorkflow, shownWorkspace]);

  usePageTitle(
    task ? `${task.needs_you ? 'Needs you · ' : ''}${task.title} — Kandev` : 'Kandev',
    !!task?.needs_you,
  );

  // Esc goes back to the board (not while typing, nor from a dialog or menu).
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'Escape' || e.defaultPrevented) return;
      const t = e.target as HTMLElement | null;
      if (t?.closest('input, textarea, select, dialog, [role="menu"]')) return;
      navigate('/');
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, []);

  if (error && !task) {
    return (
      <div className="empty-page" role="alert">
        {error}{' '}
        <button className="link" onClick={retry}>
          Retry
        </button>{' '}
        <button className="link" onClick={() => navigate('/')}>
          Back to the board
        </button>
      </div>
    );
  }
  if (!task) return <div className="empty-page">Loading…</div>;
  // The diff with the chat beside it: the Changes tab on a wide screen, with a session to show.
  const split = wide && props.tab === 'changes' && active !== null;

  return (
    <div className={split ? 'task-page task-page-split' : 'task-page'}>
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
            {task.needs_you ? (
              <span className="badge needs-you-badge" data-testid="needs-you">
                needs you: {NEEDS_YOU_LABEL[task.needs_you] ?? task.needs_you}
              </span>
            ) : (
              task.state !== 'TODO' && <StateBadge state={task.state} />
            )}
            {task.archived_at && <span className="badge">archived</span>}
          </div>
        </div>
        <span className="spacer" />
        {works && phone && (
          // On a phone the task's own actions fold into one button, so the chat keeps the
          // height (issue 45 item 26).
          <button
            className="icon task-more"
            aria-label="Task actions"
            aria-expanded={menuOpen}
            onClick={() => setMenuOpen(!menuOpen)}
          >
            ⋯
          </button>
        )}
        {works && (!phone || menuOpen) && (
          <div className={phone ? 'task-actions task-menu' : 'task-actions'} onClick={() => setMenuOpen(false)}>
            <button onClick={() => setEditing(true)}>Edit task</button>
            <button className="danger-outline" onClick={() => setDeleting(true)}>
              Delete task
            </button>
            {!task.archived_at && (
              <button
                onClick={() =>
                  call('task.archive', { id: task.id })
                    .then(() => {
                      navigate('/');
                      toast(`Archived “${task.title}”`, { undo: () => call('task.unarchive', { id: task.id }) });
                    })
                    .catch((e: unknown) => setActionError(errorText(e)))
                }
              >
                Archive
              </button>
            )}
          </div>
        )}
      </div>
      {works && workflow && !task.archived_at && (
        <StepControls task={task} steps={workflow.steps} onError={setActionError} />
      )}
      {deleted && (
        <div className="banner error" role="alert">
          This task was deleted.
        </div>
      )}
      <ErrorBanner error={error} onRetry={retry} testId="task-error" />
      <ErrorBanner error={actionError} onDismiss={() => setActionError(null)} testId="task-action-error" />
      {task.description && (
        <details className="task-description">
          <summary>Description</summary>
          <p>{task.description}</p>
        </details>
      )}
      <TaskRelations task={task} />
      <div className="tabs" role="tablist" aria-label="Sessions, changes and terminals">
        {sessions.map((s, i) => (
          <button
            key={s.id}
            role="tab"
            aria-selected={props.tab === 'chat' && active?.id === s.id}
            className={props.tab === 'chat' && active?.id === s.id ? 'active' : ''}
            onClick={() => navigate(taskPath(task.id, s.id), true)}
            data-session-id={s.id}
          >
            {s.name ?? (s.attempt != null ? `Attempt ${s.attempt}` : `${profileName(s)} ${i + 1}`)}
            {s.id === task.primary_session_id && <span className="primary-dot" title="primary session" />}
          </button>
        ))}
        {works && (
          <button className="tab-add" onClick={() => setLaunching(true)} aria-label="New session">
            {phone ? '+' : '+ Session'}
          </button>
        )}
        {works && task.repository_ids.length === 1 && !task.archived_at && (
          <button className="tab-add" onClick={() => setRacing(true)} aria-label="Start attempts" title="Several agents race on this task, each on a branch of its own">
            {phone ? '⇉' : 'Attempts…'}
          </button>
        )}
        <span className="spacer" />
        {(props.tab === 'attempts' || sessions.some((s) => s.attempt != null)) && (
          <button
            role="tab"
            aria-selected={props.tab === 'attempts'}
            className={props.tab === 'attempts' ? 'active' : ''}
            onClick={() => navigate(taskPath(task.id, active?.id, 'attempts'), true)}
          >
            Attempts
          </button>
        )}
        <button
          role="tab"
          aria-selected={props.tab === 'changes'}
          className={props.tab === 'changes' ? 'active' : ''}
          onClick={() => navigate(taskPath(task.id, active?.id, 'changes'), true)}
        >
          Changes
        </button>
        <button
          role="tab"
          aria-selected={props.tab === 'files'}
          className={props.tab === 'files' ? 'active' : ''}
          onClick={() => navigate(taskPath(task.id, active?.id, 'files'), true)}
        >
          Files
        </button>
        <button
          role="tab"
          aria-selected={props.tab === 'terminal'}
          className={props.tab === 'terminal' ? 'active' : ''}
          onClick={() => navigate(taskPath(task.id, active?.id, 'terminal'), true)}
        >
          Terminal
        </button>
      </div>
      {split && active ? (
        // The chat on the left, under its session tab; the diff on the right, under Changes.
        <div className="review-split">
          <aside className="review-split-chat" aria-label="Chat beside the diff">
            <SessionView
              key={active.id}
              sessionId={active.id}
              workspaceId={task.workspace_id}
              primary={active.id === task.primary_session_id}
            />
          </aside>
          <ChangesTab
            taskId={task.id}
            repositoryIds={task.repository_ids}
            sessionId={task.primary_session_id}
            needsYou={task.needs_you}
          />
        </div>
      ) : props.tab === 'changes' ? (
        <ChangesTab
            taskId={task.id}
            repositoryIds={task.repository_ids}
            sessionId={task.primary_session_id}
            needsYou={task.needs_you}
          />
      ) : props.tab === 'attempts' ? (
        <AttemptsTab taskId={task.id} sessions={sessions} profileName={profileName} onPicked={retry} />
      ) : props.tab === 'files' ? (
        <FilesTab taskId={task.id} />
      ) : props.tab === 'terminal' ? (
        <TerminalsTab taskId={task.id} workspaceId={task.workspace_id} archived={!!task.archived_at} />
      ) : active ? (
        <SessionView
          key={active.id}
          sessionId={active.id}
          workspaceId={task.workspace_id}
          primary={active.id === task.primary_session_id}
        />
      ) : works ? (
        <StartSession taskId={task.id} defaultProfile={task.agent_profile_id} prompt={task.description || task.title} />
      ) : (
        <div className="form start-session">
          <p>No agent session yet.</p>
          <RoleNote>{VIEWER_NOTE}</RoleNote>
        </div>
      )}
      {racing && (
        <Dialog title="Start attempts" onClose={() => setRacing(false)}>
          <StartAttempts
            taskId={task.id}
            defaultProfile={task.agent_profile_id}
            onStarted={(made) => {
              setRacing(false);
              made.forEach(addSession);
              navigate(taskPath(task.id, made[0]?.id, 'attempts'), true);
            }}
          />
        </Dialog>
      )}
      {editing && <EditTaskDialog task={task} onClose={() => setEditing(false)} />}
      {deleting && <DeleteTaskDialog task={task} onClose={() => setDeleting(false)} />}
      {launching && (
        <Dialog title="New session" onClose={() => setLaunching(false)}>
          <StartSession
            taskId={task.id}
            defaultProfile={task.agent_profile_id}
            prompt=""
            onStarted={(s) => {
              setLaunching(false);
              addSession(s);
              navigate(taskPath(task.id, s.id), true);
            }}
          />
        </Dialog>
      )}
    </div>
  );
}
