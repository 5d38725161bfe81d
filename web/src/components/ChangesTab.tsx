// The Changes tab: the task's diff against its base (`task.changes`), each file with a
// Viewed mark kept on the server (`task.file.viewed.set`: a viewed file is folded, and is
// unviewed once its diff changes) and the review's threads on its lines (ReviewDiff; sent
// to the agent as one prompt by `review.submit`), and a commit box (`task.commit`), read
// again whenever a turn of the task's primary session ends. A task without
// a repository has no changes to show: a neutral empty state offers to attach one
// (`task.update`).
import { useCallback, useEffect, useState } from 'react';
import { call, errorText } from '../api/client';
import type { FileChangeDto, Notification, ReviewCommentDto } from '../api/types';
import { useData } from '../lib/data';
import { useRole } from '../lib/me';
import { useLiveQuery } from '../lib/useLiveQuery';
import { navigate } from '../lib/router';
import { toast } from '../lib/toast';
import { useFlagPref } from '../lib/prefs';
import { useMutation } from '../lib/useMutation';
import { type ReviewActions, ReviewFile, ThreadView, threadsOf, useHighlighter } from './ReviewDiff';
import { ChangedFiles } from './ChangedFiles';
import { Commits, WorkingTree } from './GitPanel';
import { ShipPanel } from './ShipPanel';

export function ChangesTab(props: {
  taskId: string;
  repositoryIds: string[];
  sessionId: string | null;
  /** The task's needs-you: a change (a pull request's auto-fix stopping) reads its checks again. */
  needsYou?: string | null;
}) {
  const { taskId, repositoryIds, sessionId } = props;
  if (repositoryIds.length === 0) return <AttachRepository taskId={taskId} />;
  return <Changes taskId={taskId} sessionId={sessionId} needsYou={props.needsYou ?? null} />;
}

const VIEW_LABEL = { review: 'Review', tree: 'Working tree', commits: 'Commits' } as const;

/** Nothing to read: the session topic is followed only for its turn ends. */
const nothing = async () => 0;

/** Calls `then` each time a turn of `sessionId` ends (the agent may have changed files). */
function useTurnEnds(sessionId: string | null, then: () => void) {
  const apply = useCallback(
    (data: number, n: Notification) => {
      if (n.action === 'session.turn.completed') then();
      return data;
    },
    [then],
  );
  useLiveQuery(sessionId ? `session:${sessionId}` : null, nothing, apply);
}

function AttachRepository({ taskId }: { taskId: string }) {
  const { repositories } = useData();
  const works = useRole().can('member');
  const [repo, setRepo] = useState('');
  const [error, setError] = useState<string | null>(null);
  const chosen = repo || repositories[0]?.id || '';
  return (
    <div className="changes changes-empty" data-testid="changes-empty">
      <p>
        <strong>No repository.</strong> This task is not attached to a repository, so there are no changes to show.
        Attach one: the agent's next start works in a worktree of it.
      </p>
      {!works ? null : repositories.length === 0 ? (
        <p>
          <a
            href="/settings/repositories"
            onClick={(e) => {
              e.preventDefault();
              navigate('/settings/repositories');
            }}
          >
            Add a repository in Settings → Repositories
          </a>
        </p>
      ) : (
        <form
          className="row"
          onSubmit={(e) => {
            e.preventDefault();
            setError(null);
            call('task.update', { id: taskId, repository_ids: [chosen] }).then(
              () => toast('Repository attached'),
              (err: unknown) => setError(errorText(err)),
            );
          }}
        >
          <label>
            Repository
            <select value={chosen} onChange={(e) => setRepo(e.target.value)}>
              {repositories.map((r) => (
                <option key={r.id} value={r.id}>
                  {r.name}
                </option>
              ))}
            </select>
          </label>
          <button className="primary" type="submit">
            Attach repository
          </button>
        </form>
      )}
      {error && (
        <p className="form-error" role="alert">
          {error}
        </p>
      )}
    </div>
  );
}

function Changes({ taskId, sessionId, needsYou }: { taskId: string; sessionId: string | null; needsYou: string | null }) {
  const [files, setFiles] = useState<FileChangeDto[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [message, setMessage] = useState('');
  const [note, setNote] = useState<string | null>(null);
  // A commit's outcome, done or failed, is the note under the box.
  const { busy: committing, run: commit } = useMutation(setNote);
  // A mark that failed says why where the commit's note goes.
  const { run: mark } = useMutation(setNote);
  // Bumped on each read of the diff, so the ship panel reads the branch's status again.
  const [version, setVersion] = useState(0);
  // The view chosen is kept (a reload, another task, the task's other tabs and back).
  const [sideBySide, setSideBySide] = useFlagPref('kandev.diff.side-by-side');
  // The review of the diff, the working tree (staging) or the branch's commits.
  const [view, setView] = useState<'review' | 'tree' | 'commits'>('review');
  const [comments, setComments] = useState<ReviewCommentDto[]>([]);
  const [reviewNote, setReviewNote] = useState<{ text: string; ok: boolean } | null>(null);
  // Reviewing, marking files viewed and committing are a member's; a viewer reads (issue 49).
  const works = useRole().can('member');
  const review = { ...useReview(taskId, setComments, setReviewNote), readOnly: !works };

  const load = useCallback(() => {
    setError(null);
    call('task.changes', { task_id: taskId })
      .then((r) => {
        setFiles(r.files ?? []);
        setVersion((v) => v + 1);
      })
      .catch((e: unknown) => setError(errorText(e)));
    review.reload();
  }, [taskId, review.reload]);
  useEffect(load, [load]);
  useTurnEnds(sessionId, load);
  const highlighter = useHighlighter(!!files?.length);
  const threads = threadsOf(comments);
  const open = comments.filter((c) => !c.sent_at && !threads.find((t) => t.root.id === (c.thread_id ?? c.id))?.root.resolved_at);
  // Threads on files the diff no longer has stay in sight, under the files.
  const paths = new Set(files?.map((f) => f.path) ?? []);
  const orphans = files ? threads.filter((t) => !paths.has(t.root.path)) : [];

  return (
    <div className="changes">
      <div className="changes-bar">
        <strong>Changes</strong>
        {files && (
          <span className="hint">
            {files.length} file{files.length === 1 ? '' : 's'} ·{' '}
            <span data-testid="viewed-count">
              {files.filter((f) => f.viewed).length} of {files.length} viewed
            </span>{' '}
            ·{' '}
            <span className="adds">+{files.reduce((n, f) => n + f.additions, 0)}</span>{' '}
            <span className="dels">−{files.reduce((n, f) => n + f.deletions, 0)}</span>
          </span>
        )}
        <span className="spacer" />
        <label className="check">
          <input type="checkbox" checked={sideBySide} onChange={(e) => setSideBySide(e.target.checked)} />
          Side by side
        </label>
        <button onClick={load}>Refresh</button>
      </div>
      <ShipPanel
        taskId={taskId}
        version={version}
        needsYou={needsYou}
        onChanged={() => {
          setNote(null); // a rebase or merge may have rewritten the commit the note names
          load();
        }}
      />
      <div className="tabs git-views" role="tablist" aria-label="Review, working tree or commits">
        {(['review', 'tree', 'commits'] as const).map((v) => (
          <button key={v} role="tab" aria-selected={view === v} className={view === v ? 'active' : ''} onClick={() => setView(v)}>
            {VIEW_LABEL[v]}
          </button>
        ))}
      </div>
      {view === 'tree' && <WorkingTree taskId={taskId} version={version} onChanged={load} />}
      {view === 'commits' && <Commits taskId={taskId} version={version} />}
      {view === 'review' && (
        <>
          <div className="changes-bar review-bar" aria-label="Review">
            <span className="hint" data-testid="review-count">
              {threads.length === 0
                ? works
                  ? 'Click a line number to comment; drag over several to comment on them together.'
                  : 'No review comments.'
                : `${open.length} comment${open.length === 1 ? '' : 's'} to send · ${threads.filter((t) => t.root.resolved_at).length} of ${threads.length} thread${threads.length === 1 ? '' : 's'} resolved`}
            </span>
            <span className="spacer" />
            {works && (
              <button disabled={review.busy || open.length === 0} onClick={() => void review.submit()}>
                Send review to agent
              </button>
            )}
          </div>
          {reviewNote && (
            <p role="status" data-testid="review-note" data-ok={reviewNote.ok ? 'yes' : 'no'} className={reviewNote.ok ? 'ship-note ok' : 'ship-note refused'}>
              {reviewNote.text}
            </p>
          )}
          {error && (
            <div className="banner error" role="alert" data-testid="changes-error">
              {error}
            </div>
          )}
          {files && files.length === 0 && <p className="column-empty">No changes yet.</p>}
          {files && files.length > 0 && (
            <div className="changes-body">
              <ChangedFiles files={files} openThreads={(path) => threads.filter((t) => t.root.path === path && !t.root.resolved_at).length} onOpen={goTo} />
              <div className="changes-files">
                {files.map((f) => (
                  // Keyed by the mark too: marking a file viewed folds it, unmarking unfolds it.
                  <details
                    key={`${f.repository_id ?? ''}:${f.path}:${f.viewed}`}
                    className={f.viewed ? 'diff-file viewed' : 'diff-file'}
                    open={!f.viewed}
                    data-path={f.path}
                  >
                    <summary className="diff-head">
                      <code>{f.old_path ? `${f.old_path} → ${f.path}` : f.path}</code>
                      <span className="badge">{f.status}</span>
                      <span className="adds">+{f.additions}</span>
                      <span className="dels">−{f.deletions}</span>
                      {works && (
                        <label className="check viewed-mark">
                          <input
                            type="checkbox"
                            checked={f.viewed}
                            aria-label={`Viewed ${f.path}`}
                            onChange={(e) => {
                              const viewed = e.target.checked;
                              // Shown at once; the server's answer (read again) has the last word.
                              setFiles((all) => all?.map((x) => (x === f ? { ...x, viewed } : x)) ?? all);
                              void mark(async () => {
                                try {
                                  await call('task.file.viewed.set', {
                                    task_id: taskId,
                                    repository_id: f.repository_id ?? undefined,
                                    path: f.path,
                                    viewed,
                                  });
                                } finally {
                                  load();
                                }
                              });
                            }}
                          />
                          Viewed
                        </label>
                      )}
                    </summary>
                    {f.binary && <p className="hint">Binary file</p>}
                    {f.truncated && <p className="hint">Diff too large to show in full</p>}
                    <ReviewFile
                      file={f}
                      sideBySide={sideBySide}
                      threads={threads.filter((t) => t.root.path === f.path)}
                      actions={review}
                      highlighter={highlighter}
            draftKey={`${taskId}:${f.repository_id ?? ''}:${f.path}`}
                    />
                  </details>
                ))}
              </div>
            </div>
          )}
          {orphans.length > 0 && (
            <section className="threads-elsewhere" aria-label="Threads on files without changes now">
              <p className="hint">On files that have no changes now:</p>
              {orphans.map((t) => (
                <ThreadView key={t.root.id} thread={t} actions={review} />
              ))}
            </section>
          )}
          {works && (
            <form
              className="commit-box"
              onSubmit={async (e) => {
                e.preventDefault();
                if (!message.trim()) return;
                await commit(async () => {
                  const r = await call('task.commit', { task_id: taskId, message });
                  setMessage('');
                  setNote(r.commit ? `Committed ${r.commit.sha.slice(0, 8)} on ${r.commit.branch}.` : 'Nothing to commit.');
                  load();
                });
              }}
            >
              <label htmlFor="commit-message">Commit message</label>
              <textarea id="commit-message" rows={2} value={message} onChange={(e) => setMessage(e.target.value)} />
              <p className="hint" id="commit-all-hint">
                Commits every change, staged or not; to commit a part, stage it in Working tree.
              </p>
              <button
                className="primary"
                type="submit"
                aria-describedby="commit-all-hint"
                disabled={committing || !message.trim()}
              >
                Commit all
              </button>
              {note && <p role="status">{note}</p>}
            </form>
          )}
        </>
      )}
    </div>
  );
}

/** Unfolds a file's diff and scrolls to it (the changed-files tree). */
function goTo(file: FileChangeDto) {
  const diff = document.querySelector<HTMLDetailsElement>(`.diff-file[data-path="${CSS.escape(file.path)}"]`);
  if (!diff) return;
  diff.open = true;
  diff.scrollIntoView({ block: 'start' });
}

/** The review's actions: each reads the comments again when the server has answered. */
function useReview(
  taskId: string,
  setComments: (c: ReviewCommentDto[]) => void,
  setNote: (note: { text: string; ok: boolean } | null) => void,
): ReviewActions & { reload: () => void; submit: () => Promise<boolean> } {
  const refused = useCallback((text: string | null) => setNote(text ? { text, ok: false } : null), [setNote]);
  const { busy, run } = useMutation(refused);
  const reload = useCallback(() => {
    call('review.comment.list', { task_id: taskId })
      .then((r) => setComments(r.comments))
      .catch((e: unknown) => refused(errorText(e)));
  }, [taskId, setComments, refused]);
  const act = (work: () => Promise<unknown>) =>
    run(async () => {
      try {
        await work();
      } finally {
        reload();
      }
    });
  return {
    busy,
    reload,
    add: (path, range, text) =>
      act(() =>
        call('review.comment.add', {
          task_id: taskId,
          path,
          side: range.side,
          start_line: range.start < range.end ? range.start : undefined,
          line: range.end,
          text,
        }),
      ),
    reply: (root, text) =>
      act(() => call('review.comment.add', { task_id: taskId, path: root.path, line: root.line, text, thread_id: root.id })),
    edit: (id, text) => act(() => call('review.comment.update', { id, text })),
    remove: (id) => act(() => call('review.comment.delete', { id })),
    resolve: (threadId, resolved) => act(() => call('review.thread.resolve', { id: threadId, resolved })),
    submit: () =>
      act(async () => {
        const r = await call('review.submit', { task_id: taskId });
        const n = r.comments.length;
        setNote({ text: `Sent ${n} comment${n === 1 ? '' : 's'} to the agent${r.queued ? ' (queued)' : ''}.`, ok: true });
      }),
  };
}
