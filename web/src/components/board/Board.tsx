// The board page: one column per step of the chosen workflow, search, create and archive. Its
// concerns live beside it: the live tasks (useBoardTasks), keyboard moves (useKeyboardMove),
// drag and drop (Column, Card, dropPosition) and the phone layout (StepSwitcher).
import { useMemo, useRef, useState } from 'react';
import type { TaskDto } from '../../api/types';
import { useData } from '../../lib/data';
import type { VirtualHandle } from '../../lib/VirtualList';
import { CreateTaskDialog } from '../CreateTaskDialog';
import { ErrorBanner } from '../ErrorBanner';
import { dropPosition, matches } from './boardState';
import { Card } from './Card';
import { Column } from './Column';
import { StepSwitcher, usePhoneStep } from './StepSwitcher';
import { useBoardTasks } from './useBoardTasks';
import { useKeyboardMove } from './useKeyboardMove';

export function Board() {
  const { workspace, workflow, repositories } = useData();
  const steps = useMemo(
    () => [...(workflow?.steps ?? [])].sort((a, b) => a.position - b.position),
    [workflow],
  );
  const tasks = useBoardTasks(workspace?.id ?? null, workflow?.id ?? null);
  const { board } = tasks;
  const [query, setQuery] = useState('');
  const [creating, setCreating] = useState(false);
  const [announce, setAnnounce] = useState('');
  const [phoneStep, showStep] = usePhoneStep(steps);
  const handles = useRef(new Map<string, VirtualHandle | null>());
  const onKeyMove = useKeyboardMove({
    steps,
    columns: board.columns,
    move: tasks.move,
    announce: setAnnounce,
    showStep,
    handles,
  });

  const archive = async (task: TaskDto) => {
    if (await tasks.archive(task)) setAnnounce(`Archived “${task.title}”`);
  };

  const repoName = (ids: string[]) =>
    ids.map((id) => repositories.find((r) => r.id === id)?.name).filter(Boolean).join(', ');

  if (!workflow) {
    return <div className="empty-page">Loading the board…</div>;
  }

  return (
    <div className="board-page">
      <div className="toolbar">
        <h1 className="board-title">{workflow.name}</h1>
        <label className="search">
          <span className="sr-only">Search tasks</span>
          <input
            type="search"
            placeholder="Search tasks"
            value={query}
            onChange={(e) => setQuery(e.target.value)}
            aria-label="Search tasks"
          />
        </label>
        <button className="primary" onClick={() => setCreating(true)}>
          New task
        </button>
      </div>
      <ErrorBanner error={tasks.error} onDismiss={tasks.dismissError} testId="board-error" />
      <div className="sr-only" aria-live="polite">
        {announce}
      </div>
      <StepSwitcher
        steps={steps}
        active={phoneStep}
        count={(stepId) => (board.columns.get(stepId) ?? []).length}
        onChoose={showStep}
      />
      <div className="columns" data-loaded={tasks.loaded ? 'true' : 'false'}>
        {steps.map((step) => {
          const ids = board.columns.get(step.id) ?? [];
          const visible = ids
            .map((id) => board.tasks.get(id))
            .filter((t): t is TaskDto => !!t && matches(t, query));
          return (
            <Column
              key={step.id}
              step={step}
              total={ids.length}
              tasks={visible}
              active={step.id === phoneStep}
              handle={(h) => handles.current.set(step.id, h)}
              onDrop={(taskId, visibleIndex) => {
                const task = board.tasks.get(taskId);
                if (!task) return;
                const position = dropPosition(ids, visible, task, step.id, visibleIndex);
                if (position !== null) void tasks.move(task, step.id, position);
              }}
              renderCard={(task) => (
                <Card task={task} repo={repoName(task.repository_ids)} onKeyMove={onKeyMove} onArchive={archive} />
              )}
            />
          );
        })}
      </div>
      {creating && (
        <CreateTaskDialog
          workflow={workflow}
          onClose={() => setCreating(false)}
          onCreated={(task) => {
            tasks.add(task);
            setCreating(false);
          }}
        />
      )}
    </div>
  );
}
