// Git control of the task's worktree, beside the review on the Changes tab: the working tree
// (what is staged and what is not, each file and each hunk with Stage, Unstage or Discard;
// commit what is staged, amend the last commit) and the task branch's commits, each with its
// diff (`task.index`, `task.stage` / `task.unstage` / `task.discard`, `task.commit`
// `staged_only`, `task.amend`, `task.commits`, `task.commit.diff`). While a turn runs the
// server refuses what changes the worktree and the refusal is the note.
import { useCallback, useEffect, useMemo, useState } from 'react';
import { call, errorText } from '../api/client';
import type { BranchCommitDto, FileChangeDto, HunkDto, IndexDto } from '../api/types';
import { useRole } from '../lib/me';
import { useMutation } from '../lib/useMutation';
import { Dialog } from './Dialog';
import { Code, unifiedRows, useHighlighter } from './ReviewDiff';

type Note = { text: string; ok: boolean } | null;

/** A hunk, read-only, with its line numbers, highlighted as `path`'s language once the
 * highlighter is there; `actions` sit on its header. */
function PlainHunk({ hunk, path, actions }: { hunk: HunkDto; path: string; actions?: React.ReactNode }) {
  const highlighter = useHighlighter(true);
  const html = useMemo(
    () => highlighter?.highlightLines(path, hunk.lines.map((l) => l.text)) ?? null,
    [highlighter, path, hunk],
  );
  return (
    <div className="hunk">
      <div className="hunk-head row">
        <span>{hunk.header}</span>
        <span className="spacer" />
        {actions}
      </div>
      <table className="diff unified" aria-label="Unified diff">
        <tbody>
          {unifiedRows(hunk.lines, hunk.old_start, hunk.new_start).map((r, i) => (
            <tr key={i} className={`dl dl-${r.kind}`}>
              <td className="ln">{r.old ?? ''}</td>
              <td className="ln">{r.new ?? ''}</td>
              <td className="dl-text">
                <span className="dl-sign" aria-hidden="true">
                  {r.kind === 'add' ? '+' : r.kind === 'del' ? '-' : ' '}
                </span>
                <Code text={r.text} html={html?.[i]} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

type Change = 'stage' | 'unstage' | 'discard';
/** Read-only diffs of files (a commit's, a turn's), one open section per file. */
export function FileDiffs({ files }: { files: FileChangeDto[] }) {
  return (
    <>
      {files.map((f) => (
        <details key={`${f.repository_id ?? ''}:${f.path}`} className="diff-file" open data-path={f.path}>
          <summary className="diff-head">
            <code>{f.old_path ? `${f.old_path} → ${f.path}` : f.path}</code>
            <span className="badge">{f.status}</span>
            <span className="adds">+{f.additions}</span>
            <span className="dels">−{f.deletions}</span>
          </summary>
          {f.hunks.map((h, i) => (
            <PlainHunk key={i} hunk={h} path={f.path} />
          ))}
        </details>
      ))}
    </>
  );
}

const LABEL: Record<Change, string> = { stage: 'Stage', unstage: 'Unstage', discard: 'Discard' };
const DONE: Record<Change, string> = { stage: 'Staged', unstage: 'Unstaged', discard: 'Discarded' };

/** One file of the index with its actions, per file and per hunk. */
function IndexFile(props: {
  file: FileChangeDto;
  changes: Change[];
  busy: boolean;
  onChange: (change: Change, file: FileChangeDto, hunk: number | null) => void;
}) {
  const { file, changes, busy, onChange } = props;
  // A hunk of an untracked, renamed or truncated file goes whole: no per-hunk buttons.
  const perHunk = file.status !== 'untracked' && file.status !== 'renamed' && !file.truncated && file.hunks.length > 1;
  return (
    <details className="diff-file index-file" open data-path={file.path}>
      <summary className="diff-head">
        <code>{file.path}</code>
        <span className="badge">{file.status}</span>
        <span className="adds">+{file.additions}</span>
        <span className="dels">−{file.deletions}</span>
        <span className="spacer" />
        {changes.map((c) => (
          <button
            key={c}
            type="button"
            disabled={busy}
            aria-label={`${LABEL[c]} ${file.path}`}
            onClick={(e) => {
              e.preventDefault(); // not a fold of the file
              onChange(c, file, null);
            }}
          >
            {LABEL[c]}
          </button>
        ))}
      </summary>
      {file.hunks.map((h, i) => (
        <PlainHunk
          key={i}
          hunk={h}
          path={file.path}
          actions={
            perHunk &&
            changes.map((c) => (
              <button
                key={c}
                type="button"
                className="link"
                disabled={busy}
                aria-label={`${LABEL[c]} hunk ${i + 1} of ${file.path}`}
                onClick={() => onChange(c, file, i)}
              >
                {LABEL[c]} hunk
              </button>
            ))
          }
        />
      ))}
    </details>
  );
}

/** What is staged and what is not, with Stage, Unstage, Discard, Commit staged and Amend. */
export function WorkingTree({ taskId, version, onChanged }: { taskId: string; version: number; onChanged: () => void }) {
  const [index, setIndex] = useState<IndexDto[] | null>(null);
  const [note, setNote] = useState<Note>(null);
  const [message, setMessage] = useState('');
  const refused = useCallback((text: string | null) => setNote(text ? { text, ok: false } : null), []);
  const { busy, run } = useMutation(refused);
  // Staging and committing are a member's; a viewer sees the working tree (issue 49).
  const works = useRole().can('member');
  const load = useCallback(() => {
    call('task.index', { task_id: taskId })
      .then((r) => setIndex(r.repositories))
      .catch((e: unknown) => refused(errorText(e)));
  }, [taskId, refused]);
  useEffect(load, [load, version]);

  // A discard waits for a yes in a dialog: what it throws away cannot be brought back.
  const [discarding, setDiscarding] = useState<{ file: FileChangeDto; hunk: number | null } | null>(null);
  const change = (what: Change, file: FileChangeDto, hunk: number | null) => {
    if (what === 'discard') setDiscarding({ file, hunk });
    else apply(what, file, hunk);
  };
  const apply = (what: Change, file: FileChangeDto, hunk: number | null) => {
    void run(async () => {
      try {
        await call(`task.${what}`, {
          task_id: taskId,
          repository_id: file.repository_id ?? undefined,
          path: file.path,
          ...(hunk === null ? {} : { hunk, diff_hash: file.diff_hash }),
        });
        setNote({ text: `${DONE[what]} ${hunk === null ? file.path : `hunk ${hunk + 1} of ${file.path}`}.`, ok: true });
      } finally {
        load();
        onChanged();
      }
    });
  };
  const staged = index?.flatMap((r) => r.staged) ?? [];
  const unstaged = index?.flatMap((r) => r.unstaged) ?? [];
  return (
    <section className="working-tree" aria-label="Working tree">
      {discarding && (
        <Dialog title="Discard these changes?" onClose={() => setDiscarding(null)}>
          <p>
            The unstaged changes of <code>{discarding.file.path}</code>
            {discarding.hunk === null ? '' : ` in hunk ${discarding.hunk + 1}`}
            {discarding.file.status === 'untracked' ? ' (the whole file: it is not tracked)' : ''} are thrown away. They
            cannot be brought back.
          </p>
          <div className="actions">
            <button onClick={() => setDiscarding(null)}>Keep them</button>
            <button
              className="danger"
              onClick={() => {
                setDiscarding(null);
                apply('discard', discarding.file, discarding.hunk);
              }}
            >
              Discard
            </button>
          </div>
        </Dialog>
      )}
      {note && (
        <p role="status" data-testid="git-note" data-ok={note.ok ? 'yes' : 'no'} className={note.ok ? 'ship-note ok' : 'ship-note refused'}>
          {note.text}
        </p>
      )}
      <h3>
        Staged <span className="hint">({staged.length})</span>
      </h3>
      {staged.length === 0 && <p className="hint">Nothing staged: stage files or hunks below.</p>}
      {staged.map((f) => (
        <IndexFile key={`s:${f.repository_id ?? ''}:${f.path}`} file={f} changes={works ? ['unstage'] : []} busy={busy} onChange={change} />
      ))}
      {works && (
        <form
          className="commit-box"
          aria-label="Commit staged"
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              const r = await call('task.commit', { task_id: taskId, message, staged_only: true });
              setMessage('');
              setNote({ text: `Committed ${r.commit?.sha.slice(0, 8) ?? ''}: ${r.commit?.summary ?? ''}`, ok: true });
              load();
              onChanged();
            });
          }}
        >
          <label htmlFor="staged-message">Message</label>
          <textarea id="staged-message" rows={2} value={message} onChange={(e) => setMessage(e.target.value)} />
          <div className="row">
            <button className="primary" type="submit" disabled={busy || staged.length === 0 || !message.trim()}>
              Commit staged
            </button>
            <button
              type="button"
              disabled={busy}
              title="Add what is staged to the last commit; a message replaces its message"
              onClick={() =>
                void run(async () => {
                  const r = await call('task.amend', { task_id: taskId, message: message.trim() || undefined });
                  setMessage('');
                  setNote({ text: `Amended ${r.commit.sha.slice(0, 8)}: ${r.commit.summary}`, ok: true });
                  load();
                  onChanged();
                })
              }
            >
              Amend last commit
            </button>
          </div>
        </form>
      )}
      <h3>
        Unstaged <span className="hint">({unstaged.length})</span>
      </h3>
      {unstaged.length === 0 && <p className="hint">No unstaged changes.</p>}
      {unstaged.map((f) => (
        <IndexFile key={`u:${f.repository_id ?? ''}:${f.path}`} file={f} changes={works ? ['stage', 'discard'] : []} busy={busy} onChange={change} />
      ))}
    </section>
  );
}

/** The task branch's commits; a click shows one's diff. */
export function Commits({ taskId, version }: { taskId: string; version: number }) {
  const [commits, setCommits] = useState<BranchCommitDto[] | null>(null);
  const [open, setOpen] = useState<{ commit: BranchCommitDto; files: FileChangeDto[] } | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    call('task.commits', { task_id: taskId })
      .then((r) => setCommits(r.commits))
      .catch((e: unknown) => setError(errorText(e)));
  }, [taskId, version]);
  const show = (commit: BranchCommitDto) => {
    setError(null);
    call('task.commit.diff', { task_id: taskId, sha: commit.sha, repository_id: commit.repository_id ?? undefined })
      .then((r) => setOpen({ commit, files: r.files }))
      .catch((e: unknown) => setError(errorText(e)));
  };
  return (
    <section className="commits" aria-label="Commits">
      {error && (
        <p className="form-error" role="alert">
          {error}
        </p>
      )}
      {commits && commits.length === 0 && <p className="hint">No commits on the task branch yet.</p>}
      <ol className="commit-list">
        {commits?.map((c) => (
          <li key={c.sha} aria-current={open?.commit.sha === c.sha ? 'true' : undefined}>
            <button type="button" className="link" onClick={() => show(c)}>
              <code>{c.sha.slice(0, 8)}</code> {c.summary}
            </button>{' '}
            <span className="hint">
              {c.author}, {new Date(c.committed_at).toLocaleString()}
            </span>
          </li>
        ))}
      </ol>
      {open && (
        <div className="commit-diff" aria-label={`Diff of ${open.commit.sha.slice(0, 8)}`} role="region">
          <h3>
            <code>{open.commit.sha.slice(0, 8)}</code> {open.commit.summary}
          </h3>
          <FileDiffs files={open.files} />
        </div>
      )}
    </section>
  );
}
