// One session's live state: the session object, its transcript (newest page first, older pages
// on demand), its queue, the agent's questions and whether a turn is open: one live query over
// `session:<id>`.
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { call, errorText } from '../api/client';
import type { MessageDto, MessageUpdate, Notification, QuestionDto, QueuedPromptDto, SessionDto } from '../api/types';
import {
  applyDelta,
  mergeNewest,
  prependOlder,
  type TranscriptWindow,
  upsertMessage,
} from './transcript';
import { type LiveQueryControl, useLiveQuery } from './useLiveQuery';

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
  /** The agent's questions (MCP `ask_user`), oldest first, whatever their status. */
  questions: QuestionDto[];
  loading: boolean;
  /** A read failed (the session, a message re-read after a gap, older messages). */
  error: string | null;
  dismissError: () => void;
  /** Reads the session afresh. */
  retry: () => void;
  deleted: boolean;
  turnOpen: boolean;
  loadOlder: () => void;
  /** Milliseconds from mount to the first transcript page being in state. */
  firstPageMs: number | null;
}

interface SessionData {
  session: SessionDto;
  window: TranscriptWindow;
  queue: QueuedPromptDto[];
  questions: QuestionDto[];
  turnOpen: boolean;
  deleted: boolean;
}

function upsertQuestion(list: QuestionDto[], q: QuestionDto): QuestionDto[] {
  return list.some((x) => x.id === q.id) ? list.map((x) => (x.id === q.id ? q : x)) : [...list, q];
}

const NO_TRANSCRIPT: Transcript = { messages: [], hasOlder: false };

export function useSession(sessionId: string | null): SessionLive {
  // Runs before the query's effect (declared first), so the first read is timed from mount.
  const timing = useRef({ started: 0, firstPageMs: null as number | null });
  useEffect(() => {
    timing.current = { started: performance.now(), firstPageMs: null };
  }, [sessionId]);
  // Failures of the reads besides the query's own (a re-read message, older pages).
  const [readError, setReadError] = useState<string | null>(null);
  const loadingOlder = useRef(false);

  const load = useCallback(
    async (previous: SessionData | null): Promise<SessionData> => {
      if (!sessionId) throw new Error('no session'); // never: the query has no topic then
      const [s, page, q, asked] = await Promise.all([
        call('session.get', { id: sessionId }),
        call('message.list', { session_id: sessionId, before_seq: NEWEST, limit: PAGE }),
        call('message.queue.list', { session_id: sessionId }),
        call('question.list', { session_id: sessionId }),
      ]);
      const t = timing.current;
      t.firstPageMs ??= performance.now() - t.started;
      setReadError(null);
      return {
        session: s.session,
        window: mergeNewest(previous?.window ?? null, page.messages, page.messages.length === PAGE),
        queue: q.queue,
        questions: asked.questions,
        turnOpen: s.session.state === 'RUNNING',
        deleted: false,
      };
    },
    [sessionId],
  );

  /** A gap in a streamed message: read the whole message. */
  const reread = (id: string, seq: number, control: LiveQueryControl<SessionData>) => {
    if (!sessionId) return;
    call('message.list', { session_id: sessionId, after_seq: seq - 1, limit: 1 }).then(
      ({ messages }) => {
        const m = messages[0];
        if (m && m.id === id) control.update((d) => ({ ...d, window: upsertMessage(d.window, m) }));
      },
      (e: unknown) => setReadError(`A message could not be read in full: ${errorText(e)}`),
    );
  };

  const apply = (d: SessionData, n: Notification, control: LiveQueryControl<SessionData>): SessionData => {
    // Destructured, `p` is narrowed to each action's payload.
    const { action, payload: p } = n;
    switch (action) {
      case 'session.message.added':
        return { ...d, window: upsertMessage(d.window, p.message) };
      case 'session.message.updated': {
        const u: MessageUpdate = p;
        if ('message' in u) return { ...d, window: upsertMessage(d.window, u.message) };
        const r = applyDelta(d.window, u);
        if (r.kind === 'applied') return { ...d, window: r.window };
        if (r.kind === 'reread') reread(r.messageId, r.seq, control);
        return d;
      }
      case 'session.created':
      case 'session.updated':
      case 'session.state_changed':
      case 'session.mode_changed':
      case 'session.config_changed':
        // A session that is not running has no open turn, whatever was missed (issue 14 d2:
        // a turn a server restart ended has no `turn.completed`).
        return {
          ...d,
          session: p.session,
          turnOpen: p.session.state === 'RUNNING' || p.session.state === 'STARTING' ? d.turnOpen : false,
        };
      case 'session.error':
        return { ...d, session: { ...d.session, last_error: p.last_error } };
      case 'session.queue.changed':
        return { ...d, queue: p.queue };
      case 'session.turn.started':
        return { ...d, turnOpen: true };
      case 'session.turn.completed':
        return { ...d, turnOpen: false };
      case 'session.permission.requested':
        return { ...d, window: upsertMessage(d.window, p.message) };
      case 'session.question.asked':
      case 'session.question.resolved':
        return { ...d, questions: upsertQuestion(d.questions, p.question) };
      case 'session.deleted':
        return { ...d, deleted: true };
      default:
        return d;
    }
  };

  const query = useLiveQuery(sessionId ? `session:${sessionId}` : null, load, apply);
  const { update } = query;
  const latest = useRef(query.data);
  latest.current = query.data;

  const loadOlder = useCallback(() => {
    const oldest = latest.current?.window.messages[0];
    if (!sessionId || !latest.current?.window.hasOlder || !oldest || loadingOlder.current) return;
    loadingOlder.current = true;
    call('message.list', { session_id: sessionId, before_seq: oldest.seq, limit: PAGE })
      .then(
        ({ messages }) =>
          update((d) =>
            // a reload that did not keep this page's place replaced the window: drop the page
            d.window.messages[0]?.id === oldest.id
              ? { ...d, window: prependOlder(d.window, messages, messages.length === PAGE) }
              : d,
          ),
        (e: unknown) => setReadError(`Older messages could not be read: ${errorText(e)}`),
      )
      .finally(() => {
        loadingOlder.current = false;
      });
  }, [sessionId, update]);

  const d = query.data;
  const messages = d?.window.messages;
  const hasOlder = d?.window.hasOlder ?? false;
  const transcript = useMemo(() => (messages ? { messages, hasOlder } : NO_TRANSCRIPT), [messages, hasOlder]);
  const { dismissError: dismissQueryError, reload } = query;
  const dismissError = useCallback(() => {
    setReadError(null);
    dismissQueryError();
  }, [dismissQueryError]);

  return {
    session: d?.session ?? null,
    transcript,
    queue: d?.queue ?? [],
    questions: d?.questions ?? [],
    loading: query.loading,
    error: query.error ?? readError,
    dismissError,
    retry: reload,
    deleted: d?.deleted ?? false,
    turnOpen: d?.turnOpen ?? false,
    loadOlder,
    firstPageMs: timing.current.firstPageMs,
  };
}
