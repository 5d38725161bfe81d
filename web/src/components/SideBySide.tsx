// A hunk side by side (drawn by ReviewDiff): the base version on the left, the task's on the
// right; removed and added lines of a run are paired row by row, context lines sit on both sides.
import type { DiffLineDto } from '../api/types';

/** A side's line: its number, text and kind, and its index in the hunk's lines (`at`). */
type Cell = { n: number; text: string; kind: 'ctx' | 'add' | 'del'; at: number } | null;

/** Rows of (old, new) cells for a hunk starting at `oldStart` / `newStart`. */
export function sideBySideRows(lines: DiffLineDto[], oldStart: number, newStart: number): [Cell, Cell][] {
  const rows: [Cell, Cell][] = [];
  let o = oldStart;
  let n = newStart;
  let dels: Cell[] = [];
  let adds: Cell[] = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) rows.push([dels[i] ?? null, adds[i] ?? null]);
    dels = [];
    adds = [];
  };
  lines.forEach((l, at) => {
    if (l.kind === 'removed') dels.push({ n: o++, text: l.text, kind: 'del', at });
    else if (l.kind === 'added') adds.push({ n: n++, text: l.text, kind: 'add', at });
    else {
      flush();
      rows.push([{ n: o++, text: l.text, kind: 'ctx', at }, { n: n++, text: l.text, kind: 'ctx', at }]);
    }
  });
  flush();
  return rows;
}
