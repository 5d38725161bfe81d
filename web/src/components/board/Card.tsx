// A task's card: opens the task on click or Enter, is dragged by the mouse, and moved by the
// keyboard (Alt+arrows, or [ and ]).
import type { TaskDto } from '../../api/types';
import { navigate, taskPath } from '../../lib/router';
import { StateBadge } from '../StateBadge';
import { TASK_DRAG_TYPE } from './Column';
import type { Direction } from './useKeyboardMove';

interface CardProps {
  task: TaskDto;
  repo: string;
  onKeyMove: (task: TaskDto, dir: Direction) => void;
  onArchive: (task: TaskDto) => void;
}

export function Card({ task, repo, onKeyMove, onArchive }: CardProps) {
  const open = () => navigate(taskPath(task.id));
  return (
    <article
      className="card"
      role="listitem"
      tabIndex={0}
      draggable
      data-task-id={task.id}
      aria-label={`${task.title}. ${task.state.toLowerCase().replace(/_/g, ' ')}. Alt+arrow keys move it.`}
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
        <StateBadge state={task.state} />
        {repo && <span className="repo" title="Repository">{repo}</span>}
        <button
          className="icon archive"
          aria-label={`Archive ${task.title}`}
          title="Archive"
          onClick={() => onArchive(task)}
        >
          ⤓
        </button>
      </div>
    </article>
  );
}
