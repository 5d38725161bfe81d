// The archived tasks of a board, each with Restore (`task.unarchive`). Read when opened and
// after a restore; archived tasks change rarely, so this list is not live.
import { useCallback, useState } from 'react';
import { call, errorText } from '../../api/client';
import type { TaskCardDto } from '../../api/types';
import { useRead } from '../../lib/useRead';
import { toast } from '../../lib/toast';
import { ErrorBanner } from '../ErrorBanner';

export function ArchivedList({ workflowId }: { workflowId: string }) {
  const [version, setVersion] = useState(0);
  const load = useCallback(
    async () => {
      const r = await call('task.list', { workflow_id: workflowId, include_archived: true, limit: 1000 });
      return r.tasks.filter((t) => t.archived_at);
    },
    // `version` reads afresh after a restore
    [workflowId, version],
  );
  const archived = useRead<TaskCardDto[]>(load);
  return (
    <section className="archived" aria-label="Archived tasks">
      <ErrorBanner error={archived.error} onRetry={archived.retry} testId="archived-error" />
      {archived.data?.length === 0 && <p className="hint">No archived tasks.</p>}
      <ul>
        {archived.data?.map((t) => (
          <li key={t.id} data-task-id={t.id}>
            <span>{t.title}</span>
            <button
              onClick={() =>
                call('task.unarchive', { id: t.id }).then(
                  () => {
                    toast(`Restored “${t.title}”`);
                    setVersion((v) => v + 1);
                  },
                  (e: unknown) => toast(`Restore failed: ${errorText(e)}`, { error: true }),
                )
              }
            >
              Restore
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}
