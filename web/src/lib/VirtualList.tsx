// A virtualized list with measured (variable) row heights on `@tanstack/react-virtual`: only
// the rows near the viewport are in the DOM, so a 2,000-card column or a 5,000-message
// transcript stays smooth. Keeps the first visible row in place when rows above it change
// size or are prepended (the library's `anchorTo: 'end'`), and can stick to the bottom (a
// live transcript: the library follows appends and rows growing at the end; this file also
// follows a viewport that shrinks and notices a scroll up). What the library cannot do as the
// hand-written list did: it places the prepend anchor from the position of the last scroll
// event, so a page prepended in the frame after a scroll undoes that one frame's scroll.
import { elementScroll, observeElementRect, useVirtualizer, type Virtualizer } from '@tanstack/react-virtual';
import { type ReactNode, type Ref, useCallback, useEffect, useImperativeHandle, useLayoutEffect, useRef } from 'react';

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
  /** Pixels rendered beyond each edge of the viewport. */
  overscan?: number;
  handle?: Ref<VirtualHandle>;
  role?: string;
  ariaLabel?: string;
  gap?: number;
  empty?: ReactNode;
}

/** How close to the bottom counts as "at the bottom" (a sticky list follows from there). */
const NEAR_BOTTOM = 48;

/** A hidden list (a phone shows one column at a time) still renders its first rows, as if it
 * were 1 px tall: the library would render none at height 0, and the board counts and finds
 * cards of every column in the DOM (a card that needs you, the focus following a card). */
function observeRect(instance: Virtualizer<HTMLDivElement, HTMLDivElement>, cb: (rect: { width: number; height: number }) => void) {
  return observeElementRect(instance, (rect) => cb(rect.height > 0 ? rect : { ...rect, height: 1 }));
}

/** The library corrects the position for a row above the view that changed size by writing
 * the position it last read from a scroll event plus the change: a scroll since (the browser
 * sends its event a frame later) is undone, which halved the speed of a fast scroll up the
 * transcript. The correction is applied to where the element is instead. */
function scrollTo(
  offset: number,
  options: { adjustments?: number; behavior?: ScrollBehavior },
  instance: Virtualizer<HTMLDivElement, HTMLDivElement>,
) {
  const el = instance.scrollElement;
  const delta = options.adjustments ?? 0;
  if (el && delta !== 0 && options.behavior !== 'smooth') el.scrollTop += delta;
  else elementScroll(offset, options, instance);
}

export function VirtualList<T>(props: Props<T>) {
  const { items, getKey, render, estimate, stickToBottom = false, overscan = 800, gap = 0 } = props;
  const scrollRef = useRef<HTMLDivElement | null>(null);
  // Whether the view is at the bottom (a sticky list then follows): set by scroll events, not
  // worked out from the layout, which would take the browser pulling the position back (rows
  // measured smaller than estimated shrank the content) for a scroll up. `lastTop` is the
  // position last known here, to notice a scroll up that happened before its scroll event.
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

  const itemKey = useCallback((i: number) => {
    const item = items[i];
    return item === undefined ? i : getKey(item);
  }, [items, getKey]);
  const virtualizer = useVirtualizer<HTMLDivElement, HTMLDivElement>({
    count: items.length,
    getScrollElement: () => scrollRef.current,
    observeElementRect: observeRect,
    scrollToFn: scrollTo,
    initialRect: { width: 0, height: 1 },
    estimateSize: () => estimate,
    getItemKey: itemKey,
    // the library counts rows, this list's callers pixels
    overscan: Math.max(1, Math.ceil(overscan / (estimate + gap))),
    gap,
    paddingEnd: gap,
    anchorTo: 'end',
    followOnAppend: stickToBottom,
    scrollEndThreshold: stickToBottom ? NEAR_BOTTOM : 1,
  });

  const onScroll = () => {
    const el = scrollRef.current;
    if (!el) return;
    const top = el.scrollTop;
    atBottom.current = el.scrollHeight - top - el.clientHeight < NEAR_BOTTOM;
    lastTop.current = top;
    report();
    if (top < 200) onReachTop.current?.();
  };

  // A sticky list at the bottom stays there whatever changed: the first rows arriving, a
  // viewport that shrank (the composer grew), rows the library did not follow.
  const follow = useCallback(() => {
    const el = scrollRef.current;
    if (!el) return;
    const top = el.scrollTop;
    const bottom = Math.max(0, el.scrollHeight - el.clientHeight);
    if (top < lastTop.current - 1 && bottom - top >= NEAR_BOTTOM) atBottom.current = false; // scrolled up
    if (stickToBottom && atBottom.current && bottom - top > 1 && items.length > 0) virtualizer.scrollToEnd();
    lastTop.current = el.scrollTop;
    report();
  }, [stickToBottom, items.length, virtualizer]);
  useLayoutEffect(follow);

  useEffect(() => {
    const el = scrollRef.current;
    if (!el || typeof ResizeObserver === 'undefined') return;
    const ro = new ResizeObserver(() => follow());
    ro.observe(el);
    return () => ro.disconnect();
  }, [follow]);

  useImperativeHandle(
    props.handle,
    (): VirtualHandle => ({
      indexAt(clientY: number) {
        const el = scrollRef.current;
        if (!el || items.length === 0) return items.length;
        const y = clientY - el.getBoundingClientRect().top + el.scrollTop;
        const row = virtualizer.getVirtualItemForOffset(y);
        if (!row) return items.length;
        return y < row.start + row.size / 2 ? row.index : row.index + 1;
      },
      scrollToIndex(index: number) {
        virtualizer.scrollToIndex(index, { align: 'auto' });
      },
      scrollToBottom() {
        atBottom.current = true;
        virtualizer.scrollToEnd();
      },
      element: () => scrollRef.current,
    }),
  );

  const rows: ReactNode[] = [];
  for (const row of virtualizer.getVirtualItems()) {
    const item = items[row.index];
    if (item === undefined) continue;
    rows.push(
      <div
        key={row.key}
        data-vkey={row.key}
        data-index={row.index}
        ref={virtualizer.measureElement}
        className="vrow"
        style={{ transform: `translateY(${row.start}px)` }}
      >
        {render(item, row.index)}
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
      <div className="vinner" style={{ height: virtualizer.getTotalSize() }}>
        {rows}
      </div>
    </div>
  );
}
