// A workflow's steps: reorder, add, and each step's editor.
import { useState } from 'react';
import { call } from '../../api/client';
import type { WorkflowDto } from '../../api/types';
import { StepEditor } from './StepEditor';
import { useFormError } from './useFormError';

/** The colours new steps take in turn (the templates' own). */
const STEP_COLORS = ['#64748b', '#3b82f6', '#f59e0b', '#22c55e', '#a855f7', '#ef4444'];

export function WorkflowEditor({ workflow }: { workflow: WorkflowDto }) {
  const steps = [...workflow.steps].sort((a, b) => a.position - b.position);
  const [newStep, setNewStep] = useState('');
  const { wrap, view } = useFormError();
  const reorder = (i: number, by: number) => {
    const ids = steps.map((s) => s.id);
    const [id] = ids.splice(i, 1);
    if (!id) return;
    ids.splice(i + by, 0, id);
    void wrap(() => call('workflow.step.reorder', { workflow_id: workflow.id, step_ids: ids }));
  };
  return (
    <div className="workflow-editor">
      {steps.map((s, i) => (
        <StepEditor
          key={`${s.id}-${workflow.updated_at}`}
          step={s}
          steps={steps}
          first={i === 0}
          last={i === steps.length - 1}
          onMove={(by) => reorder(i, by)}
        />
      ))}
      {view}
      <form
        className="inline-form"
        onSubmit={async (e) => {
          e.preventDefault();
          // A new step gets a colour of the palette no step has yet, so columns stay apart.
          const color =
            STEP_COLORS.find((c) => !steps.some((s) => s.color.toLowerCase() === c)) ??
            STEP_COLORS[steps.length % STEP_COLORS.length];
          if (await wrap(() => call('workflow.step.create', { workflow_id: workflow.id, name: newStep, color }))) setNewStep('');
        }}
      >
        <label>
          <span className="sr-only">New step name</span>
          <input value={newStep} placeholder="New step name" onChange={(e) => setNewStep(e.target.value)} required />
        </label>
        <button type="submit">Add step</button>
      </form>
    </div>
  );
}
