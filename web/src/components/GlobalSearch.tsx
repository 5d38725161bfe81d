// Global search (Ctrl+K): tasks and transcripts of the workspace, one row per task (title
// hits first), with the matched words highlighted; Enter or a click opens the task (at the
// session of a message hit); Esc closes.
import { useEffect, useRef, useState } from 'react';
import type { SearchHitDto } from '../api/types';
import { useData } from '../lib/data';
import { navigate, taskPath } from '../lib/router';
import { byTask, useSearch } from '../lib/search';
import { Dialog } from './Dialog';

/**
 * Opens the search on Ctrl+K / Cmd+K anywhere, even in a text field. (`/` is the board's own
 * search box: it filters the cards in place.)
 */
export function useSearchShortcut(open: () => void) {
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if ((e.ctrlKey || e.metaKey) && !e.altKey && e.key.toLowerCase() === 'k') {
        e.preventDefault();
        open();
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [open]);
}

export function Snippet(props: { hit: SearchHitDto }) {
  return (
    <span className="snippet">
      {props.hit.snippet.map((part, i) => (part.highlight ? <mark key={i}>{part.text}</mark> : <span key={i}>{part.text}</span>))}
    </span>
  );
}

export function GlobalSearch(props: { onClose: () => void }) {
  const { workspace } = useData();
  const [text, setText] = useState('');
  const [active, setActive] = useState(0);
  const result = useSearch(workspace?.id, text);
  const input = useRef<HTMLInputElement>(null);
  // The dialog focuses its first control (Close) when it opens; typing belongs in the box.
  useEffect(() => input.current?.focus(), []);
  // One row per task, title hits first.
  const rows = byTask(result.hits);
  const hits = rows.map((r) => r.hit);
  const open = (hit: SearchHitDto) => {
    props.onClose();
    navigate(taskPath(hit.task_id, hit.session_id));
  };
  return (
    <Dialog title="Search" onClose={props.onClose} wide>
      <div className="global-search">
        <input
          ref={input}
          type="search"
          aria-label="Search tasks and messages"
          placeholder="Search tasks and messages"
          value={text}
          onChange={(e) => {
            setText(e.target.value);
            setActive(0);
          }}
          onKeyDown={(e) => {
            if (e.key === 'ArrowDown') {
              e.preventDefault();
              setActive((a) => Math.min(a + 1, hits.length - 1));
            } else if (e.key === 'ArrowUp') {
              e.preventDefault();
              setActive((a) => Math.max(a - 1, 0));
            } else if (e.key === 'Enter' && hits[active]) {
              e.preventDefault();
              open(hits[active]);
            } else if (e.key === 'Escape') {
              // Closes at once (a search box would first only clear itself).
              e.preventDefault();
              props.onClose();
            }
          }}
        />
        {result.error && (
          <div className="banner error" role="alert">
            {result.error}
          </div>
        )}
        {text.trim() && !result.busy && !result.error && hits.length === 0 && result.forText && (
          <p className="muted">Nothing found.</p>
        )}
        <ul className="search-hits" role="listbox" aria-label="Search results">
          {rows.map(({ hit, more }, i) => (
            <li
              key={`${hit.kind}-${hit.message_id ?? hit.task_id}`}
              role="option"
              aria-selected={i === active}
              className={i === active ? 'active' : ''}
              onMouseEnter={() => setActive(i)}
              onClick={() => open(hit)}
            >
              <span className="hit-title">{hit.task_title}</span>
              <span className="hit-kind">
                {hit.kind === 'message' ? 'message' : 'task'}
                {more > 0 && ` · ${more} more`}
              </span>
              <Snippet hit={hit} />
            </li>
          ))}
        </ul>
      </div>
    </Dialog>
  );
}
