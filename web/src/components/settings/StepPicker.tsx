// The "where its tasks go" picker of Settings › Intake: every step of every workflow, named
// "Workflow › Step" (lib/intake.ts). `value` empty means the default, the first workflow's
// start step, shown chosen.
import type { WorkflowDto } from '../../api/types';
import { useData } from '../../lib/data';
import { defaultStepId, type StepChoice, stepChoices } from '../../lib/intake';

/** The choice a form sends: `value`, or the default when it is empty (null: no workflow). */
export function chosenStep(workflows: WorkflowDto[], value: string): StepChoice | null {
  const id = value || defaultStepId(workflows);
  return stepChoices(workflows).find((c) => c.stepId === id) ?? null;
}

export function StepPicker({ value, onChange }: { value: string; onChange: (stepId: string) => void }) {
  const { workflows } = useData();
  const choices = stepChoices(workflows);
  return (
    <label>
      Step <span className="hint">where its tasks go</span>
      <select value={chosenStep(workflows, value)?.stepId ?? ''} onChange={(e) => onChange(e.target.value)} required>
        {choices.length === 0 && <option value="">No workflow yet: add one in Workflows</option>}
        {choices.map((c) => (
          <option key={c.stepId} value={c.stepId}>
            {c.label}
          </option>
        ))}
      </select>
    </label>
  );
}
