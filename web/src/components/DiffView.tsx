// A unified line diff of an edit (old text → new text), computed in the browser with an LCS
// table for small edits; large edits fall back to "all removed, all added".
import { useMemo, useState } from 'react';

type Line = { kind: 'ctx' | 'add' | 'del'; text: string };

const MAX_CELLS = 400_000;

export function lineDiff(oldText: string, newText: string): Line[] {
  const a = oldText === '' ? [] : oldText.split('\n');
  const b = newText === '' ? [] : newText.split('\n');
  if (a.length * b.length > MAX_CELLS) {
    return [...a.map((text) => ({ kind: 'del' as const, text })), ...b.map((text) => ({ kind: 'add' as const, text }))];
  }
  const n = a.length;
  const m = b.length;
  const lcs: Uint32Array[] = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    const row = lcs[i]!;
    const next = lcs[i + 1]!;
    for (let j = m - 1; j >= 0; j--) {
      row[j] = a[i] === b[j] ? next[j + 1]! + 1 : Math.max(next[j]!, row[j + 1]!);
    }
  }
  const out: Line[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      out.push({ kind: 'ctx', text: a[i]! });
      i++;
      j++;
    } else if (lcs[i + 1]![j]! >= lcs[i]![j + 1]!) {
      out.push({ kind: 'del', text: a[i++]! });
    } else {
      out.push({ kind: 'add', text: b[j++]! });
    }
  }
  while (i < n) out.push({ kind: 'del', text: a[i++]! });
  while (j < m) out.push({ kind: 'add', text: b[j++]! });
  return out;
}

export function DiffLines({ lines }: { lines: { kind: string; text: string }[] }) {
  return (
    <pre className="diff">
      {lines.map((l, i) => {
        const kind = l.kind === 'add' || l.kind === 'added' || l.kind === '+' ? 'add' : l.kind === 'del' || l.kind === 'removed' || l.kind === 'deleted' || l.kind === '-' ? 'del' : 'ctx';
        return (
          <span key={i} className={`dl dl-${kind}`}>
            <span className="dl-sign" aria-hidden="true">
              {kind === 'add' ? '+' : kind === 'del' ? '-' : ' '}
            </span>
            {l.text}
            {'\n'}
          </span>
        );
      })}
    </pre>
  );
}

export function DiffView({ path, oldText, newText }: { path: string; oldText: string | null; newText: string }) {
  const [open, setOpen] = useState(true);
  const lines = useMemo(() => lineDiff(oldText ?? '', newText), [oldText, newText]);
  const adds = lines.filter((l) => l.kind === 'add').length;
  const dels = lines.filter((l) => l.kind === 'del').length;
  return (
    <div className="diff-file">
      <button className="diff-head" aria-expanded={open} onClick={() => setOpen(!open)}>
        <code>{path}</code>
        {oldText === null && <span className="badge">new file</span>}
        <span className="adds">+{adds}</span>
        <span className="dels">−{dels}</span>
      </button>
      {open && <DiffLines lines={lines} />}
    </div>
  );
}
