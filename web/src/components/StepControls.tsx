// The task's step on its own page (issue 14): a picker of every step and the next step as a
// button ("→ Review"), so a task moves without the board (and on a phone, where cards do not
// drag). The move is the board's: `task.move`, with the steps' on_exit/on_enter actions.
import { call, errorText } from '../api/client';
import type { StepDto, TaskDto } from '../api/types';
import { toast } from '../lib/toast';
import { useMutation } from '../lib/useMutation';

export function StepControls(props: { task: TaskDto; steps: StepDto[]; onError: (e: string | null) => void }) {
  const { task } = props;
  const steps = [...props.steps].sort((a, b) => a.position - b.position);
  const index = steps.findIndex((s) => s.id === task.step_id);
  const next = index >= 0 ? steps[index + 1] : undefined;
  // A failed move is shown by the task page.
  const { busy: moving, run } = useMutation(props.onError);
  const move = async (step: StepDto) => {
    if (step.id === task.step_id) return;
    await run(
      async () => {
        await call('task.move', { id: task.id, step_id: step.id });
        toast(`Moved to ${step.name}`);
      },
      { describe: (e) => `Move: ${errorText(e)}` },
    );
  };
  return (
    <div className="step-controls" role="group" aria-label="Step">
      <label>
        <span className="sr-only">Move to step</span>
        <select
          aria-label="Move to step"
          value={task.step_id}
          disabled={moving}
          onChange={(e) => {
            const step = steps.find((s) => s.id === e.target.value);
            if (step) void move(step);
          }}
        >
          {steps.map((s) => (
            <option key={s.id} value={s.id}>
              {s.name}
            </option>
          ))}
        </select>
      </label>
      {next && (
        <button className="primary" disabled={moving} onClick={() => void move(next)} data-testid="next-step">
          {steps[index]?.name} → {next.name}
        </button>
      )}
    </div>
  );
}
