// The tasks that need you in the other workspaces (issue 45 item 22), in the header: one live
// list per workspace (`task.needs_you`, kept current by its topic's task events), shown as a
// count that opens a menu of the tasks; choosing one switches to its workspace and opens it.
import { useCallback, useEffect, useState } from 'react';
import { call } from '../api/client';
import type { Notification, TaskCardDto, WorkspaceDto } from '../api/types';
import { useData } from '../lib/data';
import { applyTaskEvent } from '../lib/lists';
import { navigate, taskPath } from '../lib/router';
import { NEEDS_YOU_LABEL } from '../lib/title';
import { useLiveQuery } from '../lib/useLiveQuery';

/** A task stays listed while it needs you and is not archived. */
const applyNeeds = (tasks: TaskCardDto[], n: Notification) =>
  applyTaskEvent(tasks, n, (task) => !!task.needs_you && !task.archived_at);

type Report = (workspaceId: string, tasks: TaskCardDto[]) => void;

/** Follows one workspace's tasks that need you; renders nothing. */
function WorkspaceNeeds({ workspaceId, onChange }: { workspaceId: string; onChange: Report }) {
  const load = useCallback(
    () => call('task.needs_you', { workspace_id: workspaceId }).then((r) => r.tasks),
    [workspaceId],
  );
  const query = useLiveQuery(`workspace:${workspaceId}`, load, applyNeeds);
  useEffect(() => onChange(workspaceId, query.data ?? []), [workspaceId, query.data, onChange]);
  return null;
}

export function NeedsYouElsewhere() {
  const data = useData();
  const [lists, setLists] = useState<Record<string, TaskCardDto[]>>({});
  const [open, setOpen] = useState(false);
  const report = useCallback<Report>((id, tasks) => setLists((l) => ({ ...l, [id]: tasks })), []);
  const others = data.workspaces.filter((w) => w.id !== data.workspace?.id);
  const waiting: { task: TaskCardDto; workspace: WorkspaceDto }[] = others.flatMap((workspace) =>
    (lists[workspace.id] ?? []).map((task) => ({ task, workspace })),
  );
  const openTask = (task: TaskCardDto, workspace: WorkspaceDto) => {
    setOpen(false);
    data.setWorkspaceId(workspace.id);
    navigate(taskPath(task.id));
  };
  return (
    <>
      {others.map((w) => (
        <WorkspaceNeeds key={w.id} workspaceId={w.id} onChange={report} />
      ))}
      {waiting.length > 0 && (
        <span className="needs-elsewhere">
          <button
            type="button"
            className="navlink needs-you-badge"
            aria-expanded={open}
            aria-haspopup="menu"
            data-testid="needs-you-elsewhere"
            title="Tasks in your other workspaces wait for you"
            onClick={() => setOpen(!open)}
          >
            {waiting.length} need{waiting.length === 1 ? 's' : ''} you elsewhere
          </button>
          {open && (
            <ul className="needs-elsewhere-menu" role="menu" aria-label="Tasks that need you in other workspaces">
              {waiting.map(({ task, workspace }) => (
                <li key={task.id} role="none">
                  <button type="button" role="menuitem" onClick={() => openTask(task, workspace)}>
                    <strong>{task.title}</strong>
                    <span className="muted">
                      {' '}
                      · {workspace.name} · {NEEDS_YOU_LABEL[task.needs_you ?? ''] ?? task.needs_you}
                    </span>
                  </button>
                </li>
              ))}
            </ul>
          )}
        </span>
      )}
    </>
  );
}
