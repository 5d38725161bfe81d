// The session's prompt queue: reorder, edit, remove, auto-run on or off, and "Send next".
import { useEffect, useState } from 'react';
import { call } from '../../api/client';
import type { ActionName, Actions, QueuedPromptDto } from '../../api/types';
import { useMutation } from '../../lib/useMutation';
import { AttachmentList } from '../MessageView';

type QueueAction = Extract<ActionName, `message.queue.${string}`>;

export function QueuePanel({ sessionId, queue, autoRun }: { sessionId: string; queue: QueuedPromptDto[]; autoRun: boolean }) {
  const [editing, setEditing] = useState<string | null>(null);
  const [draft, setDraft] = useState('');
  // shown at once, then kept in step with the session the server announces
  const [auto, setAuto] = useState(autoRun);
  useEffect(() => setAuto(autoRun), [autoRun]);
  const { error, run } = useMutation();
  // A queue action's payload without the session, which is added here.
  const act = <A extends QueueAction>(action: A, payload: Omit<Actions[A]['request'], 'session_id'>) =>
    run(() => call(action, { session_id: sessionId, ...payload } as Actions[A]['request']));
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
