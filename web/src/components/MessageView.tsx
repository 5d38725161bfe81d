// Typed rendering of one transcript message: user text, agent markdown, thoughts (collapsed),
// tool calls with kind, status and diffs, plans as checklists, usage, status lines, errors and
// permission requests with the agent's options.
import { memo } from 'react';
import { attachmentUrl, call } from '../api/client';
import type { AttachmentDto, MessageDto, PermissionMetaDto, PlanMetaDto, ToolCallMetaDto } from '../api/types';
import { renderMarkdown } from '../lib/markdown';
import { reboundText } from '../lib/rebind';
import { useRole } from '../lib/me';
import { useMutation } from '../lib/useMutation';
import { DiffView } from './DiffView';

/** A message of one kind, its metadata typed by that kind. */
type MessageOf<K extends MessageDto['kind']> = Extract<MessageDto, { kind: K }>;

// Plain glyphs (present in common system fonts), not emoji.
const TOOL_ICONS: Record<string, string> = {
  read: '→',
  edit: '✎',
  delete: '✕',
  move: '⇄',
  search: '◎',
  execute: '▶',
  think: '…',
  fetch: '↓',
  other: '•',
};

/** Attached files (of a message or a queued message): image thumbnails, other files as chips
 * (downloads). */
export function AttachmentList({ list, label = 'Attached files' }: { list: AttachmentDto[]; label?: string }) {
  if (list.length === 0) return null;
  return (
    <ul className="msg-attachments" aria-label={label}>
      {list.map((a, i) => (
        <li key={`${a.id}-${i}`}>
          <a href={attachmentUrl(a)} target="_blank" rel="noreferrer" title={`${a.name} (${a.size.toLocaleString('en-US')} bytes)`}>
            {a.mime.startsWith('image/') ? <img src={attachmentUrl(a)} alt={a.name} className="thumb" /> : <span className="file-chip">{a.name}</span>}
          </a>
        </li>
      ))}
    </ul>
  );
}

export const MessageView = memo(function MessageView({ message }: { message: MessageDto }) {
  // A kind this page does not know (a newer server, a tab open across an upgrade) shows its text.
  const asText = () => (
    <div className="msg msg-status" data-kind={message.kind}>
      {message.content}
    </div>
  );
  switch (message.kind) {
    case 'user':
      // Markdown like the agent's (safe HTML), the attached files in the same bubble.
      return (
        <div className="msg msg-user" data-kind="user">
          <div className="bubble">
            <div className="markdown" dangerouslySetInnerHTML={{ __html: renderMarkdown(message.content) }} />
            <AttachmentList list={message.metadata.attachments ?? []} />
          </div>
        </div>
      );
    case 'agent':
      return (
        <div
          className="msg msg-agent markdown"
          data-kind="agent"
          dangerouslySetInnerHTML={{ __html: renderMarkdown(message.content) }}
        />
      );
    case 'thought':
      return (
        <details className="msg msg-thought" data-kind="thought">
          <summary>Thinking</summary>
          <div className="thought-text">{message.content}</div>
        </details>
      );
    case 'tool_call':
      return <ToolCall message={message} m={message.metadata} />;
    case 'plan':
      return <Plan m={message.metadata} />;
    case 'usage': {
      const used = message.metadata.used ?? 0;
      const size = message.metadata.size ?? 0;
      const pct = size > 0 ? Math.round((used / size) * 100) : null;
      return (
        <div className="msg msg-usage" data-kind="usage">
          Context {used.toLocaleString()} / {size.toLocaleString()} tokens{pct !== null ? ` (${pct}%)` : ''}
        </div>
      );
    }
    case 'status':
      if ('reason' in message.metadata && message.metadata.reason === 'question_resolved') {
        return <AnsweredQuestion question={message.content} note={message.metadata} />;
      }
      {
        const moved = reboundText(message.metadata);
        if (moved) {
          return (
            <div className="msg msg-status" data-kind="status" data-reason="rebound" role="note">
              <strong>{moved}</strong>
              : the new agent starts a new conversation with a summary of this one
            </div>
          );
        }
      }
      return (
        <div className="msg msg-status" data-kind="status">
          {message.content}
        </div>
      );
    case 'error':
      return (
        <div className="msg msg-error" data-kind="error" role="note">
          <strong>Error</strong> {message.content}
        </div>
      );
    case 'permission_request':
      return <Permission message={message} m={message.metadata} />;
    default:
      return asText();
  }
});

type QuestionNote = Extract<MessageOf<'status'>['metadata'], { reason: 'question_resolved' }>;

const QUESTION_ENDS: Record<string, string> = {
  cancelled: 'Not answered: the turn was cancelled or the session stopped',
  timed_out: 'Not answered in time',
  expired: 'Not answered: the server restarted while it waited',
};

/** An `ask_user` question once resolved: what was asked, and the answer and who gave it. */
function AnsweredQuestion({ question, note }: { question: string; note: QuestionNote }) {
  const by = note.by && note.by !== 'user' ? note.by : null;
  return (
    <section className="question-card resolved" data-kind="question" data-status={note.status} aria-label="The agent asked">
      <p className="question-text">{question}</p>
      {note.status === 'answered' ? (
        <p className="question-answer">
          Answered: <strong>{note.answer}</strong>
          {by && <span className="muted"> · by {by}</span>}
        </p>
      ) : (
        <p className="question-answer muted">{QUESTION_ENDS[note.status] ?? note.status.replace('_', ' ')}</p>
      )}
    </section>
  );
}

function ToolCall({ message, m }: { message: MessageOf<'tool_call'>; m: ToolCallMetaDto }) {
  const kind = m.kind || 'other';
  const status = m.status || 'pending';
  const diffs = m.content.flatMap((c) => (c.type === 'diff' ? [c] : []));
  const texts = m.content.flatMap((c) => (c.type === 'content' ? [c] : []));
  const locations = m.locations;
  return (
    <div className={`msg msg-tool tool-${status}`} data-kind="tool_call" data-status={status}>
      <div className="tool-head">
        <span className="tool-icon" aria-hidden="true">
          {TOOL_ICONS[kind] ?? TOOL_ICONS.other}
        </span>
        <span className="tool-kind">{kind}</span>
        <span className="tool-title">{message.content || m.title}</span>
        <span className={`badge tool-status status-${status}`}>{status.replace('_', ' ')}</span>
      </div>
      {locations.length > 0 && (
        <div className="tool-locations">
          {locations.map((l, i) => (
            <code key={i}>
              {l.path}
              {l.line != null ? `:${l.line}` : ''}
            </code>
          ))}
        </div>
      )}
      {texts.map((t, i) => (
        <pre key={i} className="tool-output">
          {t.text}
        </pre>
      ))}
      {diffs.map((d, i) => (
        <DiffView key={i} path={d.path} oldText={d.old_text} newText={d.new_text} />
      ))}
    </div>
  );
}

function Plan({ m }: { m: PlanMetaDto }) {
  const entries = m.entries;
  return (
    <div className="msg msg-plan" data-kind="plan">
      <div className="plan-title">Plan</div>
      <ul className="checklist">
        {entries.map((e, i) => {
          const status = e.status || 'pending';
          return (
            <li key={i} className={`plan-${status}`} data-status={status}>
              <span className="check-mark" aria-hidden="true">
                {status === 'completed' ? '✓' : status === 'in_progress' ? '◐' : '○'}
              </span>
              <span className="sr-only">{status.replace('_', ' ')}: </span>
              <span className="plan-text">{e.content}</span>
            </li>
          );
        })}
      </ul>
    </div>
  );
}

function Permission({ message, m }: { message: MessageOf<'permission_request'>; m: PermissionMetaDto }) {
  const { busy, error, run } = useMutation();
  // Answered by a member of the workspace; a viewer sees the request (issue 49).
  const answers = useRole().can('member');
  const status = m.status || 'pending';
  const options = m.options;
  const requestId = m.request_id;
  const respond = (optionId: string | null) =>
    run(() =>
      call(
        'permission.respond',
        optionId
          ? { session_id: message.session_id, request_id: requestId, option_id: optionId }
          : { session_id: message.session_id, request_id: requestId, cancelled: true },
      ),
    );
  const selected = options.find((o) => o.option_id === m.selected_option_id);
  return (
    <div
      className={`msg msg-permission perm-${status}`}
      data-kind="permission_request"
      data-status={status}
      data-request-id={requestId}
      role={status === 'pending' ? 'alertdialog' : undefined}
      aria-label={status === 'pending' ? `Permission request: ${message.content}` : undefined}
    >
      <div className="perm-head">
        <span aria-hidden="true">⚠</span> <strong>Permission</strong> {message.content}
      </div>
      {status === 'pending' && !answers ? (
        <div className="perm-result">waiting for a member of the workspace to answer</div>
      ) : status === 'pending' ? (
        <div className="perm-options">
          {options.map((o) => (
            <button
              key={o.option_id}
              className={o.kind.startsWith('allow') ? 'primary' : 'danger-outline'}
              disabled={busy}
              onClick={() => respond(o.option_id)}
            >
              {o.name || o.option_id}
            </button>
          ))}
          <button className="link" disabled={busy} onClick={() => respond(null)}>
            Dismiss
          </button>
        </div>
      ) : (
        <div className="perm-result">
          {status}
          {selected ? ` · ${selected.name}` : ''}
          {m.answered_by && m.answered_by !== 'user' ? ` (by ${m.answered_by})` : ''}
        </div>
      )}
      {error && (
        <p className="form-error" role="alert">
          {error}
        </p>
      )}
    </div>
  );
}
