// The phone layout of the board: one column at a time, chosen from a row of step tabs (hidden
// on wide screens by the stylesheet, where every column shows).
import { useState } from 'react';
import type { StepDto } from '../../api/types';

/** The step shown on a phone (the first step until one is chosen) and how to choose one. */
export function usePhoneStep(steps: StepDto[]): [string | undefined, (stepId: string) => void] {
  const [chosen, setChosen] = useState<string | null>(null);
  const active = chosen && steps.some((s) => s.id === chosen) ? chosen : steps[0]?.id;
  return [active, setChosen];
}

export function StepSwitcher(props: {
  steps: StepDto[];
  active: string | undefined;
  count: (stepId: string) => number;
  onChoose: (stepId: string) => void;
}) {
  return (
    <nav className="step-switcher" role="tablist" aria-label="Steps">
      {props.steps.map((step) => (
        <button
          key={step.id}
          role="tab"
          aria-selected={step.id === props.active}
          className={step.id === props.active ? 'active' : ''}
          onClick={() => props.onChoose(step.id)}
        >
          {step.name} <span className="count">{props.count(step.id)}</span>
        </button>
      ))}
    </nav>
  );
}
