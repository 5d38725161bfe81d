// Keyboard moves on the board: Alt+Left/Right (or [ and ]) to the previous or next step,
// Alt+Up/Down within the step. The moved card keeps the focus, the move is announced, and the
// phone layout follows the card to its new step.
import { type RefObject, useEffect, useState } from 'react';
import type { StepDto, TaskCardDto } from '../../api/types';
import type { VirtualHandle } from '../../lib/VirtualList';
import type { BoardState } from '../../lib/boardState';

export type Direction = 'left' | 'right' | 'up' | 'down';

/** Where `task` goes when moved one place in `direction`; `null` at the board's edge. */
export function keyTarget(
  steps: StepDto[],
  columns: BoardState['columns'],
  task: TaskCardDto,
  direction: Direction,
): { step: StepDto; position: number } | null {
  const stepIndex = steps.findIndex((s) => s.id === task.step_id);
  const column = columns.get(task.step_id) ?? [];
  const index = column.indexOf(task.id);
  const end = (step: StepDto) => ({ step, position: (columns.get(step.id) ?? []).length });
  if (direction === 'left' && stepIndex > 0) return end(steps[stepIndex - 1]!);
  if (direction === 'right' && stepIndex < steps.length - 1) return end(steps[stepIndex + 1]!);
  if (direction === 'up' && index > 0) return { step: steps[stepIndex]!, position: index - 1 };
  if (direction === 'down' && index < column.length - 1) return { step: steps[stepIndex]!, position: index + 1 };
  return null;
}

export function useKeyboardMove(options: {
  steps: StepDto[];
  columns: BoardState['columns'];
  move: (task: TaskCardDto, stepId: string, position: number) => Promise<void>;
  announce: (text: string) => void;
  showStep: (stepId: string) => void;
  handles: RefObject<Map<string, VirtualHandle | null>>;
}): (task: TaskCardDto, direction: Direction) => void {
  const [focusId, setFocusId] = useState<string | null>(null);

  // The card is rendered again in its new place: give it the focus back once it is there.
  useEffect(() => {
    if (!focusId) return;
    const el = document.querySelector<HTMLElement>(`[data-task-id="${CSS.escape(focusId)}"]`);
    if (el) {
      el.focus();
      setFocusId(null);
    }
  });

  return (task, direction) => {
    const target = keyTarget(options.steps, options.columns, task, direction);
    if (!target) return;
    setFocusId(task.id);
    options.announce(`Moved “${task.title}” to ${target.step.name}, position ${target.position + 1}`);
    if (target.step.id !== task.step_id) options.showStep(target.step.id);
    void options.move(task, target.step.id, target.position);
    window.requestAnimationFrame(() => options.handles.current?.get(target.step.id)?.scrollToIndex(target.position));
  };
}
