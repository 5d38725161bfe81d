// A task's parent, blockers and subtasks (issue 17), with their steps: one live query over the
// workflow's cards, kept current by the workspace's task notifications. And what intake made
// the task from (issue 47): its issue or delivery, linked when it has a web page.
import { useCallback } from 'react';
import { call } from '../api/client';
import type { Notification, TaskCardDto, TaskDto, TaskOriginDto } from '../api/types';
import { useData } from '../lib/data';
import { originText, webLink } from '../lib/intake';
import { applyTaskEvent } from '../lib/lists';
import { navigate, taskPath } from '../lib/router';
import { useLiveQuery } from '../lib/useLiveQuery';
import { InlineError } from './ErrorBanner';

const applyCards = (cards: TaskCardDto[], n: Notification) => applyTaskEvent(cards, n);

export function TaskRelations({ task }: { task: TaskDto }) {
  const { workflows } = useData();
  const { workflow_id: workflowId, workspace_id: workspaceId } = task;
  const load = useCallback(
    () => call('task.list', { workflow_id: workflowId, include_archived: true }).then((r) => r.tasks),
    [workflowId],
  );
  const query = useLiveQuery(`workspace:${workspaceId}`, load, applyCards);
  const cards = query.data ?? [];
  const steps = workflows.find((w) => w.id === workflowId)?.steps ?? [];
  const stepName = (t: TaskCardDto) => (t.archived_at ? 'archived' : (steps.find((s) => s.id === t.step_id)?.name ?? ''));
  const subtasks = cards.filter((t) => t.parent_id === task.id);
  const blockers = task.blocked_by
    .map((id) => cards.find((t) => t.id === id))
    .filter((t): t is TaskCardDto => !!t);
  const parent = cards.find((t) => t.id === task.parent_id);
  const origin = task.origin && <Origin origin={task.origin} />;
  if (query.error) {
    return (
      <>
        {origin && <div className="task-relations">{origin}</div>}
        <InlineError error={`Subtasks and blockers could not be read: ${query.error}`} onRetry={query.reload} />
      </>
    );
  }
  if (!subtasks.length && !blockers.length && !parent && !origin) return null;
  const link = (t: TaskCardDto) => (
    <li key={t.id}>
      <button className="link" onClick={() => navigate(taskPath(t.id))}>
        {t.title}
      </button>{' '}
      <span className="step-pill">{stepName(t)}</span>
    </li>
  );
  return (
    <div className="task-relations">
      {origin}
      {parent && (
        <p>
          Subtask of{' '}
          <button className="link" onClick={() => navigate(taskPath(parent.id))}>
            {parent.title}
          </button>
        </p>
      )}
      {blockers.length > 0 && (
        <section aria-label="Blocked by">
          <h2>Blocked by</h2>
          <ul>{blockers.map(link)}</ul>
        </section>
      )}
      {subtasks.length > 0 && (
        <section aria-label="Subtasks">
          <h2>Subtasks</h2>
          <ul data-testid="subtasks">{subtasks.map(link)}</ul>
        </section>
      )}
    </div>
  );
}

/** Where intake found the task (lib/intake.ts): a link to its page (a new tab), or words alone when it has no web page. */
function Origin({ origin }: { origin: TaskOriginDto }) {
  const text = originText(origin.external_id);
  const link = webLink(origin.url);
  return (
    <p className="task-origin">
      {link ? (
        <a href={link} target="_blank" rel="noreferrer">
          {text}
        </a>
      ) : (
        text
      )}
    </p>
  );
}
