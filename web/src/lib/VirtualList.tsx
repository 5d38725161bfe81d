// A small virtualized list with measured (variable) row heights: only the rows near the
// viewport are in the DOM, so a 2,000-card column or a 5,000-message transcript stays smooth.
// Keeps the first visible row in place when rows above it change size or are prepended, and
// can stick to the bottom (a live transcript).
import {
  type ReactNode,
  type Ref,
  useCallback,
  useEffect,
  useImperativeHandle,
  useLayoutEffect,
  useMemo,
  useRef,
  useState,
} from 'react';

export interface VirtualHandle {
  /** Index where a drop at `clientY` would insert. */
  indexAt(clientY: number): number;
  scrollToIndex(index: number): void;
  scrollToBottom(): void;
  element(): HTMLDivElement | null;
}

interface Props<T> {
  items: readonly T[];
  getKey: (item: T) => string;
  render: (item: T, index: number) => ReactNode;
  estimate: number;
  className?: string;
  stickToBottom?: boolean;
  onReachTop?: () => void;
  /** Told when the view reaches or leaves the bottom (a sticky list follows only there). */
  onAtBottomChange?: (atBottom: boolean) => void;
  overscan?: number;
  handle?: Ref<VirtualHandle>;
  role?: string;
  ariaLabel?: string;
  gap?: number;
  empty?: ReactNode;
}

export function VirtualList<T>(props: Props<T>) {
  const { items, getKey, render, estimate, stickToBottom = false, overscan = 800, gap = 0 } = props;
  const scrollRef = useRef<HTMLDivElement | null>(null);
  const heights = useRef(new Map<string, number>());
  const [, setVersion] = useState(0);
  const [viewport, setViewport] = useState({ top: 0, height: 800 });
  // What the DOM shows right now (the last committed layout), to keep the first visible row in
  // place across re-layouts without overriding a scroll that happened since.
  const laid = useRef<{ keys: string[]; offsets: number[] } | null>(null);
  const forceBottom = useRef(false);
  // Whether the view is at the bottom (a sticky list then follows new rows): set by scroll
  // events and by this list, not worked out from the previous layout alone, which would take
  // the browser pulling the position back (a batch of rows measured smaller than estimated
  // shrank the content) for a scroll up. `lastTop` is the position last known here, to notice
  // a scroll up that happened before its scroll event.
  const atBottom = useRef(true);
  const lastTop = useRef(0);
  const onReachTop = useRef(props.onReachTop);
  onReachTop.current = props.onReachTop;
  const onAtBottom = useRef(props.onAtBottomChange);
  onAtBottom.current = props.onAtBottomChange;
  const reported = useRef(true);
  const report = () => {
    if (reported.current !== atBottom.current) {
      reported.current = atBottom.current;
      onAtBottom.current?.(atBottom.current);
    }
  };

  const keys = useMemo(() => items.map(getKey), [items, getKey]);
  const sizes = keys.map((k) => heights.current.get(k) ?? estimate);
  const offsets = new Array<number>(keys.length + 1);
  offsets[0] = 0;
  for (let i = 0; i < keys.length; i++) offsets[i + 1] = (offsets[i] ?? 0) + (sizes[i] ?? estimate) + gap;
  const total = offsets[keys.length] ?? 0;
  const indexOfKey = useMemo(() => new Map(keys.map((k, i) => [k, i])), [keys]);

  // first row whose bottom is below y
  const rowAt = (y: number) => {
    let lo = 0;
    let hi = keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((offsets[mid + 1] ?? 0) <= y) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  // Rows taller than their estimate (not measured yet) make the content taller than `total`,
  // so the viewport can lie past it: it then shows the last rows. Rendering none would shrink
  // the content, pull the scroll position back and start over: a re-layout without end.
  const top = Math.min(viewport.top, Math.max(0, total - viewport.height));
  const start = Math.max(0, rowAt(top - overscan));
  const end = Math.min(keys.length, rowAt(top + viewport.height + overscan) + 1);

  const observer = useMemo(
    () =>
      typeof ResizeObserver === 'undefined'
        ? null
        : new ResizeObserver((entries) => {
            let changed = false;
            for (const entry of entries) {
              const el = entry.target as HTMLElement;
              const key = el.dataset.vkey;
              if (!key) continue;
              const h = Math.ceil(el.getBoundingClientRect().height);
              if (h > 0 && heights.current.get(key) !== h) {
                heights.current.set(key, h);
                changed = true;
              }
            }
            if (changed) setVersion((v) => v + 1);
          }),
    [],
  );
  useEffect(() => () => observer?.disconnect(), [observer]);

  // React 19 ref callbacks may return their cleanup.
  const measure = useCallback(
    (el: HTMLDivElement | null) => {
      if (!el || !observer) return;
      observer.observe(el);
      return () => observer.unobserve(el);
    },
    [observer],
  );

  const onScroll = () => {
    const el = scrollRef.current;
    if (!el) return;
    const top = el.scrollTop;
    atBottom.current = el.scrollHeight - top - el.clientHeight < 48;
    lastTop.current = top;
    report();
    setViewport({ top, height: el.clientHeight });
    if (top < 200) onReachTop.current?.();
  };

  useLayoutEffect(() => {
    const el = scrollRef.current;
    if (!el) return;
    const height = el.clientHeight;
    const prev = laid.current;
    const top = el.scrollTop;
    // the committed DOM already has the new height (padding included)
    const bottom = Math.max(0, el.scrollHeight - height);
    if (top < lastTop.current - 1 && bottom - top >= 48) atBottom.current = false; // scrolled up
    let target: number | null = null;
    if (prev === null) {
      if (stickToBottom) target = bottom;
    } else {
      if ((stickToBottom && atBottom.current) || forceBottom.current) {
        target = bottom;
        atBottom.current = true;
      } else {
        // the row that was at the top of the viewport stays where it was
        let lo = 0;
        let hi = prev.keys.length;
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          if ((prev.offsets[mid + 1] ?? 0) <= top) lo = mid + 1;
          else hi = mid;
        }
        const key = prev.keys[lo];
        const i = key === undefined ? undefined : indexOfKey.get(key);
        if (key !== undefined && i !== undefined) {
          const moved = (offsets[i] ?? 0) - (prev.offsets[lo] ?? 0);
          if (moved !== 0) target = top + moved;
        }
      }
    }
    forceBottom.current = false;
    laid.current = { keys, offsets };
    if (target !== null) {
      target = Math.max(0, Math.min(target, bottom));
      if (Math.abs(el.scrollTop - target) > 1) el.scrollTop = target;
    }
    lastTop.current = el.scrollTop;
    report();
    if (viewport.height !== height || Math.abs(viewport.top - el.scrollTop) > 1) {
      setViewport({ top: el.scrollTop, height });
    }
  });

  useEffect(() => {
    const el = scrollRef.current;
    if (!el || typeof ResizeObserver === 'undefined') return;
    const ro = new ResizeObserver(() => setViewport({ top: el.scrollTop, height: el.clientHeight }));
    ro.observe(el);
    return () => ro.disconnect();
  }, []);

  useImperativeHandle(
    props.handle,
    (): VirtualHandle => ({
      indexAt(clientY: number) {
        const el = scrollRef.current;
        if (!el) return keys.length;
        const y = clientY - el.getBoundingClientRect().top + el.scrollTop;
        for (let i = 0; i < keys.length; i++) {
          const mid = (offsets[i] ?? 0) + (sizes[i] ?? estimate) / 2;
          if (y < mid) return i;
        }
        return keys.length;
      },
      scrollToIndex(index: number) {
        const el = scrollRef.current;
        if (!el) return;
        const top = offsets[index] ?? 0;
        const bottom = offsets[index + 1] ?? top;
        if (top < el.scrollTop) el.scrollTop = top;
        else if (bottom > el.scrollTop + el.clientHeight) el.scrollTop = bottom - el.clientHeight;
      },
      scrollToBottom() {
        const el = scrollRef.current;
        if (!el) return;
        forceBottom.current = true;
        el.scrollTop = el.scrollHeight;
      },
      element: () => scrollRef.current,
    }),
  );

  const rows: ReactNode[] = [];
  for (let i = start; i < end; i++) {
    const item = items[i];
    const key = keys[i];
    if (item === undefined || key === undefined) continue;
    rows.push(
      <div
        key={key}
        data-vkey={key}
        ref={measure}
        className="vrow"
        style={{ transform: `translateY(${offsets[i] ?? 0}px)` }}
      >
        {render(item, i)}
      </div>,
    );
  }

  return (
    <div
      ref={scrollRef}
      className={`vscroll ${props.className ?? ''}`}
      onScroll={onScroll}
      role={props.role}
      aria-label={props.ariaLabel}
    >
      {items.length === 0 && props.empty}
      <div className="vinner" style={{ height: total }}>
        {rows}
      </div>
    </div>
  );
}
