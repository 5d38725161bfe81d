// The archived tasks of a board, each a link to its page with the step it was archived in
// and when, and Restore (`task.unarchive`): a live query over the
// workspace's topic, so a task archived a moment before the view opened (its archive still
// committing) appears when its `task.archived` arrives, and a restored one leaves on its
// `task.updated`.
import { useCallback } from 'react';
import { call, errorText } from '../../api/client';
import type { Notification, TaskCardDto } from '../../api/types';
import { useData } from '../../lib/data';
import { applyTaskEvent } from '../../lib/lists';
import { navigate, taskPath } from '../../lib/router';
import { toast } from '../../lib/toast';
import { useLiveQuery } from '../../lib/useLiveQuery';
import { ErrorBanner } from '../ErrorBanner';

/** The workflow's archived tasks: one unarchived or moved to another workflow leaves. */
function applyArchived(workflowId: string, list: TaskCardDto[], n: Notification): TaskCardDto[] {
  return applyTaskEvent(list, n, (task) => task.workflow_id === workflowId && !!task.archived_at);
}

export function ArchivedList({
  workspaceId,
  workflowId,
  restore,
}: {
  workspaceId: string;
  workflowId: string;
  /** Whether Restore is offered (a member's, issue 49). */
  restore: boolean;
}) {
  const load = useCallback(async () => {
    const r = await call('task.list', { workflow_id: workflowId, include_archived: true, limit: 1000 });
    return r.tasks.filter((t) => t.archived_at);
  }, [workflowId]);
  const apply = useCallback(
    (list: TaskCardDto[], n: Notification) => applyArchived(workflowId, list, n),
    [workflowId],
  );
  const archived = useLiveQuery(`workspace:${workspaceId}`, load, apply);
  const steps = useData().workflows.find((w) => w.id === workflowId)?.steps ?? [];
  return (
    <section className="archived" aria-label="Archived tasks">
      <ErrorBanner error={archived.error} onRetry={archived.reload} onDismiss={archived.dismissError} testId="archived-error" />
      {archived.data?.length === 0 && <p className="hint">No archived tasks.</p>}
      <ul>
        {archived.data?.map((t) => (
          <li key={t.id} data-task-id={t.id}>
            <a
              href={taskPath(t.id)}
              onClick={(e) => {
                e.preventDefault();
                navigate(taskPath(t.id));
              }}
            >
              {t.title}
            </a>
            <span className="hint archived-meta">
              {steps.find((s) => s.id === t.step_id)?.name ?? 'a removed step'}
              {t.archived_at && <>, archived {new Date(t.archived_at).toLocaleString()}</>}
            </span>
            <span className="spacer" />
            {restore && (
              <button
                onClick={() =>
                  call('task.unarchive', { id: t.id }).then(
                    () => toast(`Restored “${t.title}”`),
                    (e: unknown) => toast(`Restore failed: ${errorText(e)}`, { error: true }),
                  )
                }
              >
                Restore
              </button>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
