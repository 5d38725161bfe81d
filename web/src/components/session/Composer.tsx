// The session's composer: the message box with its `/command` and `@prompt` menu, attachments
// (pasted, dropped or picked), and the note on what a queued message will do.
import { useEffect, useRef, useState } from 'react';
import { ApiError, attachmentUrl, call, clientId, errorText, uploadAttachment } from '../../api/client';
import { live } from '../../api/live';
import type { AttachmentDto, AvailableCommandDto, SavedPromptDto } from '../../api/types';
import { commandMatches, promptMention } from '../../lib/composer';
import { useMutation } from '../../lib/useMutation';

/** One entry of the composer's menu: an agent command (`/`) or a saved prompt (`@`). */
type MenuItem = { key: string; label: string; hint: string | null; description: string; apply: () => void };

export function Composer(props: {
  sessionId: string;
  workspaceId: string | null;
  busy: boolean;
  queued: number;
  autoRun: boolean;
  commands: AvailableCommandDto[];
  onSent: () => void;
  /** Why no agent can answer now (its profile was deleted), said in place of the usual
   * placeholder; a message sent anyway shows the server's refusal. */
  refused?: string | null;
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
  // Sending and uploading are busy apart (an upload shows "Uploading…"), but their failures
  // share the one line under the composer: the latest is shown.
  const sending = useMutation();
  const uploads = useMutation(sending.setError);
  const { error, setError } = sending;
  const uploading = uploads.busy;
  const attach = async (files: File[]) => {
    if (files.length === 0) return;
    setError(null);
    // One run per file, in order: a failed file says which, and the others still go.
    for (const file of files) {
      await uploads.run(
        async () => {
          const a = await uploadAttachment(file);
          setAttached((list) => [...list, a]);
          pendingId.current = null;
        },
        { keepError: true, describe: (e) => `${file.name || 'the file'}: ${errorText(e)}` },
      );
    }
  };
  const insert = (next: string) => {
    setText(next);
    setMenuClosed(true);
    pendingId.current = null;
    textarea.current?.focus();
  };
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
    if (!content.trim() || sending.busy || uploading) return;
    // the same id on a retry of the same text: the server records it once
    const clientMessageId = (pendingId.current ??= clientId());
    await sending.run(async () => {
      await call('message.add', {
        session_id: sessionId,
        content,
        client_message_id: clientMessageId,
        queue: true,
        ...(attached.length > 0 ? { attachments: attached } : {}),
      }).catch((e: unknown) => {
        networkError.current = e instanceof ApiError && e.code === 'NETWORK';
        throw e;
      });
      pendingId.current = null;
      setText('');
      setAttached([]);
      onSent();
    });
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
      {mention && !menuClosed && prompts !== null && prompts.length === 0 && (
        <p className="command-menu command-empty" role="status" data-testid="no-prompts">
          No saved prompts yet: add one in Settings → Prompts, then type @ and its name.
        </p>
      )}
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
      {(attached.length > 0 || uploading) && (
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
          {uploading && <li className="hint">Uploading…</li>}
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
        placeholder={
          props.refused
            ? props.refused
            : busy
              ? 'The agent is busy: your message will be queued'
              : 'Message the agent (Enter sends, Shift+Enter for a new line)'
        }
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
        disabled={sending.busy || uploading || (!text.trim() && attached.length === 0)}
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
