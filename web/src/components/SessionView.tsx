// One session: state and controls (cancel, stop, reset context, resume, move to another
// agent, delete), the last error, the live transcript, the composer and the prompt queue.
// A terminal-UI session (issue 52) shows its agent's own terminal above the transcript, and
// leaves out the controls the server refuses for it (they are done in that terminal).
import { useEffect, useRef, useState } from 'react';
import { call, errorText } from '../api/client';
import type { ActionName, Actions, MessageDto, SessionDto } from '../api/types';
import { useRole } from '../lib/me';
import { moveBlocked } from '../lib/rebind';
import { useSession } from '../lib/session';
import { errorHint } from '../lib/sessionError';
import { toast } from '../lib/toast';
import { useMutation } from '../lib/useMutation';
import { usePhone } from '../lib/useWide';
import { VirtualList, type VirtualHandle } from '../lib/VirtualList';
import { Dialog } from './Dialog';
import { ErrorBanner } from './ErrorBanner';
import { RoleNote, VIEWER_NOTE } from './RoleNote';
import { MessageView } from './MessageView';
import { AuthMethods } from './session/AuthMethods';
import { AgentBadge, ModelBadge, UsageBadge } from './session/Badges';
import { LoginHint } from './session/LoginHint';
import { DeletedProfileBanner, MoveDialog } from './session/MoveSession';
import { Composer } from './session/Composer';
import { Pickers } from './session/Pickers';
import { QueuePanel } from './session/QueuePanel';
import { Questions } from './session/Questions';
import { RenameDialog } from './session/RenameDialog';
import { ResumeMenu } from './session/ResumeMenu';
import { TurnTools, useTurnCheckpoints } from './session/TurnTools';
import { TuiPanel, TuiScreenBadge } from './session/TuiPanel';
import { StateBadge } from './StateBadge';

const getKey = (m: MessageDto) => m.id;

declare global {
  interface Window {
    /** Figures read by the browser performance test. */
    __kandevPerf?: { transcriptFirstPageMs: number | null; transcriptRows: number; hasOlder: boolean };
  }
}

/** Why an agent's start is refused for a session whose profile was deleted. */
const DELETED_PROFILE_NOTE = 'Its agent profile was deleted: move the session to another agent';

/** The session's pill: an error while it waits with one (the agent crashed, a turn failed:
 * what the task's "needs you" says too), "stopped" while it waits with no agent running. */
function sessionBadge(state: string, session: SessionDto | null): { state: string; text?: string; label?: string } {
  if (state !== 'WAITING_FOR_INPUT' || !session) return { state };
  if (session.last_error) return { state: 'FAILED', label: session.last_error.message };
  if (session.deleted_profile) {
    return { state, text: 'no agent', label: DELETED_PROFILE_NOTE };
  }
  // A terminal-UI session speaks no ACP: it has no ACP session id even while its program runs.
  if (!session.terminal_ui && !session.acp_session_id) return { state, text: 'stopped', label: 'No agent runs: the next message starts it' };
  return { state };
}

export function SessionView({
  sessionId,
  workspaceId = null,
  primary = true,
}: {
  sessionId: string;
  /** The task's workspace: where `@name` finds saved prompts. */
  workspaceId?: string | null;
  /** Whether this is the task's primary session ("Make primary" is offered when not). */
  primary?: boolean;
}) {
  const s = useSession(sessionId);
  const [confirmDelete, setConfirmDelete] = useState(false);
  // A context reset drops the agent's memory of the conversation: asked first, like a delete.
  const [confirmReset, setConfirmReset] = useState(false);
  const [renaming, setRenaming] = useState(false);
  const [moving, setMoving] = useState(false);
  // The toolbar's actions: one at a time, the failure shown under the bar with its label.
  const actions = useMutation();
  const list = useRef<VirtualHandle | null>(null);
  const [atBottom, setAtBottom] = useState(true);
  const session = s.session;
  const state = session?.state ?? 'CREATED';
  const busy = state === 'RUNNING' || state === 'STARTING' || s.turnOpen;
  // The server refuses a move while a turn or a start runs (`BUSY`): said before it is asked.
  const moveRefused = moveBlocked(state, s.turnOpen);
  // A terminal-UI session: its screen is the main panel, and the ACP-only controls (mode and
  // config pickers, reset context, move to another agent, revert) are the terminal's to do.
  const tui = !!session?.terminal_ui;
  // The server clears the ACP session id when the agent's process ends (stopped, exited); a
  // terminal-UI session's program runs until it is stopped (CANCELLED) or fails.
  const agentLive = tui ? state !== 'CANCELLED' && state !== 'FAILED' && state !== 'CREATED' : !!session?.acp_session_id;
  // The server refuses to start the agent of a session whose profile was deleted.
  const orphaned = !!session?.deleted_profile && !session.agent_profile_id;
  const phone = usePhone();
  const [more, setMore] = useState(false);
  // A viewer reads the conversation; the controls and the composer are a member's (issue 49).
  const works = useRole(workspaceId ?? undefined).can('member');
  // A turn held on a permission request or a question waits for the person, not the agent.
  const waitingOnYou =
    busy &&
    (s.questions.some((q) => q.status === 'pending') ||
      s.transcript.messages.some(
        (m) => m.kind === 'permission_request' && (m.metadata.status || 'pending') === 'pending',
      ));

  // A turn's checkpoints change when a turn ends (the state moves) and when a revert notes it.
  const reverts = s.transcript.messages.filter((m) => m.kind === 'status' && m.metadata.reason === 'reverted').length;
  const checkpoints = useTurnCheckpoints(sessionId, `${state}:${reverts}`);

  useEffect(() => {
    window.__kandevPerf = {
      transcriptFirstPageMs: s.firstPageMs,
      transcriptRows: s.transcript.messages.length,
      hasOlder: s.transcript.hasOlder,
    };
  }, [s.firstPageMs, s.transcript.messages.length, s.transcript.hasOlder]);

  const run = <A extends ActionName>(label: string, action: A, payload: Actions[A]['request'], done?: string) =>
    actions.run(
      async () => {
        await call(action, payload);
        if (done) toast(done);
      },
      { describe: (e) => `${label}: ${errorText(e)}` },
    );

  const cancel = (
    <button disabled={!busy || actions.busy} onClick={() => run('Cancel', 'agent.cancel', { session_id: sessionId })}>
      Cancel turn
    </button>
  );

  if (s.deleted) {
    return <div className="empty-page">This session was deleted.</div>;
  }
  if (s.error && !session) {
    return <ErrorBanner error={s.error} onRetry={s.retry} testId="session-error" />;
  }

  return (
    <div className={tui ? 'session tui' : 'session'} data-session-id={sessionId} data-state={state}>
      <div className="session-bar">
        {waitingOnYou ? (
          <span className="badge needs-you-badge">{works ? 'waiting for you' : 'waiting for an answer'}</span>
        ) : (
          <StateBadge {...sessionBadge(state, session)} />
        )}
        <span className="session-state" data-testid="session-state">
          {state}
        </span>
        {tui && session && <TuiScreenBadge screen={session.tui_screen} />}
        {session?.name && (
          <strong className="session-name" data-testid="session-name">
            {session.name}
          </strong>
        )}
        {phone && (
          // A phone shows the state, Cancel while a turn runs, and the rest behind More: the
          // chat keeps the height (issue 45 item 26).
          <>
            <span className="spacer" />
            {works && busy && cancel}
            <button className="session-more-toggle" aria-expanded={more} onClick={() => setMore(!more)}>
              {more ? 'Less' : 'More…'}
            </button>
          </>
        )}
        {(!phone || more) && (
          <>
            {session && <AgentBadge session={session} />}
            {session?.plan_mode && <span className="badge plan">plan mode</span>}
            {session?.session_mode && <span className="badge">mode: {session.session_mode}</span>}
            {session && <ModelBadge session={session} />}
            {session && <UsageBadge session={session} />}
            {works && session && !tui && <Pickers session={session} onError={actions.setError} />}
            <span className="spacer" />
            {works && (
              <div className="session-actions" role="toolbar" aria-label="Session controls">
                {!phone && cancel}
                <button
                  disabled={busy || actions.busy || orphaned || !s.transcript.messages.some((m) => m.kind === 'user')}
                  title={orphaned ? DELETED_PROFILE_NOTE : 'Send your last message again as a new turn'}
                  onClick={() => run('Retry', 'session.retry', { id: sessionId })}
                >
                  Retry last message
                </button>
                <button disabled={actions.busy} onClick={() => setRenaming(true)}>
                  Rename
                </button>
                {!tui && (
                  <button
                    disabled={actions.busy || moveRefused !== null}
                    title={moveRefused ?? 'Go on with another agent profile in the same worktree'}
                    onClick={() => setMoving(true)}
                  >
                    Move to another agent…
                  </button>
                )}
                {!primary && (
                  <button
                    disabled={actions.busy}
                    title="The workflow's steps and the card follow the primary session"
                    onClick={() => run('Make primary', 'session.set_primary', { id: sessionId }, 'This session is now the primary one')}
                  >
                    Make primary
                  </button>
                )}
                {!tui && (
                  <button
                    disabled={actions.busy || orphaned}
                    title={orphaned ? DELETED_PROFILE_NOTE : undefined}
                    onClick={() => setConfirmReset(true)}
                  >
                    Reset context
                  </button>
                )}
                <ResumeMenu
                  disabled={actions.busy || orphaned}
                  title={orphaned ? DELETED_PROFILE_NOTE : undefined}
                  onResume={(mode) => run('Resume', 'session.resume', { id: sessionId, mode })}
                />
                <button
                  disabled={actions.busy || (!busy && !agentLive)}
                  title={!busy && !agentLive ? 'No agent runs for this session: the next message starts it' : undefined}
                  onClick={() =>
                    run('Stop', 'session.stop', { id: sessionId }, 'Agent stopped: the next message resumes the conversation')
                  }
                >
                  Stop
                </button>
                <button className="danger-outline" disabled={actions.busy} onClick={() => setConfirmDelete(true)}>
                  Delete
                </button>
              </div>
            )}
          </>
        )}
      </div>
      {session?.last_error && (
        <div className="banner error last-error" role="alert" data-testid="last-error">
          <strong>{session.last_error.message}</strong>
          <span className="hint">
            {' '}
            ({session.last_error.code}) · {errorHint(session.last_error.code)}
          </span>
          {session.last_error.code === 'agent_auth_required' && <LoginHint profileId={session.agent_profile_id} />}
          {works && session.last_error.code === 'agent_auth_required' && (
            <AuthMethods
              details={session.last_error.details}
              disabled={actions.busy}
              onPick={(method) =>
                run('Log in', 'session.authenticate', { id: sessionId, method_id: method.id }, `Authenticated with ${method.name}`)
              }
            />
          )}
        </div>
      )}
      <ErrorBanner error={s.error} onRetry={s.retry} onDismiss={s.dismissError} testId="session-error" />
      <ErrorBanner error={actions.error} onDismiss={() => actions.setError(null)} testId="action-error" />
      {tui && session && <TuiPanel session={session} />}
      <VirtualList
        items={s.transcript.messages}
        getKey={getKey}
        estimate={64}
        stickToBottom
        handle={list}
        className="transcript"
        role="log"
        ariaLabel="Conversation"
        onReachTop={s.loadOlder}
        onAtBottomChange={setAtBottom}
        render={(m) => {
          const turn = m.kind === 'user' ? checkpoints.get(m.id) : undefined;
          return turn ? (
            <>
              <MessageView message={m} />
              <TurnTools sessionId={sessionId} turn={turn} busy={busy} revertable={works && !tui} />
            </>
          ) : (
            <MessageView message={m} />
          );
        }}
        empty={
          <p className="column-empty">{s.loading ? 'Loading the conversation…' : 'No messages yet. Say what to do.'}</p>
        }
      />
      {!atBottom && s.transcript.messages.length > 0 && (
        <button className="jump-latest" onClick={() => list.current?.scrollToBottom()}>
          ↓ Jump to latest
        </button>
      )}
      {busy && (
        <div className="working" aria-live="polite" data-testid="working">
          {waitingOnYou ? (
            <>{works ? 'The agent waits for your answer.' : 'The agent waits for a member to answer.'}</>
          ) : (
            <>
              <span className="pulse" aria-hidden="true" /> The agent is working…
            </>
          )}
        </div>
      )}
      <Questions questions={s.questions} answer={works} />
      {session?.deleted_profile && (
        <DeletedProfileBanner
          sessionId={sessionId}
          name={session.deleted_profile}
          blocked={moveRefused}
          canMove={works}
        />
      )}
      {works ? (
        <>
          <QueuePanel sessionId={sessionId} queue={s.queue} autoRun={session?.auto_run ?? true} />
          <Composer
            sessionId={sessionId}
            workspaceId={workspaceId}
            busy={busy}
            queued={s.queue.length}
            autoRun={session?.auto_run ?? true}
            commands={session?.available_commands ?? []}
            refused={
              session?.deleted_profile
                ? `The agent profile ${session.deleted_profile} was deleted: move the session to another agent to go on`
                : null
            }
            onSent={() => list.current?.scrollToBottom()}
          />
        </>
      ) : (
        <RoleNote>{VIEWER_NOTE}</RoleNote>
      )}
      {moving && session && (
        <MoveDialog
          sessionId={sessionId}
          currentProfileId={session.agent_profile_id}
          blocked={moveRefused}
          onClose={() => setMoving(false)}
        />
      )}
      {renaming && session && (
        <RenameDialog
          current={session.name ?? ''}
          onClose={() => setRenaming(false)}
          onSave={(name) => {
            setRenaming(false);
            void run('Rename', 'session.rename', { id: sessionId, name });
          }}
        />
      )}
      {confirmReset && (
        <Dialog title="Reset the agent's context?" onClose={() => setConfirmReset(false)}>
          <p>
            The agent starts a fresh conversation and forgets this one; the transcript stays here.
          </p>
          <div className="actions">
            <button onClick={() => setConfirmReset(false)}>Keep the context</button>
            <button
              className="danger"
              onClick={() => {
                setConfirmReset(false);
                void run('Reset context', 'session.reset_context', { id: sessionId });
              }}
            >
              Reset context
            </button>
          </div>
        </Dialog>
      )}
      {confirmDelete && (
        <Dialog title="Delete this session?" onClose={() => setConfirmDelete(false)}>
          <p>The agent is stopped and the conversation is removed. This cannot be undone.</p>
          <div className="actions">
            <button onClick={() => setConfirmDelete(false)}>Keep it</button>
            <button
              className="danger"
              onClick={() => {
                setConfirmDelete(false);
                void run('Delete', 'session.delete', { id: sessionId });
              }}
            >
              Delete session
            </button>
          </div>
        </Dialog>
      )}
    </div>
  );
}
