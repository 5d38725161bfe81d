// One session's live state: the session object, its transcript (newest page first, older pages
// on demand), its queue and pending permissions, kept current by `session:<id>` notifications.
import { useCallback, useEffect, useRef, useState } from 'react';
import { call, errorText } from '../api/client';
import { live } from '../api/live';
import type { MessageDto, MessageUpdate, Notification, QueuedPromptDto, SessionDto } from '../api/types';
import { utf8Length } from './bytes';

const PAGE = 200;
const NEWEST = Number.MAX_SAFE_INTEGER;

export interface Transcript {
  messages: MessageDto[];
  hasOlder: boolean;
}

export interface SessionLive {
  session: SessionDto | null;
  transcript: Transcript;
  queue: QueuedPromptDto[];
  loading: boolean;
  error: string | null;
  deleted: boolean;
  turnOpen: boolean;
  loadOlder: () => void;
  /** Milliseconds from mount to the first transcript page being in state. */
  firstPageMs: number | null;
}

interface Internal {
  messages: MessageDto[];
  index: Map<string, number>;
  bytes: Map<string, number>;
  hasOlder: boolean;
}

function reindex(messages: MessageDto[]): Map<string, number> {
  return new Map(messages.map((m, i) => [m.id, i]));
}

export function useSession(sessionId: string | null): SessionLive {
  const [session, setSession] = useState<SessionDto | null>(null);
  const [transcript, setTranscript] = useState<Transcript>({ messages: [], hasOlder: false });
  const [queue, setQueue] = useState<QueuedPromptDto[]>([]);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<string | null>(null);
  const [deleted, setDeleted] = useState(false);
  const [turnOpen, setTurnOpen] = useState(false);
  const [firstPageMs, setFirstPageMs] = useState<number | null>(null);
  const state = useRef<Internal>({ messages: [], index: new Map(), bytes: new Map(), hasOlder: false });
  const loadingOlder = useRef(false);

  const publish = useCallback(() => {
    const s = state.current;
    setTranscript({ messages: s.messages, hasOlder: s.hasOlder });
  }, []);

  useEffect(() => {
    if (!sessionId) return;
    const started = performance.now();
    let stop = false;
    state.current = { messages: [], index: new Map(), bytes: new Map(), hasOlder: false };
    setSession(null);
    setTranscript({ messages: [], hasOlder: false });
    setQueue([]);
    setLoading(true);
    setDeleted(false);
    setError(null);
    setFirstPageMs(null);

    const upsert = (m: MessageDto) => {
      const s = state.current;
      const i = s.index.get(m.id);
      if (i !== undefined) {
        const messages = s.messages.slice();
        messages[i] = m;
        s.messages = messages;
      } else {
        const oldest = s.messages[0];
        if (oldest && m.seq < oldest.seq && s.hasOlder) return; // not in the loaded window
        const messages = s.messages.slice();
        let at = messages.length;
        while (at > 0 && (messages[at - 1]?.seq ?? 0) > m.seq) at--;
        messages.splice(at, 0, m);
        s.messages = messages;
        s.index = at === messages.length - 1 ? s.index.set(m.id, at) : reindex(messages);
      }
      s.bytes.set(m.id, utf8Length(m.content));
    };

    const refetch = (id: string, seq: number) => {
      call('message.list', { session_id: sessionId, after_seq: seq - 1, limit: 1 })
        .then(({ messages }) => {
          const m = messages[0];
          if (!stop && m && m.id === id) {
            upsert(m);
            publish();
          }
        })
        .catch(() => {});
    };

    const apply = (n: Notification) => {
      // Destructured, `p` is narrowed to each action's payload.
      const { action, payload: p } = n;
      switch (action) {
        case 'session.message.added':
          upsert(p.message as MessageDto);
          publish();
          break;
        case 'session.message.updated': {
          const u = p as unknown as MessageUpdate;
          if ('message' in u) {
            upsert(u.message);
          } else {
            const s = state.current;
            const i = s.index.get(u.message_id);
            const m = i === undefined ? undefined : s.messages[i];
            if (!m || i === undefined) {
              const oldest = s.messages[0];
              if (!oldest || u.seq >= oldest.seq || !s.hasOlder) refetch(u.message_id, u.seq);
              break;
            }
            const have = s.bytes.get(m.id) ?? utf8Length(m.content);
            const add = utf8Length(u.delta);
            if (have + add === u.length) {
              const messages = s.messages.slice();
              messages[i] = { ...m, content: m.content + u.delta };
              s.messages = messages;
              s.bytes.set(m.id, u.length);
            } else if (have < u.length) {
              refetch(m.id, m.seq); // a gap: read the whole message
              break;
            } // else: already contained (read after this chunk was written)
          }
          publish();
          break;
        }
        case 'session.created':
        case 'session.updated':
        case 'session.state_changed':
        case 'session.mode_changed':
        case 'session.config_changed':
          if (p.session) setSession(p.session as SessionDto);
          break;
        case 'session.error':
          setSession((s) => (s ? { ...s, last_error: (p.last_error as SessionDto['last_error']) ?? null } : s));
          break;
        case 'session.queue.changed':
          setQueue((p.queue as QueuedPromptDto[]) ?? []);
          break;
        case 'session.turn.started':
          setTurnOpen(true);
          break;
        case 'session.turn.completed':
          setTurnOpen(false);
          break;
        case 'session.permission.requested':
          if (p.message) {
            upsert(p.message as MessageDto);
            publish();
          }
          break;
        case 'session.deleted':
          setDeleted(true);
          break;
        default:
          break;
      }
    };

    let buffer: Notification[] | null = [];
    const sub = live.subscribe(
      `session:${sessionId}`,
      (n) => {
        if (buffer) buffer.push(n);
        else apply(n);
      },
      // The server could not replay what we missed (rule 47): read the newest page afresh,
      // applying what arrives meanwhile after it.
      () => {
        buffer = [];
        first();
      },
    );
    const loadAll = async () => {
      const [s, page, q] = await Promise.all([
        call('session.get', { id: sessionId }),
        call('message.list', { session_id: sessionId, before_seq: NEWEST, limit: PAGE }),
        call('message.queue.list', { session_id: sessionId }),
      ]);
      if (stop) return;
      const st = state.current;
      st.messages = page.messages;
      st.index = reindex(page.messages);
      st.bytes = new Map(page.messages.map((m) => [m.id, utf8Length(m.content)]));
      st.hasOlder = page.messages.length === PAGE;
      setSession(s.session);
      setQueue(q.queue);
      setTurnOpen(s.session.state === 'RUNNING');
      publish();
      setFirstPageMs((v) => v ?? performance.now() - started);
      const pending = buffer ?? [];
      buffer = null;
      pending.forEach(apply);
      setLoading(false);
      setError(null);
    };
    const first = () =>
      loadAll().catch((e: unknown) => {
        if (stop) return;
        buffer = null;
        setLoading(false);
        setError(errorText(e));
      });
    sub.ready.then(first);
    const off = live.onReconnect(() => {
      // Missed notifications are replayed from our last seq; refresh the session object too
      // (its state may have been reconciled while the server restarted).
      call('session.get', { id: sessionId })
        .then((r) => !stop && setSession(r.session))
        .catch(() => {});
    });
    return () => {
      stop = true;
      sub.close();
      off();
    };
  }, [sessionId, publish]);

  const loadOlder = useCallback(() => {
    const s = state.current;
    const oldest = s.messages[0];
    if (!sessionId || !s.hasOlder || !oldest || loadingOlder.current) return;
    loadingOlder.current = true;
    call('message.list', { session_id: sessionId, before_seq: oldest.seq, limit: PAGE })
      .then(({ messages }) => {
        const known = new Set(s.messages.map((m) => m.id));
        const older = messages.filter((m) => !known.has(m.id));
        s.messages = [...older, ...s.messages];
        s.index = reindex(s.messages);
        for (const m of older) s.bytes.set(m.id, utf8Length(m.content));
        s.hasOlder = messages.length === PAGE;
        publish();
      })
      .catch(() => {})
      .finally(() => {
        loadingOlder.current = false;
      });
  }, [sessionId, publish]);

  return {
    session,
    transcript,
    queue,
    loading,
    error,
    deleted,
    turnOpen,
    loadOlder,
    firstPageMs,
  };
}
