// Starts attempts of a task (issue 48): two to six agents, each with its profile and an
// optional first message of its own, each in a worktree and on a branch of its own.
import { useState } from 'react';
import { call } from '../api/client';
import type { SessionDto } from '../api/types';
import { useData } from '../lib/data';
import { useMutation } from '../lib/useMutation';
import { ProfileSelect } from './ProfileSelect';

const MAX = 6;

interface Row {
  profile: string;
  prompt: string;
}

export function StartAttempts(props: { taskId: string; defaultProfile: string | null; onStarted: (s: SessionDto[]) => void }) {
  const { profiles } = useData();
  const first = props.defaultProfile ?? profiles[0]?.id ?? '';
  const [rows, setRows] = useState<Row[]>([
    { profile: first, prompt: '' },
    { profile: first, prompt: '' },
  ]);
  const { busy, error, run } = useMutation();
  const change = (i: number, patch: Partial<Row>) => setRows(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  return (
    <form
      className="form start-attempts"
      onSubmit={(e) => {
        e.preventDefault();
        void run(async () => {
          const attempts = rows.map((r) => ({ profile_id: r.profile || undefined, prompt: r.prompt.trim() ? r.prompt : undefined }));
          const { sessions } = await call('task.attempt.create', { task_id: props.taskId, attempts });
          props.onStarted(sessions);
        });
      }}
    >
      <p className="hint">
        Each attempt works in a worktree and on a branch of its own, made from the task's base. Compare them, then pick one: its
        branch becomes the task's.
      </p>
      {rows.map((row, i) => (
        <fieldset key={i} className="attempt-row">
          <legend>Attempt {i + 1}</legend>
          <ProfileSelect value={row.profile} onChange={(profile) => change(i, { profile })} />
          <label>
            First message
            <textarea
              rows={2}
              value={row.prompt}
              placeholder="The task's title and description"
              onChange={(e) => change(i, { prompt: e.target.value })}
            />
          </label>
          {rows.length > 1 && (
            <button type="button" className="link" onClick={() => setRows(rows.filter((_, j) => j !== i))}>
              Remove attempt {i + 1}
            </button>
          )}
        </fieldset>
      ))}
      {error && (
        <p className="form-error" role="alert">
          {error}
        </p>
      )}
      <div className="actions">
        <button type="button" disabled={rows.length >= MAX} onClick={() => setRows([...rows, { profile: first, prompt: '' }])}>
          Add an attempt
        </button>
        <button className="primary" type="submit" disabled={busy}>
          Start {rows.length} attempt{rows.length === 1 ? '' : 's'}
        </button>
      </div>
    </form>
  );
}
