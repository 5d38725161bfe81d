// Settings › Intake › Schedules (issue 47): a task made on a cron expression read in a time
// zone. The table shows the next run in this browser's time and the newest runs, each with
// the task it made, "skipped", or why it failed.
import { useCallback } from 'react';
import { call } from '../../api/client';
import type { ScheduleDto, ScheduleRunDto } from '../../api/types';
import { readState, useData } from '../../lib/data';
import { localTime, missedName, stepPlace } from '../../lib/intake';
import { navigate, taskPath } from '../../lib/router';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
import { EmptyRow } from './EmptyRow';
import { ScheduleForm } from './ScheduleForm';
import { useFormError } from './useFormError';

/** How many of a schedule's newest runs the table shows. */
const RUNS_SHOWN = 3;

export function Schedules({ workspaceId }: { workspaceId: string }) {
  // Kept with the workspace it was read for: another workspace's shows nothing until read.
  const readSchedules = useCallback(
    async () => (await call('schedule.list', { workspace_id: workspaceId })).schedules,
    [workspaceId],
  );
  const list = useRead(readSchedules);
  const schedules = list.data;
  // The rows' actions report here, under the table; the form has its own.
  const { wrap, view } = useFormError();
  return (
    <>
      <h2>Schedules</h2>
      <InlineError error={list.error} onRetry={list.retry} testId="schedules-error" />
      <table className="table labelled" aria-label="Schedules">
        <thead>
          <tr>
            <th>Name</th>
            <th>When</th>
            <th>Task</th>
            <th>Next run</th>
            <th>Last runs</th>
            <th>Missed runs</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {!schedules?.length && (
            <EmptyRow columns={7} state={readState(list)} what="schedules" none="No schedules yet: add one below." />
          )}
          {schedules?.map((s) => <ScheduleRow key={s.id} schedule={s} wrap={wrap} onChanged={list.retry} />)}
        </tbody>
      </table>
      {view}
      <ScheduleForm workspaceId={workspaceId} onAdded={list.retry} />
    </>
  );
}

function ScheduleRow(props: {
  schedule: ScheduleDto;
  wrap: (f: () => Promise<unknown>) => Promise<boolean>;
  onChanged: () => void;
}) {
  const { schedule: s, wrap, onChanged } = props;
  const { workflows } = useData();
  return (
    <tr data-schedule-id={s.id}>
      <td>
        {s.name} {!s.enabled && <span className="badge">off</span>}
      </td>
      <td data-label="When">
        <code>{s.cron}</code> <span className="hint">{s.time_zone}</span>
      </td>
      <td data-label="Task">
        {s.title}
        <div className="hint">{stepPlace(workflows, s.workflow_id, s.step_id)}</div>
      </td>
      <td data-label="Next run" data-testid="schedule-next">
        {s.next_at ? localTime(s.next_at) : s.enabled ? 'None' : 'None while off'}
      </td>
      <td data-label="Last runs">
        {s.runs.length === 0 ? 'None yet' : <Runs runs={s.runs.slice(0, RUNS_SHOWN)} />}
      </td>
      <td data-label="Missed runs">{missedName(s.missed)}</td>
      <td className="row-actions">
        <button
          aria-label={`${s.enabled ? 'Turn off' : 'Turn on'} ${s.name}`}
          onClick={() =>
            void wrap(async () => {
              await call('schedule.update', { id: s.id, enabled: !s.enabled });
              onChanged();
            })
          }
        >
          {s.enabled ? 'Turn off' : 'Turn on'}
        </button>
        <button
          className="danger-outline"
          aria-label={`Delete ${s.name}`}
          onClick={() =>
            void wrap(async () => {
              await call('schedule.delete', { id: s.id });
              onChanged();
            })
          }
        >
          Delete
        </button>
      </td>
    </tr>
  );
}

/** A schedule's newest runs, newest first: when each was due, and its task, "skipped", or why it failed. */
function Runs({ runs }: { runs: ScheduleRunDto[] }) {
  return (
    <ul className="schedule-runs">
      {runs.map((r) => {
        const due = localTime(r.occurrence);
        const taskId = r.task_id;
        return (
          <li key={r.occurrence}>
            {due}:{' '}
            {taskId ? (
              <a
                href={taskPath(taskId)}
                aria-label={`Task of the run due ${due}`}
                onClick={(e) => {
                  e.preventDefault();
                  navigate(taskPath(taskId));
                }}
              >
                task
              </a>
            ) : r.error ? (
              <span className="run-failed" title={r.error}>
                failed: {r.error}
              </span>
            ) : (
              'skipped'
            )}
          </li>
        );
      })}
    </ul>
  );
}
