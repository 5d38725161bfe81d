// "Subtask of" and "Blocked by" (issue 45, item 4): the fields of the New task and Edit task
// dialogs that set a task's parent and its blockers, chosen among the board's tasks.
// TaskRelations shows them on the task's page.
import { useCallback } from 'react';
import { call, errorText } from '../api/client';
import type { TaskCardDto } from '../api/types';
import { useRead } from '../lib/useRead';
import { InlineError } from './ErrorBanner';

/** A task's parent and blockers as the dialog edits them ('' for no parent). */
export interface Links {
  parentId: string;
  blockedBy: string[];
}

/** The tasks of a board that are not archived, in board order. */
function useBoardTasks(workflowId: string) {
  const load = useCallback(() => call('task.list', { workflow_id: workflowId }).then((r) => r.tasks), [workflowId]);
  return useRead(load);
}

/** `task` and the tasks under it (its subtasks, theirs, ...): none may become its parent. */
function family(tasks: TaskCardDto[], taskId: string): Set<string> {
  const found = new Set([taskId]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const t of tasks) {
      if (t.parent_id && found.has(t.parent_id) && !found.has(t.id)) {
        found.add(t.id);
        grew = true;
      }
    }
  }
  return found;
}

export function TaskLinksFields(props: { workflowId: string; taskId?: string; links: Links; onChange: (links: Links) => void }) {
  const { links, onChange } = props;
  const tasks = useBoardTasks(props.workflowId);
  const all = tasks.data ?? [];
  const own = props.taskId ? family(all, props.taskId) : new Set<string>();
  const title = (id: string) => all.find((t) => t.id === id)?.title ?? 'a task on another board';
  const parents = all.filter((t) => !own.has(t.id));
  const blockers = all.filter((t) => t.id !== props.taskId && !links.blockedBy.includes(t.id));
  return (
    <>
      <div className="row">
        <label>
          Subtask of
          <select
            name="parent"
            value={links.parentId}
            disabled={tasks.data === null}
            onChange={(e) => onChange({ ...links, parentId: e.target.value })}
          >
            <option value="">None (a top-level task)</option>
            {links.parentId && !all.some((t) => t.id === links.parentId) && <option value={links.parentId}>{title(links.parentId)}</option>}
            {parents.map((t) => (
              <option key={t.id} value={t.id}>
                {t.title}
              </option>
            ))}
          </select>
        </label>
        <label>
          Blocked by <span className="hint">its agent waits until these are done</span>
          <select
            name="blocker"
            value=""
            disabled={tasks.data === null || blockers.length === 0}
            onChange={(e) => e.target.value && onChange({ ...links, blockedBy: [...links.blockedBy, e.target.value] })}
          >
            <option value="">{blockers.length === 0 ? 'No other task' : 'Add a blocker…'}</option>
            {blockers.map((t) => (
              <option key={t.id} value={t.id}>
                {t.title}
              </option>
            ))}
          </select>
        </label>
      </div>
      {links.blockedBy.length > 0 && (
        <ul className="chosen-blockers" aria-label="Chosen blockers">
          {links.blockedBy.map((id) => (
            <li key={id}>
              {title(id)}{' '}
              <button
                type="button"
                className="link"
                aria-label={`Remove blocker ${title(id)}`}
                onClick={() => onChange({ ...links, blockedBy: links.blockedBy.filter((b) => b !== id) })}
              >
                Remove
              </button>
            </li>
          ))}
        </ul>
      )}
      <InlineError error={tasks.error && `The board's tasks could not be read: ${tasks.error}`} onRetry={tasks.retry} />
    </>
  );
}

/** A refusal of a parent or blockers in the dialog's words (the server names its fields). */
export function linksErrorText(e: unknown): string {
  return errorText(e)
    .replace(/^parent_id would make/, 'That parent would make')
    .replace(/^blocked_by would make/, 'Those blockers would make')
    .replace(/^parent_id: /, 'Subtask of: ')
    .replace(/^blocked_by: /, 'Blocked by: ');
}
