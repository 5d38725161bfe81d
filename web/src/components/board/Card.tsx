// A task's card: opens the task on click or Enter, is dragged by the mouse, and moved by the
// keyboard (Alt+arrows, or [ and ]).
import { useEffect, useRef } from 'react';
import type { GitSummaryDto, TaskCardDto } from '../../api/types';
import { navigate, taskPath } from '../../lib/router';
import { NEEDS_YOU_LABEL } from '../../lib/title';
import { StateBadge } from '../StateBadge';
import { TASK_DRAG_TYPE } from './Column';
import type { Direction } from './useKeyboardMove';

// The card that has the focus, kept while its element is replaced (the workflow moved the task
// to another column, a virtual list re-rendered it): the new element takes the focus back
// (issue 14 defect 11). Cleared when the focus leaves for something else.
let focusedTask: string | null = null;

interface CardProps {
  task: TaskCardDto;
  /** Its blockers that are not done yet (issue 17). */
  blockers: TaskCardDto[];
  subtasks: number;
  repo: string;
  /** `null`: the card does not move (a viewer, issue 49). */
  onKeyMove: ((task: TaskCardDto, dir: Direction) => void) | null;
  /** `null`: no Archive (a viewer). */
  onArchive: ((task: TaskCardDto) => void) | null;
}

export function Card({ task, blockers, subtasks, repo, onKeyMove, onArchive }: CardProps) {
  const open = () => navigate(taskPath(task.id));
  const ref = useRef<HTMLElement | null>(null);
  useEffect(() => {
    const el = ref.current;
    if (el && focusedTask === task.id && (document.activeElement === document.body || !document.activeElement)) {
      el.focus();
    }
  });
  return (
    <article
      ref={ref}
      onFocus={(e) => {
        if (e.target === e.currentTarget) focusedTask = task.id;
      }}
      onBlur={(e) => {
        const el = e.currentTarget;
        // a card taken out of the page keeps its claim; one left for something else does not
        queueMicrotask(() => {
          if (el.isConnected && focusedTask === task.id) focusedTask = null;
        });
      }}
      className={`card ${task.needs_you ? 'needs-you' : ''}`}
      data-needs-you={task.needs_you ?? undefined}
      role="listitem"
      tabIndex={0}
      draggable={onKeyMove !== null}
      data-task-id={task.id}
      aria-label={`${task.title}. ${task.needs_you ? `Needs you: ${NEEDS_YOU_LABEL[task.needs_you] ?? task.needs_you}. ` : ''}${task.state === 'TODO' ? 'not started' : task.state.toLowerCase().replace(/_/g, ' ')}.${onKeyMove ? ' Alt+arrow keys move it.' : ''}`}
      onDragStart={(e) => {
        e.dataTransfer.setData(TASK_DRAG_TYPE, task.id);
        e.dataTransfer.effectAllowed = 'move';
      }}
      onClick={(e) => {
        if ((e.target as HTMLElement).closest('button')) return;
        open();
      }}
      onKeyDown={(e) => {
        if (e.target !== e.currentTarget) return;
        const alt = e.altKey;
        if (e.key === 'Enter') {
          e.preventDefault();
          open();
        } else if (!onKeyMove) {
          return;
        } else if ((alt && e.key === 'ArrowLeft') || e.key === '[') {
          e.preventDefault();
          onKeyMove(task, 'left');
        } else if ((alt && e.key === 'ArrowRight') || e.key === ']') {
          e.preventDefault();
          onKeyMove(task, 'right');
        } else if (alt && e.key === 'ArrowUp') {
          e.preventDefault();
          onKeyMove(task, 'up');
        } else if (alt && e.key === 'ArrowDown') {
          e.preventDefault();
          onKeyMove(task, 'down');
        }
      }}
    >
      <div className="card-title">{task.title}</div>
      <div className="card-meta">
        {task.needs_you ? (
          <span className="badge needs-you-badge" data-testid="needs-you" title={NEEDS_YOU_LABEL[task.needs_you]}>
            needs you
          </span>
        ) : (
          task.state !== 'TODO' && <StateBadge state={task.state} />
        )}
        {blockers.length > 0 && (
          <span
            className="badge blocked"
            data-testid="blocked-by"
            title={`Waits for: ${blockers.map((b) => b.title).join(', ')}`}
          >
            blocked by {blockers.length}
          </span>
        )}
        {subtasks > 0 && (
          <span className="badge" data-testid="subtask-count" title="Subtasks">
            {subtasks} subtask{subtasks === 1 ? '' : 's'}
          </span>
        )}
        {task.git && <GitBadges git={task.git} />}
        {repo && <span className="repo" title="Repository">{repo}</span>}
        {onArchive && (
          <button
            className="link archive"
            aria-label={`Archive ${task.title}`}
            title="Archive: off the board, restorable from Archived"
            onClick={() => onArchive(task)}
          >
            Archive
          </button>
        )}
      </div>
    </article>
  );
}

/** The task branch at a glance: commits ahead/behind its base, dirty files, conflicts, PR. */
function GitBadges({ git }: { git: GitSummaryDto }) {
  const parts: string[] = [];
  if (git.ahead > 0) parts.push(`${git.ahead} commit${git.ahead === 1 ? '' : 's'} ahead`);
  if (git.behind > 0) parts.push(`${git.behind} behind`);
  if (git.dirty > 0) parts.push(`${git.dirty} uncommitted`);
  if (git.conflicts > 0) parts.push(`${git.conflicts} conflicting`);
  if (git.pr_state) parts.push(`pull request ${git.pr_state}`);
  if (git.merged) parts.push('merged');
  if (parts.length === 0) return null;
  return (
    <span className="git-badges" data-testid="card-git" title={`Git: ${parts.join(', ')}`} aria-label={`Git: ${parts.join(', ')}`}>
      {git.ahead > 0 && <span className="badge git-ahead">↑{git.ahead}</span>}
      {git.behind > 0 && <span className="badge git-behind">↓{git.behind}</span>}
      {git.dirty > 0 && <span className="badge git-dirty">±{git.dirty}</span>}
      {git.conflicts > 0 && <span className="badge git-conflicts">conflict</span>}
      {git.pr_state && <span className={`badge git-pr pr-${git.pr_state}`}>PR {git.pr_state}</span>}
      {git.merged && <span className="badge git-merged">merged</span>}
    </span>
  );
}
