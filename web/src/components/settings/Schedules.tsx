// Settings › Intake › Schedules (issue 47): a task made on a cron expression read in a time
// zone. The table shows the next run in this browser's time and the newest runs, each with
// the task it made, "skipped", or why it failed.
import { useCallback, useEffect, useRef, useState } from 'react';
import { call } from '../../api/client';
import type { ScheduleDto, ScheduleRunDto } from '../../api/types';
import { readState, useData } from '../../lib/data';
import { localTime, missedName, stepPlace } from '../../lib/intake';
import { navigate, taskPath } from '../../lib/router';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
import { ConfirmDelete } from './ConfirmDelete';
import { EmptyRow } from './EmptyRow';
import { ScheduleForm } from './ScheduleForm';
import { useFormError } from './useFormError';

/** How many of a schedule's newest runs the table shows. */
const RUNS_SHOWN = 3;

/** The workspace's schedules; `manages` (an admin of it): with their controls and the form. */
export function Schedules({ workspaceId, manages }: { workspaceId: string; manages: boolean }) {
  // Kept with the workspace it was read for: another workspace's shows nothing until read.
  const readSchedules = useCallback(
    async () => (await call('schedule.list', { workspace_id: workspaceId })).schedules,
    [workspaceId],
  );
  const list = useRead(readSchedules);
  const schedules = list.data;
  useReadAtNextRun(schedules, list.retry);
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
            {manages && <th />}
          </tr>
        </thead>
        <tbody>
          {!schedules?.length && (
            <EmptyRow
              columns={manages ? 7 : 6}
              state={readState(list)}
              what="schedules"
              none={manages ? 'No schedules yet: add one below.' : 'No schedules.'}
            />
          )}
          {schedules?.map((s) => (
            <ScheduleRow key={s.id} schedule={s} wrap={manages ? wrap : null} onChanged={list.retry} />
          ))}
        </tbody>
      </table>
      {view}
      {manages && <ScheduleForm workspaceId={workspaceId} onAdded={list.retry} />}
    </>
  );
}

/** Longest delay setTimeout takes (it overflows past 2^31 - 1 ms): 24 days. */
const MAX_DELAY_MS = 24 * 24 * 60 * 60 * 1000;
/** How long after a schedule's next run the list is read again (the run has been recorded). */
const AFTER_RUN_MS = 3000;

/** Reads the list again once, just after the earliest next run of an enabled schedule, so a
 * run shows without a reload: one timeout at a known time, not polling. A next run already
 * past (the server has not run it yet) is read again after a few seconds, once for that time. */
function useReadAtNextRun(schedules: ScheduleDto[] | null, reread: () => void) {
  // The past next run last read again for: read again once, not every few seconds.
  const pastRead = useRef<number | null>(null);
  useEffect(() => {
    if (!schedules) return;
    const times = schedules
      .filter((s) => s.enabled && s.next_at)
      .map((s) => new Date(s.next_at as string).getTime())
      .filter((t) => !Number.isNaN(t));
    if (times.length === 0) return;
    const earliest = Math.min(...times);
    const wait = earliest - Date.now();
    if (wait < 0) {
      if (pastRead.current === earliest) return;
      pastRead.current = earliest;
    }
    const timer = window.setTimeout(reread, Math.min(Math.max(wait, 0) + AFTER_RUN_MS, MAX_DELAY_MS));
    return () => window.clearTimeout(timer);
  }, [schedules, reread]);
}

function ScheduleRow(props: {
  schedule: ScheduleDto;
  /** `null`: the row has no controls (not an admin). */
  wrap: ((f: () => Promise<unknown>) => Promise<boolean>) | null;
  onChanged: () => void;
}) {
  const { schedule: s, wrap, onChanged } = props;
  const { workflows } = useData();
  const [confirming, setConfirming] = useState(false);
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
      {wrap && (
        <td className="actions-cell">
          <div className="row-actions">
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
            <button className="danger-outline" aria-label={`Delete ${s.name}`} onClick={() => setConfirming(true)}>
              Delete
            </button>
          </div>
          {confirming && (
            <ConfirmDelete
              title={`Delete schedule ${s.name}?`}
              what="schedule"
              onCancel={() => setConfirming(false)}
              onConfirm={() =>
                void wrap(async () => {
                  await call('schedule.delete', { id: s.id });
                  onChanged();
                })
              }
            >
              Its run history goes; the tasks it made stay.
            </ConfirmDelete>
          )}
        </td>
      )}
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
