// A file's diff as a review: line numbers on both sides, in the unified or the side-by-side
// view; a click on a line number (or a drag over several of one side) opens a comment on
// those lines, and the threads on a line sit under it, with reply, edit, delete and
// resolve (`review.comment.*`, `review.thread.resolve`). A thread whose lines changed since
// says so; one whose line the diff no longer shows is listed under the file.
import { Fragment, useEffect, useMemo, useRef, useState } from 'react';
import type { DiffLineDto, FileChangeDto, ReviewCommentDto } from '../api/types';
import { Dialog } from './Dialog';
import { sideBySideRows } from './SideBySide';

export type Side = 'old' | 'new';

/** Lines `start..=end` on one side of a file's diff. */
export interface LineRange {
  side: Side;
  start: number;
  end: number;
}

export interface Thread {
  root: ReviewCommentDto;
  replies: ReviewCommentDto[];
}

/** The review's comments as threads, in the order they were opened. */
export function threadsOf(comments: ReviewCommentDto[]): Thread[] {
  return comments
    .filter((c) => !c.thread_id)
    .map((root) => ({ root, replies: comments.filter((c) => c.thread_id === root.id) }));
}

/** What a review can do; each returns when the server has answered. */
export interface ReviewActions {
  busy: boolean;
  /** The threads are shown without a way to write (a viewer of the workspace, issue 49). */
  readOnly?: boolean;
  add: (path: string, range: LineRange, text: string) => Promise<boolean>;
  reply: (root: ReviewCommentDto, text: string) => Promise<boolean>;
  edit: (id: string, text: string) => Promise<boolean>;
  remove: (id: string) => Promise<boolean>;
  resolve: (threadId: string, resolved: boolean) => Promise<boolean>;
}

/** `path:line`, or `path:first–last` for a range; the base's side is marked. */
export function location(c: ReviewCommentDto): string {
  const lines = c.start_line !== null && c.start_line < c.line ? `${c.start_line}–${c.line}` : `${c.line}`;
  return `${c.path}:${lines}${c.side === 'old' ? ' (old)' : ''}`;
}

type Anchor = { side: Side; line: number };
const sameAnchor = (t: Thread, a: Anchor) => t.root.side === a.side && t.root.line === a.line;

/** One row of the unified view: a diff line with its number on each side it is on. */
interface UnifiedRow {
  kind: 'ctx' | 'add' | 'del';
  old: number | null;
  new: number | null;
  text: string;
}

export function unifiedRows(lines: DiffLineDto[], oldStart: number, newStart: number): UnifiedRow[] {
  let o = oldStart;
  let n = newStart;
  return lines.map((l) => {
    if (l.kind === 'removed') return { kind: 'del', old: o++, new: null, text: l.text };
    if (l.kind === 'added') return { kind: 'add', old: null, new: n++, text: l.text };
    return { kind: 'ctx', old: o++, new: n++, text: l.text };
  });
}

/** The anchors of a unified row: where its threads are and where a click comments. */
function unifiedAnchors(r: UnifiedRow): Anchor[] {
  const anchors: Anchor[] = [];
  if (r.new !== null) anchors.push({ side: 'new', line: r.new });
  if (r.old !== null) anchors.push({ side: 'old', line: r.old });
  return anchors;
}

const ordered = (r: LineRange): LineRange => ({ side: r.side, start: Math.min(r.start, r.end), end: Math.max(r.start, r.end) });

/** Comments being written, by file (`draftKey`): switching views or tabs loses none. */
const drafts = new Map<string, { range: LineRange; text: string }>();

/** The lines being chosen with the mouse, and the comment being written on them. */
function useLineChoice(key: string) {
  const [drag, setDrag] = useState<LineRange | null>(null);
  const [draft, setDraftRange] = useState<LineRange | null>(() => drafts.get(key)?.range ?? null);
  const [text, setTextNow] = useState(() => drafts.get(key)?.text ?? '');
  // The drag as the handlers see it between renders (a quick click is down and up at once).
  const dragging = useRef<LineRange | null>(null);
  const chosen = drag ? ordered(drag) : draft;
  // A new range takes the text typed so far with it.
  const setDraft = (range: LineRange) => {
    setDraftRange(range);
    drafts.set(key, { range, text: drafts.get(key)?.text ?? '' });
  };
  return {
    draft,
    text,
    setText: (value: string) => {
      setTextNow(value);
      if (draft) drafts.set(key, { range: draft, text: value });
    },
    close: () => {
      setDraftRange(null);
      setTextNow('');
      drafts.delete(key);
    },
    begin: (a: Anchor, extend: boolean) => {
      // Shift and a line of the open comment's side: the comment covers up to that line.
      if (extend && draft && draft.side === a.side) {
        setDraft({ side: a.side, start: Math.min(draft.start, a.line), end: Math.max(draft.end, a.line) });
        return;
      }
      dragging.current = { side: a.side, start: a.line, end: a.line };
      setDrag(dragging.current);
      // Wherever the mouse is let go, the range chosen so far opens the comment.
      window.addEventListener(
        'mouseup',
        () => {
          const d = dragging.current;
          dragging.current = null;
          setDrag(null);
          if (d) setDraft(ordered(d));
        },
        { once: true },
      );
    },
    extend: (a: Anchor) => {
      const d = dragging.current;
      if (!d || d.side !== a.side) return;
      dragging.current = { ...d, end: a.line };
      setDrag(dragging.current);
    },
    open: (a: Anchor) => setDraft({ side: a.side, start: a.line, end: a.line }),
    isChosen: (a: Anchor) => !!chosen && chosen.side === a.side && a.line >= chosen.start && a.line <= chosen.end,
  };
}
type LineChoice = ReturnType<typeof useLineChoice>;

/** A line number that opens a comment: click it, or drag from it over more of its side. */
function LineNumber({ at, choice, readOnly }: { at: Anchor; choice: LineChoice; readOnly: boolean | undefined }) {
  if (readOnly) return <span className="ln-num">{at.line}</span>;
  return (
    <button
      type="button"
      className="ln-btn"
      data-side={at.side}
      data-line={at.line}
      aria-label={`Comment on ${at.side} line ${at.line}`}
      title="Comment on this line (drag, or Shift+click, for several)"
      onMouseDown={(e) => {
        if (e.button !== 0) return;
        e.preventDefault(); // no text selection while dragging
        choice.begin(at, e.shiftKey);
      }}
      onMouseEnter={() => choice.extend(at)}
      // A keyboard press (no mouse down before it) opens a comment on the one line.
      onClick={(e) => e.detail === 0 && choice.open(at)}
    >
      {at.line}
    </button>
  );
}

/** highlight.js's module (lib/highlight), loaded on first use. */
export type Highlighter = typeof import('../lib/highlight');

/** highlight.js, loaded as its own chunk once there is a diff to show (plain until then). */
export function useHighlighter(wanted: boolean): Highlighter | null {
  const [highlighter, setHighlighter] = useState<Highlighter | null>(null);
  useEffect(() => {
    if (!wanted || highlighter) return;
    let live = true;
    import('../lib/highlight')
      .then((m) => live && setHighlighter(m))
      .catch(() => {}); // shown plain
    return () => {
      live = false;
    };
  }, [wanted, highlighter]);
  return highlighter;
}

/** A line's text, highlighted when there is `html` (escaped by highlight.js, its spans only). */
export function Code({ text, html }: { text: string; html: string | undefined }) {
  return html === undefined ? <>{text}</> : <span className="code" dangerouslySetInnerHTML={{ __html: html }} />;
}

export function ReviewFile(props: {
  file: FileChangeDto;
  sideBySide: boolean;
  threads: Thread[];
  actions: ReviewActions;
  highlighter: Highlighter | null;
  /** Where the comment being written on this file is kept (task, repository, path). */
  draftKey: string;
}) {
  const { file, sideBySide, threads, actions, highlighter } = props;
  const choice = useLineChoice(props.draftKey);
  // Each hunk's lines highlighted, by index (null: shown plain).
  const highlighted = useMemo(
    () => file.hunks.map((h) => highlighter?.highlightLines(file.path, h.lines.map((l) => l.text)) ?? null),
    [file, highlighter],
  );
  const shown = new Set<Thread>();
  // The threads on any of `anchors`, and the comment being written if it ends there.
  const under = (anchors: Anchor[], span: number) => {
    const here = threads.filter((t) => anchors.some((a) => sameAnchor(t, a)));
    here.forEach((t) => shown.add(t));
    const draft = choice.draft;
    const writing = draft && anchors.some((a) => a.side === draft.side && a.line === draft.end);
    if (here.length === 0 && !writing) return null;
    return (
      <tr className="thread-row">
        <td colSpan={span}>
          {here.map((t) => (
            <ThreadView key={t.root.id} thread={t} actions={actions} />
          ))}
          {writing && (
            <CommentComposer
              range={draft}
              busy={actions.busy}
              text={choice.text}
              setText={choice.setText}
              onCancel={choice.close}
              onSend={async (text) => {
                if (await actions.add(file.path, draft, text)) choice.close();
              }}
            />
          )}
        </td>
      </tr>
    );
  };
  const hunks = file.hunks.map((h, i) => (
    <div key={i} className="hunk">
      <div className="hunk-head">{h.header}</div>
      {sideBySide ? (
        <table className="diff sbs" aria-label="Side-by-side diff">
          <tbody>
            {sideBySideRows(h.lines, h.old_start, h.new_start).map(([left, right], j) => {
              const anchors: Anchor[] = [];
              if (left) anchors.push({ side: 'old', line: left.n });
              if (right) anchors.push({ side: 'new', line: right.n });
              return (
                <Fragment key={j}>
                  <tr>
                    {[left, right].map((cell, k) => {
                      const side: Side = k === 0 ? 'old' : 'new';
                      if (!cell) return <td key={k} className="sbs-empty" colSpan={2} />;
                      const at = { side, line: cell.n };
                      return (
                        <Fragment key={k}>
                          <td className={choice.isChosen(at) ? 'sbs-n chosen' : 'sbs-n'}>
                            <LineNumber at={at} choice={choice} readOnly={actions.readOnly} />
                          </td>
                          <td className={`sbs-text dl-${cell.kind}`}>
                            <Code text={cell.text} html={highlighted[i]?.[cell.at]} />
                          </td>
                        </Fragment>
                      );
                    })}
                  </tr>
                  {under(anchors, 4)}
                </Fragment>
              );
            })}
          </tbody>
        </table>
      ) : (
        <table className="diff unified" aria-label="Unified diff">
          <tbody>
            {unifiedRows(h.lines, h.old_start, h.new_start).map((r, j) => {
              const anchors = unifiedAnchors(r);
              // Each number comments on its side: the base's (old) or the task's (new).
              return (
                <Fragment key={j}>
                  <tr className={`dl dl-${r.kind}${anchors.some(choice.isChosen) ? ' chosen' : ''}`}>
                    <td className="ln">{r.old !== null && <LineNumber at={{ side: 'old', line: r.old }} choice={choice} readOnly={actions.readOnly} />}</td>
                    <td className="ln">{r.new !== null && <LineNumber at={{ side: 'new', line: r.new }} choice={choice} readOnly={actions.readOnly} />}</td>
                    <td className="dl-text">
                      <span className="dl-sign" aria-hidden="true">
                        {r.kind === 'add' ? '+' : r.kind === 'del' ? '-' : ' '}
                      </span>
                      <Code text={r.text} html={highlighted[i]?.[j]} />
                    </td>
                  </tr>
                  {under(anchors, 3)}
                </Fragment>
              );
            })}
          </tbody>
        </table>
      )}
    </div>
  ));
  const elsewhere = threads.filter((t) => !shown.has(t));
  return (
    <>
      {hunks}
      {elsewhere.length > 0 && (
        <div className="threads-elsewhere">
          <p className="hint">On lines the diff does not show now:</p>
          {elsewhere.map((t) => (
            <ThreadView key={t.root.id} thread={t} actions={actions} />
          ))}
        </div>
      )}
    </>
  );
}

function CommentComposer(props: {
  range: LineRange;
  busy: boolean;
  text: string;
  setText: (text: string) => void;
  onSend: (text: string) => Promise<void>;
  onCancel: () => void;
}) {
  const { range, busy, text, setText } = props;
  const lines = range.start === range.end ? `line ${range.end}` : `lines ${range.start}–${range.end}`;
  return (
    <form
      className="comment-composer"
      aria-label="New comment"
      onSubmit={(e) => {
        e.preventDefault();
        if (text.trim()) void props.onSend(text);
      }}
    >
      <label>
        Comment on {range.side} {lines}
        <textarea
          rows={3}
          value={text}
          autoFocus
          onChange={(e) => setText(e.target.value)}
          onKeyDown={(e) => {
            // Ctrl+Enter (⌘+Enter) sends, Escape cancels.
            if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
              e.preventDefault();
              if (text.trim()) void props.onSend(text);
            } else if (e.key === 'Escape') {
              e.preventDefault();
              props.onCancel();
            }
          }}
        />
      </label>
      <div className="row">
        <button className="primary" type="submit" disabled={busy || !text.trim()}>
          Comment
        </button>
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

export function ThreadView({ thread, actions }: { thread: Thread; actions: ReviewActions }) {
  const { root, replies } = thread;
  const resolved = root.resolved_at !== null;
  const [unfolded, setUnfolded] = useState(false);
  const [reply, setReply] = useState('');
  const [deleting, setDeleting] = useState(false);
  const open = !resolved || unfolded;
  return (
    <div
      className={resolved ? 'thread resolved' : 'thread'}
      role="group"
      aria-label={`Thread on ${location(root)}`}
      data-thread={root.id}
      data-resolved={resolved ? 'yes' : 'no'}
    >
      {deleting && (
        <Dialog title="Delete this thread?" onClose={() => setDeleting(false)}>
          <p>
            Its first comment and its {replies.length} repl{replies.length === 1 ? 'y' : 'ies'} are deleted. This
            cannot be undone.
          </p>
          <div className="actions">
            <button onClick={() => setDeleting(false)}>Keep it</button>
            <button
              className="danger"
              onClick={() => {
                setDeleting(false);
                void actions.remove(root.id);
              }}
            >
              Delete thread
            </button>
          </div>
        </Dialog>
      )}
      <div className="thread-head">
        <code>{location(root)}</code>
        {root.outdated && (
          <span className="badge warn" data-testid="lines-changed" title="The lines it was made on changed since">
            lines changed
          </span>
        )}
        {resolved && <span className="badge">resolved</span>}
        <span className="spacer" />
        {resolved && (
          <button type="button" onClick={() => setUnfolded(!unfolded)}>
            {unfolded ? 'Hide' : 'Show'}
          </button>
        )}
        {!actions.readOnly && (
          <button type="button" disabled={actions.busy} onClick={() => void actions.resolve(root.id, !resolved)}>
            {resolved ? 'Reopen' : 'Resolve'}
          </button>
        )}
      </div>
      {open && (
        <>
          {root.outdated && root.quote && (
            <pre className="thread-quote" aria-label="The lines as they were">
              {root.quote}
            </pre>
          )}
          {[root, ...replies].map((c) => (
            <CommentView
              key={c.id}
              comment={c}
              actions={actions}
              // The first comment takes its replies with it: asked first when there are any.
              onDelete={c === root && replies.length > 0 ? () => setDeleting(true) : undefined}
            />
          ))}
          {!actions.readOnly && (
            <form
              className="row thread-reply"
              onSubmit={async (e) => {
                e.preventDefault();
                if (reply.trim() && (await actions.reply(root, reply))) setReply('');
              }}
            >
              <textarea rows={1} aria-label="Reply" placeholder="Reply…" value={reply} onChange={(e) => setReply(e.target.value)} />
              <button type="submit" disabled={actions.busy || !reply.trim()}>
                {resolved ? 'Reply and reopen' : 'Reply'}
              </button>
            </form>
          )}
        </>
      )}
    </div>
  );
}

function CommentView(props: { comment: ReviewCommentDto; actions: ReviewActions; onDelete?: () => void }) {
  const { comment, actions } = props;
  const [editing, setEditing] = useState<string | null>(null);
  const sent = comment.sent_at !== null;
  if (editing !== null) {
    return (
      <form
        className="comment editing"
        onSubmit={async (e) => {
          e.preventDefault();
          if (editing.trim() && (await actions.edit(comment.id, editing))) setEditing(null);
        }}
      >
        <textarea rows={2} aria-label="Edit comment" value={editing} autoFocus onChange={(e) => setEditing(e.target.value)} />
        <div className="row">
          <button className="primary" type="submit" disabled={actions.busy || !editing.trim()}>
            Save
          </button>
          <button type="button" onClick={() => setEditing(null)}>
            Cancel
          </button>
        </div>
      </form>
    );
  }
  return (
    <div className="comment" data-comment={comment.id} data-sent={sent ? 'yes' : 'no'}>
      <p className="comment-text">{comment.text}</p>
      <div className="row comment-meta">
        <span className="hint">{sent ? 'sent to the agent' : 'not sent yet'}</span>
        <span className="spacer" />
        {/* What was sent stays as it was sent. */}
        {!sent && !actions.readOnly && (
          <button type="button" className="link" onClick={() => setEditing(comment.text)}>
            Edit
          </button>
        )}
        {!actions.readOnly && (
          <button
            type="button"
            className="link"
            disabled={actions.busy}
            aria-label={comment.thread_id ? 'Delete reply' : 'Delete thread'}
            onClick={() => (props.onDelete ? props.onDelete() : void actions.remove(comment.id))}
          >
            Delete
          </button>
        )}
      </div>
    </div>
  );
}
