// Short-lived notes at the bottom of the page ("Archived “x”", "Saved"), some with an Undo.
// One list for the whole page: `toast()` may be called from anywhere; <Toasts/> shows it.
import { useEffect, useState } from 'react';
import { errorText } from '../api/client';

export interface Toast {
  id: number;
  text: string;
  /** Offered as "Undo"; a failure of the undo is shown in place of the note. */
  undo?: () => Promise<unknown>;
  error?: boolean;
}

const SHOWN_MS = 8000;
let next = 1;
let toasts: Toast[] = [];
const listeners = new Set<(t: Toast[]) => void>();

function set(list: Toast[]) {
  toasts = list;
  listeners.forEach((l) => l(toasts));
}

export function dismissToast(id: number): void {
  set(toasts.filter((t) => t.id !== id));
}

/** Shows `text` for a few seconds (with Undo when `undo` is given). */
export function toast(text: string, options: { undo?: () => Promise<unknown>; error?: boolean } = {}): number {
  const id = next++;
  set([...toasts.slice(-2), { id, text, ...options }]);
  window.setTimeout(() => dismissToast(id), options.error ? SHOWN_MS * 2 : SHOWN_MS);
  return id;
}

export function Toasts() {
  const [list, setList] = useState(toasts);
  useEffect(() => {
    listeners.add(setList);
    return () => void listeners.delete(setList);
  }, []);
  return (
    <div className="toasts" role="status" aria-live="polite">
      {list.map((t) => (
        <div key={t.id} className={`toast ${t.error ? 'toast-error' : ''}`} data-testid="toast">
          <span>{t.text}</span>
          {t.undo && (
            <button
              type="button"
              className="link"
              onClick={() => {
                const undo = t.undo;
                dismissToast(t.id);
                undo?.().catch((e: unknown) => toast(`Undo failed: ${errorText(e)}`, { error: true }));
              }}
            >
              Undo
            </button>
          )}
          <button type="button" className="icon" aria-label="Dismiss" onClick={() => dismissToast(t.id)}>
            ×
          </button>
        </div>
      ))}
    </div>
  );
}
