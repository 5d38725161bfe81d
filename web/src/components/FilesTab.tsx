// The task's working directory (issue 18): its file tree (`task.tree`) and a read-only viewer
// of the chosen file (`task.file.read`). Nothing announces file changes: the tree is read when
// the tab opens and by Refresh. Text is syntax highlighted by highlight.js (lib/highlight.ts,
// its own chunk, loaded when the first file opens); until it is loaded, and for languages it
// does not know, the text is shown plain.
import { useCallback, useEffect, useState } from 'react';
import { call, errorText } from '../api/client';
import type { FileContentDto, TreeEntryDto } from '../api/types';
import { ErrorBanner } from './ErrorBanner';

type Highlighter = typeof import('../lib/highlight');

/** The tree's mark of a changed file, by its status in `task.changes`. */
const MARK: Record<string, string> = { modified: 'M', added: 'A', untracked: 'U', deleted: 'D', renamed: 'R' };

/** `1\n2\n…` for each line of `content` (a last newline ends the last line). */
function lineNumbers(content: string): string {
  const lines = content.endsWith('\n') ? content.split('\n').length - 1 : content.split('\n').length;
  return Array.from({ length: Math.max(lines, 1) }, (_, i) => i + 1).join('\n');
}

export function FilesTab({ taskId }: { taskId: string }) {
  const [entries, setEntries] = useState<TreeEntryDto[] | null>(null);
  const [truncated, setTruncated] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [open, setOpen] = useState<FileContentDto | null>(null);
  const [fileError, setFileError] = useState<string | null>(null);
  const [highlighter, setHighlighter] = useState<Highlighter | null>(null);
  useEffect(() => {
    if (!open || highlighter) return;
    let live = true;
    import('../lib/highlight')
      .then((m) => live && setHighlighter(m))
      .catch(() => {}); // shown plain
    return () => {
      live = false;
    };
  }, [open, highlighter]);
  const highlighted = open && !open.binary && highlighter ? highlighter.highlight(open.path, open.content) : null;

  const load = useCallback(() => {
    setError(null);
    call('task.tree', { task_id: taskId })
      .then((tree) => {
        setEntries(tree.entries);
        setTruncated(tree.truncated);
      })
      .catch((e: unknown) => setError(errorText(e)));
  }, [taskId]);
  useEffect(load, [load]);

  // The task's changed files (`task.changes`), marked in the tree; none when it has none.
  const [changed, setChanged] = useState<Map<string, string>>(new Map());
  useEffect(() => {
    call('task.changes', { task_id: taskId })
      .then((r) => setChanged(new Map(r.files.map((f) => [f.path, f.status]))))
      .catch(() => setChanged(new Map())); // a task without a worktree has no changes to mark
  }, [taskId, entries]);

  const read = (path: string) => {
    setFileError(null);
    call('task.file.read', { task_id: taskId, path })
      .then(setOpen)
      .catch((e: unknown) => setFileError(`${path}: ${errorText(e)}`));
  };

  return (
    <div className="files">
      <ErrorBanner error={error} onRetry={load} testId="files-error" />
      <nav className="file-tree" aria-label="Files">
        <button className="refresh" onClick={load}>
          Refresh
        </button>
        {entries === null && !error && <p className="hint">Loading the files…</p>}
        {entries?.length === 0 && <p className="hint">No files yet.</p>}
        <ul>
          {entries?.map((e) => {
            const depth = e.path.split('/').length - 1;
            const name = e.path.split('/').pop() ?? e.path;
            return (
              <li key={e.path} style={{ paddingLeft: `${depth * 14}px` }} data-kind={e.kind}>
                {e.kind === 'file' ? (
                  <>
                    <button
                      className={`link ${open?.path === e.path ? 'active' : ''}`}
                      title={e.path}
                      onClick={() => read(e.path)}
                    >
                      {name}
                    </button>
                    {changed.get(e.path) && (
                      <span
                        className={`change-mark change-${changed.get(e.path)}`}
                        title={`${changed.get(e.path)} in this task`}
                        data-testid="change-mark"
                      >
                        {MARK[changed.get(e.path) ?? ''] ?? '•'}
                      </span>
                    )}
                  </>
                ) : (
                  <span className="dir">{e.kind === 'dir' ? `${name}/` : `${name} →`}</span>
                )}
              </li>
            );
          })}
        </ul>
        {truncated && <p className="hint">Only the first entries are listed.</p>}
      </nav>
      <section className="file-view" aria-label={open ? `File ${open.path}` : 'File'}>
        <ErrorBanner error={fileError} onDismiss={() => setFileError(null)} testId="file-error" />
        {open ? (
          <>
            <h2 className="file-path">{open.path}</h2>
            {open.binary ? (
              <p className="hint">A binary file ({open.size.toLocaleString('en-US')} bytes) is not shown.</p>
            ) : (
              <div className="file-lines">
                {/* Line numbers beside the text (lines never wrap, so they stay aligned). */}
                <pre className="file-gutter" aria-hidden="true" data-testid="line-numbers">
                  {lineNumbers(open.content)}
                </pre>
                <pre className="file-content" data-language={highlighted?.language ?? 'plain'}>
                  {highlighted ? (
                    // highlight.js escapes the file's text; its output holds only its own spans.
                    <code className="hljs" dangerouslySetInnerHTML={{ __html: highlighted.html }} />
                  ) : (
                    <code>{open.content}</code>
                  )}
                </pre>
              </div>
            )}
            {open.truncated && <p className="hint">Only the first MiB is shown.</p>}
          </>
        ) : (
          <p className="hint">Choose a file to read it.</p>
        )}
      </section>
    </div>
  );
}
