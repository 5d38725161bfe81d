// Full-text search through the `search` action: what a person types becomes a safe FTS5
// query (every word quoted, the last one a prefix), so typing never hits a syntax error.
import { useEffect, useState } from 'react';
import { call, errorText } from '../api/client';
import type { SearchHitDto } from '../api/types';

/** `fix the bu` → `"fix" "the" "bu"*`: all words, in any order, the last as a prefix. */
export function ftsQuery(typed: string): string {
  const words = typed.split(/\s+/).filter((w) => w.length > 0);
  return words
    .map((w, i) => {
      const quoted = `"${w.replaceAll('"', '""')}"`;
      return i === words.length - 1 ? `${quoted}*` : quoted;
    })
    .join(' ');
}

export interface SearchState {
  hits: SearchHitDto[];
  /** The text the hits are for (they lag behind typing by the debounce). */
  forText: string;
  error: string | null;
  busy: boolean;
}

/** Hits of `typed` in the workspace, debounced; empty text searches nothing. */
export function useSearch(workspaceId: string | undefined, typed: string, limit = 50): SearchState {
  const [state, setState] = useState<SearchState>({ hits: [], forText: '', error: null, busy: false });
  useEffect(() => {
    const text = typed.trim();
    if (!workspaceId || !text) {
      setState({ hits: [], forText: '', error: null, busy: false });
      return;
    }
    let cancelled = false;
    setState((s) => ({ ...s, busy: true }));
    const timer = setTimeout(() => {
      call('search', { workspace_id: workspaceId, query: ftsQuery(text), limit })
        .then((page) => {
          if (!cancelled) setState({ hits: page.hits, forText: text, error: null, busy: false });
        })
        .catch((err: unknown) => {
          if (!cancelled) setState({ hits: [], forText: text, error: errorText(err), busy: false });
        });
    }, 150);
    return () => {
      cancelled = true;
      clearTimeout(timer);
    };
  }, [workspaceId, typed, limit]);
  return state;
}

/** A task in the results: its best hit and how many more it had. */
export interface TaskHit {
  hit: SearchHitDto;
  more: number;
}

/** One row per task, tasks whose title or description matched first (then in the server's
 * rank order); each row keeps the task's best hit, a title hit over a message hit. */
export function byTask(hits: SearchHitDto[]): TaskHit[] {
  const rows = new Map<string, TaskHit>();
  for (const hit of hits) {
    const row = rows.get(hit.task_id);
    if (!row) rows.set(hit.task_id, { hit, more: 0 });
    else {
      row.more += 1;
      if (row.hit.kind === 'message' && hit.kind !== 'message') row.hit = hit;
    }
  }
  const all = [...rows.values()];
  return [...all.filter((r) => r.hit.kind !== 'message'), ...all.filter((r) => r.hit.kind === 'message')];
}
