// Settings › Intake (issue 47): work that arrives by itself. Sources make tasks from a
// repository's forge issues (polled, or told by the forge's webhook) or from a generic
// webhook's deliveries; schedules (Schedules.tsx) make a task on a cron expression. Neither
// list is announced live: both are `useRead` reads, read again after each change made here.
// Intake is an admin's of the workspace (issue 49): others see the schedules, without changing
// them, and no sources.
import { useCallback, useState } from 'react';
import { call, errorText } from '../../api/client';
import type { IntakeSourceDto } from '../../api/types';
import { readState, useData } from '../../lib/data';
import { useRole } from '../../lib/me';
import { hookUrl, localTime, pollNote, schemeName, sourceWhat, stepPlace } from '../../lib/intake';
import { toast } from '../../lib/toast';
import { useMutation } from '../../lib/useMutation';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
import { RoleNote } from '../RoleNote';
import { ConfirmDelete } from './ConfirmDelete';
import { Copyable } from './Copyable';
import { EmptyRow } from './EmptyRow';
import { Schedules } from './Schedules';
import { NewHook, type MadeHook, SourceForm } from './SourceForm';
import { useFormError } from './useFormError';

export function Intake() {
  const { workspace } = useData();
  const manages = useRole().can('admin');
  if (!workspace) return null;
  return (
    <section className="intake">
      <h1>Intake</h1>
      <p className="hint">
        Work that arrives by itself: tasks made from a repository's issues or a webhook's deliveries, and tasks made on a
        schedule. Each one goes to the step chosen here; its agent starts only if that step starts agents.
      </p>
      {!manages && <RoleNote>Sources and schedules are added and changed by admins of the workspace.</RoleNote>}
      {manages && <Sources workspaceId={workspace.id} />}
      <Schedules workspaceId={workspace.id} manages={manages} />
    </section>
  );
}

function Sources({ workspaceId }: { workspaceId: string }) {
  // Kept with the workspace it was read for: another workspace's shows nothing until read.
  const readSources = useCallback(
    async () => (await call('intake.source.list', { workspace_id: workspaceId })).sources,
    [workspaceId],
  );
  const list = useRead(readSources);
  const sources = list.data;
  const [made, setMade] = useState<MadeHook | null>(null);
  // The rows' actions report here, under the table; the form has its own.
  const { wrap, view } = useFormError();
  return (
    <>
      <h2>Sources</h2>
      <InlineError error={list.error} onRetry={list.retry} testId="sources-error" />
      <table className="table labelled" aria-label="Intake sources">
        <thead>
          <tr>
            <th>Name</th>
            <th>Takes in</th>
            <th>Tasks go to</th>
            <th>Webhook</th>
            <th>Last poll</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {!sources?.length && (
            <EmptyRow columns={6} state={readState(list)} what="sources" none="No sources yet: add one below." />
          )}
          {sources?.map((s) => <SourceRow key={s.id} source={s} wrap={wrap} onChanged={list.retry} />)}
        </tbody>
      </table>
      {view}
      {made && <NewHook made={made} onDone={() => setMade(null)} />}
      <SourceForm
        workspaceId={workspaceId}
        onAdded={(hook) => {
          setMade(hook);
          list.retry();
        }}
      />
    </>
  );
}

function SourceRow(props: {
  source: IntakeSourceDto;
  wrap: (f: () => Promise<unknown>) => Promise<boolean>;
  onChanged: () => void;
}) {
  const { source: s, wrap, onChanged } = props;
  const { workflows, repositories } = useData();
  // A poll's failure is the row's alert (the source keeps it as its last error too).
  const polling = useMutation();
  const poll = () =>
    void polling
      .run(
        async () => {
          const r = await call('intake.source.poll', { id: s.id });
          toast(`${s.name}: ${pollNote(r.created.length)}`);
        },
        { describe: (e) => `The poll failed: ${errorText(e)}` },
      )
      // Its last poll and last error changed either way.
      .finally(onChanged);
  const failure = polling.error ?? (s.last_error ? `The last poll failed: ${s.last_error}` : null);
  const [confirming, setConfirming] = useState(false);
  return (
    <tr data-source-id={s.id}>
      <td>
        {s.name} {!s.enabled && <span className="badge">off</span>}
      </td>
      <td data-label="Takes in">{sourceWhat(s, repositories)}</td>
      <td data-label="Tasks go to">{stepPlace(workflows, s.workflow_id, s.step_id)}</td>
      <td data-label="Webhook">
        {s.hook_scheme ? (
          <>
            {schemeName(s.hook_scheme)} <Copyable text={hookUrl(location.origin, s.id)} what={`the webhook URL of ${s.name}`} />
          </>
        ) : (
          'None'
        )}
      </td>
      <td data-label="Last poll">
        {s.kind !== 'issues' ? '—' : s.last_polled_at ? localTime(s.last_polled_at) : 'Not yet'}
        <InlineError error={failure} />
      </td>
      <td className="actions-cell">
        <div className="row-actions">
          {s.kind === 'issues' && (
            <button disabled={polling.busy || !s.enabled} aria-label={`Poll ${s.name} now`} onClick={poll}>
              {polling.busy ? 'Polling…' : 'Poll now'}
            </button>
          )}
          <button
            aria-label={`${s.enabled ? 'Turn off' : 'Turn on'} ${s.name}`}
            onClick={() =>
              void wrap(async () => {
                await call('intake.source.update', { id: s.id, enabled: !s.enabled });
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
            title={`Delete source ${s.name}?`}
            what="source"
            onCancel={() => setConfirming(false)}
            onConfirm={() =>
              void wrap(async () => {
                await call('intake.source.delete', { id: s.id });
                onChanged();
              })
            }
          >
            {s.hook_scheme
              ? 'Its webhook URL and secret stop working; the tasks it made stay.'
              : 'It takes in no more issues; the tasks it made stay.'}
          </ConfirmDelete>
        )}
      </td>
    </tr>
  );
}
