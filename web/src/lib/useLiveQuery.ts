// One hook per live query: follow a topic, read the objects once the subscription is confirmed,
// hold back the notifications that arrive during the read and apply them after it, and read
// afresh when the subscription is confirmed again after a reconnect or a `resync_required`
// (../api/live.ts). Duplicates (seq at or below the last one seen) never reach `apply`: the
// subscription layer drops them. Payloads are full objects or length-checked deltas, so a
// notification the read already contains is harmless to apply again.
import { useCallback, useEffect, useRef, useState } from 'react';
import { errorText } from '../api/client';
import { live } from '../api/live';
import type { Notification } from '../api/types';

/** What `apply` may do besides returning the new data. */
export interface LiveQueryControl<T> {
  /** Changes the data later (e.g. when a message re-read after a gap arrives). */
  update: (change: (data: T) => T) => void;
  /** Reads afresh (e.g. when a notification says something the payload does not carry). */
  reload: () => void;
}

export interface LiveQuery<T> extends LiveQueryControl<T> {
  /** The objects, once a read succeeded; `null` before (and after a topic change). */
  data: T | null;
  /** Nothing to show yet: the first read is under way. */
  loading: boolean;
  /** The last read failed: a message for a person; cleared by the next read that succeeds. */
  error: string | null;
  dismissError: () => void;
}

/**
 * Follows `topic` (`null`: not yet known, nothing is read) with `load` and `apply`.
 *
 * - `load(previous)` reads the objects; `previous` is the data held so far (`null` on the
 *   first read), so a reload can keep what it still agrees with (older transcript pages).
 *   The query starts over (new subscription, first read) when `topic` or `load` changes:
 *   give a `load` that is stable between renders (`useCallback`).
 * - `apply(data, n, control)` returns the data after one notification. It is called exactly
 *   once per notification, in order, never during a read; the latest `apply` is used.
 */
export function useLiveQuery<T>(
  topic: string | null,
  load: (previous: T | null) => Promise<T>,
  apply: (data: T, n: Notification, control: LiveQueryControl<T>) => T,
): LiveQuery<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const applyRef = useRef(apply);
  applyRef.current = apply;
  const control = useRef<LiveQueryControl<T> | null>(null);

  useEffect(() => {
    setData(null);
    setError(null);
    if (topic === null) return;
    let closed = false;
    let current: T | null = null;
    // Notifications held back while a read is under way; `null` when applied as they come.
    let held: Notification[] | null = [];
    // Only the newest read's answer is used.
    let reads = 0;

    const publish = () => {
      if (!closed) setData(current);
    };
    // One notification. One that cannot be applied (a payload this page does not understand)
    // is logged and the objects are read afresh: what is shown then is right again.
    const step = (n: Notification) => {
      if (current === null) return;
      try {
        current = applyRef.current(current, n, ctl);
      } catch (e) {
        console.error(`${topic}: ${n.action} could not be applied; reading afresh`, e);
        ctl.reload();
      }
    };
    const applyAll = (notes: Notification[]) => notes.forEach(step);
    const read = () => {
      if (closed) return;
      const mine = ++reads;
      held ??= [];
      load(current).then(
        (value) => {
          if (closed || mine !== reads) return;
          current = value;
          const pending = held ?? [];
          held = null;
          applyAll(pending);
          publish();
          setError(null);
        },
        (e: unknown) => {
          if (closed || mine !== reads) return;
          // Go on live with what is shown (if anything): what was held back applies to it.
          const pending = held ?? [];
          held = null;
          applyAll(pending);
          publish();
          setError(errorText(e));
        },
      );
    };
    const ctl: LiveQueryControl<T> = {
      update: (change) => {
        if (closed || current === null) return;
        current = change(current);
        publish();
      },
      // Read once the subscription is confirmed, so nothing between the read and it is lost.
      reload: () => void sub.ready.then(read),
    };
    const sub = live.subscribe(
      topic,
      (n) => {
        if (held) {
          held.push(n);
        } else if (current !== null) {
          step(n);
          publish();
        }
      },
      read,
    );
    control.current = ctl;
    void sub.ready.then(read);
    return () => {
      closed = true;
      control.current = null;
      sub.close();
    };
  }, [topic, load]);

  const update = useCallback((change: (data: T) => T) => control.current?.update(change), []);
  const reload = useCallback(() => control.current?.reload(), []);
  const dismissError = useCallback(() => setError(null), []);
  return { data, loading: topic !== null && data === null && error === null, error, update, reload, dismissError };
}
