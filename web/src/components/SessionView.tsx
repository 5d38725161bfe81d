// One session: state and controls (cancel, stop, reset context, resume, delete), the last
// error, the live transcript, the composer and the prompt queue.
import { useEffect, useRef, useState } from 'react';
import { ApiError, attachmentUrl, call, clientId, errorText, uploadAttachment } from '../api/client';
import { live } from '../api/live';
import type {
  ActionName,
  Actions,
  AttachmentDto,
  AvailableCommandDto,
  MessageDto,
  QuestionDto,
  QueuedPromptDto,
  SavedPromptDto,
  SessionDto,
} from '../api/types';
import { useSession } from '../lib/session';
import { VirtualList, type VirtualHandle } from '../lib/VirtualList';
import { Dialog } from './Dialog';
import { ErrorBanner } from './ErrorBanner';
import { AttachmentList, MessageView } from './MessageView';
import { toast } from '../lib/toast';
import { StateBadge } from './StateBadge';

const getKey = (m: MessageDto) => m.id;

declare global {
  interface Window {
    /** Figures read by the browser performance test. */
    __kandevPerf?: { transcriptFirstPageMs: number | null; transcriptRows: number; hasOlder: boolean };
  }
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
  const [actionError, setActionError] = useState<string | null>(null);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const [renaming, setRenaming] = useState(false);
  const [busyAction, setBusyAction] = useState<string | null>(null);
  const list = useRef<VirtualHandle | null>(null);
  const [atBottom, setAtBottom] = useState(true);
  const session = s.session;
  const state = session?.state ?? 'CREATED';
  const busy = state === 'RUNNING' || state === 'STARTING' || s.turnOpen;

  useEffect(() => {
    window.__kandevPerf = {
      transcriptFirstPageMs: s.firstPageMs,
      transcriptRows: s.transcript.messages.length,
      hasOlder: s.transcript.hasOlder,
    };
  }, [s.firstPageMs, s.transcript.messages.length, s.transcript.hasOlder]);

  const run = async <A extends ActionName>(
    label: string,
    action: A,
    payload: Actions[A]['request'],
    done?: string,
  ) => {
    setBusyAction(label);
    setActionError(null);
    try {
      await call(action, payload);
      if (done) toast(done);
    } catch (e) {
      setActionError(`${label}: ${errorText(e)}`);
    } finally {
      setBusyAction(null);
    }
  };

  if (s.deleted) {
    return <div className="empty-page">This session was deleted.</div>;
  }
  if (s.error && !session) {
    return <ErrorBanner error={s.error} onRetry={s.retry} testId="session-error" />;
  }

  return (
    <div className="session" data-session-id={sessionId} data-state={state}>
      <div className="session-bar">
        <StateBadge state={state} />
        <span className="session-state" data-testid="session-state">
          {state}
        </span>
        {session?.name && (
          <strong className="session-name" data-testid="session-name">
            {session.name}
          </strong>
        )}
        {session && <AgentBadge session={session} />}
        {session?.plan_mode && <span className="badge plan">plan mode</span>}
        {session?.session_mode && <span className="badge">mode: {session.session_mode}</span>}
        {session && <ModelBadge session={session} />}
        {session && <UsageBadge session={session} />}
        {session && <Pickers session={session} onError={setActionError} />}
        <span className="spacer" />
        <div className="session-actions" role="toolbar" aria-label="Session controls">
          <button
            disabled={!busy || busyAction !== null}
            onClick={() => run('Cancel', 'agent.cancel', { session_id: sessionId })}
          >
            Cancel turn
          </button>
          <button
            disabled={busy || busyAction !== null || !s.transcript.messages.some((m) => m.kind === 'user')}
            title="Send your last message again as a new turn"
            onClick={() => run('Retry', 'session.retry', { id: sessionId })}
          >
            Retry last message
          </button>
          <button disabled={busyAction !== null} onClick={() => setRenaming(true)}>
            Rename
          </button>
          {!primary && (
            <button
              disabled={busyAction !== null}
              title="The workflow's steps and the card follow the primary session"
              onClick={() => run('Make primary', 'session.set_primary', { id: sessionId }, 'This session is now the primary one')}
            >
              Make primary
            </button>
          )}
          <button
            disabled={busyAction !== null}
            onClick={() => run('Reset context', 'session.reset_context', { id: sessionId })}
          >
            Reset context
          </button>
          <ResumeMenu disabled={busyAction !== null} onResume={(mode) => run('Resume', 'session.resume', { id: sessionId, mode })} />
          <button disabled={busyAction !== null} onClick={() =>
              run('Stop', 'session.stop', { id: sessionId }, 'Agent stopped: the next message resumes the conversation')
            }>
            Stop
          </button>
          <button className="danger-outline" disabled={busyAction !== null} onClick={() => setConfirmDelete(true)}>
            Delete
          </button>
        </div>
      </div>
      {session?.last_error && (
        <div className="banner error last-error" role="alert" data-testid="last-error">
          <strong>{session.last_error.message}</strong>
          <span className="hint">
            {' '}
            ({session.last_error.code}) · {errorHint(session.last_error.code)}
          </span>
          {session.last_error.code === 'agent_auth_required' && (
            <AuthMethods
              details={session.last_error.details}
              disabled={busyAction !== null}
              onPick={(method) =>
                run('Log in', 'session.authenticate', { id: sessionId, method_id: method.id }, `Authenticated with ${method.name}`)
              }
            />
          )}
        </div>
      )}
      <ErrorBanner error={s.error} onRetry={s.retry} onDismiss={s.dismissError} testId="session-error" />
      <ErrorBanner error={actionError} onDismiss={() => setActionError(null)} testId="action-error" />
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
        render={(m) => <MessageView message={m} />}
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
        <div className="working" aria-live="polite">
          <span className="pulse" aria-hidden="true" /> The agent is working…
        </div>
      )}
      <Questions questions={s.questions} />
      <QueuePanel sessionId={sessionId} queue={s.queue} autoRun={session?.auto_run ?? true} />
      <Composer
        sessionId={sessionId}
        workspaceId={workspaceId}
        busy={busy}
        queued={s.queue.length}
        autoRun={session?.auto_run ?? true}
        commands={session?.available_commands ?? []}
        onSent={() => list.current?.scrollToBottom()}
      />
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

function ResumeMenu({ disabled, onResume }: { disabled: boolean; onResume: (mode: 'load' | 'fresh') => void }) {
  const [open, setOpen] = useState(false);
  return (
    <div className="menu-wrap">
      <button disabled={disabled} aria-haspopup="menu" aria-expanded={open} onClick={() => setOpen(!open)}>
        Resume ▾
      </button>
      {open && (
        <div className="menu" role="menu">
          <button
            role="menuitem"
            onClick={() => {
              setOpen(false);
              onResume('load');
            }}
          >
            Resume (load the conversation)
          </button>
          <button
            role="menuitem"
            onClick={() => {
              setOpen(false);
              onResume('fresh');
            }}
          >
            Resume fresh (new conversation)
          </button>
        </div>
      )}
    </div>
  );
}

/** The agent's commands that `text` (a `/name` being typed, no space yet) could be. */
function commandMatches(text: string, commands: AvailableCommandDto[]): AvailableCommandDto[] {
  if (!text.startsWith('/') || /\s/.test(text)) return [];
  const typed = text.slice(1).toLowerCase();
  return commands.filter((c) => c.name.toLowerCase().startsWith(typed));
}

/** The `@name` being typed at the end of `text` (after a space or at the start), if any. */
function promptMention(text: string): { at: number; typed: string } | null {
  const m = /(^|\s)@([A-Za-z0-9_-]*)$/.exec(text);
  return m ? { at: m.index + (m[1] ?? '').length, typed: (m[2] ?? '').toLowerCase() } : null;
}

/** One entry of the composer's menu: an agent command (`/`) or a saved prompt (`@`). */
type MenuItem = { key: string; label: string; hint: string | null; description: string; apply: () => void };

function Composer(props: {
  sessionId: string;
  workspaceId: string | null;
  busy: boolean;
  queued: number;
  autoRun: boolean;
  commands: AvailableCommandDto[];
  onSent: () => void;
}) {
  const { sessionId, busy, onSent, workspaceId } = props;
  const [text, setText] = useState('');
  const [picked, setPicked] = useState(0);
  const [menuClosed, setMenuClosed] = useState(false);
  // The workspace's saved prompts, loaded when `@` is first typed (fresh on each new `@`).
  const [prompts, setPrompts] = useState<SavedPromptDto[] | null>(null);
  const mention = promptMention(text);
  const mentioning = mention !== null;
  useEffect(() => {
    if (!mentioning || !workspaceId) return;
    let live = true;
    call('prompt.list', { workspace_id: workspaceId })
      .then((r) => live && setPrompts(r.prompts))
      .catch(() => live && setPrompts([]));
    return () => {
      live = false;
    };
  }, [mentioning, workspaceId]);
  const textarea = useRef<HTMLTextAreaElement | null>(null);
  const menuKind = mention ? 'prompt' : 'command';
  const matches: MenuItem[] = menuClosed
    ? []
    : mention
      ? (prompts ?? [])
          .filter((p) => p.name.toLowerCase().startsWith(mention.typed))
          .map((p) => ({
            key: p.name,
            label: `@${p.name}`,
            hint: null,
            description: p.body.length > 80 ? `${p.body.slice(0, 80)}…` : p.body,
            // Inserting a saved prompt writes its body in place of `@name`.
            apply: () => insert(text.slice(0, mention.at) + p.body),
          }))
      : commandMatches(text, props.commands).map((c) => ({
          key: c.name,
          label: `/${c.name}`,
          hint: c.input_hint,
          description: c.description,
          // Choosing a command writes `/name ` (the agent gets `/name args` as the message).
          apply: () => insert(`/${c.name} `),
        }));
  const active = matches.length > 0 ? Math.min(picked, matches.length - 1) : -1;
  const chosen: MenuItem | undefined = matches[active];
  // Files pasted or dropped: uploaded at once, sent with the next message.
  const [attached, setAttached] = useState<AttachmentDto[]>([]);
  const [uploading, setUploading] = useState(0);
  const attach = async (files: File[]) => {
    if (files.length === 0) return;
    setError(null);
    setUploading((n) => n + files.length);
    for (const file of files) {
      try {
        const a = await uploadAttachment(file);
        setAttached((list) => [...list, a]);
        pendingId.current = null;
      } catch (e) {
        setError(`${file.name || 'the file'}: ${errorText(e)}`);
      } finally {
        setUploading((n) => n - 1);
      }
    }
  };
  const insert = (next: string) => {
    setText(next);
    setMenuClosed(true);
    pendingId.current = null;
    textarea.current?.focus();
  };
  const [sending, setSending] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const pendingId = useRef<string | null>(null);
  // "The server cannot be reached" is no longer true once the connection is back.
  const networkError = useRef(false);
  useEffect(
    () =>
      live.onStatus((status) => {
        if (status === 'open' && networkError.current) {
          networkError.current = false;
          setError(null);
        }
      }),
    [],
  );

  const send = async () => {
    const content = text.trim() ? text : attached.length > 0 ? '(see the attached files)' : text;
    if (!content.trim() || sending || uploading > 0) return;
    // the same id on a retry of the same text: the server records it once
    pendingId.current ??= clientId();
    setSending(true);
    setError(null);
    try {
      await call('message.add', {
        session_id: sessionId,
        content,
        client_message_id: pendingId.current,
        queue: true,
        ...(attached.length > 0 ? { attachments: attached } : {}),
      });
      pendingId.current = null;
      setText('');
      setAttached([]);
      onSent();
    } catch (e) {
      networkError.current = e instanceof ApiError && e.code === 'NETWORK';
      setError(errorText(e));
    } finally {
      setSending(false);
    }
  };

  // Said while it is true: the queue holds messages (gone once it drains or is emptied).
  const note =
    props.queued === 0
      ? null
      : props.autoRun && busy
        ? `Queued${props.queued > 1 ? ` (${props.queued})` : ''}: it runs when the agent finishes this turn.`
        : props.autoRun
          ? 'Queued: it runs next.'
          : `Queued${props.queued > 1 ? ` (${props.queued})` : ''}: auto-run is off, Send next runs it.`;

  return (
    <form
      className="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
    >
      <label className="sr-only" htmlFor={`composer-${sessionId}`}>
        Message to the agent
      </label>
      {matches.length > 0 && (
        <ul
          className="command-menu"
          role="listbox"
          aria-label={menuKind === 'prompt' ? 'Saved prompts' : 'Agent commands'}
          id={`commands-${sessionId}`}
        >
          {matches.map((c, i) => (
            <li
              key={c.key}
              role="option"
              id={`command-${sessionId}-${c.key}`}
              aria-selected={i === active}
              className={i === active ? 'active' : undefined}
              onMouseDown={(e) => {
                e.preventDefault(); // keep the focus in the composer
                c.apply();
              }}
            >
              <span className="command-name">{c.label}</span>
              {c.hint && <span className="command-hint"> {c.hint}</span>}
              {c.description && <span className="command-description"> — {c.description}</span>}
            </li>
          ))}
        </ul>
      )}
      {(attached.length > 0 || uploading > 0) && (
        <ul className="attachment-chips" aria-label="Attached files">
          {attached.map((a, i) => (
            <li key={`${a.id}-${i}`} className="attachment-chip">
              {a.mime.startsWith('image/') && <img src={attachmentUrl(a)} alt="" className="chip-thumb" />}
              <span>{a.name}</span>
              <button
                type="button"
                className="link"
                aria-label={`Remove ${a.name}`}
                onClick={() => setAttached((list) => list.filter((_, j) => j !== i))}
              >
                ✕
              </button>
            </li>
          ))}
          {uploading > 0 && <li className="hint">Uploading…</li>}
        </ul>
      )}
      <textarea
        ref={textarea}
        onPaste={(e) => {
          const files = Array.from(e.clipboardData.files);
          if (files.length > 0) {
            e.preventDefault();
            void attach(files);
          }
        }}
        onDrop={(e) => {
          const files = Array.from(e.dataTransfer.files);
          if (files.length > 0) {
            e.preventDefault();
            void attach(files);
          }
        }}
        id={`composer-${sessionId}`}
        value={text}
        rows={2}
        aria-controls={matches.length > 0 ? `commands-${sessionId}` : undefined}
        aria-activedescendant={chosen ? `command-${sessionId}-${chosen.key}` : undefined}
        placeholder={busy ? 'The agent is busy: your message will be queued' : 'Message the agent (Enter sends, Shift+Enter for a new line)'}
        onChange={(e) => {
          setText(e.target.value);
          setMenuClosed(false);
          setPicked(0);
          pendingId.current = null;
        }}
        onKeyDown={(e) => {
          if (matches.length > 0) {
            if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
              e.preventDefault();
              const step = e.key === 'ArrowDown' ? 1 : matches.length - 1;
              setPicked((active + step) % matches.length);
              return;
            }
            if ((e.key === 'Enter' || e.key === 'Tab') && !e.shiftKey && !e.nativeEvent.isComposing) {
              e.preventDefault();
              chosen?.apply();
              return;
            }
            if (e.key === 'Escape') {
              e.preventDefault();
              setMenuClosed(true);
              return;
            }
          }
          if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
            e.preventDefault();
            void send();
          }
        }}
      />
      <label className="attach-button">
        Attach
        <input
          type="file"
          multiple
          className="sr-only"
          onChange={(e) => {
            const files = Array.from(e.target.files ?? []);
            e.target.value = '';
            void attach(files);
          }}
        />
      </label>
      <button
        className="primary"
        type="submit"
        disabled={sending || uploading > 0 || (!text.trim() && attached.length === 0)}
      >
        {busy ? 'Queue' : 'Send'}
      </button>
      {(error || note) && (
        <p className={error ? 'form-error' : 'hint'} role={error ? 'alert' : 'status'}>
          {error ?? note}
        </p>
      )}
    </form>
  );
}

type QueueAction = Extract<ActionName, `message.queue.${string}`>;

function QueuePanel({ sessionId, queue, autoRun }: { sessionId: string; queue: QueuedPromptDto[]; autoRun: boolean }) {
  const [editing, setEditing] = useState<string | null>(null);
  const [draft, setDraft] = useState('');
  // shown at once, then kept in step with the session the server announces
  const [auto, setAuto] = useState(autoRun);
  useEffect(() => setAuto(autoRun), [autoRun]);
  const [error, setError] = useState<string | null>(null);
  // A queue action's payload without the session, which is added here.
  const act = async <A extends QueueAction>(action: A, payload: Omit<Actions[A]['request'], 'session_id'>) => {
    setError(null);
    try {
      await call(action, { session_id: sessionId, ...payload } as Actions[A]['request']);
    } catch (e) {
      setError(errorText(e));
    }
  };
  const ordered = [...queue].sort((a, b) => a.position - b.position);
  const moveBy = (index: number, by: number) => {
    const ids = ordered.map((q) => q.id);
    const [id] = ids.splice(index, 1);
    if (!id) return;
    ids.splice(index + by, 0, id);
    void act('message.queue.reorder', { ids });
  };
  return (
    <section className="queue" aria-label="Queued messages" data-count={ordered.length}>
      <div className="queue-head">
        <strong>Queue</strong> <span className="count">{ordered.length}</span>
        <span className="spacer" />
        <label className="check">
          <input
            type="checkbox"
            checked={auto}
            onChange={(e) => {
              setAuto(e.target.checked);
              void act('message.queue.auto_run.set', { enabled: e.target.checked });
            }}
          />
          Auto-run
        </label>
        {!auto && ordered.length > 0 && (
          <button onClick={() => void act('message.queue.drain', {})}>Send next</button>
        )}
      </div>
      {ordered.length > 0 && (
        <ol className="queue-list">
          {ordered.map((q, i) => (
            <li key={q.id} className="queue-item" data-queue-id={q.id}>
              {editing === q.id ? (
                <form
                  className="queue-edit"
                  onSubmit={(e) => {
                    e.preventDefault();
                    setEditing(null);
                    void act('message.queue.update', { id: q.id, content: draft });
                  }}
                >
                  <label className="sr-only" htmlFor={`q-${q.id}`}>
                    Edit queued message
                  </label>
                  <textarea
                    id={`q-${q.id}`}
                    value={draft}
                    rows={2}
                    autoFocus
                    onChange={(e) => setDraft(e.target.value)}
                    onKeyDown={(e) => {
                      if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
                        e.preventDefault();
                        e.currentTarget.form?.requestSubmit();
                      }
                    }}
                  />
                  <button className="primary" type="submit">
                    Save
                  </button>
                  <button type="button" onClick={() => setEditing(null)}>
                    Cancel
                  </button>
                </form>
              ) : (
                <>
                  <span className="queue-text">
                    {q.content}
                    <AttachmentList list={q.attachments ?? []} label="Queued attachments" />
                  </span>
                  <span className="queue-buttons">
                    <button className="icon" aria-label="Move up" disabled={i === 0} onClick={() => moveBy(i, -1)}>
                      ↑
                    </button>
                    <button
                      className="icon"
                      aria-label="Move down"
                      disabled={i === ordered.length - 1}
                      onClick={() => moveBy(i, 1)}
                    >
                      ↓
                    </button>
                    <button
                      className="icon"
                      aria-label="Edit"
                      onClick={() => {
                        setEditing(q.id);
                        setDraft(q.content);
                      }}
                    >
                      ✎
                    </button>
                    <button
                      className="icon"
                      aria-label="Remove from queue"
                      onClick={() => void act('message.queue.remove', { id: q.id })}
                    >
                      ×
                    </button>
                  </span>
                </>
              )}
            </li>
          ))}
        </ol>
      )}
      {error && (
        <p className="form-error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}

/** The agent's title (else name) and version, as its ACP `initialize` answered (`agentInfo`). */
function AgentBadge({ session }: { session: SessionDto }) {
  const info = session.agent_info && typeof session.agent_info === 'object' ? (session.agent_info as Record<string, unknown>) : {};
  const title = typeof info.title === 'string' && info.title ? info.title : typeof info.name === 'string' ? info.name : null;
  if (!title) return null;
  const version = typeof info.version === 'string' && info.version ? ` ${info.version}` : '';
  return (
    <span className="badge" data-testid="agent-info" title="The agent, as it introduced itself">
      {title}
      {version}
    </span>
  );
}

function RenameDialog(props: { current: string; onClose: () => void; onSave: (name: string) => void }) {
  const [name, setName] = useState(props.current);
  return (
    <Dialog title="Rename session" onClose={props.onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          props.onSave(name);
        }}
      >
        <label>
          Name <span className="hint">(empty clears it)</span>
          <input autoFocus value={name} maxLength={200} onChange={(e) => setName(e.target.value)} />
        </label>
        <div className="actions">
          <button type="button" onClick={props.onClose}>
            Cancel
          </button>
          <button className="primary" type="submit">
            Save
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/**
 * The model the agent says it uses (its `model` config option), and a warning when that is not
 * the one the session asked for (its profile's model): issue 14 defect 14.
 */
function ModelBadge({ session }: { session: SessionDto }) {
  const options = session.config_options;
  const used =
    options && typeof options === 'object' && !Array.isArray(options) && typeof options.model === 'string'
      ? options.model
      : null;
  const asked = session.model;
  if (!used && !asked) return null;
  if (asked && used && asked !== used) {
    return (
      <span className="badge needs-you-badge" role="note" data-testid="model-mismatch">
        model: {used} (asked for {asked})
      </span>
    );
  }
  return (
    <span className="badge" data-testid="session-model">
      model: {used ?? asked}
    </span>
  );
}

type Choice = { value: string; name: string };

/** The choices of a config option as the agent sent them: flat, or in groups. */
function choicesOf(options: unknown): Choice[] {
  if (!Array.isArray(options)) return [];
  return options.flatMap((o: unknown): Choice[] => {
    if (!o || typeof o !== 'object') return [];
    const r = o as Record<string, unknown>;
    if (Array.isArray(r.options)) return choicesOf(r.options);
    return typeof r.value === 'string' ? [{ value: r.value, name: typeof r.name === 'string' ? r.name : r.value }] : [];
  });
}

/**
 * The mode, model and config-option pickers (issue 18): what the agent offered when it
 * started (the session's `agent_info.modes` and `agent_info.config_options`); a choice goes to
 * the agent (`session.set_mode`, `session.set_config_option`) and the pickers and badges
 * follow what it confirms (the session's `config_options` values, as the agent answered).
 * The `mode` config option is left out when the agent lists its modes (the Mode picker).
 */
function Pickers({ session, onError }: { session: SessionDto; onError: (e: string | null) => void }) {
  const info = session.agent_info && typeof session.agent_info === 'object' ? (session.agent_info as Record<string, unknown>) : {};
  const modes = choicesOf(Array.isArray(info.modes) ? info.modes.map((m: { id?: unknown; name?: unknown }) => ({ value: m.id, name: m.name })) : []);
  const options = (Array.isArray(info.config_options) ? (info.config_options as Record<string, unknown>[]) : []).filter(
    (o) => !(modes.length > 0 && (o.id === 'mode' || o.category === 'mode')),
  );
  const values = session.config_options && typeof session.config_options === 'object' ? (session.config_options as Record<string, unknown>) : {};
  const [busy, setBusy] = useState(false);
  const change = async (work: () => Promise<unknown>) => {
    setBusy(true);
    onError(null);
    try {
      await work();
    } catch (e) {
      onError(errorText(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      {modes.length > 0 && (
        <label className="compact">
          <span className="sr-only">Mode</span>
          <select
            aria-label="Mode"
            disabled={busy}
            value={session.session_mode ?? ''}
            onChange={(e) => void change(() => call('session.set_mode', { id: session.id, mode_id: e.target.value }))}
          >
            {!session.session_mode && <option value="">mode…</option>}
            {modes.map((m) => (
              <option key={m.value} value={m.value}>
                {m.name}
              </option>
            ))}
          </select>
        </label>
      )}
      {options.map((option) => {
        const id = String(option.id);
        const choices = choicesOf(option.options);
        if (choices.length === 0) return null;
        const isModel = id === 'model' || option.category === 'model';
        const label = isModel ? 'Model' : typeof option.name === 'string' && option.name ? option.name : id;
        const value = typeof values[id] === 'string' ? String(values[id]) : '';
        return (
          <label className="compact" key={id}>
            <span className="sr-only">{label}</span>
            <select
              aria-label={label}
              data-config-id={id}
              disabled={busy}
              value={value}
              onChange={(e) =>
                void change(() => call('session.set_config_option', { id: session.id, config_id: id, value: e.target.value }))
              }
            >
              {!value && <option value="">{label.toLowerCase()}…</option>}
              {choices.map((m) => (
                <option key={m.value} value={m.value}>
                  {m.name}
                </option>
              ))}
            </select>
          </label>
        );
      })}
    </>
  );
}

/** The agent's context window use, from its latest usage report (`{used, size}`). */
function UsageBadge({ session }: { session: SessionDto }) {
  const used = session.context_window?.used;
  const size = session.context_window?.size;
  if (used == null || size == null || size <= 0) return null;
  const percent = Math.round((used / size) * 100);
  return (
    <span className="badge" data-testid="session-usage" title={`${percent}% of the context window used`}>
      context {used.toLocaleString('en-US')} / {size.toLocaleString('en-US')}
    </span>
  );
}

interface AuthMethod {
  id: string;
  name: string;
  description?: string;
  command?: string;
  env_vars?: string[];
}

/** The auth methods of an `agent_auth_required` error (`details.auth_methods`). */
function authMethods(details: unknown): AuthMethod[] {
  if (!details || typeof details !== 'object') return [];
  const list = (details as { auth_methods?: unknown }).auth_methods;
  if (!Array.isArray(list)) return [];
  return list.flatMap((m) => {
    if (!m || typeof m !== 'object') return [];
    const { id, name, description, command, env_vars } = m as Record<string, unknown>;
    if (typeof id !== 'string' || !id) return [];
    return [
      {
        id,
        name: typeof name === 'string' && name ? name : id,
        description: typeof description === 'string' ? description : undefined,
        command: typeof command === 'string' ? command : undefined,
        env_vars: Array.isArray(env_vars) ? env_vars.filter((v): v is string => typeof v === 'string') : undefined,
      },
    ];
  });
}

/** One button per login method the agent offers (`session.authenticate`): on a running agent
 * it logs in over the open connection, otherwise the agent restarts with it. */
function AuthMethods({
  details,
  disabled,
  onPick,
}: {
  details: unknown;
  disabled: boolean;
  onPick: (method: AuthMethod) => void;
}) {
  const methods = authMethods(details);
  if (!methods.length) return null;
  return (
    <div className="auth-methods" role="group" aria-label="Log in to the agent">
      {methods.map((m) => (
        <div key={m.id} className="auth-method">
          <button disabled={disabled} onClick={() => onPick(m)} title={m.description}>
            Log in: {m.name}
          </button>
          {m.command && (
            <span className="hint">
              {' '}
              first run <code>{m.command}</code> in a terminal
            </span>
          )}
          {m.env_vars && m.env_vars.length > 0 && (
            <span className="hint"> first set {m.env_vars.join(', ')} in the agent profile’s environment</span>
          )}
        </div>
      ))}
    </div>
  );
}

/** What to do about a session's last error, by its code (issue 14 d15: not one hint for all). */
function errorHint(code: string): string {
  switch (code) {
    case 'agent_start_failed':
      return 'Check the agent profile’s command in Settings → Agent profiles (is the agent installed?), then resume the session.';
    case 'agent_auth_required':
      return 'Log in with one of the agent’s methods below (after its sign-in steps, if any).';
    default:
      return 'Send a message to try again, or resume the session (load keeps the conversation, fresh starts a new one).';
  }
}

/** The agent's open questions (MCP `ask_user`), live: options as buttons, else free text. */
function Questions({ questions }: { questions: QuestionDto[] }) {
  const pending = questions.filter((q) => q.status === 'pending');
  if (!pending.length) return null;
  return (
    <div className="questions">
      {pending.map((q) => (
        <QuestionCard key={q.id} question={q} />
      ))}
    </div>
  );
}

function QuestionCard({ question }: { question: QuestionDto }) {
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const answer = (value: string) =>
    call('question.answer', { id: question.id, answer: value }).catch((e: unknown) => setError(errorText(e)));
  return (
    <section className="question-card" role="group" aria-label="The agent asks" data-testid="question-card">
      <p className="question-text">{question.question}</p>
      {question.options.length > 0 ? (
        <div className="actions">
          {question.options.map((o) => (
            <button key={o} onClick={() => void answer(o)}>
              {o}
            </button>
          ))}
        </div>
      ) : (
        <form
          className="actions"
          onSubmit={(e) => {
            e.preventDefault();
            if (text.trim()) void answer(text);
          }}
        >
          <input aria-label="Your answer" value={text} onChange={(e) => setText(e.target.value)} />
          <button className="primary" type="submit">
            Answer
          </button>
        </form>
      )}
      {error && (
        <p className="form-error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}
