// A workflow's steps: reorder, add, and each step's editor.
import { useState } from 'react';
import { call } from '../../api/client';
import type { WorkflowDto } from '../../api/types';
import { StepEditor } from './StepEditor';
import { useFormError } from './useFormError';

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
          if (await wrap(() => call('workflow.step.create', { workflow_id: workflow.id, name: newStep }))) setNewStep('');
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
