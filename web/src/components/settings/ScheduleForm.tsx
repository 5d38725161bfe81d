// Settings › Intake › Add a schedule: when (a cron expression in a time zone), the task it
// makes (title, description, step, repositories) and what happens to runs missed while the
// server was down.
import { useMemo, useState } from 'react';
import { call } from '../../api/client';
import { useData } from '../../lib/data';
import { browserTimeZone, MISSED } from '../../lib/intake';
import { chosenStep, StepPicker } from './StepPicker';
import { useFormError } from './useFormError';

/** The form's words for the fields a refusal may start with (a bad expression or zone is
 * refused in words already: "cron expression must have 5 fields ..."). */
const LABELS = { name: 'Name', title: 'Task title', description: 'Description', step_id: 'Step', workflow_id: 'Step' };

const empty = () => ({
  name: '',
  cron: '',
  timeZone: browserTimeZone(),
  title: '',
  description: '',
  stepId: '',
  repositoryIds: [] as string[],
  missed: 'run_once',
});

/** The zones this browser knows, offered while typing one (any IANA name may be typed). */
function knownZones(): string[] {
  const intl = Intl as { supportedValuesOf?: (key: string) => string[] };
  try {
    return intl.supportedValuesOf?.('timeZone') ?? [];
  } catch {
    return [];
  }
}

export function ScheduleForm({ workspaceId, onAdded }: { workspaceId: string; onAdded: () => void }) {
  const { workflows, repositories } = useData();
  const [form, setForm] = useState(empty);
  const set = <K extends keyof ReturnType<typeof empty>>(key: K, value: ReturnType<typeof empty>[K]) =>
    setForm((f) => ({ ...f, [key]: value }));
  const zones = useMemo(knownZones, []);
  const { wrap, view } = useFormError(LABELS);
  const toggleRepository = (id: string, on: boolean) =>
    set('repositoryIds', on ? [...form.repositoryIds, id] : form.repositoryIds.filter((r) => r !== id));
  return (
    <form
      className="form card-form"
      aria-label="Add schedule"
      onSubmit={async (e) => {
        e.preventDefault();
        const step = chosenStep(workflows, form.stepId);
        const ok = await wrap(async () => {
          await call('schedule.create', {
            workspace_id: workspaceId,
            name: form.name,
            cron: form.cron.trim(),
            time_zone: form.timeZone.trim(),
            title: form.title,
            description: form.description || undefined,
            workflow_id: step?.workflowId,
            step_id: step?.stepId,
            // In the workspace's order, whatever order they were ticked in.
            repository_ids: repositories.filter((r) => form.repositoryIds.includes(r.id)).map((r) => r.id),
            missed: form.missed,
          });
          onAdded();
        });
        if (ok) setForm(empty());
      }}
    >
      <h3>Add a schedule</h3>
      <label>
        Name
        <input value={form.name} onChange={(e) => set('name', e.target.value)} required placeholder="Weekday triage" />
      </label>
      <div className="row">
        <label>
          Cron expression <span className="hint">minute hour day month weekday, e.g. 0 9 * * MON-FRI, or @daily</span>
          <input
            value={form.cron}
            onChange={(e) => set('cron', e.target.value)}
            required
            spellCheck={false}
            autoCapitalize="off"
            placeholder="0 9 * * MON-FRI"
            className="mono"
          />
        </label>
        <label>
          Time zone <span className="hint">the expression's times are in it</span>
          <input
            value={form.timeZone}
            onChange={(e) => set('timeZone', e.target.value)}
            required
            spellCheck={false}
            autoCapitalize="off"
            list="schedule-time-zones"
          />
          <datalist id="schedule-time-zones">
            {zones.map((z) => (
              <option key={z} value={z} />
            ))}
          </datalist>
        </label>
      </div>
      <label>
        Task title
        <input value={form.title} onChange={(e) => set('title', e.target.value)} required placeholder="Triage new issues" />
      </label>
      <label>
        Description <span className="hint">what the agent is asked to do</span>
        <textarea rows={3} value={form.description} onChange={(e) => set('description', e.target.value)} />
      </label>
      <StepPicker value={form.stepId} onChange={(id) => set('stepId', id)} />
      <fieldset className="repository-checks">
        <legend>
          Repositories <span className="hint">the task works in these</span>
        </legend>
        {repositories.length === 0 && <p className="hint">No repositories yet: the task will have none.</p>}
        {repositories.map((r) => (
          <label key={r.id} className="check">
            <input
              type="checkbox"
              checked={form.repositoryIds.includes(r.id)}
              onChange={(e) => toggleRepository(r.id, e.target.checked)}
            />
            {r.name}
          </label>
        ))}
      </fieldset>
      <label>
        When runs were missed while the server was down
        <select value={form.missed} onChange={(e) => set('missed', e.target.value)}>
          {MISSED.map(([value, name]) => (
            <option key={value} value={value}>
              {name}
            </option>
          ))}
        </select>
      </label>
      {view}
      <div className="actions">
        <button className="primary" type="submit">
          Add schedule
        </button>
      </div>
    </form>
  );
}
